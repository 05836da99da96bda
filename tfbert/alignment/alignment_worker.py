"""A worker process of the alignment harness:
`python -m tfbert.alignment.alignment_worker SPEC_JSON`.

SPEC_JSON is a `PretrainingRunConfig` saved with `to_json` (distribution "multi_worker");
TF_CONFIG, set by the launcher (`tfbert.training.workers.launch_workers`), names the cluster and
this worker. The chief writes the run directory; the others write beside it (`.worker<i>/`).
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def run_spec_file(path: str) -> dict:
  """Runs the pretraining saved in `path`; returns its last log."""
  from tfbert.pretraining.pretraining_run import PretrainingRunConfig, run_pretraining
  with open(path, encoding="utf-8") as f:
    return run_pretraining(PretrainingRunConfig.from_json(f.read()))


def main(argv: list[str]) -> int:
  if len(argv) != 2:
    print(f"usage: python -m tfbert.alignment.alignment_worker SPEC_JSON (got {argv[1:]})",
          file=sys.stderr)
    return 2
  run_spec_file(argv[1])
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
