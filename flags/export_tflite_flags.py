"""Flags of tools/export_tflite.py (--model and --output are required)."""

from absl import flags

from tfbert_flags import casing_flags, common_flags
from tfbert_flags.casing_flags import ALLOW_CASING_MISMATCH, DO_LOWER_CASE  # noqa: F401  (for the tool)

MODEL = flags.DEFINE_string(
    "model", None, "Required. A tfbert .keras model: a run's model.keras or best/model.keras "
    "(classifier, span labeler, tagger), or any tfbert model (its encoder is exported).")
OUTPUT = flags.DEFINE_string(
    "output", None, "Required. The .tflite file to write (atomically); bert_config.json, "
    "vocab.txt and a classifier's or tagger's labels.txt are written beside it.")
SEQ_LENGTH = flags.DEFINE_integer(
    "seq_length", None, "S of the TFLite inputs (fixed; the batch is dynamic). Default: the "
    "run's max_seq_length (run_config.json beside --model, or one level up), else 128, or "
    "the model's max_position_embeddings when smaller. At least 3 ([CLS], a token, [SEP]).",
    lower_bound=3)
QUANTIZE = flags.DEFINE_bool(
    "quantize", False, "Dynamic-range quantization: int8 weights (about 4x smaller), outputs "
    "close to float32's but not equal.")
TASK_NAME = flags.DEFINE_string(
    "task_name", None, "A classifier's GLUE task (its labels go to labels.txt; --eval_* score "
    "it); refused for a model that is no classifier. Default: the run's.")
VOCAB_FILE = flags.DEFINE_string(
    "vocab_file", None, "The vocabulary copied beside the output (and used by --eval_*). "
    "Default: vocab.txt beside --model.")
EVAL_DATA_DIR = flags.DEFINE_string(
    "eval_data_dir", None, "After the export, score the .tflite file and the Keras model on "
    "this GLUE task directory's dev file(s) (a classifier); print one JSON line each.")
EVAL_FILE = flags.DEFINE_string("eval_file", None, "A dev file to score instead of "
                                "--eval_data_dir's.")
EVAL_BATCH_SIZE = flags.DEFINE_integer("eval_batch_size", 64, "Examples per call when scoring.",
                                       lower_bound=1)
LATENCY_RUNS = flags.DEFINE_integer(
    "latency_runs", 100, "When scoring: single examples timed (median ms reported); 0: none.",
    lower_bound=0)
NUM_THREADS = flags.DEFINE_integer("num_threads", None, "LiteRT interpreter threads when "
                                   "scoring; default: LiteRT's.", lower_bound=1)

# Key flags: the tool's --help lists them (absl shows only the main module's key flags).
flags.adopt_module_key_flags(common_flags)
flags.adopt_module_key_flags(casing_flags)
