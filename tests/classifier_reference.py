"""Google's classifier packing as the test reference, and text pairs with its edge cases.

The reference is Model Garden's `classifier_data_lib.convert_single_example`
(google-research/bert `run_classifier.py`'s function, same code) with the reference
`FullTokenizer`: pure Python, one example at a time, sharing no code with tfbert's
in-graph `classifier_features.pack_text`.
"""

import numpy as np
from official.nlp.data import classifier_data_lib

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
LONG = "a sentence long enough that packing must drop some of its word pieces here"
# (text_a, text_b) including Google's edge cases (comments for a sequence length of 13).
PAIRS = [
    ("Hello, world!", "How are you?"),
    (LONG, "Short."),                        # Only a is cut.
    (LONG, LONG + " too"),                    # Both cut, the longer one first.
    ("Short.", ""),                           # No text_b: one segment.
    ("Short.", " \u200b\t"),                  # A text_b without wordpieces: one segment too.
    ("", "Only the second text."),            # [CLS] [SEP] b [SEP].
    ("", ""),
    ("Café naïve résumé", "BERT是一个模型。"),
]


def google_features(reference, pairs, seq_length: int, single: bool = False):
  """convert_single_example of each (text_a, text_b), stacked into int32 arrays [N, S].

  Args:
    reference: `tfbert.text.tokenization.reference_tokenizer(...)`.
    pairs: (text_a, text_b) tuples; text_b is ignored when `single`.
    seq_length: S.
    single: pack text_a only.
  """
  rows = []
  for i, (a, b) in enumerate(pairs):
    example = classifier_data_lib.InputExample(str(i), a, None if single else b, label="0")
    rows.append(classifier_data_lib.convert_single_example(i, example, ["0", "1"], seq_length,
                                                           reference))
  return {name: np.array([getattr(r, name) for r in rows], np.int32) for name in FEATURE_NAMES}
