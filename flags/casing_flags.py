"""The casing flags of every tool that tokenizes (tfbert.text.casing checks them)."""

from absl import flags

DO_LOWER_CASE = flags.DEFINE_bool(
    "do_lower_case", None, "Lower-case and strip accents (true for uncased vocabularies, false "
    "for cased ones). Default: the checkpoint's casing, from its tokenizer_config.json, its "
    "tfbert run directory or its vocabulary's content. A value that contradicts these fails "
    "before any work, naming both.")
ALLOW_CASING_MISMATCH = flags.DEFINE_bool(
    "allow_casing_mismatch", False, "Tokenize with --do_lower_case even where it contradicts "
    "the checkpoint's casing (rarely intended: a wrong casing loses accuracy silently).")
