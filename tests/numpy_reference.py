"""Float64 NumPy reference of google-research/bert's forward pass and pre-training heads.

An independent re-statement of google-research/bert `modeling.py` (`BertModel`) and the
heads of `run_pretraining.py` (`get_masked_lm_output`, `get_next_sentence_output`), used
by the test suite to prove tfbert's Keras model exact. It imports neither TensorFlow nor
Keras, works in float64 throughout, and takes weights as a dict keyed by Google's TF1
checkpoint variable names (e.g. `bert/encoder/layer_0/attention/self/query/kernel`).

Shape legend (used in every comment and einsum below):
  B: batch size            S: sequence length (F: query / "from", T: key / "to")
  H: hidden_size           N: num_attention_heads    D: size per head (H = N * D)
  I: intermediate_size     V: vocab_size             G: type_vocab_size
  P: max_position_embeddings (tables) or masked positions per example (MLM gather)
"""

import math

import numpy as np

# google-research/bert `layer_norm` calls `tf.contrib.layers.layer_norm`, whose
# `variance_epsilon` is hard-coded to 1e-12.
LAYER_NORM_EPSILON = 1e-12
# google-research/bert `attention_layer`: `adder = (1.0 - mask) * -10000.0`.
MASK_ADDER = -10000.0

# math.erf is vectorized here rather than taken from scipy: scipy is only a transitive
# dependency of this project (not in requirements.txt), and math.erf is accurate to ~1 ulp.
_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x, approximate: bool):
  """Gaussian Error Linear Unit (Hendrycks & Gimpel, arXiv:1606.08415), in float64.

  Args:
    x: float array of any shape.
    approximate: True for google-research/bert `modeling.gelu`, the tanh approximation
      0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); False for the exact form
      0.5 x (1 + erf(x / sqrt(2))), which Hugging Face calls "gelu".

  Returns:
    float64 array shaped like `x`.
  """
  x = np.asarray(x, np.float64)
  if approximate:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
  return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def activation(name: str, gelu_approximate: bool = True):
  """Returns the float64 function for a `bert_config.json` `hidden_act` value.

  Args:
    name: "gelu" (flavour chosen by `gelu_approximate`), "gelu_exact" (erf), "relu",
      "tanh" or "linear".
    gelu_approximate: which gelu "gelu" means; Google's own is the tanh approximation.

  Raises:
    ValueError: for any other name.
  """
  table = {
      "gelu": lambda x: gelu(x, approximate=gelu_approximate),
      "gelu_exact": lambda x: gelu(x, approximate=False),
      "relu": lambda x: np.maximum(x, 0.0),
      "tanh": np.tanh,
      "linear": lambda x: x,
  }
  if name not in table:
    raise ValueError(f"Unsupported hidden_act {name!r}; expected one of {sorted(table)}")
  return table[name]


def layer_norm(x, gamma, beta, eps: float = LAYER_NORM_EPSILON):
  """Layer normalization over the last axis (Ba et al., arXiv:1607.06450), float64.

  The variance is computed in two passes, mean((x - mean(x))^2), not as
  E[x^2] - E[x]^2, which cancels catastrophically for inputs with a large mean.

  Args:
    x: float array [..., H].
    gamma: float array [H], the scale.
    beta: float array [H], the offset.
    eps: added to the variance; 1e-12 as in google-research/bert.

  Returns:
    float64 array [..., H].
  """
  x = np.asarray(x, np.float64)
  centered = x - x.mean(axis=-1, keepdims=True)
  variance = np.mean(centered * centered, axis=-1, keepdims=True)
  x_hat = centered / np.sqrt(variance + eps)
  return x_hat * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64)


def layer_norm_backward(x, gamma, dy, eps: float = LAYER_NORM_EPSILON):
  """Analytic gradients of `layer_norm` given the upstream gradient `dy`, float64.

  With x_hat = (x - mu) * r, r = 1 / sqrt(var + eps) and g = dy * gamma:
    dx     = r * (g - mean(g) - x_hat * mean(g * x_hat))   (means over the last axis)
    dgamma = sum over leading axes of dy * x_hat
    dbeta  = sum over leading axes of dy

  Args:
    x: float array [..., H], the forward input.
    gamma: float array [H].
    dy: float array [..., H], gradient of the loss w.r.t. the layer_norm output.
    eps: as in `layer_norm`.

  Returns:
    (dx [..., H], dgamma [H], dbeta [H]), all float64.
  """
  x = np.asarray(x, np.float64)
  dy = np.asarray(dy, np.float64)
  centered = x - x.mean(axis=-1, keepdims=True)
  rstd = 1.0 / np.sqrt(np.mean(centered * centered, axis=-1, keepdims=True) + eps)
  x_hat = centered * rstd
  g = dy * np.asarray(gamma, np.float64)
  dx = rstd * (g - g.mean(axis=-1, keepdims=True)
               - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True))
  leading = tuple(range(x.ndim - 1))
  return dx, np.sum(dy * x_hat, axis=leading), np.sum(dy, axis=leading)


def random_google_weights(config: dict, seed: int) -> dict:
  """Random weights for every variable of a Google BERT pre-training checkpoint.

  Matrices and embedding tables are N(0, r^2) with r = config["initializer_range"]
  (default 0.02, Google's value). Biases, LayerNorm gammas and betas get distinct
  non-trivial values (gamma ~ 1 + N(0, 0.1^2), beta and biases ~ N(0, 0.1^2)), so a
  swapped or ignored vector changes the outputs.

  With r = 0.02 and a small hidden size the activations stay near 0, where attention is
  almost uniform and the two gelu flavours agree to ~1e-6; parity tests that must tell
  those apart use a larger r (e.g. 0.2).

  Args:
    config: dict with `bert_config.json` names.
    seed: seed of the NumPy generator.

  Returns:
    dict mapping Google TF1 variable names to float32 arrays.
  """
  rng = np.random.default_rng(seed)
  std = config.get("initializer_range", 0.02)
  h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
  shapes = {
      "bert/embeddings/word_embeddings": (v, h),
      "bert/embeddings/token_type_embeddings": (config["type_vocab_size"], h),
      "bert/embeddings/position_embeddings": (config["max_position_embeddings"], h),
      "bert/embeddings/LayerNorm": h,
      "bert/pooler/dense": (h, h),
      "cls/predictions/transform/dense": (h, h),
      "cls/predictions/transform/LayerNorm": h,
  }
  for layer in range(config["num_hidden_layers"]):
    p = f"bert/encoder/layer_{layer}/"
    for name in ("query", "key", "value"):
      shapes[p + f"attention/self/{name}"] = (h, h)
    shapes[p + "attention/output/dense"] = (h, h)
    shapes[p + "attention/output/LayerNorm"] = h
    shapes[p + "intermediate/dense"] = (h, i)
    shapes[p + "output/dense"] = (i, h)
    shapes[p + "output/LayerNorm"] = h

  weights = {}
  for name, shape in shapes.items():
    if name.endswith("LayerNorm"):
      weights[name + "/gamma"] = 1.0 + 0.1 * rng.standard_normal(shape)
      weights[name + "/beta"] = 0.1 * rng.standard_normal(shape)
    elif name.endswith("_embeddings"):
      weights[name] = std * rng.standard_normal(shape)
    else:  # A dense layer: kernel [in, out] and bias [out].
      weights[name + "/kernel"] = std * rng.standard_normal(shape)
      weights[name + "/bias"] = 0.1 * rng.standard_normal(shape[1])
  weights["cls/predictions/output_bias"] = 0.1 * rng.standard_normal(v)
  weights["cls/seq_relationship/output_weights"] = std * rng.standard_normal((2, h))
  weights["cls/seq_relationship/output_bias"] = 0.1 * rng.standard_normal(2)
  return {name: value.astype(np.float32) for name, value in weights.items()}


def random_inputs(config: dict, batch_size: int, seq_length: int, seed: int):
  """Random padded inputs: example b has a random length in [1, S], example 0 is full.

  Token ids and segment ids at padded positions are random too (not 0), so any leak of
  padding into real positions shows up. Every example keeps at least one real token.

  Returns:
    (input_ids, input_mask, segment_ids), int32 arrays [B, S].
  """
  rng = np.random.default_rng(seed)
  lengths = rng.integers(1, seq_length + 1, size=batch_size)
  lengths[0] = seq_length
  if batch_size > 1:
    lengths[1] = max(1, seq_length // 2)  # At least one example is padded.
  positions = np.arange(seq_length)[None, :]  # [1, S]
  input_mask = (positions < lengths[:, None]).astype(np.int32)  # [B, S]
  input_ids = rng.integers(0, config["vocab_size"], size=(batch_size, seq_length))
  segment_ids = rng.integers(0, config["type_vocab_size"], size=(batch_size, seq_length))
  return input_ids.astype(np.int32), input_mask, segment_ids.astype(np.int32)


def _w(weights, name):
  return np.asarray(weights[name], np.float64)


def _dense(weights, prefix, x):
  """x [..., in] @ kernel [in, out] + bias [out] -> [..., out]."""
  return x @ _w(weights, prefix + "/kernel") + _w(weights, prefix + "/bias")


def _layer_norm(weights, prefix, x):
  return layer_norm(x, _w(weights, prefix + "/gamma"), _w(weights, prefix + "/beta"))


def _embeddings(weights, input_ids, segment_ids):
  """Word + token-type + position embeddings, then LayerNorm. Returns [B, S, H]."""
  seq_length = input_ids.shape[1]
  x = _w(weights, "bert/embeddings/word_embeddings")[input_ids]  # [B, S, H]
  x = x + _w(weights, "bert/embeddings/token_type_embeddings")[segment_ids]  # [B, S, H]
  x = x + _w(weights, "bert/embeddings/position_embeddings")[:seq_length]  # [S, H]
  return _layer_norm(weights, "bert/embeddings/LayerNorm", x)


def _softmax(x):
  e = np.exp(x - x.max(axis=-1, keepdims=True))
  return e / e.sum(axis=-1, keepdims=True)


def _self_attention(weights, prefix, x, mask_adder, num_heads):
  """Multi-head scaled dot-product self-attention of `modeling.attention_layer`.

  Args:
    x: [B, S, H]. mask_adder: [B, 1, 1, T], 0 for real keys and -10000 for padding.

  Returns:
    The context before the output dense, [B, S, H].
  """
  b, s, h = x.shape
  d = h // num_heads

  def heads(name):  # [B, S, H] -> [B, S, N, D]; column n * D + d is head n.
    return _dense(weights, prefix + name, x).reshape(b, s, num_heads, d)

  q, k, v = heads("query"), heads("key"), heads("value")
  scores = np.einsum("bfnd,btnd->bnft", q, k) / math.sqrt(d)  # [B, N, F, T]
  probs = _softmax(scores + mask_adder)  # [B, N, F, T]
  context = np.einsum("bnft,btnd->bfnd", probs, v)  # [B, F, N, D]
  return context.reshape(b, s, h)


def _transformer_layer(weights, prefix, x, mask_adder, config, act):
  """One post-LayerNorm transformer block of `modeling.transformer_model`. [B, S, H]."""
  context = _self_attention(weights, prefix + "attention/self/", x, mask_adder,
                            config["num_attention_heads"])
  attention = _dense(weights, prefix + "attention/output/dense", context)
  x = _layer_norm(weights, prefix + "attention/output/LayerNorm", attention + x)
  inner = act(_dense(weights, prefix + "intermediate/dense", x))  # [B, S, I]
  output = _dense(weights, prefix + "output/dense", inner)  # [B, S, H]
  return _layer_norm(weights, prefix + "output/LayerNorm", output + x)


def _masked_lm_logits(weights, sequence_output, positions, act):
  """`run_pretraining.get_masked_lm_output` without the loss. Returns [B, P, V]."""
  gathered = np.take_along_axis(sequence_output, positions[:, :, None], axis=1)  # [B, P, H]
  x = act(_dense(weights, "cls/predictions/transform/dense", gathered))
  x = _layer_norm(weights, "cls/predictions/transform/LayerNorm", x)
  logits = x @ _w(weights, "bert/embeddings/word_embeddings").T  # [B, P, V]
  return logits + _w(weights, "cls/predictions/output_bias")


def bert_forward(weights: dict, config: dict, input_ids, input_mask, segment_ids,
                 masked_lm_positions=None, gelu_approximate: bool = True) -> dict:
  """Float64 forward pass of google-research/bert `BertModel` (inference, no dropout).

  Args:
    weights: dict of Google TF1 variable names to arrays (see `random_google_weights`).
    config: dict with `bert_config.json` names.
    input_ids: int array [B, S].
    input_mask: int array [B, S], 1 for real tokens and 0 for padding.
    segment_ids: int array [B, S], token types in [0, G).
    masked_lm_positions: optional int array [B, P] of positions to predict.
    gelu_approximate: what `hidden_act == "gelu"` means (True: Google's tanh form).

  Returns:
    dict with float64 arrays `sequence_output` [B, S, H], `pooled_output` [B, H],
    `encoder_outputs` (list of num_hidden_layers arrays [B, S, H]) and, if
    `masked_lm_positions` is given, `mlm_logits` [B, P, V] and `nsp_logits` [B, 2].
  """
  input_ids, segment_ids = np.asarray(input_ids), np.asarray(segment_ids)
  act = activation(config.get("hidden_act", "gelu"), gelu_approximate)
  # Only keys are masked: a padded query position still attends to the real tokens.
  mask = np.asarray(input_mask, np.float64)[:, None, None, :]  # [B, 1, 1, T]
  mask_adder = (1.0 - mask) * MASK_ADDER

  x = _embeddings(weights, input_ids, segment_ids)
  encoder_outputs = []
  for layer in range(config["num_hidden_layers"]):
    x = _transformer_layer(weights, f"bert/encoder/layer_{layer}/", x, mask_adder,
                           config, act)
    encoder_outputs.append(x)
  pooled = np.tanh(_dense(weights, "bert/pooler/dense", x[:, 0]))  # [B, H]

  outputs = {"sequence_output": x, "pooled_output": pooled,
             "encoder_outputs": encoder_outputs}
  if masked_lm_positions is not None:
    outputs["mlm_logits"] = _masked_lm_logits(weights, x, np.asarray(masked_lm_positions),
                                              act)
    outputs["nsp_logits"] = (pooled @ _w(weights, "cls/seq_relationship/output_weights").T
                             + _w(weights, "cls/seq_relationship/output_bias"))  # [B, 2]
  return outputs
