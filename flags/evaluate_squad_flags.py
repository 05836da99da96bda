"""Flags of tools/evaluate_squad.py (the dataset and predictions files are positional)."""

from absl import flags

from tfbert_flags import common_flags

NA_PROB_FILE = flags.DEFINE_string(
    "na_prob_file", None, "SQuAD v2.0 only: {question id: null odds} JSON (e.g. the "
    "null_odds.json of tfbert.squad.squad_postprocess), the official script's --na-prob-file; "
    "adds best_exact/best_f1 and their thresholds. Needs a single predictions file.")

# Key flags: the tool's --help lists them (absl shows only the main module's key flags).
flags.adopt_module_key_flags(common_flags)
