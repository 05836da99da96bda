"""Tests for tfbert.pretraining.pretraining_export: a pretrainer's SavedModel fills masks.

The export's `fill_mask` must give the top-k tokens of the Keras model's own MLM logits at
each `[MASK]` (computed here from hand-packed ids over a tiny word-level vocabulary, so the
packing is checked too), and the Python call `model.fill_mask` and `tfbert.load(export)`
answer the same. One MLM-only pretrainer (2 layers, H 32, V 23, S 13) and its export are
shared by the module.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfbert
from tests import helpers, numpy_reference
from tfbert import BertPretrainer
from tfbert.inference import text_settings
from tfbert.pretraining import pretraining_export

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "to", "park", "and", ".", "is",
         "red", "big", "small", "in", "house"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS  # V = 23
SEQ = 13
CONFIG = helpers.odd_config(vocab_size=len(VOCAB), num_hidden_layers=2,
                            max_position_embeddings=24, hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0)
TEXTS = ["the cat [MASK] on the mat .", "[MASK] dog ran to the [MASK]", "a big red [MASK]"]
# Every test reads the module's export (written and loaded once: ~4 s with the tokenizer).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  """(model with text settings, export directory, the export loaded by `tfbert.load`)."""
  root = tmp_path_factory.mktemp("fill_mask")
  vocab = root / "vocab.txt"
  vocab.write_text("\n".join(VOCAB) + "\n")
  weights = numpy_reference.random_google_weights(CONFIG.to_dict(), seed=7)
  weights = {n: w for n, w in weights.items() if not n.startswith("cls/seq_relationship/")}
  model = helpers.loaded(BertPretrainer(CONFIG, objective="mlm"), weights)
  text_settings.attach_text(model, str(vocab), True, SEQ)
  path = pretraining_export.export_pretrainer_saved_model(model, str(root / "export"),
                                                          str(vocab), True, SEQ)
  return model, path, tfbert.load(path)


def _keras_top_k(model, texts, k):
  """float64 softmax top-k of the Keras model's MLM logits at each mask, from ids packed by
  hand ([CLS] words [SEP], one id per word): [(ids, probabilities)] per text per mask."""
  rows = [[VOCAB.index("[CLS]")] + [VOCAB.index(w) for w in t.split()] + [VOCAB.index("[SEP]")]
          for t in texts]
  positions = [[i for i, t in enumerate(r) if t == VOCAB.index("[MASK]")] for r in rows]
  width = max(len(p) for p in positions)
  features = {
      "input_ids": np.array([r + [0] * (SEQ - len(r)) for r in rows], np.int32),
      "input_mask": np.array([[1] * len(r) + [0] * (SEQ - len(r)) for r in rows], np.int32),
      "segment_ids": np.zeros((len(rows), SEQ), np.int32),
      "masked_lm_positions": np.array([p + [0] * (width - len(p)) for p in positions],
                                      np.int32)}
  logits = model(features, training=False)["mlm_logits"].numpy().astype(np.float64)  # [B, M, V]
  found = []
  for row, where in enumerate(positions):
    masks = []
    for m in range(len(where)):
      p = np.exp(logits[row, m] - logits[row, m].max())
      p /= p.sum()
      top = np.argsort(-p, kind="stable")[:k]
      masks.append((top.tolist(), p[top]))
    found.append(masks)
  return found


def test_fill_mask_serves_the_top_k_of_the_keras_mlm_logits(exported):
  model, _, loaded = exported
  signatures = loaded._loaded.signatures  # pylint: disable=protected-access
  out = signatures["fill_mask"](text=tf.constant(TEXTS), top_k=tf.constant(4))
  assert out["num_masks"].numpy().tolist() == [1, 2, 1]
  want = _keras_top_k(model, TEXTS, 4)
  for row, masks in enumerate(want):
    for m, (ids, probabilities) in enumerate(masks):
      assert out["token_ids"][row, m].numpy().tolist() == ids
      assert [t.decode() for t in out["tokens"][row, m].numpy()] == [VOCAB[i] for i in ids]
      np.testing.assert_allclose(out["scores"][row, m], probabilities, rtol=1e-5)
  # Rows with fewer masks are padded.
  assert out["token_ids"][0, 1].numpy().tolist() == [-1] * 4
  assert out["scores"][0, 1].numpy().tolist() == [0.0] * 4
  # The model's Python call and the loaded export answer the same (one implementation).
  in_python = model.fill_mask(TEXTS, top_k=4)
  from_export = loaded.fill_mask(TEXTS, top_k=4)
  for got in (in_python, from_export):
    assert [[[c["token"] for c in mask] for mask in masks] for masks in got] == [
        [ids for ids, _ in masks] for masks in want]
    np.testing.assert_allclose([c["score"] for c in got[1][1]], want[1][1][1], rtol=1e-5)
  # The id signatures serve the encoder, as the encoder export does.
  ids = {"input_ids": tf.constant([[2, 5, 6, 3]]), "input_mask": tf.ones([1, 4], tf.int32),
         "segment_ids": tf.zeros([1, 4], tf.int32)}
  served = signatures["serving_default"](**ids)
  assert sorted(served) == ["pooled_output", "sequence_output"]
  np.testing.assert_allclose(served["sequence_output"],
                             model.encoder(ids, training=False)["sequence_output"], atol=2e-6)


@pytest.mark.parametrize("texts, top_k, message", [
    (["a [MASK]", "no mask"], 2, r"fill_mask: text\[1\] has no \[MASK\]"),
    (["the " * 11 + "[MASK]"], 2, r"fill_mask: text\[0\] has a \[MASK\] beyond "
     r"max_seq_length - 2 = 11 wordpieces"),
    (["a [MASK]"], 24, r"fill_mask: top_k is 24, outside \[1, 23\]"),
], ids=["no_mask", "beyond", "top_k"])
def test_a_request_the_signature_cannot_answer_is_named(exported, texts, top_k, message):
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    exported[2]._loaded.signatures["fill_mask"](  # pylint: disable=protected-access
        text=tf.constant(texts), top_k=tf.constant(top_k))


def test_the_python_call_names_the_text_in_the_callers_list(exported):
  model = exported[0]
  with pytest.raises(ValueError, match=r"texts\[2\] has a \[MASK\] beyond max_seq_length - 2 "
                                       r"= 11 wordpieces"):
    model.fill_mask(["a [MASK]", "b [MASK]", "the " * 11 + "[MASK]"], batch_size=2)
  with pytest.raises(ValueError, match=r"top_k is 30, outside \[1, 23\]"):
    model.fill_mask("a [MASK]", top_k=30)
