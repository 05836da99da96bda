"""Tests for tfbert.layers.fused: values and every gradient against the unfused composition.

The reference is the plain TensorFlow composition of the same ops, differentiated by
autodiff in float64; the fused kernels compute in float32.
"""

import numpy as np
import pytest
import tensorflow as tf

from tfbert.layers import activations, fused

M, C = 23, 37  # odd sizes


def _reference_residual_norm(h, bias, keep, scale, residual, gamma, beta, epsilon):
  dense = h + bias
  if keep is not None:
    dense = tf.where(keep, dense * scale, tf.zeros_like(dense))
  s = dense + residual
  mean = tf.reduce_mean(s, -1, keepdims=True)
  variance = tf.reduce_mean(tf.square(s - mean), -1, keepdims=True)
  return (s - mean) / tf.sqrt(variance + epsilon) * gamma + beta


def _arrays(seed):
  rng = np.random.default_rng(seed)
  return {
      "h": rng.normal(0.0, 2.0, (M, C)), "bias": rng.normal(0.0, 0.5, C),
      "residual": rng.normal(0.0, 1.0, (M, C)), "gamma": 1.0 + rng.normal(0.0, 0.3, C),
      "beta": rng.normal(0.0, 0.3, C), "dy": rng.normal(0.0, 1.0, (M, C)),
      "keep": rng.random((M, C)) >= 0.3}


def _values_and_gradients(fn, inputs, dy):
  with tf.GradientTape() as tape:
    tape.watch(inputs)
    y = fn(*inputs)
  return [y] + tape.gradient(y, inputs, output_gradients=dy)


@pytest.mark.parametrize("with_dropout", [False, True])
def test_residual_layer_norm_matches_the_unfused_composition(with_dropout):
  a = _arrays(1)
  keep = tf.constant(a["keep"]) if with_dropout else None
  scale = 1.0 / 0.7
  names = ["h", "bias", "residual", "gamma", "beta"]
  ours = _values_and_gradients(
      lambda h, b, r, g, be: fused.bias_dropout_residual_layer_norm(h, b, keep, scale, r, g, be,
                                                                    1e-12),
      [tf.constant(a[n], tf.float32) for n in names], tf.constant(a["dy"], tf.float32))
  want = _values_and_gradients(
      lambda h, b, r, g, be: _reference_residual_norm(h, b, keep, scale, r, g, be, 1e-12),
      [tf.constant(a[n], tf.float64) for n in names], tf.constant(a["dy"], tf.float64))
  # float32 against float64: normalized values are O(1) (ulp 1.2e-7); dgamma and dbeta sum
  # 23 per-row terms of O(1-5): measured max 2.0e-6 (dgamma), 1.3e-6 (dbeta), <= 6e-7 else.
  for name, got, expected in zip(["y"] + names, ours, want):
    np.testing.assert_allclose(got, expected, atol=5e-6, err_msg=name)
  # Dropped elements pass no gradient to h; the residual always receives it.
  if with_dropout:
    assert np.all(ours[1].numpy()[~a["keep"]] == 0.0)
    assert np.count_nonzero(ours[3].numpy()[~a["keep"]]) == np.count_nonzero(~a["keep"])


@pytest.mark.parametrize("exact", [False, True], ids=["tanh", "erf"])
def test_bias_gelu_matches_the_unfused_composition(exact):
  a = _arrays(2)
  formula = activations.gelu_exact if exact else activations.gelu_tanh_value
  ours = _values_and_gradients(lambda h, b: fused.bias_gelu(h, b, exact=exact),
                               [tf.constant(a["h"], tf.float32),
                                tf.constant(a["bias"], tf.float32)],
                               tf.constant(a["dy"], tf.float32))
  want = _values_and_gradients(lambda h, b: formula(h + b),
                               [tf.constant(a["h"], tf.float64),
                                tf.constant(a["bias"], tf.float64)],
                               tf.constant(a["dy"], tf.float64))
  # The written-out slopes against float64 autodiff of each formula. Values up to 7.4 (ulp
  # 4.8e-7), measured 5e-7. XLA's float32 tanh, erf and exp are within a few ulps, times dy
  # up to ~3: measured 3.4e-6 on dh, 4.0e-6 on dbias (23 terms) for tanh; 6.1e-7, 2.9e-7
  # and 1.1e-6 (y, dh, dbias) for erf.
  for name, got, expected in zip(["y", "h", "bias"], ours, want):
    np.testing.assert_allclose(got, expected, atol=6e-6, err_msg=name)
  # The two forms differ (up to ~5e-4 here), so the flag picks the formula.
  other = fused.bias_gelu(tf.constant(a["h"], tf.float32), tf.constant(a["bias"], tf.float32),
                          exact=not exact)
  assert np.max(np.abs(other.numpy() - ours[0].numpy())) > 1e-4


def test_bfloat16_inputs_are_computed_in_float32_and_rounded_once():
  a = _arrays(3)
  h16 = tf.constant(a["h"], tf.bfloat16)
  r16 = tf.constant(a["residual"], tf.bfloat16)
  bias, gamma, beta = (tf.constant(a[n], tf.float32) for n in ("bias", "gamma", "beta"))
  y = fused.bias_dropout_residual_layer_norm(h16, bias, None, 1.0, r16, gamma, beta, 1e-12)
  g = fused.bias_gelu(h16, bias)
  assert y.dtype == tf.bfloat16 and g.dtype == tf.bfloat16
  # The float32 result of the same (bfloat16-valued) inputs, rounded once to bfloat16.
  want_y = _reference_residual_norm(tf.cast(h16, tf.float64), tf.cast(bias, tf.float64), None,
                                    1.0, tf.cast(r16, tf.float64), tf.cast(gamma, tf.float64),
                                    tf.cast(beta, tf.float64), 1e-12)
  want_g = activations.gelu_tanh_value(tf.cast(h16, tf.float64) + tf.cast(bias, tf.float64))
  # Rounded once: the bfloat16 result is the float64 reference rounded to bfloat16 (measured
  # 851/851 for the LayerNorm). gelu's far negative tail (|gelu| < 1e-3, x < -3) is
  # computed as 0.5 x (1 + tanh), whose float32 cancellation leaves an absolute error
  # ~|x| 6e-8 that can flip the bfloat16 rounding there (23 of 851 elements); above it,
  # every element matches. All are within half a bfloat16 ulp (2^-8 relative) + 1e-6.
  for got, want in ((y, want_y), (g, want_g)):
    got, want = tf.cast(got, tf.float64).numpy(), want.numpy()
    rounded = tf.cast(tf.cast(want, tf.bfloat16), tf.float64).numpy()
    above_tail = np.abs(want) >= 1e-3
    assert above_tail.sum() > 800
    np.testing.assert_array_equal(got[above_tail], rounded[above_tail])
    np.testing.assert_array_less(np.abs(got - want), 2.0 ** -8 * np.abs(want) + 1e-6)


def test_widen_bias_add_is_exact_and_its_gradient_is_the_unfused_ops():
  a = _arrays(4)
  h16 = tf.constant(a["h"], tf.bfloat16)
  bias = tf.constant(a["bias"], tf.float32)
  dy = tf.constant(a["dy"], tf.float32)
  got = _values_and_gradients(fused.widen_bias_add, [h16, bias], dy)
  want = _values_and_gradients(lambda h, b: tf.nn.bias_add(tf.cast(h, tf.float32), b),
                               [h16, bias], dy)
  assert got[0].dtype == tf.float32 and got[1].dtype == tf.bfloat16
  # The same float32 operations (one cast, one add; a row sum for the bias): bit for bit.
  for name, g, w in zip(["y", "h", "bias"], got, want):
    np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=name)
