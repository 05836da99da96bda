"""tfbert.layers.pooling against NumPy: sentence-transformers' mean, CLS and max pooling."""

import numpy as np
import pytest
import tensorflow as tf

from tfbert.layers import pooling


def _inputs():
  rng = np.random.default_rng(2)
  x = rng.normal(size=(3, 5, 7)).astype(np.float32)
  mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], np.int32)
  return x, mask


def test_mean_cls_and_max_pool_only_the_unmasked_tokens():
  x, mask = _inputs()
  mean = pooling.pool(tf.constant(x), tf.constant(mask), "mean").numpy()
  np.testing.assert_allclose(mean[0], x[0, :3].mean(axis=0), rtol=1e-6)
  np.testing.assert_allclose(mean[1], x[1].mean(axis=0), rtol=1e-6)
  np.testing.assert_array_equal(mean[2], np.zeros(7))  # No token: zeros, not NaN.
  np.testing.assert_array_equal(pooling.pool(tf.constant(x), tf.constant(mask), "cls").numpy(),
                                x[:, 0])
  most = pooling.pool(tf.constant(x), tf.constant(mask), "max").numpy()
  np.testing.assert_array_equal(most[0], x[0, :3].max(axis=0))
  np.testing.assert_array_equal(most[1], x[1].max(axis=0))
  np.testing.assert_array_equal(most[2], np.zeros(7))
  with pytest.raises(ValueError, match="unknown pooling mode 'weighted'.*mean, cls, max"):
    pooling.pool(tf.constant(x), tf.constant(mask), "weighted")


def test_normalize_gives_unit_rows_and_keeps_a_zero_row():
  rows = np.array([[3.0, 4.0], [0.0, 0.0]], np.float32)
  np.testing.assert_allclose(pooling.normalize(tf.constant(rows)).numpy(),
                             [[0.6, 0.8], [0.0, 0.0]], rtol=1e-6)
