"""BERT input embeddings as in google-research/bert `embedding_lookup` +
`embedding_postprocessor`: word + token type + position, LayerNorm, dropout.

Shape legend: B batch, S sequence, H hidden, V vocabulary, P max positions.

The [PAD] row (id 0) is an ordinary row that receives gradient from padded positions, as
in google-research/bert (Hugging Face's `padding_idx=0` rule differs; see docs/pitfalls.md).
"""

import keras
import tensorflow as tf

from tfbert.layers.dropout import Dropout
from tfbert.layers.layer_norm import LayerNorm


@keras.saving.register_keras_serializable(package="tfbert")
class BertEmbeddings(keras.layers.Layer):
  """Sums word, token-type and absolute position embeddings, then normalizes.

  Args:
    vocab_size: V.
    hidden_size: H.
    max_position_embeddings: P; longer inputs raise an error.
    type_vocab_size: Rows of the token-type table.
    dropout_rate: Dropout after the LayerNorm.
    initializer_range: Stddev of the truncated-normal initializer.
    **kwargs: Forwarded to `keras.layers.Layer`.
  """

  def __init__(self, vocab_size: int, hidden_size: int, max_position_embeddings: int,
               type_vocab_size: int, dropout_rate: float = 0.0,
               initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range

    def table(rows, name):
      return keras.layers.Embedding(
          rows, hidden_size, name=name, dtype=self.dtype_policy,
          embeddings_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range))

    self.word_embeddings = table(vocab_size, "word_embeddings")
    self.token_type_embeddings = table(type_vocab_size, "token_type_embeddings")
    self.position_embeddings = table(max_position_embeddings, "position_embeddings")
    self.layer_norm = LayerNorm(name="layer_norm", dtype=self.dtype_policy)
    self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)

  def build(self, input_shape):
    for layer in (self.word_embeddings, self.token_type_embeddings, self.position_embeddings):
      layer.build(input_shape)
    self.layer_norm.build(tuple(input_shape) + (self.hidden_size,))

  def call(self, input_ids: tf.Tensor, segment_ids: tf.Tensor, training=None) -> tf.Tensor:
    """Args: input_ids, segment_ids: int32 [B, S]. Returns: [B, S, H] in the compute dtype."""
    seq = input_ids.shape[1]
    if seq is not None and seq > self.max_position_embeddings:
      raise ValueError(f"sequence length {seq} exceeds max_position_embeddings "
                       f"{self.max_position_embeddings}")
    positions = tf.range(tf.shape(input_ids)[1])  # [S]
    x = (self.word_embeddings(input_ids) + self.token_type_embeddings(segment_ids)
         + self.position_embeddings(positions)[tf.newaxis])
    return self.dropout(self.layer_norm(x), training=training)

  def get_config(self):
    return {**super().get_config(), "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size, "dropout_rate": self.dropout_rate,
            "initializer_range": self.initializer_range}
