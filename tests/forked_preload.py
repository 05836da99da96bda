"""What `tests.forked`'s server computes once, before any fork, so that no child repeats it.

Only pure-Python work that creates no TensorFlow runtime state (no op, device or thread
pool): the tokenizer's per-character normalization tables (`tfbert.text.text_normalization`,
cached per process; about 0.6 s of every child that tokenizes text, measured on the AMD
Zen 5 of docs/testing.md). A child reads the same tuples a fresh process would compute.
"""

from tfbert.text import text_normalization

for _do_lower_case in (True, False):
  text_normalization.normalization_table(_do_lower_case)
text_normalization.final_sigma_regex()
