"""Tests for tools.benchmarks.onnxruntime_peer: ORT's fused BERT graph is BERT."""

import numpy as np
import pytest

from tests import helpers, numpy_reference
from tfbert_tools.benchmarks import onnxruntime_peer


@pytest.mark.parametrize("hidden_act, gelu_op", [("gelu", "FastGelu"),
                                                 ("gelu_exact", "BiasGelu")])
def test_the_fused_graph_equals_a_float64_bert_with_padding(tmp_path, hidden_act, gelu_op):
  """Odd sizes, right-padded rows of different lengths, both GELUs. Bound: float32 through 3
  layers against float64, outputs ~1 with initializer_range 0.2 (tfbert's own parity bound
  against this reference); measured 2.2e-6 (sequence) and 1.1e-6 (pooled)."""
  from tfbert.serving import onnx_export

  config = helpers.odd_config(hidden_act=hidden_act)
  weights = numpy_reference.random_google_weights(config.to_dict(), seed=4)
  path = onnxruntime_peer.fused_encoder_onnx(config, weights, str(tmp_path / "fused.onnx"))
  counts = onnxruntime_peer.fused_op_counts(path)
  layers = config.num_hidden_layers
  assert counts == {"Attention": layers, "BiasGelu": layers * (gelu_op == "BiasGelu"),
                    "EmbedLayerNormalization": 1, "FastGelu": layers * (gelu_op == "FastGelu"),
                    "SkipLayerNormalization": 2 * layers}
  ids, mask, segments = numpy_reference.random_inputs(config.to_dict(), helpers.BATCH,
                                                      helpers.SEQ, seed=2)
  assert mask.min() == 0  # Some rows are padded.
  features = {"input_ids": ids.astype(np.int32), "input_mask": mask.astype(np.int32),
              "segment_ids": segments.astype(np.int32)}
  got = dict(zip(onnxruntime_peer.OUTPUT_NAMES, onnx_export.onnx_session(path).run(
      list(onnxruntime_peer.OUTPUT_NAMES), features)))
  want = numpy_reference.bert_forward(weights, config.to_dict(), ids, mask, segments)
  for name in onnxruntime_peer.OUTPUT_NAMES:
    assert helpers.max_abs_diff(got[name], want[name]) < 2e-5, name


def test_an_activation_without_a_fused_operator_is_refused(tmp_path):
  config = helpers.odd_config(hidden_act="relu")
  with pytest.raises(ValueError, match="hidden_act must be one of"):
    onnxruntime_peer.fused_encoder_onnx(config, {}, str(tmp_path / "x.onnx"))
