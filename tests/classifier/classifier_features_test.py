"""Tests for tfbert.classifier.classifier_features: the in-graph packing equals Google's, id for id.

The peer is Model Garden's `classifier_data_lib.convert_single_example` with the reference
`FullTokenizer` (tests/classifier_reference.py), sharing no code with `pack_text`.
Equality is exact (integer ids).
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from tests.classifier_reference import PAIRS, google_features
from tfbert.checkpoints import pretrained
from tfbert.classifier import classifier_features, glue_data
from tfbert.text import tokenization

SEQ = 13  # Odd, and short enough that many pairs are truncated.


@pytest.fixture(scope="module")
def tokenizers():
  vocab = pretrained.minilm_vocab_file()
  return (tokenization.WordPieceTokenizer(vocab, True),
          tokenization.reference_tokenizer(vocab, True))


def _assert_equal(got, want):
  for name in classifier_features.FEATURE_NAMES:
    np.testing.assert_array_equal(np.asarray(got[name]), want[name], err_msg=name)


def test_pairs_pack_exactly_as_googles_convert_single_example(tokenizers):
  ours, reference = tokenizers
  a, b = (tf.constant([p[i] for p in PAIRS]) for i in (0, 1))
  got = classifier_features.pack_text(ours, a, b, SEQ)
  want = google_features(reference, PAIRS, SEQ)
  _assert_equal(got, want)
  # The edge cases are there: rows 3 and 4 are single segments, row 1 keeps all of b.
  assert want["segment_ids"][3].max() == want["segment_ids"][4].max() == 0
  assert want["input_mask"][3].sum() == 4  # [CLS] short . [SEP]
  assert want["input_mask"][1].sum() == want["input_mask"][2].sum() == SEQ


def test_single_texts_pack_exactly_as_googles(tokenizers):
  ours, reference = tokenizers
  got = classifier_features.pack_text(ours, tf.constant([p[0] for p in PAIRS]), None, SEQ)
  _assert_equal(got, google_features(reference, PAIRS, SEQ, single=True))


def test_examples_to_features_batches_pairs_and_single_texts(tokenizers):
  ours, reference = tokenizers
  examples = [glue_data.InputExample(f"dev-{i}", i, i + 2, a, b or None, "0")
              for i, (a, b) in enumerate(PAIRS * 2)]
  for is_pair in (True, False):
    got = classifier_features.examples_to_features(examples, ours, SEQ, is_pair, batch_size=5)
    assert {k: v.dtype for k, v in got.items()} == {k: np.int32 for k in got}
    _assert_equal(got, google_features(reference, PAIRS * 2, SEQ, single=not is_pair))
  empty = classifier_features.examples_to_features([], ours, SEQ, True)
  assert empty["input_ids"].shape == (0, SEQ)


def test_real_mrpc_and_sst2_dev_pack_exactly_as_googles(shared_data, tokenizers):
  ours, reference = tokenizers
  for task, directory, seq_length in (("mrpc", "MRPC", 41), ("sst-2", "SST-2", 17)):
    task = glue_data.TASKS[task]
    path = os.path.join(shared_data, "glue", directory, "dev.tsv")
    examples = glue_data.read_examples(task, path, "dev").examples
    got = classifier_features.examples_to_features(examples, ours, seq_length, task.is_pair)
    want = google_features(reference, [(e.text_a, e.text_b) for e in examples], seq_length,
                            single=not task.is_pair)
    _assert_equal(got, want)
    assert (want["input_mask"].sum(axis=1) == seq_length).mean() > 0.1  # Truncation is tested.


def test_labels_become_class_ids_or_float_scores():
  rows = [glue_data.InputExample("x-0", 0, 1, "a", "b", "neutral"),
          glue_data.InputExample("x-1", 1, 2, "a", "b", "contradiction")]
  ids = classifier_features.label_array(rows, glue_data.TASKS["mnli"])
  np.testing.assert_array_equal(ids, [2, 0])
  assert ids.dtype == np.int32
  scores = [glue_data.InputExample("x-0", 0, 1, "a", "b", 3.8)]
  got = classifier_features.label_array(scores, glue_data.TASKS["sts-b"])
  assert got.dtype == np.float32 and got[0] == np.float32(3.8)
  with pytest.raises(ValueError, match=r"labels \[.contradiction., .neutral.\] are not"):
    classifier_features.label_array(rows, glue_data.TASKS["rte"])
  with pytest.raises(ValueError, match="1 examples have no label"):
    classifier_features.label_array([glue_data.InputExample("t-0", 0, 1, "a")],
                                    glue_data.TASKS["sst-2"])
