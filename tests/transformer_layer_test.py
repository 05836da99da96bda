"""Tests for tfbert.transformer_layer."""

import numpy as np
import tensorflow as tf

from tfbert.transformer_layer import TransformerLayer


def _layer(dropout=0.0):
  layer = TransformerLayer(hidden_size=12, num_heads=3, intermediate_size=17,
                           hidden_dropout=dropout, attention_dropout=dropout)
  layer.build((None, None, 12))
  return layer


def test_weights_have_googles_shapes():
  shapes = {v.path.split("/", 1)[1]: tuple(v.shape) for v in _layer().weights}
  assert shapes["intermediate/kernel"] == (12, 17)
  assert shapes["output/kernel"] == (17, 12)
  assert shapes["attention/query/kernel"] == (12, 12)
  assert len(shapes) == 16  # 4 attention dense x2 + 2 FFN dense x2 + 2 LayerNorms x2


def test_dropout_only_in_training_and_deterministic_in_inference():
  layer = _layer(dropout=0.3)
  x = tf.constant(np.random.default_rng(0).standard_normal((2, 5, 12)), tf.float32)
  mask = np.ones((2, 5))
  np.testing.assert_array_equal(layer(x, mask), layer(x, mask))
  assert not np.allclose(layer(x, mask, training=True), layer(x, mask))


def test_get_config_round_trips():
  layer = _layer()
  assert TransformerLayer.from_config(layer.get_config()).get_config() == layer.get_config()
