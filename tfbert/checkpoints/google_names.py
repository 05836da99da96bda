"""The name table between google-research/bert TF1 checkpoints and tfbert weights.

Compatibility is data: every Google variable name that a tfbert model can hold is listed
below, next to the tfbert weight path (relative to the component that holds it). `{i}`
stands for a transformer layer index. All Google tensors have tfbert's layout, so no
transposes are needed at this boundary.

A "Google-name dict" (`{google_name: np.ndarray}`) is the interchange format between
checkpoint formats: the Hugging Face boundary (`tfbert.checkpoints.huggingface`) converts to and
from it.
"""

import re
from typing import Iterator

import keras

# google-research/bert `modeling.BertModel` variables under `bert/`.
ENCODER_TABLE = (
    ("embeddings/word_embeddings", "embeddings/word_embeddings/embeddings"),
    ("embeddings/token_type_embeddings", "embeddings/token_type_embeddings/embeddings"),
    ("embeddings/position_embeddings", "embeddings/position_embeddings/embeddings"),
    ("embeddings/LayerNorm/gamma", "embeddings/layer_norm/gamma"),
    ("embeddings/LayerNorm/beta", "embeddings/layer_norm/beta"),
    ("encoder/layer_{i}/attention/self/query/kernel", "layer_{i}/attention/query/kernel"),
    ("encoder/layer_{i}/attention/self/query/bias", "layer_{i}/attention/query/bias"),
    ("encoder/layer_{i}/attention/self/key/kernel", "layer_{i}/attention/key/kernel"),
    ("encoder/layer_{i}/attention/self/key/bias", "layer_{i}/attention/key/bias"),
    ("encoder/layer_{i}/attention/self/value/kernel", "layer_{i}/attention/value/kernel"),
    ("encoder/layer_{i}/attention/self/value/bias", "layer_{i}/attention/value/bias"),
    ("encoder/layer_{i}/attention/output/dense/kernel", "layer_{i}/attention_output/kernel"),
    ("encoder/layer_{i}/attention/output/dense/bias", "layer_{i}/attention_output/bias"),
    ("encoder/layer_{i}/attention/output/LayerNorm/gamma", "layer_{i}/attention_layer_norm/gamma"),
    ("encoder/layer_{i}/attention/output/LayerNorm/beta", "layer_{i}/attention_layer_norm/beta"),
    ("encoder/layer_{i}/intermediate/dense/kernel", "layer_{i}/intermediate/kernel"),
    ("encoder/layer_{i}/intermediate/dense/bias", "layer_{i}/intermediate/bias"),
    ("encoder/layer_{i}/output/dense/kernel", "layer_{i}/output/kernel"),
    ("encoder/layer_{i}/output/dense/bias", "layer_{i}/output/bias"),
    ("encoder/layer_{i}/output/LayerNorm/gamma", "layer_{i}/output_layer_norm/gamma"),
    ("encoder/layer_{i}/output/LayerNorm/beta", "layer_{i}/output_layer_norm/beta"),
    ("pooler/dense/kernel", "pooler/kernel"),
    ("pooler/dense/bias", "pooler/bias"),
)

# `run_pretraining.py` get_masked_lm_output, under `cls/predictions/`.
MLM_TABLE = (
    ("transform/dense/kernel", "transform/kernel"),
    ("transform/dense/bias", "transform/bias"),
    ("transform/LayerNorm/gamma", "layer_norm/gamma"),
    ("transform/LayerNorm/beta", "layer_norm/beta"),
    ("output_bias", "output_bias"),
)

# NSP (`cls/seq_relationship/`), SQuAD (`cls/squad/`) and `run_classifier.py` (no scope).
PROJECTION_TABLE = (("output_weights", "output_weights"), ("output_bias", "output_bias"))

# Model attribute -> (Google scope, table). The encoder is `bert/`.
COMPONENTS = (
    ("encoder", "bert/", ENCODER_TABLE),
    ("mlm_head", "cls/predictions/", MLM_TABLE),
    ("nsp_head", "cls/seq_relationship/", PROJECTION_TABLE),
    ("span_head", "cls/squad/", PROJECTION_TABLE),
    ("classifier_head", "", PROJECTION_TABLE),
)

# Checkpoint entries that carry no model weight: optimizer slots, step counters and
# loss-scale state written by google-research/bert and Model Garden training loops.
IGNORED_PATTERN = re.compile(
    r"(/adam_[mv]$|/lamb_[mv]$|/Momentum$|^global_step$|^good_steps$|^current_loss_scale$"
    r"|^loss_scale/)")


def is_ignored(name: str) -> bool:
  """True for optimizer slots and step counters, which never map onto model weights."""
  return bool(IGNORED_PATTERN.search(name))


def components(model: keras.Model) -> Iterator[tuple[str, str, tuple, keras.layers.Layer]]:
  """Yields (attribute, Google scope, table, layer) for each component of a tfbert model."""
  from tfbert.encoder import BertEncoder  # Local import: encoder does not need this module.
  if isinstance(model, BertEncoder):
    yield "encoder", "bert/", ENCODER_TABLE, model
    return
  for attribute, scope, table in COMPONENTS:
    layer = getattr(model, attribute, None)
    if layer is not None:
      yield attribute, scope, table, layer


def google_variable_map(model: keras.Model) -> dict[str, keras.Variable]:
  """Maps every weight of a tfbert model to its google-research/bert checkpoint name.

  Args:
    model: a tfbert model (`BertEncoder`, `BertPretrainer`, `BertSpanLabeler`,
      `BertClassifier`); built here if it is not built yet.

  Returns:
    `{google_name: variable}` covering every model weight exactly once.

  Raises:
    ValueError: when a model weight has no Google name (a table is incomplete).
  """
  if not model.built:
    model.build()
  mapping, seen = {}, set()
  for _, scope, table, layer in components(model):
    by_path = {v.path[len(layer.path) + 1:]: v for v in layer.weights}
    for google_suffix, ours in _expand(table, _num_layers(model)):
      variable = by_path.get(ours)
      if variable is not None:
        mapping[scope + google_suffix] = variable
        seen.add(id(variable))
  unnamed = [v.path for v in model.weights if id(v) not in seen]
  if unnamed:
    raise ValueError(f"model weights without a Google name: {unnamed}")
  return mapping


def _num_layers(model: keras.Model) -> int:
  return model.config.num_hidden_layers


def _expand(table, num_layers: int) -> Iterator[tuple[str, str]]:
  for google, ours in table:
    if "{i}" in google:
      for i in range(num_layers):
        yield google.format(i=i), ours.format(i=i)
    else:
      yield google, ours
