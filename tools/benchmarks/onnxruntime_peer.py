"""The strongest ONNX Runtime peer for encoder inference: BERT as ORT's fused CPU operators.

ONNX Runtime's transformer optimizer (`onnxruntime.transformers.optimizer.optimize_model`)
rewrites a BERT graph exported from transformers into its fused contrib operators: one
`EmbedLayerNormalization`, and per layer one `Attention`, one `BiasGelu` and two
`SkipLayerNormalization`. Those fusions are what make ORT fast on CPU. On the graph tf2onnx
makes of tfbert's export the optimizer finds none of its patterns (measured: every count 0;
`optimizer_fusions` reports them), and transformers' exporter needs PyTorch, which this
project does not use. So `fused_encoder_onnx` writes the graph the optimizer would produce,
directly from the same weights: the same fused operators, in the same order, with the
optimizer's own operator attributes. `tests/benchmarks/onnxruntime_peer_test.py` checks it
against a float64 NumPy BERT and counts its fused operators.

Shape legend: B batch, S sequence, H hidden, I intermediate.
"""

from typing import Mapping

import numpy as np

from tfbert.config import BertConfig
from tfbert.layers.layer_norm import EPSILON

MS_DOMAIN = "com.microsoft"
IR_VERSION = 8  # ONNX 1.10+: what every ONNX Runtime of the last years loads (1.31: up to 13).
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")  # int32 [B, S], Google's names.
OUTPUT_NAMES = ("sequence_output", "pooled_output")
# The fused operators of a BERT that ORT's optimizer fully fused, per encoder of L layers.
FUSED_OPS = {"EmbedLayerNormalization": lambda layers: 1, "Attention": lambda layers: layers,
             "SkipLayerNormalization": lambda layers: 2 * layers}
GELU_OPS = {"gelu_exact": "BiasGelu", "gelu": "FastGelu"}  # Exact erf; Google's tanh form.


def fused_encoder_onnx(config: BertConfig, weights: Mapping[str, np.ndarray], path: str,
                       opset: int = 17) -> str:
  """Writes BERT (encoder + pooler) as ONNX Runtime's fused CPU operators.

  Args:
    config: the model's config (`hidden_act` "gelu_exact" or "gelu").
    weights: Google-name weights (`bert/...`; kernels [in, out]), e.g. from
      `tfbert.checkpoints.huggingface.load_hf_checkpoint`.
    path: the `.onnx` file to write.
    opset: the default-domain opset.

  Returns:
    `path`. The model takes int32 `input_ids`, `input_mask`, `segment_ids` [B, S] (right
    padded: ORT's `Attention` reads each row's length from the mask) and returns float32
    `sequence_output` [B, S, H] and `pooled_output` [B, H].
  """
  import onnx
  from onnx import TensorProto, helper, numpy_helper

  if config.hidden_act not in GELU_OPS:
    raise ValueError(f"hidden_act must be one of {tuple(GELU_OPS)}, got {config.hidden_act!r}")
  initializers, nodes = [], []

  def constant(name, value):
    initializers.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
    return name

  def w(name):
    return constant(name, weights["bert/" + name])

  nodes.append(helper.make_node(
      "EmbedLayerNormalization",
      ["input_ids", "segment_ids", w("embeddings/word_embeddings"),
       w("embeddings/position_embeddings"), w("embeddings/token_type_embeddings"),
       w("embeddings/LayerNorm/gamma"), w("embeddings/LayerNorm/beta"), "input_mask"],
      ["embedding_output", "mask_index"], domain=MS_DOMAIN, epsilon=EPSILON))
  x = "embedding_output"
  for i in range(config.num_hidden_layers):
    x = _layer(helper, nodes, w, constant, weights, config, i, x)
  nodes.append(helper.make_node("Identity", [x], ["sequence_output"]))
  initializers.append(numpy_helper.from_array(np.array(0, np.int64), "cls_index"))
  nodes.append(helper.make_node("Gather", [x, "cls_index"], ["cls"], axis=1))  # [B, H]
  nodes.append(helper.make_node("MatMul", ["cls", w("pooler/dense/kernel")], ["pooler_mm"]))
  nodes.append(helper.make_node("Add", ["pooler_mm", w("pooler/dense/bias")], ["pooler_add"]))
  nodes.append(helper.make_node("Tanh", ["pooler_add"], ["pooled_output"]))

  h = config.hidden_size
  inputs = [helper.make_tensor_value_info(n, TensorProto.INT32, ["B", "S"])
            for n in FEATURE_NAMES]
  outputs = [helper.make_tensor_value_info("sequence_output", TensorProto.FLOAT, ["B", "S", h]),
             helper.make_tensor_value_info("pooled_output", TensorProto.FLOAT, ["B", h])]
  graph = helper.make_graph(nodes, "bert_fused", inputs, outputs, initializers)
  model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                  helper.make_opsetid(MS_DOMAIN, 1)],
                            producer_name="tfbert-onnxruntime-peer", ir_version=IR_VERSION)
  onnx.save(model, path)
  return path


def _layer(helper, nodes, w, constant, weights, config, i, x):
  """One transformer layer as Attention, SkipLayerNormalization, BiasGelu and
  SkipLayerNormalization (with the projections' MatMuls between them); returns its output."""
  p = f"encoder/layer_{i}/"
  qkv_kernel = np.concatenate([weights[f"bert/{p}attention/self/{n}/kernel"]
                               for n in ("query", "key", "value")], axis=1)  # [H, 3H]
  qkv_bias = np.concatenate([weights[f"bert/{p}attention/self/{n}/bias"]
                             for n in ("query", "key", "value")])  # [3H]
  t = f"layer_{i}_"
  nodes += [
      helper.make_node("Attention", [x, constant(t + "qkv_kernel", qkv_kernel),
                                     constant(t + "qkv_bias", qkv_bias), "mask_index"],
                       [t + "context"], domain=MS_DOMAIN,
                       num_heads=config.num_attention_heads),
      helper.make_node("MatMul", [t + "context", w(p + "attention/output/dense/kernel")],
                       [t + "attention_mm"]),
      helper.make_node("SkipLayerNormalization",
                       [t + "attention_mm", x, w(p + "attention/output/LayerNorm/gamma"),
                        w(p + "attention/output/LayerNorm/beta"),
                        w(p + "attention/output/dense/bias")],
                       [t + "attention_out"], domain=MS_DOMAIN, epsilon=EPSILON),
      helper.make_node("MatMul", [t + "attention_out", w(p + "intermediate/dense/kernel")],
                       [t + "intermediate_mm"]),
      helper.make_node(GELU_OPS[config.hidden_act],
                       [t + "intermediate_mm", w(p + "intermediate/dense/bias")],
                       [t + "intermediate"], domain=MS_DOMAIN),
      helper.make_node("MatMul", [t + "intermediate", w(p + "output/dense/kernel")],
                       [t + "output_mm"]),
      helper.make_node("SkipLayerNormalization",
                       [t + "output_mm", t + "attention_out", w(p + "output/LayerNorm/gamma"),
                        w(p + "output/LayerNorm/beta"), w(p + "output/dense/bias")],
                       [t + "output"], domain=MS_DOMAIN, epsilon=EPSILON),
  ]
  return t + "output"


def fused_op_counts(path: str) -> dict[str, int]:
  """How many of each ORT fused operator the `.onnx` file at `path` holds."""
  import onnx

  graph = onnx.load(path, load_external_data=False).graph
  names = set(FUSED_OPS) | set(GELU_OPS.values())
  return {name: sum(node.op_type == name for node in graph.node) for name in sorted(names)}


def optimizer_fusions(onnx_file: str, config: BertConfig) -> dict[str, int]:
  """The fusions ORT's transformer optimizer makes in `onnx_file` (its own statistics).

  Python fusion passes only (`opt_level=0`): ORT's graph-level pre-optimization imports
  PyTorch. Sessions still apply ORT's own graph optimizations when they load a model.
  """
  from onnxruntime.transformers import optimizer

  optimized = optimizer.optimize_model(onnx_file, model_type="bert",
                                       num_heads=config.num_attention_heads,
                                       hidden_size=config.hidden_size, opt_level=0)
  return {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}
