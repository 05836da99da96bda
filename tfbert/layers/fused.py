"""XLA-fused element-wise tails of the transformer layer's dense projections.

On CPU, every element-wise TensorFlow op is one pass over memory, and bfloat16 element-wise
ops are slow. So the layer's feed-forward and output projections run as bare MatMuls and
everything after each of them is one XLA-compiled loop for the forward pass and one for
the gradient (`tf.function` with `jit_compile=True`, called from the ordinary graph),
computing in float32 and rounding once to the compute dtype:

* `bias_gelu(h, bias)`: gelu_tanh(h + bias), with the bias gradient summed in the same loop.
* `bias_dropout_residual_layer_norm(h, bias, keep, residual, gamma, beta)`:
  LayerNorm(dropout(h + bias) + residual), google-research/bert's post-LN residual block.
* `widen_bias_add(h, bias)`: float32 h + bias for a 16-bit h (the MLM head's logits).

Gradients are written out (not autodiff) and recompute the forward values from the inputs,
so only the [..., 1] LayerNorm statistics are kept between the passes.
`tests/layers/fused_test.py` checks values and every gradient against the unfused composition.

Speed-ups against the unfused ops: `tools/benchmark.py --benchmark=kernels`
(docs/benchmark_history.md).
Not fused: the query/key/value bias add and head transpose. As one XLA loop it took 1.5x
(float32) and 2.2x (bfloat16) the time of TensorFlow's add and transpose (oneDNN's), in
the same benchmark at commit bdc7b65.

Shape legend: M rows (B * S), C channels (H or I).
"""

from typing import Optional

import tensorflow as tf

from tfbert.layers import activations, layer_norm


def _f32(x: tf.Tensor) -> tf.Tensor:
  return tf.cast(x, tf.float32)


@tf.function(jit_compile=True, autograph=False)
def _bias_gelu_forward(h, bias):
  return tf.cast(activations.gelu_tanh_value(_f32(h) + _f32(bias)), h.dtype)


@tf.function(jit_compile=True, autograph=False)
def _bias_gelu_backward(h, bias, dy):
  dz = _f32(dy) * activations.gelu_tanh_slope(_f32(h) + _f32(bias))
  return tf.cast(dz, h.dtype), tf.cast(tf.reduce_sum(dz, axis=0), bias.dtype)


def bias_gelu(h: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
  """google-research/bert's gelu (tanh form) of `h + bias`, fused.

  Args:
    h: [M, C] MatMul output, float32 or 16-bit.
    bias: [C].

  Returns:
    [M, C] in h's dtype.
  """

  @tf.custom_gradient
  def fused(h, bias):
    def grad(dy):
      return _bias_gelu_backward(h, bias, dy)

    return _bias_gelu_forward(h, bias), grad

  return fused(tf.convert_to_tensor(h), tf.convert_to_tensor(bias))


@tf.function(jit_compile=True, autograph=False)
def _widen_add(h, bias):
  return _f32(h) + bias


def widen_bias_add(h: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
  """float32 `h + bias` for a 16-bit `h`, the cast and the add in one XLA loop.

  The MLM head's [N, V] logits: one pass instead of TensorFlow's Cast and BiasAdd (9.2
  against 15.0 ms for bfloat16 [640, 30522] on this 2-core CPU). The gradient is the
  cast of `dy` to h's dtype and `BiasAddGrad(dy)` in float32, as for the unfused ops.

  Args:
    h: [N, C] 16-bit MatMul output.
    bias: float32 [C].

  Returns:
    float32 [N, C].
  """

  @tf.custom_gradient
  def fused(h, bias):
    def grad(dy):
      return tf.cast(dy, h.dtype), tf.raw_ops.BiasAddGrad(out_backprop=dy)

    return _widen_add(h, bias), grad

  return fused(tf.convert_to_tensor(h), tf.convert_to_tensor(bias))


def _residual_sum(h, bias, keep, scale, residual):
  """float32 dropout(h + bias) + residual; `keep` is a bool mask or a scalar True."""
  dense = _f32(h) + _f32(bias)
  return tf.where(keep, dense * scale, 0.0) + _f32(residual)


@tf.function(jit_compile=True, autograph=False)
def _residual_norm_forward(h, bias, keep, scale, residual, gamma, beta, epsilon):
  y, mean, rstd = layer_norm.normalize_forward(_residual_sum(h, bias, keep, scale, residual),
                                               gamma, beta, epsilon)
  return tf.cast(y, h.dtype), mean, rstd


@tf.function(jit_compile=True, autograph=False)
def _residual_norm_backward(h, bias, keep, scale, residual, gamma, mean, rstd, dy):
  ds, dgamma, dbeta = layer_norm.normalize_backward(
      _residual_sum(h, bias, keep, scale, residual), mean, rstd, gamma, _f32(dy))
  dh = tf.where(keep, ds * scale, 0.0)
  return (tf.cast(dh, h.dtype), tf.cast(tf.reduce_sum(dh, axis=0), bias.dtype),
          tf.cast(ds, residual.dtype), dgamma, dbeta)


def bias_dropout_residual_layer_norm(h: tf.Tensor, bias: tf.Tensor, keep: Optional[tf.Tensor],
                                     scale: float, residual: tf.Tensor, gamma: tf.Tensor,
                                     beta: tf.Tensor, epsilon: float) -> tf.Tensor:
  """LayerNorm(dropout(h + bias) + residual), fused; statistics in float32.

  Args:
    h: [M, C] MatMul output, float32 or 16-bit.
    bias: [C].
    keep: bool [M, C] dropout keep-mask (`Dropout.keep_mask`), or None for no dropout.
    scale: Factor of kept elements (`Dropout.scale`); ignored without a mask. Applied in
      float32, as `Dropout` does.
    residual: [M, C] in h's dtype.
    gamma, beta: float32 [C] LayerNorm parameters.
    epsilon: LayerNorm epsilon.

  Returns:
    [M, C] in h's dtype.
  """
  if keep is None:
    keep, scale = tf.constant(True), 1.0
  scale = tf.constant(scale, tf.float32)
  epsilon = tf.constant(epsilon, tf.float32)

  @tf.custom_gradient
  def fused(h, bias, residual, gamma, beta):
    y, mean, rstd = _residual_norm_forward(h, bias, keep, scale, residual, gamma, beta, epsilon)

    def grad(dy):
      return _residual_norm_backward(h, bias, keep, scale, residual, gamma, mean, rstd, dy)

    return y, grad

  return fused(*[tf.convert_to_tensor(t) for t in (h, bias, residual, gamma, beta)])

