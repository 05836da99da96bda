"""Flags of tools/align.py."""

from absl import flags

from tfbert.training.optimization import OPTIMIZERS
from tfbert_flags import common_flags

VARIANTS = flags.DEFINE_list(
    "variants", ["graph", "eager", "xla"],
    "Set-ups to compare; the first is the reference (default for --task=squad and "
    "--task=classifier, which run graph execution only: graph,accumulate2,mirrored). "
    "Presets: graph, eager, xla, mirrored "
    "(2 logical devices), workers (2 processes), bfloat16, float16, accumulateK, resumeN, "
    "micro_batch_normalization; or name:field=value;... with fields of tfbert.alignment.alignment."
    "Variant (use ';' between fields inside one variant).")
WORKDIR = flags.DEFINE_string("workdir", "runs/align",
                              "Where the runs, report.json and alignment.png are written.")
BERT_CONFIG_FILE = flags.DEFINE_string(
    "bert_config_file", None, "bert_config.json of the model (default: the main job's small BERT).")
TASK = flags.DEFINE_enum(
    "task", "pretraining", ["pretraining", "squad", "classifier"],
    "What every variant trains: pretraining, or fine-tuning through run_squad / "
    "run_classifier (AdamW, the default --optimizer of these tasks; no warmup; graph "
    "execution).")
INPUT_FILES = flags.DEFINE_list(
    "input_files", None, "Comma-separated pretraining TFRecord globs (a comma in a name: "
    "match it with ?; default: made from pydoc_data.topics).")
TRAIN_FILE = flags.DEFINE_string(
    "train_file", None, "Fine-tuning data: SQuAD JSON (default for --task=squad: the main "
    "job's synthetic set) or a GLUE-format TSV of --task_name (needed for --task=classifier).")
TASK_NAME = flags.DEFINE_string("task_name", "mrpc", "The GLUE task of --task=classifier.")
STEPS = flags.DEFINE_integer("steps", 20, "Applied steps of every variant.", lower_bound=1)
TRAIN_BATCH_SIZE = flags.DEFINE_integer("train_batch_size", 32, "Global sequences per step.",
                                        lower_bound=1)
MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 64, "Sequence length of the data.",
                                      lower_bound=1)
MAX_PREDICTIONS_PER_SEQ = flags.DEFINE_integer("max_predictions_per_seq", 10, "Masked positions.",
                                               lower_bound=1)
OPTIMIZER = flags.DEFINE_enum(
    "optimizer", None, OPTIMIZERS, "Optimizer (default: sgd for --task=pretraining; adamw, the "
    "only one fine-tuning trains, for --task=squad and --task=classifier).")
LEARNING_RATE = flags.DEFINE_float("learning_rate", 1e-3, "Peak learning rate.", lower_bound=0.0)
MOMENTUM = flags.DEFINE_float("momentum", 0.9, "SGD momentum.", lower_bound=0.0)
NUM_WARMUP_STEPS = flags.DEFINE_integer("num_warmup_steps", 0, "Warmup steps of the schedule.",
                                        lower_bound=0)
WEIGHT_DECAY_RATE = flags.DEFINE_float("weight_decay_rate", 0.01, "AdamW/LAMB weight decay.",
                                       lower_bound=0.0)
CLIP_NORM = flags.DEFINE_float("clip_norm", 0.0, "Global-norm clipping (0 disables).",
                               lower_bound=0.0)
SEED = flags.DEFINE_integer("seed", 12345, "Seed of the initial weights.", lower_bound=0)
TOLERANCES = flags.DEFINE_list(
    "tolerances", [], "Overrides of the relative per-step tolerances, kind=value (kinds: "
    "float32, mixed_bfloat16, mixed_float16).")
COMPARE_WEIGHTS = flags.DEFINE_bool("compare_weights", True,
                                    "Also compare the final weights (same tolerance).")

# Key flags: the tool's --help lists them (absl shows only the main module's key flags).
flags.adopt_module_key_flags(common_flags)
