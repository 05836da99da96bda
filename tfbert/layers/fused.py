"""XLA-fused element-wise tails of the transformer layer's dense projections.

On CPU, every element-wise TensorFlow op is one pass over memory, and bfloat16 element-wise
ops are slow. So the layer's feed-forward and output projections run as bare MatMuls and
everything after each of them is one XLA-compiled loop for the forward pass and one for
the gradient (`tf.function` with `jit_compile=True`, called from the ordinary graph),
computing in float32 and rounding once to the compute dtype:

* `bias_gelu(h, bias, exact)`: gelu(h + bias), google-research/bert's tanh form or the exact
  erf form, with the bias gradient summed in the same loop.
* `bias_dropout_residual_layer_norm(h, bias, keep, residual, gamma, beta)`:
  LayerNorm(dropout(h + bias) + residual), google-research/bert's post-LN residual block.
* `widen_bias_add(h, bias)`: float32 h + bias for a 16-bit h (the MLM head's logits).

Gradients are written out (not autodiff) and recompute the forward values from the inputs,
so only the [..., 1] LayerNorm statistics are kept between the passes.
`tests/layers/fused_test.py` checks values and every gradient against the unfused composition.

Speed-ups against the unfused ops: `tools/benchmark.py --benchmark=kernels`
(docs/benchmark_history.md). Exported graphs trace plain ops instead, which oneDNN fuses
into the MatMuls (`tfbert.layers.serving_ops`).
Not fused: the query/key/value bias add and head transpose. As one XLA loop it took 1.5x
(float32) and 2.2x (bfloat16) the time of TensorFlow's add and transpose (oneDNN's), in
the same benchmark at commit bdc7b65. Nor the attention's scale + mask + softmax (with its
casts): as one XLA loop over [B, 12, 128, 128] it took 1.1-1.2x (B 1) and 1.15x (bfloat16)
to 2.0x (float32) at B 32 the time of TensorFlow's ops (2026-11-26, six calls in a graph).

Shape legend: M rows (B * S), C channels (H or I).
"""

from typing import Optional

import tensorflow as tf

from tfbert.layers import activations, layer_norm, serving_ops


def _f32(x: tf.Tensor) -> tf.Tensor:
  return tf.cast(x, tf.float32)


def _bias_gelu_kernels(value, slope):
  """The forward and gradient XLA loops of `bias_gelu` for one GELU form."""

  @tf.function(jit_compile=True, autograph=False)
  def forward(h, bias):
    return tf.cast(value(_f32(h) + _f32(bias)), h.dtype)

  @tf.function(jit_compile=True, autograph=False)
  def backward(h, bias, dy):
    dz = _f32(dy) * slope(_f32(h) + _f32(bias))
    return tf.cast(dz, h.dtype), tf.cast(tf.reduce_sum(dz, axis=0), bias.dtype)

  return forward, backward


_BIAS_GELU = {False: _bias_gelu_kernels(activations.gelu_tanh_value, activations.gelu_tanh_slope),
              True: _bias_gelu_kernels(activations.gelu_exact, activations.gelu_exact_slope)}


def bias_gelu(h: tf.Tensor, bias: tf.Tensor, exact: bool = False) -> tf.Tensor:
  """GELU of `h + bias`, fused: google-research/bert's tanh form, or with `exact` the erf form
  (Hugging Face's "gelu", `BertConfig.hidden_act` "gelu_exact").

  Unfused, the exact form is five TensorFlow ops (add, erf, three multiplies) over [M, C],
  each one pass over memory, and in bfloat16 each rounds: here it is one float32 loop
  rounded once to h's dtype. Forward pass, six calls in a graph, [M, 1536] on the 2-core
  CPU: M = 128 0.61 against 0.92 ms (float32), 0.52 against 0.86 ms (bfloat16); M = 4096
  4.5 against 11.0 ms (float32), 3.8 against 11.8 ms (bfloat16).

  Args:
    h: [M, C] MatMul output, float32 or 16-bit.
    bias: [C].
    exact: the erf form instead of the tanh form.

  Returns:
    [M, C] in h's dtype.
  """
  if serving_ops.active():
    return serving_ops.bias_gelu(h, bias, exact)
  forward, backward = _BIAS_GELU[exact]

  @tf.custom_gradient
  def fused(h, bias):
    def grad(dy):
      return backward(h, bias, dy)

    return forward(h, bias), grad

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
  if serving_ops.active():
    if keep is not None:
      raise ValueError("dropout in a serving graph: trace exports with training=False")
    total = _f32(tf.nn.bias_add(h, tf.cast(bias, h.dtype))) + _f32(residual)
    return tf.cast(layer_norm.normalize(total, gamma, beta, epsilon), h.dtype)
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

