"""Tests for tools.benchmarks.benchmark_inference: five engines of the same model, a report."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tfbert import BertEncoder
from tfbert.checkpoints import convert, pretrained
from tfbert.serving import export, onnx_export, tflite_export
from tfbert_tools.benchmarks import benchmark_inference

TINY = dict(batch_size=3, seq_length=9, iterations=2, latency_iterations=3, warmup=1, rounds=1)


@pytest.mark.slow
def test_the_engines_compute_the_same_encoder_and_are_timed(tmp_path):
  """Like with like: the float32 SavedModel, TFLite and ONNX Runtime agree to float32
  rounding (the ONNX test's bound), and the bfloat16 SavedModel to bfloat16's (8-bit
  mantissas: ~1e-2 here, a bound of 0.1 still fails for another model or input). On a small
  odd encoder in Hugging Face format; `tools/benchmark.py` measures MiniLM-L6-H384."""
  hf_dir = str(tmp_path / "hf")
  # Two layers: every layer's ops fused, not only the first (one layer could not tell).
  encoder = BertEncoder(helpers.odd_config(vocab_size=30522, num_hidden_layers=2))
  encoder.build()
  convert.write_model(encoder, "hf", hf_dir, vocab_file=pretrained.minilm_vocab_file(),
                      do_lower_case=True)
  prepared = benchmark_inference.prepare(str(tmp_path / "exports"), 9, hf_dir)
  paths = prepared["paths"]
  assert sorted(paths) == sorted(benchmark_inference.ENGINES)
  # The fused peer is fully fused (tanh GELU here: FastGelu); the optimizer's own count on
  # the tf2onnx graph is reported whatever it is.
  assert prepared["fused_ops"] == {"Attention": 2, "BiasGelu": 0, "EmbedLayerNormalization": 1,
                                   "FastGelu": 2, "SkipLayerNormalization": 4}
  assert isinstance(prepared["optimizer_fusions"], dict)
  batch = benchmark_inference.features(2, 9)
  pooled = {}
  for engine in ("tfbert_float32", "tfbert_bfloat16"):
    loaded = tf.saved_model.load(f"{paths[engine]}/{export.ID_DIR}")
    served = loaded.signatures[export.SERVING_SIGNATURE](
        **{k: tf.constant(v) for k, v in batch.items()})
    pooled[engine] = served["pooled_output"].numpy()
  session = onnx_export.onnx_session(paths["onnxruntime_float32"])
  pooled["onnxruntime_float32"] = session.run(["pooled_output"], batch)[0]
  fused = onnx_export.onnx_session(paths["onnxruntime_fused"])
  pooled["onnxruntime_fused"] = fused.run(["pooled_output"], batch)[0]
  pooled["tfbert_tflite"] = tflite_export.TfliteModel(paths["tfbert_tflite"])(batch)[
      "pooled_output"]
  for engine in ("onnxruntime_float32", "onnxruntime_fused", "tfbert_tflite"):
    assert np.abs(pooled[engine] - pooled["tfbert_float32"]).max() < 1e-5, engine
  bf16 = np.abs(pooled["tfbert_bfloat16"] - pooled["tfbert_float32"]).max()
  assert 0 < bf16 < 0.1, bf16
  case = benchmark_inference.InferenceCase(**TINY)
  runs = {engine: [benchmark_inference.run_engine(
      {"case": dataclasses.asdict(case), "engine": engine, "path": paths[engine]})]
      for engine in benchmark_inference.ENGINES}
  for engine, (run,) in runs.items():
    assert run["engine"] == engine
    assert run["sequences_per_second"] > 0 and run["latency_ms"] > 0


def test_the_report_names_the_cpu_and_judges_the_best_export_against_the_fused_peer():
  case = benchmark_inference.InferenceCase(**TINY)
  numbers = {"tfbert_float32": (60.0, 20.0), "tfbert_bfloat16": (120.0, 15.0),
             "tfbert_tflite": (70.0, 17.0),
             "onnxruntime_float32": (50.0, 25.0), "onnxruntime_fused": (80.0, 16.0)}
  runs = {e: [{"engine": e, "sequences_per_second": s, "latency_ms": ms}]
          for e, (s, ms) in numbers.items()}
  result = benchmark_inference.summarize(
      case, runs, "Some CPU (avx2; oneDNN off)",
      {"optimizer_fusions": {}, "fused_ops": {"Attention": 6}})
  assert result["throughput_over_onnxruntime_fused"]["tfbert_bfloat16"] == 1.5
  assert result["latency_over_onnxruntime_float32"]["tfbert_float32"] == 0.8
  text = benchmark_inference.format_result(result)
  assert ("| Some CPU (avx2; oneDNN off) | tfbert_bfloat16 | 120.0 | 120.0 | 1.50 | 2.40 | "
          "15.00 | 15.00 | 0.94 | 0.60 |") in text
  assert "optimizer on the tf2onnx graph fused: nothing" in text
  assert ("best throughput (tfbert_bfloat16) / ORT fused: 1.50 (goal >= 1.2: met); best B1 "
          "latency (tfbert_bfloat16) / ORT fused: 0.94 (goal <= 1.0: met)") in text
  slow = {**numbers, "tfbert_bfloat16": (70.0, 30.0)}
  result = benchmark_inference.summarize(
      case, {e: [{"engine": e, "sequences_per_second": s, "latency_ms": ms}]
             for e, (s, ms) in slow.items()}, "x", {"optimizer_fusions": {}, "fused_ops": {}})
  text = benchmark_inference.format_result(result)
  assert "(tfbert_bfloat16) / ORT fused: 0.88 (goal >= 1.2: NOT met)" in text
  assert "latency (tfbert_tflite) / ORT fused: 1.06 (goal <= 1.0: NOT met)" in text


def test_a_case_is_checked():
  with pytest.raises(ValueError, match=r"seq_length \(600\) must be in \[1, 512\]"):
    benchmark_inference.InferenceCase(seq_length=600)
