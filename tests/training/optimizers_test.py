"""Tests for tfbert.training.optimizers: exclusions on a real model, numerics vs NumPy,
distribution.

The NumPy references below are written from google-research/bert `optimization.py`
(`AdamWeightDecayOptimizer.apply_gradients`) and the LAMB paper / TF-Addons `LAMB`, in
float64, independently of the code under test.

Tolerance: float32 parameters of magnitude ~1 carry a rounding error of ~6e-8 per assign;
over 5 steps of a handful of float32 ops each, the measured deviation is a few 1e-7, so
1e-6 (~8 float32 ulps at 1.0) catches any formula error (a wrong epsilon placement, bias
correction, decay or trust ratio moves weights by >= 1e-4 here) without flaking.
"""

import copy
import json
import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfbert
from tests import forked, helpers
from tfbert.layers.layer_norm import LayerNorm
from tfbert.training.optimizers import (
  BERT_WEIGHT_DECAY_EXCLUSIONS,
  AdamW,
  Lamb,
  decayed_variables,
  variable_path,
)
from tfbert.training.schedules import WarmupPolynomialDecay

TOL = 1e-6  # See the module docstring.
STEPS = 5
REPO = helpers.ROOT

# --- The real model's variables, by path below the model's own (auto-numbered) scope. -----

DECAYED = {
    "encoder/embeddings/word_embeddings/embeddings",
    "encoder/embeddings/token_type_embeddings/embeddings",
    "encoder/embeddings/position_embeddings/embeddings",
    "encoder/layer_0/attention/query/kernel", "encoder/layer_0/attention/key/kernel",
    "encoder/layer_0/attention/value/kernel", "encoder/layer_0/attention_output/kernel",
    "encoder/layer_0/intermediate/kernel", "encoder/layer_0/output/kernel",
    "encoder/layer_1/attention/query/kernel", "encoder/layer_1/attention/key/kernel",
    "encoder/layer_1/attention/value/kernel", "encoder/layer_1/attention_output/kernel",
    "encoder/layer_1/intermediate/kernel", "encoder/layer_1/output/kernel",
    "encoder/pooler/kernel", "mlm_head/transform/kernel", "nsp_head/output_weights",
}
LAYER_NORMS = {
    "encoder/embeddings/layer_norm/gamma", "encoder/embeddings/layer_norm/beta",
    "encoder/layer_0/attention_layer_norm/gamma", "encoder/layer_0/attention_layer_norm/beta",
    "encoder/layer_0/output_layer_norm/gamma", "encoder/layer_0/output_layer_norm/beta",
    "encoder/layer_1/attention_layer_norm/gamma", "encoder/layer_1/attention_layer_norm/beta",
    "encoder/layer_1/output_layer_norm/gamma", "encoder/layer_1/output_layer_norm/beta",
    "mlm_head/layer_norm/gamma", "mlm_head/layer_norm/beta",
}
BIASES = {
    "encoder/layer_0/attention/query/bias", "encoder/layer_0/attention/key/bias",
    "encoder/layer_0/attention/value/bias", "encoder/layer_0/attention_output/bias",
    "encoder/layer_0/intermediate/bias", "encoder/layer_0/output/bias",
    "encoder/layer_1/attention/query/bias", "encoder/layer_1/attention/key/bias",
    "encoder/layer_1/attention/value/bias", "encoder/layer_1/attention_output/bias",
    "encoder/layer_1/intermediate/bias", "encoder/layer_1/output/bias",
    "encoder/pooler/bias", "mlm_head/transform/bias", "mlm_head/output_bias",
    "nsp_head/output_bias",
}


@pytest.fixture(scope="module")
def bert():
  model = tfbert.BertPretrainer(tfbert.BertConfig(
      vocab_size=101, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
      intermediate_size=37))
  model.build()
  return model


def _suffix(variable) -> str:
  return variable_path(variable).split("/", 1)[1]  # Drop "bert_pretrainer[_N]/".


def _decayed_by_one_step(optimizer, model) -> set:
  """Paths a zero-gradient step shrinks: with g = 0, Adam's step is 0 and only decay acts."""
  for w in model.weights:
    w.assign(np.ones(w.shape, np.float32))
  optimizer.apply([tf.zeros(w.shape) for w in model.trainable_weights], model.trainable_weights)
  return {_suffix(w) for w in model.weights if np.all(w.numpy() < 1.0)}


def test_bert_exclusions_decay_kernels_embeddings_and_nsp_weights_only(bert):
  assert {_suffix(w) for w in bert.weights} == DECAYED | LAYER_NORMS | BIASES
  exclusions = BERT_WEIGHT_DECAY_EXCLUSIONS
  adamw = AdamW(1.0, weight_decay_rate=0.1, exclude_from_weight_decay=exclusions)
  lamb = Lamb(1.0, weight_decay_rate=0.1, exclude_from_weight_decay=exclusions)
  for optimizer_or_patterns in (adamw, lamb, exclusions):
    decayed = decayed_variables(optimizer_or_patterns, bert.weights)
    assert {_suffix(w) for w in decayed} == DECAYED
  # And the update itself: 1.0 -> 1 - lr * rate = 0.9 exactly on the decayed set.
  assert _decayed_by_one_step(adamw, bert) == DECAYED


def test_a_model_named_like_an_exclusion_is_decayed_as_any_other():
  """Sweep 30, B14: the regexes searched the whole path, the model's name included: a model
  named `unbiased_model` (or `LayerNorm_probe`) had 0 of its variables decayed."""
  config = tfbert.BertConfig(vocab_size=101, hidden_size=32, num_hidden_layers=1,
                             num_attention_heads=4, intermediate_size=37)
  adamw = AdamW(1.0, weight_decay_rate=0.1, exclude_from_weight_decay=BERT_WEIGHT_DECAY_EXCLUSIONS)
  decayed = {}
  for name in ("plain_model", "unbiased_model", "LayerNorm_probe"):
    model = tfbert.BertClassifier(config, 3, name=name)
    model.build()
    decayed[name] = sorted(_suffix(w) for w in decayed_variables(adamw, model.weights))
  assert decayed["plain_model"] and "encoder/pooler/kernel" in decayed["plain_model"]
  assert decayed["unbiased_model"] == decayed["LayerNorm_probe"] == decayed["plain_model"]
  # And the update itself, by the built optimizer.
  adamw = AdamW(1.0, weight_decay_rate=0.1, exclude_from_weight_decay=BERT_WEIGHT_DECAY_EXCLUSIONS)
  assert _decayed_by_one_step(adamw, model) == set(decayed["plain_model"])  # LayerNorm_probe.


def test_exclusions_that_match_no_variable_are_named_when_the_optimizer_is_built(bert, caplog):
  """Sweep 31, B33: Hugging Face's ["bias", "LayerNorm.weight"] (or google-research/bert's
  "LayerNorm" alone) matched none of tfbert's `.../layer_norm/gamma`, so every layer norm
  was decayed without a word. Google's own list (both spellings) and tfbert's are quiet."""
  caplog.set_level("WARNING", logger="absl")
  for quiet in (BERT_WEIGHT_DECAY_EXCLUSIONS, ["layer_norm", "bias"]):
    AdamW(1.0, weight_decay_rate=0.1, exclude_from_weight_decay=quiet).build(bert.weights)
  assert "match none" not in caplog.text
  for optimizer in (AdamW, Lamb):
    optimizer(1.0, weight_decay_rate=0.1, exclude_from_weight_decay=[
        "bias", "LayerNorm.weight"]).build(bert.weights)
    assert ("exclude_from_weight_decay: pattern(s) ['LayerNorm.weight'] match none of the "
            f"model's {len(bert.weights)} variable paths, so they exclude nothing") in caplog.text
    assert "layer norms are '.../layer_norm/gamma'" in caplog.text
    caplog.clear()
  Lamb(1.0, exclude_from_layer_adaptation=["LayerNorm"]).build(bert.weights)
  assert "exclude_from_layer_adaptation: pattern(s) ['LayerNorm'] match none" in caplog.text
  caplog.clear()
  AdamW(1.0, exclude_from_weight_decay=["LayerNorm"]).build(bert.weights)
  assert caplog.text == ""  # No decay at all: nothing to exclude, nothing to say.


def test_zero_weight_decay_rate_decays_nothing(bert):
  # google-research/bert `_do_use_weight_decay`: `if not self.weight_decay_rate: return False`.
  assert decayed_variables(AdamW(1e-3), bert.weights) == []


def test_keras_adamw_name_matching_depends_on_the_backend_variable(bert):
  """Documents the docs/pitfalls.md trap exactly as Keras 3.15 / TF 2.20 behave.

  Keras matches `var_names` against `variable.name`. A Keras variable's name is its leaf
  (`gamma`), so its backend-agnostic rule (used as is by the JAX/torch backends) decays
  every layer-norm gamma/beta. The TF backend happens to call that rule on the underlying
  `tf.Variable`, whose name is the full path (`.../layer_norm/gamma:0`), so through `apply`
  the layer norms *are* excluded. tfbert matches paths explicitly on every backend.
  """
  gammas = [w for w in bert.weights if _suffix(w) in LAYER_NORMS]
  assert {w.name for w in gammas} == {"gamma", "beta"}

  def keras_adamw():
    optimizer = keras.optimizers.AdamW(learning_rate=1.0, weight_decay=0.1)
    optimizer.exclude_from_weight_decay(var_names=list(BERT_WEIGHT_DECAY_EXCLUSIONS))
    return optimizer

  rule = keras_adamw()
  assert all(rule._use_weight_decay(w) for w in gammas)  # Leaf name: decayed.
  assert not any(keras_adamw()._use_weight_decay(w.value) for w in gammas)  # tf name: kept.
  assert _decayed_by_one_step(keras_adamw(), bert) == DECAYED
  with pytest.raises(TypeError, match="constructor"):
    AdamW(1e-3).exclude_from_weight_decay(var_names=["bias"])


def test_lamb_adapts_every_variable_unless_told_otherwise(bert):
  # TF-Addons / Model Garden fall back to the decay exclusions here; tfbert does not.
  lamb = Lamb(1e-3, weight_decay_rate=0.01, exclude_from_weight_decay=BERT_WEIGHT_DECAY_EXCLUSIONS)
  assert all(lamb.uses_layer_adaptation(w) for w in bert.weights)
  lamb = Lamb(1e-3, exclude_from_layer_adaptation=["layer_norm", "bias"])
  assert {_suffix(w) for w in bert.weights if lamb.uses_layer_adaptation(w)} == DECAYED


# --- Numerics vs independent NumPy references. -------------------------------------------

def _variables(values: dict) -> list:
  """Keras variables whose paths are the keys ("scope/leaf") of `values`."""
  variables = []
  for path, value in values.items():
    scope, leaf = path.split("/")
    with keras.name_scope(scope):
      variables.append(keras.Variable(value, name=leaf, dtype="float32"))
  assert [v.path for v in variables] == list(values)
  return variables


def _problem(seed=0, zero=()):
  """Odd-shaped initial values and STEPS gradient dicts (float64 NumPy)."""
  rng = np.random.default_rng(seed)
  shapes = {"dense/kernel": (3, 5), "dense/bias": (5,), "layer_norm/gamma": (5,),
            "zeros/kernel": (2, 3)}
  init = {k: (np.zeros(s) if k in zero else rng.normal(size=s)) for k, s in shapes.items()}
  grads = [{k: rng.normal(scale=0.1 * (t + 1), size=s) for k, s in shapes.items()}
           for t in range(STEPS)]
  return init, grads


def _run(optimizer, init, grads) -> dict:
  """Applies `grads` with `optimizer` inside a tf.function; returns the final values."""
  variables = _variables(init)
  optimizer.build(variables)
  apply = tf.function(lambda gs: optimizer.apply(gs, variables))
  for step_grads in grads:
    apply([tf.constant(step_grads[v.path], tf.float32) for v in variables])
  assert int(optimizer.iterations) == len(grads)
  return {v.path: v.numpy() for v in variables}


def _adam_moments(m, v, g, b1, b2):
  return b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g


def numpy_adamw(init, grads, lr, rate, decayed, bias_correction, b1=0.9, b2=0.999, eps=1e-6):
  """google-research/bert AdamWeightDecayOptimizer (optionally with Adam's m_hat, v_hat)."""
  w = {k: x.copy() for k, x in init.items()}
  m = {k: np.zeros_like(x) for k, x in init.items()}
  v = {k: np.zeros_like(x) for k, x in init.items()}
  for t, step_grads in enumerate(grads, start=1):
    for k in w:
      m[k], v[k] = _adam_moments(m[k], v[k], step_grads[k], b1, b2)
      mm, vv = m[k], v[k]
      if bias_correction:
        mm, vv = mm / (1 - b1**t), vv / (1 - b2**t)
      update = mm / (np.sqrt(vv) + eps) + (rate * w[k] if k in decayed else 0.0)
      w[k] = w[k] - lr * update
  return w


def numpy_lamb(init, grads, lr, rate, decayed, adapted, b1=0.9, b2=0.999, eps=1e-6):
  """LAMB (You et al. 2019, Algorithm 2; TF-Addons). Returns (weights, ratios per step)."""
  w = {k: x.copy() for k, x in init.items()}
  m = {k: np.zeros_like(x) for k, x in init.items()}
  v = {k: np.zeros_like(x) for k, x in init.items()}
  ratios = []
  for t, step_grads in enumerate(grads, start=1):
    ratios.append({})
    for k in w:
      m[k], v[k] = _adam_moments(m[k], v[k], step_grads[k], b1, b2)
      update = (m[k] / (1 - b1**t)) / (np.sqrt(v[k] / (1 - b2**t)) + eps)
      if k in decayed:
        update = update + rate * w[k]
      w_norm, u_norm = np.linalg.norm(w[k]), np.linalg.norm(update)
      ratio = w_norm / u_norm if (k in adapted and w_norm > 0 and u_norm > 0) else 1.0
      ratios[-1][k] = ratio
      w[k] = w[k] - ratio * lr * update
  return w, ratios


def _max_diff(got: dict, want: dict) -> float:
  return max(float(np.max(np.abs(got[k] - want[k]))) for k in want)


@pytest.mark.parametrize("bias_correction", [False, True])
def test_adamw_matches_numpy_google_optimizer(bias_correction):
  init, grads = _problem()
  optimizer = AdamW(0.01, weight_decay_rate=0.1, bias_correction=bias_correction,
                    exclude_from_weight_decay=BERT_WEIGHT_DECAY_EXCLUSIONS)
  got = _run(optimizer, init, grads)
  decayed = {"dense/kernel", "zeros/kernel"}
  want = numpy_adamw(init, grads, 0.01, 0.1, decayed, bias_correction)
  assert _max_diff(got, want) < TOL
  # The alternative (the other bias_correction) is far away, so the test has teeth.
  other = numpy_adamw(init, grads, 0.01, 0.1, {"dense/kernel", "zeros/kernel"},
                      not bias_correction)
  assert _max_diff(got, other) > 1e-3


def test_lamb_matches_numpy_with_trust_ratio_and_both_exclusions():
  init, grads = _problem(zero=("zeros/kernel",))
  optimizer = Lamb(0.05, weight_decay_rate=0.1, exclude_from_weight_decay=["bias"],
                   exclude_from_layer_adaptation=["layer_norm"])
  got = _run(optimizer, init, grads)
  decayed = {"dense/kernel", "layer_norm/gamma", "zeros/kernel"}  # gamma: decayed, not adapted.
  adapted = {"dense/kernel", "dense/bias", "zeros/kernel"}  # bias: adapted, not decayed.
  want, ratios = numpy_lamb(init, grads, 0.05, 0.1, decayed, adapted)
  assert _max_diff(got, want) < TOL
  assert ratios[0]["zeros/kernel"] == 1.0  # ||w|| = 0 at step 1: ratio 1.
  assert ratios[0]["layer_norm/gamma"] == 1.0 and abs(ratios[0]["dense/kernel"] - 1.0) > 0.01
  unadapted, _ = numpy_lamb(init, grads, 0.05, 0.1, decayed, adapted={})
  assert _max_diff(got, unadapted) > 1e-3


def test_schedule_is_evaluated_at_applied_steps():
  # lr(s) for W = 2, T = 4 (google): 0, 0.5, 1 * (1 - 2/4) = 0.5, 1 * (1 - 3/4) = 0.25.
  # Zero gradients leave only decay: w <- w * (1 - lr(s) * 0.1), from w = 1:
  #   1 -> 1 -> 0.95 -> 0.95 * 0.95 = 0.9025 -> 0.9025 * (1 - 0.025) = 0.8799375.
  w = _variables({"dense/kernel": np.ones((3, 5))})
  optimizer = AdamW(WarmupPolynomialDecay(1.0, warmup_steps=2, total_steps=4),
                    weight_decay_rate=0.1)
  for want in (1.0, 0.95, 0.9025, 0.8799375):
    optimizer.apply([tf.zeros((3, 5))], w)
    np.testing.assert_allclose(w[0].numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("make", [
    lambda: AdamW(0.01, weight_decay_rate=0.1, bias_correction=True,
                  exclude_from_weight_decay=["bias"]),
    lambda: Lamb(0.05, weight_decay_rate=0.1, exclude_from_layer_adaptation=["layer_norm"]),
], ids=["adamw", "lamb"])
def test_direct_update_step_calls_equal_apply(make):
  """The gradient-accumulation wrapper's path: update_step per variable, then iterations += 1."""
  init, grads = _problem()
  want = _run(make(), init, grads)
  optimizer, variables = make(), _variables(init)
  optimizer.build(variables)
  for step_grads in grads:
    for v in variables:
      optimizer.update_step(tf.constant(step_grads[v.path], tf.float32), v,
                            optimizer.learning_rate)
    optimizer.iterations.assign_add(1)
  assert _max_diff({v.path: v.numpy() for v in variables}, want) == 0.0


@pytest.mark.parametrize("make", [
    lambda: AdamW(0.01, weight_decay_rate=0.1, bias_correction=True),
    lambda: Lamb(0.05, weight_decay_rate=0.1),
], ids=["adamw", "lamb"])
def test_indexed_slices_gradient_equals_its_dense_form(make):
  ids = tf.constant([[1, 3, 3], [7, 1, 10]])  # Duplicates: slices must be summed.
  target = tf.constant(np.random.default_rng(0).normal(size=(2, 3, 4)), tf.float32)
  tables = []
  for densify in (False, True):
    embedding = keras.layers.Embedding(11, 4, name="embedding")
    embedding.build((None,))
    embedding.embeddings.assign(np.random.default_rng(1).normal(size=(11, 4)))
    optimizer = make()
    for _ in range(3):
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(embedding(ids) - target))
      grad = tape.gradient(loss, embedding.embeddings)
      assert isinstance(grad, tf.IndexedSlices)
      optimizer.apply([tf.convert_to_tensor(grad) if densify else grad], [embedding.embeddings])
    tables.append(embedding.embeddings.numpy())
  np.testing.assert_allclose(tables[0], tables[1], rtol=0, atol=1e-7)


# --- Config, errors. ---------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: AdamW(WarmupPolynomialDecay(1e-3, 10, 100), weight_decay_rate=0.01,
                  bias_correction=True, epsilon=1e-7, exclude_from_weight_decay=["bias"],
                  clipnorm=1.0, name="adamw_x"),
    lambda: Lamb(2e-3, weight_decay_rate=0.01, beta_2=0.99, exclude_from_weight_decay=["bias"],
                 exclude_from_layer_adaptation=["layer_norm"]),
], ids=["adamw", "lamb"])
def test_get_config_round_trips(make):
  optimizer = make()
  config = optimizer.get_config()
  assert "weight_decay" not in config
  # Keras's from_config replaces config["learning_rate"] in place, hence the deep copy.
  assert type(optimizer).from_config(copy.deepcopy(config)).get_config() == config
  restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
  assert type(restored) is type(optimizer) and restored.get_config() == config


def test_an_integer_learning_rate_is_a_float_numpy_integers_and_floats_too():
  """Keras refused np.int64(1) and (sweep 29, B61) np.float32(1e-2) ("Argument
  `learning_rate` should be float")."""
  for make in (AdamW, Lamb):
    assert float(make(np.int64(1)).learning_rate) == float(make(1).learning_rate) == 1.0
    assert float(make(np.float32(0.5)).learning_rate) == 0.5


def test_an_exclusion_that_is_no_regular_expression_is_named():
  """Sweep 29, B63: a bare re.error named neither the argument nor the pattern."""
  with pytest.raises(ValueError, match=r"^exclude_from_weight_decay: 'LayerNorm\[' is not a "
                                       r"regular expression \(unterminated character set"):
    AdamW(1e-3, exclude_from_weight_decay=["bias", "LayerNorm["])
  with pytest.raises(ValueError, match="^exclude_from_layer_adaptation: '\\(' is not"):
    Lamb(1e-3, exclude_from_layer_adaptation=["("])


def test_invalid_arguments_raise():
  with pytest.raises(ValueError, match="weight_decay_rate"):
    AdamW(1e-3, weight_decay=0.01)
  with pytest.raises(TypeError, match="list of regex"):
    AdamW(1e-3, exclude_from_weight_decay="bias")
  with pytest.raises(TypeError, match="list of regex"):
    Lamb(1e-3, exclude_from_layer_adaptation="layer_norm")
  with pytest.raises(ValueError, match="beta_1"):
    Lamb(1e-3, beta_1=1.0)


# --- MirroredStrategy over 2 logical CPUs (in a subprocess: TF may already be initialized).


def _tiny_layers():
  """Embedding (IndexedSlices grads) -> Dense -> LayerNorm, deterministic odd-sized weights."""
  rng = np.random.default_rng(3)
  embedding, dense = keras.layers.Embedding(11, 4, name="embedding"), keras.layers.Dense(3)
  norm = LayerNorm(name="layer_norm")
  embedding.build((None,))
  dense.build((None, 4))
  norm.build((None, 3))
  layers = [embedding, dense, norm]
  for w in [w for layer in layers for w in layer.weights]:
    w.assign(rng.normal(size=w.shape))
  return layers


def _tiny_loss(layers, ids, target):
  embedding, dense, norm = layers
  return tf.reduce_sum(tf.square(norm(dense(embedding(ids))) - target))  # A sum: adds up.


def _makers() -> dict:
  return {"adamw": lambda: AdamW(0.01, weight_decay_rate=0.1, bias_correction=True,
                                 exclude_from_weight_decay=BERT_WEIGHT_DECAY_EXCLUSIONS),
          "lamb": lambda: Lamb(0.05, weight_decay_rate=0.1, exclude_from_weight_decay=["bias"],
                               exclude_from_layer_adaptation=["layer_norm"])}


def _summed_grads(layers, batches, target):
  """Dense gradients of the tiny loss, summed over `batches` (Keras all-reduces with SUM)."""
  variables = [w for layer in layers for w in layer.trainable_weights]
  total = None
  for ids in batches:
    with tf.GradientTape() as tape:
      loss = _tiny_loss(layers, ids, target)
    grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]
    total = grads if total is None else [a + b for a, b in zip(total, grads)]
  return total, variables


def _mirrored_setup(strategy, make):
  with strategy.scope():
    layers, optimizer = _tiny_layers(), make()
    variables = [w for layer in layers for w in layer.trainable_weights]
    optimizer.build(variables)
  return layers, optimizer, variables


def _mirrored_apply_steps(strategy, make, batches, target, steps):
  """`optimizer.apply` inside `strategy.run`, one batch per replica (IndexedSlices included)."""
  layers, optimizer, variables = _mirrored_setup(strategy, make)

  def replica_step(ids):
    with tf.GradientTape() as tape:
      loss = _tiny_loss(layers, ids, target)
    optimizer.apply(tape.gradient(loss, variables), variables)

  per_replica = strategy.experimental_distribute_values_from_function(
      lambda ctx: batches[ctx.replica_id_in_sync_group])
  step = tf.function(lambda ids: strategy.run(replica_step, args=(ids,)))
  for _ in range(steps):
    step(per_replica)
  return variables


def _mirrored_update_step_steps(strategy, make, batches, target, steps):
  """The accumulation wrapper's path: cross-replica `update_step` in `extended.update`."""
  layers, optimizer, variables = _mirrored_setup(strategy, make)

  @tf.function
  def wrapper_step(grads):
    lr = optimizer.learning_rate
    for grad, var in zip(grads, variables):
      strategy.extended.update(var.value, lambda v, g: optimizer.update_step(g, v, lr),
                               args=(grad,), group=False)
    optimizer.iterations.assign_add(1)

  for _ in range(steps):
    grads, _ = _summed_grads(layers, batches, target)
    with strategy.scope():
      wrapper_step(grads)
  return variables


def _max_replica_diff(variables, want) -> float:
  """Max |replica copy - want| over both replicas' copies of `variables`."""
  return max(
      float(np.max(np.abs(np.concatenate([w.value.values[r].numpy().ravel()
                                          for w in variables]) - want)))
      for r in range(2))


def _distributed_parity(steps: int = 2) -> dict:
  """Max |distributed - single device| per optimizer and path. Needs a fresh process."""
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
  strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  rng = np.random.default_rng(4)
  batches = [tf.constant(rng.integers(0, 11, size=(5, 3)), tf.int32) for _ in range(2)]
  target = tf.constant(rng.normal(size=(5, 3, 3)), tf.float32)
  results = {"replicas": strategy.num_replicas_in_sync}
  for name, make in _makers().items():
    reference, optimizer = _tiny_layers(), make()
    for _ in range(steps):
      grads, variables = _summed_grads(reference, batches, target)
      optimizer.apply(grads, variables)
    want = np.concatenate([w.numpy().ravel() for w in variables])
    for path, run in (("apply", _mirrored_apply_steps),
                      ("update_step", _mirrored_update_step_steps)):
      results[f"{name}_{path}"] = _max_replica_diff(
          run(strategy, make, batches, target, steps), want)
  return results


@pytest.mark.slow
def test_mirrored_strategy_step_equals_single_device_step_on_summed_gradients():
  code = ("import json; from tests.training.optimizers_test import _distributed_parity; "
          "print('RESULT ' + json.dumps(_distributed_parity()))")
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  run = forked.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                   text=True, timeout=240)
  lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
  assert run.returncode == 0 and lines, run.stderr[-3000:]
  diffs = json.loads(lines[-1][len("RESULT "):])
  assert diffs.pop("replicas") == 2
  assert set(diffs) == {"adamw_apply", "adamw_update_step", "lamb_apply", "lamb_update_step"}
  assert all(d < TOL for d in diffs.values()), diffs
