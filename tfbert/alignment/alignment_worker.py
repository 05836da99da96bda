"""A worker process of the alignment harness:
`python -m tfbert.alignment.alignment_worker SPEC_JSON`.

SPEC_JSON is {"task": "pretraining" | "squad" | "classifier", "config": the run config's
`to_json`} (distribution "multi_worker");
TF_CONFIG, set by the launcher (`tfbert.training.workers.launch_workers`), names the cluster and
this worker. The chief writes the run directory; the others write beside it (`.worker<i>/`).
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def run_spec_file(path: str) -> dict:
  """Runs the training saved in `path` ({"task", "config"}); returns the run's result."""
  import json  # pylint: disable=import-outside-toplevel

  from tfbert.runtime import files  # pylint: disable=import-outside-toplevel
  with files.open_file(path) as f:
    spec = json.load(f)
  text = json.dumps(spec["config"])
  if spec.get("way_out"):  # The launching tool's way out of a refused run directory.
    from tfbert.runtime import run_directory  # pylint: disable=import-outside-toplevel
    with run_directory.way_out(spec["way_out"]):
      return _run(spec["task"], text)
  return _run(spec["task"], text)


def _run(task: str, text: str) -> dict:
  """Runs the `task` training of the run config `text` (JSON); returns its result."""
  if task == "squad":
    from tfbert.squad import squad_run  # pylint: disable=import-outside-toplevel
    return squad_run.run_squad(squad_run.SquadRunConfig.from_json(text))
  if task == "classifier":
    from tfbert.classifier import classifier_run  # pylint: disable=import-outside-toplevel
    return classifier_run.run_classifier(classifier_run.ClassifierRunConfig.from_json(text))
  from tfbert.pretraining.pretraining_run import (  # pylint: disable=import-outside-toplevel
    PretrainingRunConfig,
    run_pretraining,
  )
  return run_pretraining(PretrainingRunConfig.from_json(text))


def main(argv: list[str]) -> int:
  if len(argv) != 2:
    print(f"usage: python -m tfbert.alignment.alignment_worker SPEC_JSON (got {argv[1:]})",
          file=sys.stderr)
    return 2
  run_spec_file(argv[1])
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
