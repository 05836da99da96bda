"""An independent BERT peer: TF Model Garden's `BertEncoder` loaded with Google weights.

Model Garden (`official.nlp.modeling.networks.BertEncoder`, tf-models-official 2.20) is a
tf_keras (Keras 2) functional model. It must never be mixed into a Keras 3 model (see
docs/pitfalls.md), but it can run in the same process, so the tests use it as a second,
independently written implementation of the same network.

Shape letters as in `numpy_reference`. Weight layout, measured by building one and listing
`model.weights` ("L/" is `bert/encoder/layer_i/` on the Google side and
`transformer/layer_i/` on the Model Garden side; Model Garden shape in brackets):

  bert/embeddings/word_embeddings          word_embeddings/embeddings            [V, H]
  bert/embeddings/position_embeddings      position_embedding/embeddings         [P, H]
  bert/embeddings/token_type_embeddings    type_embeddings/embeddings            [G, H]
  bert/embeddings/LayerNorm/{gamma,beta}   embeddings/layer_norm/{gamma,beta}    [H]
  L/attention/self/{q,k,v}/kernel          L/self_attention/{q,k,v}/kernel       [H, N, D]
  L/attention/self/{q,k,v}/bias            L/self_attention/{q,k,v}/bias         [N, D]
  L/attention/output/dense/kernel          L/self_attention/attention_output/kernel [N, D, H]
  L/attention/output/dense/bias            L/self_attention/attention_output/bias   [H]
  L/attention/output/LayerNorm/*           L/self_attention_layer_norm/*         [H]
  L/intermediate/dense/{kernel,bias}       L/intermediate/{kernel,bias}          [H, I], [I]
  L/output/dense/{kernel,bias}             L/output/{kernel,bias}                [I, H], [H]
  L/output/LayerNorm/*                     L/output_layer_norm/*                 [H]
  bert/pooler/dense/{kernel,bias}          pooler_transform/{kernel,bias}        [H, H], [H]
  cls/predictions/transform/*              masked_lm/transform/* (MaskedLM)      as Google
  cls/predictions/output_bias              masked_lm/output_bias/bias            [V]

({q,k,v} is query, key, value.) Google splits heads by reshaping the projected [B, S, H] to
[B, S, N, D], so column n * D + d of a q/k/v kernel belongs to head n: a C-order reshape
[H, H] -> [H, N, D] is exact, and so is [H, H] -> [N, D, H] for the attention output kernel,
whose rows are the merged heads.

Activation: the BertEncoder default `inner_activation` and Model Garden's own
`tf_utils.get_activation("gelu")` (`official.modeling.activations.gelu`) are both the tanh
approximation, i.e. google-research/bert's gelu; plain `tf_keras.activations.get("gelu")`
would instead be exact erf. Masking: tf_keras's masked softmax adds -1e9 (float32), not
Google's -10000, to padded keys. Both drive a padded key's probability to exactly 0 when a
row has at least one real token; they differ only for a row with no real token at all
(Google: softmax over the raw scores, Model Garden: uniform), which the tests avoid.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tf_keras  # pylint: disable=g-import-not-at-top
from official.modeling import tf_utils  # pylint: disable=g-import-not-at-top
from official.nlp.modeling import (
  layers,  # pylint: disable=g-import-not-at-top
  networks,  # pylint: disable=g-import-not-at-top
)


def _gelu_exact(x):
  """Exact (erf) gelu for tf_keras; Model Garden has no string name for it."""
  return tf_keras.activations.gelu(x, approximate=False)


def gelu_activation(approximate: bool):
  """Model Garden activation for the requested gelu flavour.

  Args:
    approximate: True gives Model Garden's own "gelu" (tanh approximation, as Google's);
      False gives the exact erf form.
  """
  return tf_utils.get_activation("gelu") if approximate else _gelu_exact


def _layer_name_map(layer: int, num_heads: int, hidden: int) -> dict:
  """Model Garden name -> (Google name, Model Garden shape) for transformer layer `layer`."""
  d = hidden // num_heads
  g, m = f"bert/encoder/layer_{layer}/", f"transformer/layer_{layer}/"
  table = {}
  for name in ("query", "key", "value"):
    table[m + f"self_attention/{name}/kernel"] = (g + f"attention/self/{name}/kernel",
                                                  (hidden, num_heads, d))
    table[m + f"self_attention/{name}/bias"] = (g + f"attention/self/{name}/bias",
                                                (num_heads, d))
  table[m + "self_attention/attention_output/kernel"] = (
      g + "attention/output/dense/kernel", (num_heads, d, hidden))
  table[m + "self_attention/attention_output/bias"] = (g + "attention/output/dense/bias",
                                                       None)
  for mg, google in (("self_attention_layer_norm", "attention/output/LayerNorm"),
                     ("output_layer_norm", "output/LayerNorm")):
    for leaf in ("gamma", "beta"):
      table[m + f"{mg}/{leaf}"] = (g + f"{google}/{leaf}", None)
  for mg, google in (("intermediate", "intermediate/dense"), ("output", "output/dense")):
    for leaf in ("kernel", "bias"):
      table[m + f"{mg}/{leaf}"] = (g + f"{google}/{leaf}", None)
  return table


def model_garden_name_map(config: dict) -> dict:
  """Model Garden variable name -> (Google TF1 name, target shape or None to keep).

  Args:
    config: dict with `bert_config.json` names.
  """
  table = {
      "word_embeddings/embeddings": ("bert/embeddings/word_embeddings", None),
      "position_embedding/embeddings": ("bert/embeddings/position_embeddings", None),
      "type_embeddings/embeddings": ("bert/embeddings/token_type_embeddings", None),
      "embeddings/layer_norm/gamma": ("bert/embeddings/LayerNorm/gamma", None),
      "embeddings/layer_norm/beta": ("bert/embeddings/LayerNorm/beta", None),
      "pooler_transform/kernel": ("bert/pooler/dense/kernel", None),
      "pooler_transform/bias": ("bert/pooler/dense/bias", None),
  }
  for layer in range(config["num_hidden_layers"]):
    table.update(_layer_name_map(layer, config["num_attention_heads"],
                                 config["hidden_size"]))
  return table


def _assign_all(variables, table: dict, weights: dict, google_prefix: str):
  """Sets every variable from `weights` via `table`, each exactly once.

  Args:
    variables: tf_keras variables to set.
    table: variable name (without ":0") -> (Google name, target shape or None).
    weights: dict of Google TF1 variable names to arrays.
    google_prefix: every Google name starting with it must be used.

  Raises:
    ValueError: if a variable has no source, a source is used twice, or a Google name
      under `google_prefix` is left unused.
  """
  unmapped, used = [], []
  for variable in variables:
    name = variable.name.split(":")[0]
    if name not in table:
      unmapped.append(name)
      continue
    google_name, shape = table[name]
    value = np.asarray(weights[google_name], np.float32)
    variable.assign(value.reshape(shape) if shape is not None else value)
    used.append(google_name)
  duplicates = sorted({n for n in used if used.count(n) > 1})
  leftover = sorted(n for n in weights if n.startswith(google_prefix) and n not in used)
  if unmapped or duplicates or leftover:
    raise ValueError(
        f"Model Garden weight mapping is not one-to-one: Model Garden weights without a "
        f"source: {unmapped}; Google names used twice: {duplicates}; Google "
        f"{google_prefix!r} names left unused: {leftover}")


def build_model_garden_encoder(config: dict, weights: dict,
                               gelu_approximate: bool = True):
  """Builds Model Garden's `BertEncoder` and loads Google-named weights into it.

  Args:
    config: dict with `bert_config.json` names; `hidden_act` must be "gelu" or
      "gelu_exact" (the peer is only used for those).
    weights: dict of Google TF1 variable names to arrays; names outside `bert/` (the
      `cls/` heads) are ignored.
    gelu_approximate: what `hidden_act == "gelu"` means (True: tanh, Google's).

  Returns:
    A built tf_keras `BertEncoder` with dict outputs and all encoder outputs.
  """
  hidden_act = config.get("hidden_act", "gelu")
  if hidden_act not in ("gelu", "gelu_exact"):
    raise ValueError(f"Model Garden peer supports gelu only, got {hidden_act!r}")
  approximate = gelu_approximate and hidden_act == "gelu"
  model = networks.BertEncoder(
      vocab_size=config["vocab_size"],
      hidden_size=config["hidden_size"],
      num_layers=config["num_hidden_layers"],
      num_attention_heads=config["num_attention_heads"],
      max_sequence_length=config["max_position_embeddings"],
      type_vocab_size=config["type_vocab_size"],
      inner_dim=config["intermediate_size"],
      inner_activation=gelu_activation(approximate),
      output_dropout=0.0,
      attention_dropout=0.0,
      dict_outputs=True,
      return_all_encoder_outputs=True)
  dummy = np.zeros((1, 1), np.int32)
  model(dict(input_word_ids=dummy, input_mask=dummy + 1, input_type_ids=dummy))
  _assign_all(model.weights, model_garden_name_map(config), weights, "bert/")
  return model


def model_garden_forward(model, input_ids, input_mask, segment_ids) -> dict:
  """Runs the Model Garden peer in inference mode.

  Args:
    model: from `build_model_garden_encoder`.
    input_ids, input_mask, segment_ids: int arrays [B, S].

  Returns:
    dict with float32 numpy `sequence_output` [B, S, H], `pooled_output` [B, H] and
    `encoder_outputs` (list of [B, S, H]).
  """
  outputs = model(dict(input_word_ids=np.asarray(input_ids, np.int32),
                       input_mask=np.asarray(input_mask, np.int32),
                       input_type_ids=np.asarray(segment_ids, np.int32)),
                  training=False)
  return {"sequence_output": outputs["sequence_output"].numpy(),
          "pooled_output": outputs["pooled_output"].numpy(),
          "encoder_outputs": [x.numpy() for x in outputs["encoder_outputs"]]}


# MaskedLM variable name -> Google name. Its word embedding table is the encoder's own
# variable (tied weights), already set by `build_model_garden_encoder`.
_MASKED_LM_NAMES = {
    "masked_lm/transform/dense/kernel": "cls/predictions/transform/dense/kernel",
    "masked_lm/transform/dense/bias": "cls/predictions/transform/dense/bias",
    "masked_lm/transform/LayerNorm/gamma": "cls/predictions/transform/LayerNorm/gamma",
    "masked_lm/transform/LayerNorm/beta": "cls/predictions/transform/LayerNorm/beta",
    "masked_lm/output_bias/bias": "cls/predictions/output_bias",
}


def build_model_garden_masked_lm(encoder, weights: dict, gelu_approximate: bool = True):
  """Builds Model Garden's `MaskedLM` head on `encoder` and loads `cls/predictions/*`.

  Args:
    encoder: from `build_model_garden_encoder` (supplies the tied embedding table).
    weights: dict of Google TF1 variable names to arrays.
    gelu_approximate: gelu flavour of the transform dense layer.

  Returns:
    A built `official.nlp.modeling.layers.MaskedLM` producing logits.
  """
  table = encoder.get_embedding_table()
  masked_lm = layers.MaskedLM(embedding_table=table,
                              activation=gelu_activation(gelu_approximate),
                              output="logits", name="masked_lm")
  hidden = table.shape[1]
  # MaskedLM reads `masked_positions.shape.as_list()`, so it needs tensors, not arrays.
  masked_lm(tf.zeros((1, 1, hidden), tf.float32),
            masked_positions=tf.zeros((1, 1), tf.int32))
  own = [v for v in masked_lm.weights if v is not table]
  _assign_all(own, {k: (g, None) for k, g in _MASKED_LM_NAMES.items()}, weights,
              "cls/predictions/")
  return masked_lm


def model_garden_mlm_logits(masked_lm, sequence_output, masked_lm_positions):
  """MLM logits of the Model Garden head.

  Args:
    masked_lm: from `build_model_garden_masked_lm`.
    sequence_output: float array [B, S, H].
    masked_lm_positions: int array [B, P].

  Returns:
    float32 numpy array [B, P, V].
  """
  return masked_lm(tf.constant(sequence_output, tf.float32),
                   masked_positions=tf.constant(masked_lm_positions, tf.int32)).numpy()
