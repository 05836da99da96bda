"""Summarizes a suite profile (tests/profiling.py) as the Markdown tables of docs/testing.md.

  TFBERT_TEST_PROFILE=/tmp/profile bash bootstrap.sh test
  .venv/bin/python -m tests.profile_report /tmp/profile [--top 30] \
      [--durations_file tests/durations.json]

Prints: the totals, the time by cost kind, the time by test file, and the slowest tests
(setup, call and teardown added up, so a session fixture's build counts in the test that
first asked for it).
"""

import argparse
import collections
import glob
import json
import os
import re

# A test whose child processes used this share of its wall time or more is a subprocess test.
SUBPROCESS_SHARE = 0.3
_CONVERSION = re.compile(r"tflite|onnx|export|convert|saved|serving")
_TRAINING = re.compile(r"_run_test|alignment|accumulation|training|resume|fine_tuning|demo"
                       r"|fit|multi_worker|worker")


def read_profile(folder: str) -> dict[str, dict[str, float]]:
  """{nodeid: {"wall", "cpu", "child_cpu", "setup"}} summed over a test's phases."""
  tests: dict[str, dict[str, float]] = collections.defaultdict(
      lambda: {"wall": 0.0, "cpu": 0.0, "child_cpu": 0.0, "setup": 0.0})
  for path in sorted(glob.glob(os.path.join(folder, "*.jsonl"))):
    with open(path, encoding="utf-8") as f:
      for line in f:
        row = json.loads(line)
        test = tests[row["nodeid"]]
        for key in ("wall", "cpu", "child_cpu"):
          test[key] += row[key]
        if row["phase"] == "setup":
          test["setup"] += row["wall"]
  return dict(tests)


def cost_kind(nodeid: str, test: dict[str, float]) -> str:
  """The kind of work a test's time mostly goes to (a heuristic: child CPU time, then the
  test's module and name)."""
  if test["child_cpu"] >= SUBPROCESS_SHARE * test["wall"] and test["child_cpu"] > 0.5:
    return "subprocess (tool, worker, fresh interpreter)"
  if test["wall"] < 0.5:
    return "under 0.5 s (pure Python, small graphs)"
  if _CONVERSION.search(nodeid):
    return "export / conversion (SavedModel, TFLite, ONNX, checkpoints)"
  if _TRAINING.search(nodeid):
    return "training steps in-process (runs, alignment, accumulation)"
  return "model build and tracing in-process"


def durations(tests: dict[str, dict[str, float]]) -> dict[str, float]:
  """{nodeid: wall seconds, to 0.1 s} of the tests that took 0.5 s or more (the rest count
  as tests/scheduling.py's default)."""
  return {nodeid: round(t["wall"], 1) for nodeid, t in tests.items() if t["wall"] >= 0.5}


def _table(header, rows):
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
  return "\n".join(lines)


def report(tests: dict[str, dict[str, float]], top: int = 30) -> str:
  """The Markdown tables for `tests` (from read_profile)."""
  total = sum(t["wall"] for t in tests.values())
  kinds: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
  files: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
  for nodeid, test in tests.items():
    kind = kinds[cost_kind(nodeid, test)]
    kind[0] += 1
    kind[1] += test["wall"]
    row = files[nodeid.split("::")[0]]
    row[0] += 1
    row[1] += test["wall"]
    row[2] += test["setup"]
    row[3] += test["child_cpu"]
  out = [f"{len(tests)} tests, {total:.0f} s of worker time (the sum over workers).", ""]
  out.append(_table(["cost kind", "tests", "s", "share"], [
      (k, n, f"{s:.0f}", f"{100 * s / total:.0f}%")
      for k, (n, s) in sorted(kinds.items(), key=lambda kv: -kv[1][1])]))
  out += ["", _table(["file", "tests", "s", "of which setup", "child CPU s"], [
      (f, int(n), f"{s:.0f}", f"{setup:.0f}", f"{child:.0f}")
      for f, (n, s, setup, child) in sorted(files.items(), key=lambda kv: -kv[1][1])])]
  slowest = sorted(tests.items(), key=lambda kv: -kv[1]["wall"])[:top]
  out += ["", _table(["s", "test", "kind"], [
      (f"{t['wall']:.0f}", nodeid, cost_kind(nodeid, t)) for nodeid, t in slowest])]
  return "\n".join(out)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("folder")
  parser.add_argument("--top", type=int, default=30)
  parser.add_argument("--durations_file", help="Also write {test: seconds} here, the order "
                      "tests/scheduling.py deals the tests in (tests/durations.json).")
  args = parser.parse_args()
  tests = read_profile(args.folder)
  print(report(tests, args.top))
  if args.durations_file:
    with open(args.durations_file, "w", encoding="utf-8") as f:
      json.dump(durations(tests), f, indent=0, sort_keys=True)
      f.write("\n")


if __name__ == "__main__":
  main()
