"""Flags shared by the tools that read CoNLL files (run_ner.py, evaluate_ner.py)."""

from absl import flags

TOKEN_COLUMN = flags.DEFINE_integer(
    "token_column", 0, "0-based column of the word in CoNLL files (whitespace-separated "
    "columns); < 0 counts from the end.")
TAG_COLUMN = flags.DEFINE_integer(
    "tag_column", -1, "Column of the tag in CoNLL files (default: the last).")
TAG_SCHEME = flags.DEFINE_enum(
    "tag_scheme", "iob2", ["iob2", "iob1"], "The gold files' tagging scheme: iob2 (checked: "
    "an I-X that does not continue an X entity is an error naming file:line) or iob1 "
    "(repaired to IOB2 as read: such an I-X becomes B-X).")
