"""Dropout that draws 16 random bits per element instead of 32.

BERT applies dropout to the attention probabilities [B, N, S, S] and to every [B, S, H]
layer output, and on CPU the random numbers cost more than the rest of the dropout: Keras'
`Dropout` draws one 32-bit float per element. Here each 32-bit draw of the stateless Philox
generator gives the decisions of two elements (its two 16-bit halves), which halves the
generator's work (tools/benchmark.py; BENCHMARKS.md).

An element is kept when its 16-bit number u satisfies u >= round(rate * 65536), so the drop
probability is round(rate * 65536) / 65536: 0.10000610 for rate 0.1 (Keras' float draws give
rate up to float32 rounding). Kept elements are scaled by 65536 / (65536 - threshold), the
inverse of the exact keep probability, so the expected output equals the input. (In a
bfloat16 compute dtype that factor is rounded to bfloat16, 1.109375 for 1.1111, as Keras'
`Dropout` rounds its 1 / (1 - rate).)

Like Keras' `Dropout`, the layer owns a `keras.random.SeedGenerator` that advances on every
training call, so `keras.utils.set_random_seed` makes runs repeatable.
"""

import keras
import tensorflow as tf

_LEVELS = 65536  # 2^16 values of a 16-bit draw.


def keep_threshold(rate: float) -> int:
  """The smallest kept 16-bit value: drop probability = keep_threshold(rate) / 65536."""
  return int(round(rate * _LEVELS))


@keras.saving.register_keras_serializable(package="tfbert")
class Dropout(keras.layers.Layer):
  """Inverted dropout with 16-bit random decisions.

  Args:
    rate: Drop probability in [0, 1).
    seed: Optional seed of the layer's seed generator.
    **kwargs: Forwarded to `keras.layers.Layer`.
  """

  def __init__(self, rate: float, seed=None, **kwargs):
    super().__init__(**kwargs)
    if not 0.0 <= rate < 1.0:
      raise ValueError(f"{self.name}: dropout rate must be in [0, 1), got {rate!r}")
    self.rate = rate
    self.seed = seed
    self.seed_generator = keras.random.SeedGenerator(seed)
    self.built = True

  @property
  def scale(self) -> float:
    """Factor of kept elements: 65536 / (65536 - threshold), 1 / exact keep probability."""
    return _LEVELS / (_LEVELS - keep_threshold(self.rate))

  def keep_mask(self, shape: tf.Tensor, training=None):
    """A fresh bool keep-mask of `shape`, or None when dropout is off (inference, rate 0).

    For fused kernels that apply the mask themselves (`tfbert.fused`); `call` uses it too.
    """
    threshold = keep_threshold(self.rate)
    if not training or threshold == 0:
      return None
    count = tf.reduce_prod(shape)
    seed = tf.cast(self.seed_generator.next(), tf.int32)  # [2]
    words = tf.random.stateless_uniform([(count + 1) // 2], seed=seed, minval=None,
                                        maxval=None, dtype=tf.uint32)
    halves = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:count]  # two draws per word
    return tf.reshape(halves >= threshold, shape)

  def call(self, x: tf.Tensor, training=None) -> tf.Tensor:
    """Args: x: float Tensor of any shape. Returns: x with dropped elements zeroed."""
    keep = self.keep_mask(tf.shape(x), training)
    if keep is None:
      return x
    return x * (tf.cast(keep, x.dtype) * tf.cast(self.scale, x.dtype))

  def compute_output_shape(self, input_shape):
    return input_shape

  def get_config(self):
    return {**super().get_config(), "rate": self.rate, "seed": self.seed}
