"""Tests for tfbert.layers.transformer_layer."""

import numpy as np
import tensorflow as tf

from tfbert.layers.transformer_layer import TransformerLayer


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


def test_query_positions_give_the_full_layer_gathered():
  layer = _layer()
  rng = np.random.default_rng(2)
  x = tf.constant(rng.standard_normal((3, 5, 12)), tf.float32)
  mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0]])
  positions = np.array([[0, 3], [4, 4], [2, 0]])  # Repeats, and a padded position.
  got = layer(x, mask, query_positions=positions)
  assert got.shape == (3, 2, 12)
  full = layer(x, mask).numpy()
  # float32 with matmuls over 6 instead of 15 rows: only summation order may differ.
  np.testing.assert_allclose(got, np.take_along_axis(full, positions[..., None], axis=1),
                             atol=1e-6)


def test_get_config_round_trips():
  layer = _layer()
  assert TransformerLayer.from_config(layer.get_config()).get_config() == layer.get_config()
