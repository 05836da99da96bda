"""Flags of tools/evaluate_ner.py (the gold and prediction files are positional)."""

from absl import flags

from tfbert_flags import common_flags, conll_flags
from tfbert_flags.conll_flags import TAG_COLUMN, TAG_SCHEME, TOKEN_COLUMN  # noqa: F401  (for the tool)

# Key flags: the tool's --help lists them (absl shows only the main module's key flags).
flags.adopt_module_key_flags(common_flags)
flags.adopt_module_key_flags(conll_flags)
