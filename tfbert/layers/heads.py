"""Task heads on top of `BertEncoder`, with google-research/bert's weight layouts.

Shape legend: B batch, S sequence, P masked positions, H hidden, V vocabulary, C classes.

Every head returns float32 logits, also under a mixed-precision policy, so that losses and
softmaxes downstream are computed in float32.
"""

from typing import Optional

import keras
import numpy as np
import tensorflow as tf

from tfbert.layers import activations, fused, serving_ops
from tfbert.layers.dropout import Dropout
from tfbert.layers.layer_norm import LayerNorm


def _init(stddev: float):
  return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.saving.register_keras_serializable(package="tfbert")
class _OutputProjection(keras.layers.Layer):
  """`x @ output_weights^T + output_bias` with Google's [C, H] weight layout.

  google-research/bert stores the NSP, SQuAD and classifier projections as
  `output_weights` [C, H] (transposed against a Dense kernel) and `output_bias` [C].
  """

  def __init__(self, num_outputs: int, initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    self.num_outputs = num_outputs
    self.initializer_range = initializer_range

  def build(self, input_shape):
    self.output_weights = self.add_weight(
        name="output_weights", shape=(self.num_outputs, input_shape[-1]),
        initializer=_init(self.initializer_range))
    self.output_bias = self.add_weight(name="output_bias", shape=(self.num_outputs,),
                                       initializer="zeros")
    # Keras then names another width when called ("expected axis -1 of input shape to have
    # value 16"), where TensorFlow's MatMul failed with "Matrix size-incompatible" (sweep 31,
    # B43).
    self.input_spec = keras.layers.InputSpec(min_ndim=2, axes={-1: int(input_shape[-1])})

  def call(self, x: tf.Tensor) -> tf.Tensor:
    """Args: x: [..., H]. Returns: float32 logits [..., C]."""
    # A 2-D MatMul with transpose_b, not `tf.einsum("...H,CH->...C")`: in float16 that
    # einsum returns garbage on CPUs with AVX512_FP16 (Intel Xeon; docs/pitfalls.md,
    # "float16 einsum"), so a mixed_float16 classifier did not learn there.
    flat = tf.reshape(x, [-1, x.shape[-1]])  # [B*S, H] (or [B, H])
    logits = tf.matmul(flat, self.output_weights, transpose_b=True) + self.output_bias
    if x.shape.rank != 2:
      # x's static dims as constants, only the unknown ones read at run time: a TFLite file
      # then declares [-1, S, C] for a fixed S, not [-1, -1, C].
      dims = [tf.shape(x)[i] if d is None else d for i, d in enumerate(x.shape[:-1])]
      logits = tf.reshape(logits, dims + [self.num_outputs])
    return tf.cast(logits, tf.float32)

  def get_config(self):
    return {**super().get_config(), "num_outputs": self.num_outputs,
            "initializer_range": self.initializer_range}


@keras.saving.register_keras_serializable(package="tfbert")
class NextSentenceHead(_OutputProjection):
  """NSP logits [B, 2] from `pooled_output` [B, H] (`cls/seq_relationship`)."""

  def __init__(self, initializer_range: float = 0.02, **kwargs):
    kwargs.pop("num_outputs", None)
    super().__init__(2, initializer_range, **kwargs)


@keras.saving.register_keras_serializable(package="tfbert")
class SpanHead(_OutputProjection):
  """SQuAD start/end logits from `sequence_output` (`cls/squad` in google-research/bert)."""

  def __init__(self, initializer_range: float = 0.02, **kwargs):
    kwargs.pop("num_outputs", None)
    super().__init__(2, initializer_range, **kwargs)

  def call(self, sequence_output: tf.Tensor) -> dict[str, tf.Tensor]:
    """Args: sequence_output [B, S, H]. Returns: `start_logits`, `end_logits` float32 [B, S]."""
    logits = super().call(sequence_output)  # [B, S, 2]
    return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}


@keras.saving.register_keras_serializable(package="tfbert")
class ClassifierHead(_OutputProjection):
  """Classification logits [B, C] from `pooled_output`, with dropout as in `run_classifier`.

  Args:
    num_classes: C, an int >= 1.
    dropout_rate: Dropout on the pooled output in training (google-research/bert: 0.1).
    initializer_range: Stddev of the weight initializer.
  """

  def __init__(self, num_classes: int, dropout_rate: float = 0.1,
               initializer_range: float = 0.02, **kwargs):
    kwargs.pop("num_outputs", None)
    if (isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer))
        or num_classes < 1):  # Keras' shape code would fail at build, naming neither.
      raise ValueError(f"ClassifierHead num_classes={num_classes!r}: must be an int >= 1")
    num_classes = int(num_classes)
    super().__init__(num_classes, initializer_range, **kwargs)
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate
    self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)

  def call(self, pooled_output: tf.Tensor, training=None) -> tf.Tensor:
    return super().call(self.dropout(pooled_output, training=training))

  def get_config(self):
    config = super().get_config()
    config.pop("num_outputs")
    return {**config, "num_classes": self.num_classes, "dropout_rate": self.dropout_rate}


@keras.saving.register_keras_serializable(package="tfbert")
class MaskedLMHead(keras.layers.Layer):
  """MLM logits at the masked positions, decoder tied to the word embeddings.

  As google-research/bert `get_masked_lm_output`: gather the positions, dense + `hidden_act`,
  LayerNorm, then `x @ word_embeddings^T + output_bias`.

  Args:
    vocab_size: V.
    hidden_size: H.
    hidden_act: A `BertConfig.hidden_act` name for the transform.
    initializer_range: Stddev of the transform initializer.
    **kwargs: Forwarded to `keras.layers.Layer`.
  """

  def __init__(self, vocab_size: int, hidden_size: int, hidden_act: str = "gelu",
               initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.hidden_act = hidden_act
    self.initializer_range = initializer_range
    self.transform = keras.layers.Dense(
        hidden_size, activation=activations.get_activation(hidden_act), name="transform",
        kernel_initializer=_init(initializer_range), dtype=self.dtype_policy)
    self.layer_norm = LayerNorm(name="layer_norm", dtype=self.dtype_policy)

  def build(self, input_shape=None):
    self.transform.build((None, self.hidden_size))
    self.layer_norm.build((None, self.hidden_size))
    # autocast=False: the bias is added in float32 (see `call`).
    self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                       initializer="zeros", autocast=False)

  def call(self, sequence_output: tf.Tensor, positions: Optional[tf.Tensor],
           embedding_table: tf.Tensor) -> tf.Tensor:
    """Computes MLM logits.

    Args:
      sequence_output: [B, S, H].
      positions: int32 [B, P] positions to predict; None when `sequence_output` holds
        only the positions to predict already ([B, P, H]).
      embedding_table: the word-embedding table [V, H] (tied decoder).

    Returns:
      float32 logits [B, P, V].
    """
    x = sequence_output
    if positions is not None:
      x = tf.gather(x, tf.cast(positions, tf.int32), batch_dims=1)  # [B, P, H]
    x = self.layer_norm(self._transformed(x))
    table = tf.cast(embedding_table, self.compute_dtype)
    batch, num_positions = tf.shape(x)[0], tf.shape(x)[1]
    # A 2-D MatMul with transpose_b, whose gradients are plain MatMuls. The bias is added
    # in float32: under mixed_bfloat16, a bfloat16 bias add (fused into the MatMul or not)
    # made the head's forward and backward 1.5x slower (tools/benchmark.py
    # --benchmark=kernels). In float32 oneDNN fuses the BiasAdd into the MatMul; a 16-bit
    # MatMul output is widened and biased in one XLA loop.
    logits = tf.matmul(tf.reshape(x, [-1, self.hidden_size]), table, transpose_b=True)
    bias = tf.cast(self.output_bias, tf.float32)
    logits = (tf.nn.bias_add(logits, bias) if logits.dtype == tf.float32
              else fused.widen_bias_add(logits, bias))  # [B*P, V] float32
    return tf.reshape(logits, [batch, num_positions, self.vocab_size])

  def _transformed(self, x: tf.Tensor) -> tf.Tensor:
    """The dense + `hidden_act` transform of x [B, P, H]; in a served graph
    (`serving_ops.scope`) a GELU traces its plain-op form, no XLA call
    (`serving_ops.bias_gelu`), as the encoder's layers do."""
    if not (serving_ops.active() and self.hidden_act in ("gelu", "gelu_exact")):
      return self.transform(x)
    kernel = tf.cast(self.transform.kernel, self.compute_dtype)
    flat = tf.matmul(tf.reshape(x, [-1, self.hidden_size]), kernel)  # [B*P, H]
    y = serving_ops.bias_gelu(flat, self.transform.bias, self.hidden_act == "gelu_exact")
    return tf.reshape(y, tf.shape(x))

  def get_config(self):
    return {**super().get_config(), "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size, "hidden_act": self.hidden_act,
            "initializer_range": self.initializer_range}
