"""Flags of the tools that own a run directory (run_pretraining, run_squad, run_classifier)."""

from absl import flags

ALLOW_CONFIG_CHANGE = flags.DEFINE_bool(
    "allow_config_change", False, "Continue a run directory whose recorded bert_config.json / "
    "run_config.json differ from this command's (the differences are listed, then the new "
    "values recorded), or whose checkpoints lack one of those records. Without it such a "
    "rerun is refused before anything is written.")
