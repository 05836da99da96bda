"""Tests for tfbert.layers.heads (numerics are covered end to end in models_test)."""

import numpy as np
import pytest
import tensorflow as tf

from tfbert.layers.heads import ClassifierHead, MaskedLMHead, NextSentenceHead, SpanHead


def test_projection_weights_have_googles_c_by_h_layout():
  head = NextSentenceHead()
  head.build((None, 8))
  assert tuple(head.output_weights.shape) == (2, 8)
  x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
  want = x @ head.output_weights.numpy().T + head.output_bias.numpy()
  np.testing.assert_allclose(head(tf.constant(x)), want, atol=1e-6)


def test_span_head_splits_start_and_end():
  head = SpanHead()
  head.build((None, None, 8))
  out = head(tf.ones((2, 5, 8)))
  assert set(out) == {"start_logits", "end_logits"} and out["start_logits"].shape == (2, 5)


def test_mlm_head_gathers_positions_per_example():
  head = MaskedLMHead(vocab_size=7, hidden_size=4)
  head.build()
  seq = tf.constant(np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4))
  table = tf.constant(np.random.default_rng(0).standard_normal((7, 4)), tf.float32)
  both = head(seq, tf.constant([[2], [0]]), table)
  first = head(seq[:1], tf.constant([[2]]), table)
  second = head(seq[1:], tf.constant([[0]]), table)
  np.testing.assert_allclose(both, tf.concat([first, second], 0), atol=1e-6)


@pytest.mark.parametrize("layer", [NextSentenceHead(initializer_range=0.1),
                                   ClassifierHead(num_classes=3, dropout_rate=0.2),
                                   MaskedLMHead(vocab_size=7, hidden_size=4, hidden_act="relu")])
def test_get_config_round_trips(layer):
  assert type(layer).from_config(layer.get_config()).get_config() == layer.get_config()
