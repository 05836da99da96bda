"""What `tests.forked`'s server computes once, before any fork, so that no child repeats it.

Its garbage collector is set as a test process's is (`tests/conftest.py`): the modules
imported (TensorFlow, Keras, tfbert) frozen out of the collections, and a young collection
per 50,000 objects; every child inherits both. Only when cycles are collected changes, not
what a child computes (tests/forked_test.py compares a child with a fresh interpreter).

Only pure-Python work that creates no TensorFlow runtime state (no op, device or thread
pool): the tokenizer's per-character normalization tables (`tfbert.text.text_normalization`,
cached per process; about 0.6 s of every child that tokenizes text, measured on the AMD
Zen 5 of docs/testing.md). A child reads the same tuples a fresh process would compute.
"""

import gc

from tfbert.text import text_normalization

for _do_lower_case in (True, False):
  text_normalization.normalization_table(_do_lower_case)
text_normalization.final_sigma_regex()

gc.freeze()
gc.set_threshold(50_000, 20, 10)
