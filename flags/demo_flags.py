"""Flags of tools/demo.py."""

from absl import flags

SENTENCES = flags.DEFINE_multi_string(
    "sentence", None, "A sentence to embed; repeat the flag for several (default: a built-in set).")
SEQ_LENGTH = flags.DEFINE_integer("seq_length", 64, "Tokens per sentence, [CLS]/[SEP] included.")
