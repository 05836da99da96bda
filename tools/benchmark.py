"""Benchmarks, each measured against a peer in the same run (see BENCHMARKS.md).

  bash bootstrap.sh python tools/benchmark.py --benchmark=accumulation \
      --micro_batch_size=8 --accumulation_steps=4
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # noqa: E402

from flags import benchmark_flags as f  # noqa: E402
from tfbert import benchmark  # noqa: E402


def main(argv):
  del argv
  case = benchmark.PretrainingCase(
      hidden_size=f.HIDDEN_SIZE.value, num_layers=f.NUM_LAYERS.value,
      num_heads=f.NUM_HEADS.value, intermediate_size=f.INTERMEDIATE_SIZE.value,
      seq_length=f.SEQ_LENGTH.value, max_predictions=f.MAX_PREDICTIONS.value,
      micro_batch_size=f.MICRO_BATCH_SIZE.value, applied_steps=f.APPLIED_STEPS.value,
      warmup_steps=f.WARMUP_STEPS.value, dtype_policy=f.DTYPE.value)
  result = benchmark.accumulation_overhead(case, f.ACCUMULATION_STEPS.value)
  print(benchmark.format_accumulation(result))


if __name__ == "__main__":
  app.run(main)
