"""Layer normalization as in google-research/bert, with float32 statistics.

Epsilon is 1e-12 (google-research/bert `modeling.layer_norm`, via
`tf.contrib.layers.layer_norm(begin_norm_axis=-1, begin_params_axis=-1)` with its
`variance_epsilon=1e-12`). Mean and variance are computed in two passes in float32 even
under a mixed-precision policy: `E[x^2] - E[x]^2` loses all precision for inputs with a large
mean, and bfloat16 statistics are too coarse for BERT's residual stream.
"""

import keras
import tensorflow as tf

from tfbert.layers import serving_ops

EPSILON = 1e-12


@keras.saving.register_keras_serializable(package="tfbert")
class LayerNorm(keras.layers.Layer):
  """Normalizes the last axis, then scales by `gamma` and shifts by `beta`.

  Args:
    epsilon: Added to the variance; BERT's 1e-12 by default.
    **kwargs: Forwarded to `keras.layers.Layer`.
  """

  def __init__(self, epsilon: float = EPSILON, **kwargs):
    super().__init__(**kwargs)
    self.epsilon = epsilon

  def build(self, input_shape):
    width = input_shape[-1]
    if width is None:
      raise ValueError(f"{self.name}: the last axis must be known, got input shape {input_shape}")
    # autocast=False: under a mixed policy gamma/beta must reach the float32 math unrounded.
    self.gamma = self.add_weight(name="gamma", shape=(width,), initializer="ones", autocast=False)
    self.beta = self.add_weight(name="beta", shape=(width,), initializer="zeros", autocast=False)

  def call(self, x: tf.Tensor) -> tf.Tensor:
    """Args: x: float Tensor [..., H]. Returns: Tensor of x's shape and compute dtype."""
    width = self.gamma.shape[0]
    if x.shape[-1] is not None and x.shape[-1] != width:
      raise ValueError(
          f"{self.name}: input shape {tuple(x.shape)} has last axis {x.shape[-1]}, but the "
          f"layer was built for width {width} (gamma/beta shape ({width},))")
    y = normalize(tf.cast(x, tf.float32), tf.convert_to_tensor(self.gamma),
                   tf.convert_to_tensor(self.beta), self.epsilon)
    return tf.cast(y, self.compute_dtype)

  def get_config(self):
    return {**super().get_config(), "epsilon": self.epsilon}


def _outer_axes(x: tf.Tensor) -> list[int]:
  return list(range(len(x.shape) - 1))


def normalize_forward(x, gamma, beta, epsilon):
  """The LayerNorm math, for tracing inside a fused kernel (also `tfbert.layers.fused`'s).

  Returns:
    y, and the row statistics mean and rstd [..., 1].
  """
  mean = tf.reduce_mean(x, axis=-1, keepdims=True)
  centered = x - mean
  variance = tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
  rstd = tf.math.rsqrt(variance + epsilon)
  return centered * rstd * gamma + beta, mean, rstd


def normalize_backward(x, mean, rstd, gamma, dy):
  """(dx, dgamma, dbeta) of `normalize_forward`, recomputing xhat from x and the statistics."""
  xhat = (x - mean) * rstd
  g = dy * gamma
  mean_g = tf.reduce_mean(g, axis=-1, keepdims=True)
  mean_gx = tf.reduce_mean(g * xhat, axis=-1, keepdims=True)
  dx = rstd * (g - mean_g - xhat * mean_gx)
  outer = _outer_axes(dy)
  return dx, tf.reduce_sum(dy * xhat, axis=outer), tf.reduce_sum(dy, axis=outer)


_forward = tf.function(normalize_forward, jit_compile=True, autograph=False)
_backward = tf.function(normalize_backward, jit_compile=True, autograph=False)


def normalize(x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, epsilon: float) -> tf.Tensor:
  """float32 LayerNorm of the last axis with a written-out gradient (in
  `serving_ops.scope()`: `normalize_forward`'s plain ops, no gradient).

  With xhat = (x - mean) * r, r = 1 / sqrt(var + epsilon) and g = dy * gamma:
  dx = r * (g - mean(g) - xhat * mean(g * xhat)), dgamma = sum(dy * xhat),
  dbeta = sum(dy) (sums over every axis but the last). The forward pass and the gradient
  are each one XLA-compiled fusion; only the [..., 1] statistics are kept between them.
  Autodiff of unfused forward ops took about twice the element-wise passes over [B, S, H],
  and the same written-out gradient as separate ops 1.2x the time of the fused one
  (tools/benchmark.py --benchmark=kernels);
  the layer's tests check all three gradients against the float64 NumPy reference.

  Args:
    x: float32 [..., H].
    gamma, beta: float32 [H].
    epsilon: Added to the variance.

  Returns:
    float32 [..., H].
  """
  if serving_ops.active():  # Plain ops: no XLA call per LayerNorm in a served graph.
    return normalize_forward(x, gamma, beta, tf.constant(epsilon, x.dtype))[0]

  @tf.custom_gradient
  def forward(x, gamma, beta):
    y, mean, rstd = _forward(x, gamma, beta, tf.constant(epsilon, x.dtype))

    def grad(dy):
      return _backward(x, mean, rstd, gamma, dy)

    return y, grad

  return forward(x, gamma, beta)
