"""Flags of tools/convert_checkpoint.py (--input and --output are required)."""

from absl import flags

from tfbert.checkpoints.convert import FORMATS
from tfbert_flags import casing_flags, common_flags
from tfbert_flags.casing_flags import ALLOW_CASING_MISMATCH, DO_LOWER_CASE  # noqa: F401  (for the tool)

INPUT_FORMAT = flags.DEFINE_enum("input_format", "google", FORMATS, "Format of --input.")
INPUT = flags.DEFINE_string(
    "input", None, "Required. Checkpoint to read: a Google checkpoint prefix, a Hugging Face "
    "directory (config.json + model.safetensors) or a tfbert .keras file.")
BERT_CONFIG_FILE = flags.DEFINE_string(
    "bert_config_file", None, "bert_config.json of a Google input (default: beside --input); "
    "with a tfbert or hf input, which carries its own, it must equal that one.")
VOCAB_FILE = flags.DEFINE_string(
    "vocab_file", None, "WordPiece vocabulary to put beside the output (default: the "
    "vocab.txt beside --input). Google and Hugging Face outputs need one.")
OUTPUT_FORMAT = flags.DEFINE_enum("output_format", "hf", FORMATS, "Format of --output.")
OUTPUT = flags.DEFINE_string(
    "output", None, "Required. Where to write: a checkpoint prefix (google), a directory (hf) or a "
    ".keras file (tfbert). The vocabulary goes beside it with tokenizer_config.json (its "
    "casing) and special_tokens_map.json; files appear only when complete.")

# Key flags: the tool's --help lists them (absl shows only the main module's key flags).
flags.adopt_module_key_flags(common_flags)
flags.adopt_module_key_flags(casing_flags)
