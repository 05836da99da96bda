"""The BERT encoder without heads (google-research/bert `BertModel`).

Shape legend: B batch, S sequence, H hidden.
"""

from typing import Any, Mapping

import keras
import tensorflow as tf

from tfbert.config import BertConfig
from tfbert.layers.embeddings import BertEmbeddings
from tfbert.layers.transformer_layer import TransformerLayer
from tfbert.runtime import validation
from tfbert.text import feature_checks, text_calls

OUTPUT_NAMES = ("sequence_output", "pooled_output")  # What an encoder serves.


def as_config(config) -> BertConfig:
  """Accepts a `BertConfig` or its dict form (as stored by `get_config`).

  Raises:
    TypeError: for anything else (a config file path, `None`, a number, a list), naming the
      `config` argument, the type given and what to pass instead.
  """
  if isinstance(config, BertConfig):
    return config
  if isinstance(config, Mapping):
    return BertConfig.from_dict(dict(config))
  given = type(config).__name__
  if isinstance(config, (str, bytes)) or hasattr(config, "__fspath__"):
    given += f" {str(config)!r}"
  raise TypeError(f"config must be a tfbert.BertConfig or a dict of its fields, got {given}: "
                  "pass tfbert.BertConfig(...), tfbert.BertConfig.from_json_file(path) for a "
                  "bert_config.json file, or tfbert.load(path) for a saved model")


def build_once(layer: keras.layers.Layer, *input_shape) -> None:
  """Builds `layer` unless it is built: a model's `build` over parts that a text call built
  without building the model (`fill_mask` builds the encoder and heads it runs; building
  them again failed in Keras' "already built" check on the save that builds the model)."""
  if not layer.built:
    layer.build(*input_shape)


def read_inputs(features: Mapping[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """Reads google-research/bert's feature names; mask defaults to ones, segments to zeros.

  Raises:
    KeyError: when `input_ids` is missing, naming the features that were given;
      `feature_checks.check_names` for the rest (Hugging Face's names are refused: unread).
  """
  feature_checks.check_names(features, None)
  input_ids = tf.cast(features["input_ids"], tf.int32)
  input_mask = features.get("input_mask")
  input_mask = tf.ones_like(input_ids) if input_mask is None else tf.cast(input_mask, tf.int32)
  segment_ids = features.get("segment_ids")
  segment_ids = tf.zeros_like(input_ids) if segment_ids is None else tf.cast(segment_ids, tf.int32)
  return input_ids, input_mask, segment_ids


# The dtype policies tfbert computes in (`tfbert.training.distribution.DTYPES`): its layer
# norms, softmax and losses keep float32 statistics beside the policy's compute dtype.
POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def check_policy(name: str, owner: str) -> None:
  """Refuses a Keras dtype policy tfbert does not compute in, naming it and the ones it
  does: "float64" and "float16" failed inside LayerNorm.call with "Input 'y' of 'Mul' Op
  has type float64 that does not match float32" (sweep 31, B42)."""
  if name not in POLICIES:
    raise ValueError(f"{owner}: dtype policy {name!r} is not one tfbert computes in; use "
                     f"one of {list(POLICIES)} (dtype=..., or keras.config.set_dtype_policy; "
                     "mixed_float16 / mixed_bfloat16 compute in half precision and keep "
                     "float32 weights)")


@keras.saving.register_keras_serializable(package="tfbert")
class BertEncoder(text_calls.RawTextPredict, keras.Model):
  """Embeddings, `num_hidden_layers` transformer layers and the tanh pooler.

  Its inputs are checked where it reads them (`feature_checks.graph_checked`): dtype, rank,
  length and names at trace time, and within Keras' `predict`, `fit` and `evaluate` of a
  tfbert model the values too; `predict` checks concrete features before Keras sees them
  and takes raw text once a vocabulary is attached (`tfbert.text.text_calls`).

  Args:
    config: A `BertConfig` (or its dict).
    **kwargs: Forwarded to `keras.Model` (e.g. `name`, `dtype`).

  Call args:
    features: dict with int32 `input_ids` [B, S] and optional `input_mask`, `segment_ids` [B, S].
    training: Whether dropout is active.
    output_positions: Optional int [B, P]. The last layer then computes its output only at
      position 0 (for the pooler) and at these positions, as pretraining needs (MLM logits
      at the masked positions, NSP from the pooler): its keys and values still cover all
      S positions, but its queries, output projection and feed-forward run over 1 + P rows
      instead of S. Row for row the result is the full encoder's, gathered.

  Returns:
    dict with `sequence_output` [B, S, H] ([B, P, H] at `output_positions` when given),
    `pooled_output` [B, H] and `encoder_outputs`, the list of every layer's output
    [B, S, H] (the last one [B, 1 + P, H] with `output_positions`: position 0, then them).
  """

  @validation.typed_arguments()
  def __init__(self, config, **kwargs):
    super().__init__(**kwargs)
    self.config = as_config(config)
    c = self.config
    policy = self.dtype_policy
    check_policy(policy.name, type(self).__name__)
    # The strategy whose scope the model is made in: its variables must be made there too.
    object.__setattr__(self, "_made_in", tf.distribute.get_strategy()
                       if tf.distribute.has_strategy() else None)
    self.embeddings = BertEmbeddings(
        c.vocab_size, c.hidden_size, c.max_position_embeddings, c.type_vocab_size,
        c.hidden_dropout_prob, c.initializer_range, name="embeddings", dtype=policy)
    self.transformer_layers = [
        TransformerLayer(c.hidden_size, c.num_attention_heads, c.intermediate_size,
                         c.hidden_act, c.hidden_dropout_prob, c.attention_probs_dropout_prob,
                         c.initializer_range, name=f"layer_{i}", dtype=policy)
        for i in range(c.num_hidden_layers)]
    self.pooler = keras.layers.Dense(
        c.hidden_size, activation="tanh", name="pooler", dtype=policy,
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=c.initializer_range))

  def build(self, input_shape=None):
    made_in = getattr(self, "_made_in", None)
    if made_in is not None and (not tf.distribute.has_strategy()
                                or tf.distribute.get_strategy() is not made_in):
      # Its variables would be plain ones, which the strategy's compile and evaluate then
      # met with TensorFlow's "colocate_vars_with must only be passed a variable created in
      # this scope" and a dump of the embedding table (sweep 31, B77).
      raise ValueError(f"the model was made in the scope of a {type(made_in).__name__} but "
                       "is built (its weights made: build(), or its first call) outside it: "
                       "build it in the same scope, e.g. `with strategy.scope(): "
                       "model.build()` (or call it there)")
    shape = (None, None)
    build_once(self.embeddings, shape)
    for layer in self.transformer_layers:
      build_once(layer, shape + (self.config.hidden_size,))
    build_once(self.pooler, (None, self.config.hidden_size))
    self.built = True

  def call(self, features, training=None, output_positions=None) -> dict[str, Any]:
    input_ids, input_mask, segment_ids = read_inputs(feature_checks.graph_checked(self, features))
    x = self.embeddings(input_ids, segment_ids, training=training)  # [B, S, H]
    queries = None
    if output_positions is not None:
      output_positions = tf.cast(output_positions, tf.int32)
      first = tf.zeros_like(output_positions[:, :1])  # [B, 1]: the pooler's position 0
      queries = tf.concat([first, output_positions], axis=1)  # [B, 1 + P]
    encoder_outputs = []
    for i, layer in enumerate(self.transformer_layers):
      last = i == len(self.transformer_layers) - 1
      x = layer(x, input_mask, training=training, query_positions=queries if last else None)
      encoder_outputs.append(x)
    pooled = self.pooler(x[:, 0])  # [B, H]
    sequence_output = x if queries is None else x[:, 1:]
    return {"sequence_output": sequence_output, "pooled_output": pooled,
            "encoder_outputs": encoder_outputs}

  def served_outputs(self, features) -> dict:
    """What its exports serve: float32 `sequence_output` [B, S, H], `pooled_output` [B, H]."""
    outputs = self(features, training=False)
    return {name: tf.cast(outputs[name], tf.float32) for name in OUTPUT_NAMES}

  def hf_task(self, labels=None) -> dict:
    """The task fields of this model's Hugging Face `config.json`: `BertModel`, no head."""
    if labels is not None:
      raise ValueError("labels are for a classifier or tagger, not a BertEncoder")
    return {"architectures": ["BertModel"]}

  def get_config(self):
    return {**super().get_config(), "config": self.config.to_dict()}
