"""Sentence pooling of token embeddings: sentence-transformers' `Pooling` modes.

`1_Pooling/config.json` of a sentence-transformers directory names one mode; tfbert reads
the three that BERT sentence encoders use:

* `mean` (`pooling_mode_mean_tokens`): the mean of the token vectors where the attention
  mask is 1 (all-MiniLM-L6-v2, E5, GTE);
* `cls` (`pooling_mode_cls_token`): the first token's vector (BGE);
* `max` (`pooling_mode_max_tokens`): the element-wise maximum over the unmasked tokens.

`normalize` is the `2_Normalize` module: each sentence vector divided by its L2 norm.

Shape legend: B sentences, S positions, H hidden width.
"""

import tensorflow as tf

MODES = ("mean", "cls", "max")


def pool(sequence_output: tf.Tensor, input_mask: tf.Tensor, mode: str) -> tf.Tensor:
  """Sentence vectors of token vectors.

  Args:
    sequence_output: float [B, S, H], the encoder's last layer.
    input_mask: int or float [B, S], 1 for real tokens, 0 for padding.
    mode: one of `MODES`.

  Returns:
    float32 [B, H]. A sentence without any unmasked token pools to zeros (mean: divided by
    max(count, 1e-9), as sentence-transformers clamps; max: no token, so 0).

  Raises:
    ValueError: an unknown mode.
  """
  x = tf.cast(sequence_output, tf.float32)
  mask = tf.cast(input_mask, tf.float32)[:, :, None]                      # [B, S, 1]
  if mode == "mean":
    return tf.reduce_sum(x * mask, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1e-9)
  if mode == "cls":
    return x[:, 0]
  if mode == "max":
    # sentence-transformers sets padding to -1e9 before the max; a fully padded row
    # gives 0 here instead of -1e9.
    masked = tf.where(mask > 0, x, tf.fill(tf.shape(x), -1e9))
    pooled = tf.reduce_max(masked, axis=1)
    return tf.where(tf.reduce_sum(mask, axis=1) > 0, pooled, tf.zeros_like(pooled))
  raise ValueError(f"unknown pooling mode {mode!r}; known: {', '.join(MODES)}")


def normalize(embeddings: tf.Tensor) -> tf.Tensor:
  """float32 [B, H]: each row divided by its L2 norm (a zero row stays zero)."""
  return tf.math.l2_normalize(tf.cast(embeddings, tf.float32), axis=-1, epsilon=1e-24)
