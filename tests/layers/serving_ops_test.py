"""Tests for tfbert.layers.serving_ops: the exported graph's form of the layers.

The serving form must compute what the training form computes (float32: to rounding;
bfloat16: no less accurately against a float32 reference), hold no XLA call or custom
gradient, and be what oneDNN fuses: every projection's bias, and the feed-forward GELU, in its
MatMul.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.eager import context
from tensorflow.python.util import _pywrap_util_port

from tests import helpers, numpy_reference
from tfbert.encoder import BertEncoder
from tfbert.layers import activations, fused, serving_ops
from tfbert.serving import export

FEATURES = ("input_ids", "input_mask", "segment_ids")


def _encoder(hidden_act: str, policy: str = "float32") -> BertEncoder:
  """An odd-sized encoder with random Google-name weights: nonzero biases, which Grappler
  would otherwise fold away (x + 0) before any fusion."""
  config = helpers.odd_config(hidden_act=hidden_act)
  encoder = BertEncoder(config, dtype=policy)
  weights = numpy_reference.random_google_weights(config.to_dict(), seed=5)
  return helpers.loaded(encoder, weights, allow_unused=True)


def _features(encoder):
  f = helpers.random_features(encoder.config)
  return {name: tf.constant(f[name]) for name in FEATURES}


def _outputs(encoder, features, serving: bool):
  @tf.function(autograph=False)
  def call(features):
    if serving:
      with serving_ops.scope():
        return encoder(features, training=False)
    return encoder(features, training=False)

  out = call(features)
  return {name: tf.cast(out[name], tf.float32).numpy()
          for name in ("sequence_output", "pooled_output")}


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_exact"])
def test_float32_serving_form_equals_the_training_form(hidden_act):
  encoder = _encoder(hidden_act)
  features = _features(encoder)
  trained, served = _outputs(encoder, features, False), _outputs(encoder, features, True)
  # The same float32 formulas in another op order (the GELU's multiplies, LayerNorm's
  # reductions) and TensorFlow's erf/tanh instead of XLA's: outputs up to 3.2 (float32 ulp
  # 2.4e-7 above 2); measured max 1.7e-6 (sequence_output) and 1.2e-6 (pooled) over 3 layers.
  for name in trained:
    np.testing.assert_allclose(served[name], trained[name], atol=3e-6, rtol=0, err_msg=name)


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_exact"])
def test_bfloat16_serving_form_is_as_accurate_as_the_training_form(hidden_act):
  reference = _outputs(_encoder(hidden_act), _features(_encoder(hidden_act)), False)
  mixed = _encoder(hidden_act, "mixed_bfloat16")
  features = _features(mixed)
  trained, served = _outputs(mixed, features, False), _outputs(mixed, features, True)
  for name in reference:
    trained_error = helpers.max_abs_diff(trained[name], reference[name])
    served_error = helpers.max_abs_diff(served[name], reference[name])
    # Both carry bfloat16 rounding (2^-9 relative per rounding, compounded over 3 layers:
    # measured 0.030-0.046 on outputs up to 3.2). The serving form rounds the biased GELU
    # once where the training kernel rounds twice; measured ratios served / trained
    # 0.68-1.10; with the LayerNorm in bfloat16 instead, 1.64-1.80 on sequence_output.
    assert served_error <= 1.25 * trained_error, (name, served_error, trained_error)
    assert trained_error > 1e-3, "the mixed model did not compute in bfloat16"


def test_tanh_gelu_op_is_google_research_berts_formula():
  x = tf.constant(np.linspace(-6.0, 6.0, 1201), tf.float64)
  # tf.nn.gelu(approximate=True), which the serving form uses, against the written-out
  # formula in float64. They write x + 0.044715 x^3 differently; near x = -6, 1 + tanh(.)
  # cancels to ~1e-10, which turns float64 rounding into up to 9e-10 absolute (measured).
  # Another coefficient or the erf form would differ by 1e-6 to 5e-4.
  np.testing.assert_allclose(tf.nn.gelu(x, approximate=True), activations.gelu_tanh_value(x),
                             atol=2e-9, rtol=0)


def test_serving_graph_has_no_xla_call_and_bare_matmuls_before_every_bias():
  encoder = _encoder("gelu_exact")
  spec = {name: tf.TensorSpec([None, None], tf.int32, name) for name in FEATURES}
  graph = tf.function(lambda f: export.served_outputs(encoder, f),
                      autograph=False).get_concrete_function(spec).graph.as_graph_def()
  nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
  by_name = {n.name: n for n in graph.node}
  assert not [n.name for n in nodes if "_XlaMustCompile" in n.attr or n.op == "IdentityN"]
  assert not graph.library.function, "a nested function (an XLA kernel) was traced"
  layers = encoder.config.num_hidden_layers
  bias_inputs = [by_name[n.input[0]].op for n in graph.node if n.op == "BiasAdd"]
  # Query/key/value, attention output, intermediate and output per layer, and the pooler
  # (Keras' Dense), each a MatMul feeding its BiasAdd directly.
  assert bias_inputs == ["MatMul"] * (4 * layers + 1), bias_inputs


def test_dropout_cannot_enter_a_serving_graph():
  h = tf.ones([3, 5])
  with serving_ops.scope(), pytest.raises(ValueError, match="training=False"):
    fused.bias_dropout_residual_layer_norm(h, tf.zeros([5]), tf.ones([3, 5], tf.bool), 2.0, h,
                                           tf.ones([5]), tf.zeros([5]), 1e-12)
  assert not serving_ops.active()


def _executed_ops(function, *args) -> collections.Counter:
  """Op types (with their fused ops) of the graphs TensorFlow runs for a first call of
  `function`: after Grappler and oneDNN's rewrites."""
  context.enable_run_metadata()
  try:
    function(*args)
    metadata = context.export_run_metadata()
  finally:
    context.disable_run_metadata()
  ops = collections.Counter()
  for graphs in metadata.function_graphs:
    for partition in graphs.partition_graphs:
      for node in partition.node:
        fused_ops = [op.decode() for op in node.attr["fused_ops"].list.s]
        ops[node.op + ("[" + ",".join(fused_ops) + "]" if fused_ops else "")] += 1
  return ops


@pytest.mark.skipif(not _pywrap_util_port.IsMklEnabled(),
                    reason="TensorFlow runs without oneDNN here (TF_ENABLE_ONEDNN_OPTS=0 or "
                    "not x86): the fusions are oneDNN's")
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("hidden_act,gelu", [("gelu", "GeluApproximate"),
                                             ("gelu_exact", "GeluExact")])
def test_onednn_fuses_every_bias_and_gelu_into_its_matmul(policy, hidden_act, gelu):
  encoder = _encoder(hidden_act, policy)
  served = export.FrozenOutputs(encoder)
  ops = _executed_ops(served, _features(encoder))
  layers = encoder.config.num_hidden_layers
  fused_matmuls = {op: n for op, n in ops.items() if "FusedMatMul[BiasAdd" in op}
  assert sum(fused_matmuls.values()) == 4 * layers + 1, ops  # with the pooler's
  assert sum(n for op, n in fused_matmuls.items() if op.endswith(f",{gelu}]")) == layers, ops
  assert "Erf" not in ops and "BiasAdd" not in ops, ops
  assert ops["Tanh"] == 0, ops  # the tanh GELU's (the pooler's tanh is fused too)
