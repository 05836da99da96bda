"""Multi-head self-attention as in google-research/bert `modeling.attention_layer`.

Shape legend: B batch, F query (from) positions, T key (to) positions, N heads,
D head size (H / N), H hidden size.

Masked keys get -10000.0 added to their scores before the softmax (google-research/bert's
adder; with float32 softmax it makes their probability exactly 0 after underflow for any
realistic score range). The softmax runs in float32 under mixed precision.
"""

import math
from typing import Optional

import keras
import tensorflow as tf

from tfbert.layers import matmul
from tfbert.layers.dropout import Dropout

MASK_ADDER = -10000.0


def attention_mask_adder(input_mask: tf.Tensor) -> tf.Tensor:
  """Turns a [B, T] 0/1 mask into the additive float32 mask [B, 1, 1, T]."""
  mask = tf.cast(input_mask, tf.float32)[:, tf.newaxis, tf.newaxis, :]
  return (1.0 - mask) * MASK_ADDER


@keras.saving.register_keras_serializable(package="tfbert")
class SelfAttention(keras.layers.Layer):
  """Self-attention with separate query/key/value [H, H] kernels (Google's layout).

  Args:
    hidden_size: H.
    num_heads: N; must divide H.
    dropout_rate: Dropout on the attention probabilities.
    initializer_range: Stddev of the truncated-normal kernel initializer.
    **kwargs: Forwarded to `keras.layers.Layer`.
  """

  def __init__(self, hidden_size: int, num_heads: int, dropout_rate: float = 0.0,
               initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.num_heads = num_heads
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.head_size = hidden_size // num_heads

    def dense(name):
      return keras.layers.Dense(
          hidden_size, name=name, dtype=self.dtype_policy,
          kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range))

    self.query = dense("query")
    self.key = dense("key")
    self.value = dense("value")
    self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)

  def build(self, input_shape):
    for layer in (self.query, self.key, self.value):
      layer.build(input_shape)

  def call(self, x: tf.Tensor, input_mask: tf.Tensor, training=None,
           queries: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Attends every query position to every unmasked position of `x`.

    Query, key and value come from one [H, 3H] matmul over the three kernels side by side
    (the variables stay Google's separate `query`/`key`/`value`). Heads are moved next to
    the batch once, so scores and context are plain batched matmuls. The 1/sqrt(D) scale
    is folded into the query projection where that is exact (see below); otherwise it
    acts on the float32 scores: in bfloat16, 1/sqrt(32) itself would be off by 0.2%.

    Args:
      x: float Tensor [B, T, H], the positions attended to (keys and values).
      input_mask: int Tensor [B, T], 1 for real tokens (keys), 0 for padding. Passed as
        ints (not as the float adder) so a mixed policy cannot autocast the -10000 adder.
      training: Whether dropout is active.
      queries: Optional float Tensor [B, F, H], rows of `x` to compute the attention for
        (default: all of `x`, F = T). The query projection then runs over these F rows
        only and key and value over [H, 2H]: the same result, row for row, as attending
        from all of `x` and gathering.

    Returns:
      Context Tensor [B, F, H] (before the output projection).
    """
    batch = tf.shape(x)[0]
    scale = 1.0 / math.sqrt(self.head_size)
    # The 1/sqrt(D) scale goes into the query kernel and bias ([H, H] and [H]) instead of the
    # [B, N, F, T] scores, when that is exact: always in float32 (one rounding either way),
    # in a 16-bit compute dtype only for a power of two (D = 16, 64, 256), since the kernel
    # reaches this call already rounded and a second rounding would lose precision.
    fold = self.compute_dtype == "float32" or math.log2(scale).is_integer()
    query_scale = scale if fold else 1.0
    if queries is None:
      q, k, v = self._heads(x, (self.query, self.key, self.value), query_scale)  # [B, N, S, D]
    else:
      k, v = self._heads(x, (self.key, self.value))  # each [B, N, T, D]
      (q,) = self._heads(queries, (self.query,), query_scale)  # [B, N, F, D]
    scores = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32)  # [B, N, F, T]
    if not fold:
      scores *= scale
    scores += attention_mask_adder(input_mask)  # [B, N, F, T] + [B, 1, 1, T]
    # Dropout and the rounding to the compute dtype in one pass over the float32 probs.
    probs = self.dropout.drop(tf.nn.softmax(scores, axis=-1), training,
                              self.compute_dtype)  # [B, N, F, T]
    context = tf.matmul(probs, v)  # [B, N, F, D]
    context = tf.transpose(context, [0, 2, 1, 3])  # [B, F, N, D]
    return tf.reshape(context, [batch, tf.shape(context)[1], self.hidden_size])  # [B, F, H]

  def _heads(self, x: tf.Tensor, projections, query_scale: float = 1.0) -> list[tf.Tensor]:
    """Projects [B, L, H] with the given dense layers in one matmul; each [B, N, L, D].

    The query projection's kernel and bias (if among `projections`) are multiplied by
    `query_scale` first.
    """
    batch, length, parts = tf.shape(x)[0], tf.shape(x)[1], len(projections)
    dtype = self.compute_dtype

    def weight(d, w):
      w = tf.convert_to_tensor(w)
      return tf.cast(w * tf.cast(query_scale, w.dtype) if d is self.query and query_scale != 1.0
                     else w, dtype)

    kernel = tf.concat([weight(d, d.kernel) for d in projections], axis=1)  # [H, pH]
    bias = tf.concat([weight(d, d.bias) for d in projections], axis=0)  # [pH]
    # BiasAdd, not a broadcast add: its gradient is BiasAddGrad, 2x faster than the
    # broadcast add's row Sum in float32 (4.1 against 8.4 ms for [4096, 768]).
    h = tf.nn.bias_add(matmul.matmul(tf.reshape(x, [-1, self.hidden_size]), kernel),
                       bias)  # [B*L, pH]
    h = tf.reshape(h, [batch, length, parts, self.num_heads, self.head_size])
    return tf.unstack(tf.transpose(h, [2, 0, 3, 1, 4]), num=parts)  # p x [B, N, L, D]

  def get_config(self):
    return {**super().get_config(), "hidden_size": self.hidden_size,
            "num_heads": self.num_heads, "dropout_rate": self.dropout_rate,
            "initializer_range": self.initializer_range}
