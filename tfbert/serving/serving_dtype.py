"""The compute dtype of an export, chosen for the CPU it is made on, and its record.

What serves fastest differs by CPU kind (docs/pitfalls.md, "CPU kinds"): bfloat16 matmuls
ran 409 GFLOP/s on an AMD EPYC Zen 4 (AVX512_BF16), where a bfloat16 export served MiniLM at
0.8x ONNX Runtime's batch-1 latency; on an Intel Xeon they ran 157 GFLOP/s and the same
export was 2x slower than float32; an AMD EPYC Zen 3 has no bfloat16 instructions at all.
So an export takes an `export_dtype`: "model" (the default: the model's own policy, as
trained), "float32", "bfloat16", or "auto", which times the model's own matmul shapes in both
on this CPU and takes bfloat16 only where it is clearly faster (`BFLOAT16_SPEEDUP`). Outputs
are float32 whatever is chosen.

Every export writes what it chose into `serving.json` beside `bert_config.json` (in the
export and in its `ids/`): the compute dtype, how it was chosen, the CPU and the timings.
"""

import os
import time
from typing import Optional

import keras
import tensorflow as tf

from tfbert.runtime import atomic, cpu, files, json_values

EXPORT_DTYPES = ("model", "auto", "float32", "bfloat16")
RECORD_FILE = "serving.json"
POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16"}
# "auto" takes bfloat16 when its matmuls take at most this share of float32's time: the
# export also runs LayerNorms, softmax and casts, which bfloat16 does not speed up. Measured
# end to end (MiniLM, B 1): on the Zen 4 EPYC bfloat16 matmuls took ~0.45 of float32's time
# and the bfloat16 export 0.67 of the float32 one's; on the Intel Xeon ~1.0 and 2.0.
BFLOAT16_SPEEDUP = 0.8


def matmul_seconds(dtype: str, hidden: int, intermediate: int, rows: int = 128,
                   repeats: int = 10) -> float:
  """Seconds for a transformer layer's feed-forward matmuls ([rows, H] @ [H, I] @ [I, H]) in
  `dtype` on this CPU: the best of 5 timings of `repeats` calls each, after a warm-up."""
  with tf.device("/CPU:0"):
    normal = tf.random.stateless_normal
    x = tf.cast(normal([rows, hidden], [1, 2]), dtype)
    up = tf.cast(normal([hidden, intermediate], [3, 4]), dtype)
    down = tf.cast(normal([intermediate, hidden], [5, 6]), dtype)
    layer = tf.function(lambda: tf.matmul(tf.matmul(x, up), down), autograph=False)
    for _ in range(3):
      layer().numpy()
    best = float("inf")
    for _ in range(5):
      start = time.perf_counter()
      for _ in range(repeats):
        result = layer()
      result.numpy()
      best = min(best, (time.perf_counter() - start) / repeats)
  return best


def choose(model: keras.Model, export_dtype: str) -> dict:
  """What `model` should be exported in.

  Args:
    model: a tfbert model or encoder (its `config` gives the matmul shapes).
    export_dtype: one of `EXPORT_DTYPES`.

  Returns:
    the record `serving.json` holds: "compute_dtype" ("float32" or "bfloat16"; for "model"
    also "float16", a mixed_float16 model's), "chosen_by"
    ("the model's policy", "the caller", or "measured on this CPU"), "cpu", and for "auto"
    "matmul_seconds" {dtype: seconds}.

  Raises:
    ValueError: an unknown `export_dtype`.
  """
  if export_dtype not in EXPORT_DTYPES:
    raise ValueError(f"export_dtype must be one of {EXPORT_DTYPES}, got {export_dtype!r}")
  record = {"cpu": cpu.describe()}
  if export_dtype == "model":  # As trained: float32, bfloat16 or float16.
    return {"compute_dtype": model.dtype_policy.compute_dtype,
            "chosen_by": "the model's policy", **record}
  if export_dtype != "auto":
    return {"compute_dtype": export_dtype, "chosen_by": "the caller", **record}
  config = model.config
  seconds = {dtype: matmul_seconds(dtype, config.hidden_size, config.intermediate_size)
             for dtype in ("float32", "bfloat16")}
  fast = seconds["bfloat16"] <= BFLOAT16_SPEEDUP * seconds["float32"]
  return {"compute_dtype": "bfloat16" if fast else "float32",
          "chosen_by": "measured on this CPU", "matmul_seconds": seconds, **record}


def export_dtype_check(export_dtype: str) -> tuple[bool, str]:
  """The run configs' check of an `export_dtype` setting (`tfbert.runtime.validation`)."""
  return (export_dtype in EXPORT_DTYPES,
          f"export_dtype must be one of {EXPORT_DTYPES}, got {export_dtype!r}")


def in_dtype(model: keras.Model, compute_dtype: str) -> keras.Model:
  """`model` itself if it computes in `compute_dtype`, else a copy built in that policy with
  the same weights (float32 variables either way)."""
  policy = POLICIES[compute_dtype]
  if model.dtype_policy.name == policy:
    return model
  copy = type(model).from_config({**model.get_config(), "dtype": policy})
  copy.build()
  copy.set_weights(model.get_weights())
  return copy


def for_serving(model: keras.Model, export_dtype: str) -> tuple[keras.Model, dict]:
  """(`model` in the chosen compute dtype, the record to write); see `choose`."""
  record = choose(model, export_dtype)
  if export_dtype == "model":
    return model, record
  return in_dtype(model, record["compute_dtype"]), record


def read_record(saved_model_dir: str) -> Optional[dict]:
  """The `serving.json` record of an export (or its `ids/`), or None for one without it."""
  path = os.path.join(saved_model_dir, RECORD_FILE)
  files.check_not_dangling(path, "serving record")  # Not an export without a record.
  if not files.isfile(path):
    return None
  return json_values.read(path)


def write_record(export_dir: str, record: dict, id_dir: Optional[str] = None) -> None:
  """Writes `serving.json` into `export_dir` and, when given, its `id_dir` subdirectory."""
  text = json_values.dumps(record, indent=2, sort_keys=True) + "\n"
  folders = [export_dir] + ([os.path.join(export_dir, id_dir)] if id_dir else [])
  for folder in folders:
    atomic.write_text(os.path.join(folder, RECORD_FILE), text)

