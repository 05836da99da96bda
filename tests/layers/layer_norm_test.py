"""Tests for tfbert.layers.layer_norm: outputs AND gradients against the float64 NumPy reference."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import numpy_reference
from tfbert.layers.layer_norm import LayerNorm

B, S, H = 5, 3, 37


def _layer(gamma, beta):
  layer = LayerNorm()
  layer.build((None, H))
  layer.gamma.assign(gamma)
  layer.beta.assign(beta)
  return layer


@pytest.mark.parametrize("mean", [0.0, 1e3])
def test_output_and_gradients_match_reference(mean):
  rng = np.random.default_rng(7)
  x = (mean + rng.standard_normal((B, S, H))).astype(np.float32)
  gamma = (1 + 0.3 * rng.standard_normal(H)).astype(np.float32)
  beta = (0.3 * rng.standard_normal(H)).astype(np.float32)
  dy = rng.standard_normal((B, S, H)).astype(np.float32)
  layer = _layer(gamma, beta)
  xt = tf.constant(x)
  with tf.GradientTape() as tape:
    tape.watch(xt)
    y = layer(xt)
    loss = tf.reduce_sum(y * dy)
  dx, dgamma, dbeta = tape.gradient(loss, [xt, layer.gamma, layer.beta])
  want_y = numpy_reference.layer_norm(x.astype(np.float64), gamma, beta)
  want_dx, want_dgamma, want_dbeta = numpy_reference.layer_norm_backward(
      x.astype(np.float64), gamma, dy.astype(np.float64))
  # float32 with a mean of 1e3: the input itself is only known to ~6e-5 (ulp at 1e3), which
  # becomes ~6e-5 in normalized units; a one-pass E[x^2]-E[x]^2 would be off by O(1).
  tol = 2e-5 if mean == 0 else 2e-4
  np.testing.assert_allclose(y, want_y, atol=tol)
  np.testing.assert_allclose(dx, want_dx, atol=tol * 10)  # dx scales with gamma * |dy| sums
  np.testing.assert_allclose(dgamma, want_dgamma, atol=tol * 10)  # sum over B*S=15 terms
  np.testing.assert_allclose(dbeta, want_dbeta, atol=1e-5)
  # gamma and beta gradients are not swapped: they differ from each other by a lot.
  assert np.max(np.abs(want_dgamma - want_dbeta)) > 1.0


def test_epsilon_is_bert_1e_minus_12():
  assert LayerNorm().epsilon == 1e-12


def test_wrong_input_width_names_both_shapes():
  layer = _layer(np.ones(H, np.float32), np.zeros(H, np.float32))
  with pytest.raises(ValueError, match=r"input shape \(2, 36\) has last axis 36, but the layer "
                                       r"was built for width 37"):
    layer(tf.zeros((2, 36)))


def test_mixed_bfloat16_keeps_float32_parameters_and_statistics():
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  rng = np.random.default_rng(3)
  x = tf.cast(tf.constant(rng.standard_normal((B, H)) * 4 + 2), tf.bfloat16)
  # gamma 1.001 is not representable in bfloat16 (it rounds to 1.0): a layer that rounds its
  # parameters or statistics to bfloat16 would lose it.
  gamma = np.full(H, 1.001, np.float32)
  layer = _layer(gamma, np.full(H, 0.25, np.float32))
  assert layer.gamma.dtype == "float32"
  y = layer(x)
  assert y.dtype == tf.bfloat16
  want = numpy_reference.layer_norm(tf.cast(x, tf.float64).numpy(), gamma.astype(np.float64),
                                    np.full(H, 0.25))
  # The float32 result, rounded once to bfloat16, is within half a bfloat16 ulp (2^-9 relative).
  got = tf.cast(y, tf.float64).numpy()
  assert np.all(np.abs(got - want) <= np.abs(want) * 2.0 ** -8 + 1e-6)
