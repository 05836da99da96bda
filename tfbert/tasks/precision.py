"""Precision policies, and a check that this CPU computes BERT right in each of them.

A reduced-precision kernel that is wrong on one CPU kind trains silently wrong there: the
loss stays flat or rises, nothing raises. `tf.einsum("...H,CH->...C")` in float16 returned
garbage on an Intel Xeon with AVX512_FP16 (right on an AMD EPYC), so a mixed_float16
classifier did not learn on that machine only (docs/pitfalls.md, "float16 einsum").
`check_policy` runs a tiny BERT (every layer, every head kind) once per process in the policy
and in float32 with the same weights, forward and backward, and raises a one-line error
naming the policy, the tensor and the error when they disagree by more than the policy's
rounding allows. The runners call it before any work; `set_policy` checks, then sets Keras'
global policy, for code that trains with Keras `fit`.
"""

import functools
import math
import random

import keras
import numpy as np
import tensorflow as tf

from tfbert.runtime import cpu
from tfbert.training.distribution import DTYPES

# Largest relative error |policy - float32| / |float32| (vector norms) accepted for each
# output and each gradient of the check model. Measured on an AMD EPYC (Zen 3, AVX2 only):
# mixed_float16 <= 1.8e-3, mixed_bfloat16 <= 2.7e-2 (8 against 11 mantissa bits, about the
# factor 8 expected). The limits leave 5-10x room for other CPUs' kernels (an Intel Xeon's
# float16 products were off NumPy by 3e-4 to 5e-4); the broken float16 einsum was off by
# 1.2-1.6: a wrong kernel is off by order 1, not by a rounding.
TOLERANCES = {"mixed_bfloat16": 0.15, "mixed_float16": 0.02}
# A gradient whose reference norm is below this fraction of the largest gradient's is
# compared against that floor instead: the key bias's gradient is zero in exact arithmetic
# (softmax ignores a constant shift), 3e-8 in float32 against 81 for the largest, so its
# relative error is rounding noise (2e3 in float16). The next smallest norm is 2e-3 of the
# largest, above the floor.
_GRADIENT_FLOOR = 1e-3
_TINY = dict(vocab_size=37, hidden_size=24, num_hidden_layers=1, num_attention_heads=2,
             intermediate_size=29, max_position_embeddings=16, type_vocab_size=2,
             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


class PrecisionError(ValueError):
  """This CPU computes BERT wrong in the asked-for precision policy."""


def set_policy(dtype: str) -> None:
  """Checks `dtype` on this CPU (`check_policy`), then makes it Keras' global policy.

  Raises:
    ValueError: `dtype` is not one of `DTYPES`.
    PrecisionError: this CPU's kernels are wrong in `dtype`.
  """
  check_policy(dtype)
  keras.mixed_precision.set_global_policy(dtype)


@functools.lru_cache(maxsize=None)
def check_policy(dtype: str) -> dict[str, float]:
  """Runs the check model in `dtype` and in float32; raises if they disagree.

  Once per policy and process (cached); float32 is the reference and is not checked.

  Args:
    dtype: one of `DTYPES`.

  Returns:
    {tensor name: relative error} for the outputs and gradients compared (empty for float32).

  Raises:
    ValueError: `dtype` is not one of `DTYPES`.
    PrecisionError: a relative error is over `TOLERANCES[dtype]`; the message names the
      tensor, the error and what to use instead.
  """
  if dtype not in DTYPES:
    raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
  if dtype == "float32":
    return {}
  reference, weights = _outputs_and_gradients("float32", None)
  floor = _GRADIENT_FLOOR * max(float(np.linalg.norm(value)) for name, value in
                                reference.items() if name.startswith("gradient"))
  errors = {name: _relative_error(value, reference[name],
                                  floor if name.startswith("gradient") else 0.0)
            for name, value in _outputs_and_gradients(dtype, weights)[0].items()}
  # A NaN is the worst of all (max() would pass over it: every comparison with NaN is False).
  name, worst = max(errors.items(), key=lambda item: math.inf if math.isnan(item[1]) else item[1])
  if not worst <= TOLERANCES[dtype]:
    instead = "mixed_bfloat16 or float32" if dtype == "mixed_float16" else "float32"
    raise PrecisionError(
        f"dtype {dtype}: this CPU ({cpu.describe()}) computes BERT wrong in {dtype}: {name} is "
        f"off float32 by {worst:.3g} relative (rounding allows {TOLERANCES[dtype]:g}); "
        f"use {instead}")
  return errors


def _relative_error(value: np.ndarray, reference: np.ndarray, floor: float) -> float:
  scale = max(float(np.linalg.norm(reference)), floor, 1e-30)
  return float(np.linalg.norm(value - reference)) / scale


def _outputs_and_gradients(dtype: str, weights) -> tuple[dict[str, np.ndarray], list]:
  """The check model's outputs and gradients, in float64 NumPy, built under `dtype`.

  Every kind of layer and head runs: embeddings, attention, the fused dense + GELU and
  residual + LayerNorm kernels, the pooler, the MLM head (tied decoder), the NSP
  projection ([B, H] input) and the span projection ([B, S, H] input).

  Args:
    dtype: the policy to build in.
    weights: the reference model's weights to load, or None to keep the seeded init.

  Returns:
    ({name: value}, the model's weights).
  """
  # Imported here: models import the layers, which this package's training code must not
  # pull in at import time.
  from tfbert.config import BertConfig
  from tfbert.layers.heads import SpanHead
  from tfbert.models import BertPretrainer

  batch, seq = 3, 7
  rng = np.random.default_rng(11)
  features = {"input_ids": rng.integers(1, 37, (batch, seq)).astype(np.int32),
              "input_mask": np.array([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4], np.int32),
              "segment_ids": np.array([[0] * 4 + [1] * 3] * batch, np.int32),
              "masked_lm_positions": np.array([[1, 4], [0, 2], [2, 1]], np.int32)}
  policy = keras.mixed_precision.Policy(dtype)
  # Keras draws unseeded initializers' seeds from Python's `random`: building the model must
  # not move the caller's stream (a run seeds before it builds its own model).
  python_random = random.getstate()
  model = BertPretrainer(BertConfig(**_TINY), name="precision_check", dtype=policy)
  span = SpanHead(name="span_head", dtype=policy)
  model.build()
  span.build((None, None, _TINY["hidden_size"]))
  random.setstate(python_random)
  variables = model.weights + span.weights
  if weights is None:  # Seeded here, not through Keras: the caller's seed stream is theirs.
    weights = [rng.normal(1.0 if v.path.endswith("gamma") else 0.0, 0.1, v.shape)
               .astype(np.float32) for v in variables]
  for variable, value in zip(variables, weights):
    variable.assign(value)
  loss_weights = np.random.default_rng(12)
  with tf.GradientTape() as tape:
    outputs = model(features, training=False)
    spans = span(outputs["sequence_output"])
    named = {"mlm_logits": outputs["mlm_logits"], "nsp_logits": outputs["nsp_logits"],
             "start_logits": spans["start_logits"], "end_logits": spans["end_logits"],
             "pooled_output": outputs["pooled_output"]}
    # A loss that weighs every logit differently, so every gradient path is exercised.
    loss = tf.add_n([tf.reduce_sum(tf.cast(t, tf.float32) * loss_weights.standard_normal(
        t.shape).astype(np.float32)) for t in named.values()])
  trainable = model.trainable_variables + span.trainable_variables
  gradients = tape.gradient(loss, trainable)
  result = {name: tf.cast(t, tf.float64).numpy() for name, t in named.items()}
  for variable, gradient in zip(trainable, gradients):
    result[f"gradient of {variable.path}"] = tf.cast(
        tf.convert_to_tensor(gradient), tf.float64).numpy()
  return result, [v.numpy() for v in variables]
