"""One post-LayerNorm transformer layer as in google-research/bert `transformer_model`.

Shape legend: B batch, S sequence, H hidden, I intermediate.
"""

from typing import Optional

import keras
import tensorflow as tf

from tfbert.layers import activations, fused, matmul
from tfbert.layers.attention import SelfAttention
from tfbert.layers.dropout import Dropout
from tfbert.layers.layer_norm import LayerNorm


@keras.saving.register_keras_serializable(package="tfbert")
class TransformerLayer(keras.layers.Layer):
  """Attention, residual + LayerNorm, feed-forward, residual + LayerNorm.

  Sub-layer names mirror Google's scopes (`attention/self`, `attention/output/dense`,
  `intermediate/dense`, `output/dense`) through `tfbert.checkpoints.google_names`.

  Args:
    hidden_size: H.
    num_heads: Attention heads N.
    intermediate_size: I.
    hidden_act: A `BertConfig.hidden_act` name for the feed-forward activation.
    hidden_dropout: Dropout on the attention output and the layer output.
    attention_dropout: Dropout on attention probabilities.
    initializer_range: Stddev of the truncated-normal kernel initializer.
    **kwargs: Forwarded to `keras.layers.Layer`.
  """

  def __init__(self, hidden_size: int, num_heads: int, intermediate_size: int,
               hidden_act: str = "gelu", hidden_dropout: float = 0.0,
               attention_dropout: float = 0.0, initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.num_heads = num_heads
    self.intermediate_size = intermediate_size
    self.hidden_act = hidden_act
    self.hidden_dropout = hidden_dropout
    self.attention_dropout = attention_dropout
    self.initializer_range = initializer_range

    def init():
      return keras.initializers.TruncatedNormal(stddev=initializer_range)
    policy = self.dtype_policy
    self.attention = SelfAttention(hidden_size, num_heads, attention_dropout, initializer_range,
                                   name="attention", dtype=policy)
    self.attention_output = keras.layers.Dense(hidden_size, kernel_initializer=init(),
                                               name="attention_output", dtype=policy)
    self.attention_layer_norm = LayerNorm(name="attention_layer_norm", dtype=policy)
    self.intermediate = keras.layers.Dense(intermediate_size, kernel_initializer=init(),
                                           name="intermediate", dtype=policy)
    self.output_dense = keras.layers.Dense(hidden_size, kernel_initializer=init(),
                                           name="output", dtype=policy)
    self.output_layer_norm = LayerNorm(name="output_layer_norm", dtype=policy)
    self.dropout = Dropout(hidden_dropout, dtype=policy)
    self._activation = activations.get_activation(hidden_act)

  def build(self, input_shape):
    self.attention.build(input_shape)
    self.attention_output.build(input_shape)
    self.attention_layer_norm.build(input_shape)
    self.intermediate.build(input_shape)
    self.output_dense.build(tuple(input_shape[:-1]) + (self.intermediate_size,))
    self.output_layer_norm.build(input_shape)

  def call(self, x: tf.Tensor, input_mask: tf.Tensor, training=None,
           query_positions: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Args: x: [B, S, H]; input_mask: int [B, S]. Returns: [B, S, H].

    The three dense projections run as bare 2-D MatMuls; their bias, activation, dropout,
    residual and LayerNorm tails are XLA-fused (`tfbert.layers.fused`), with the same math as
    `dropout(dense(.)) + residual -> LayerNorm` and `act(dense(.))`.

    With `query_positions` (int [B, F]) the layer computes its output only at those
    positions and returns [B, F, H]: keys and values still come from all S positions, and
    everything after them (queries, scores, output projection, feed-forward, LayerNorms)
    runs over F rows instead of S. Row for row this is the full layer's output gathered
    at the positions.
    """
    batch = tf.shape(x)[0]
    if query_positions is None:
      queries = x  # [B, S, H]
      context = self.attention(x, input_mask, training=training)  # [B, S, H]
    else:
      queries = tf.gather(x, tf.cast(query_positions, tf.int32), batch_dims=1)  # [B, F, H]
      context = self.attention(x, input_mask, training=training, queries=queries)
    rows = tf.reshape(queries, [-1, self.hidden_size])  # [B*F, H]
    attended = self._residual_block(self.attention_output, self.attention_layer_norm,
                                    tf.reshape(context, [-1, self.hidden_size]), rows, training)
    h = matmul.matmul(attended, self.intermediate.kernel)  # [B*F, I]
    if self.hidden_act in ("gelu", "gelu_exact"):
      inner = fused.bias_gelu(h, self.intermediate.bias, exact=self.hidden_act == "gelu_exact")
    else:
      inner = self._activation(h + self.intermediate.bias)
    out = self._residual_block(self.output_dense, self.output_layer_norm, inner, attended,
                               training)
    return tf.reshape(out, [batch, tf.shape(queries)[1], self.hidden_size])

  def _residual_block(self, dense, layer_norm, inputs, residual, training):
    """LayerNorm(dropout(inputs @ kernel + bias) + residual) over [B*F, .] rows."""
    h = matmul.matmul(inputs, dense.kernel)  # [B*F, H]
    keep = self.dropout.keep_mask(tf.shape(h), training)
    return fused.bias_dropout_residual_layer_norm(
        h, dense.bias, keep, self.dropout.scale, residual,
        tf.convert_to_tensor(layer_norm.gamma), tf.convert_to_tensor(layer_norm.beta),
        layer_norm.epsilon)

  def get_config(self):
    return {**super().get_config(), "hidden_size": self.hidden_size,
            "num_heads": self.num_heads, "intermediate_size": self.intermediate_size,
            "hidden_act": self.hidden_act, "hidden_dropout": self.hidden_dropout,
            "attention_dropout": self.attention_dropout,
            "initializer_range": self.initializer_range}
