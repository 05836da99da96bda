"""Longest tests first, dealt evenly to the pytest-xdist workers, so that they finish together.

pytest-xdist's `worksteal` scheduler hands each of its N workers one contiguous N-th of the
collection and, when a worker runs dry, moves the tail of the longest queue to it. Left in
file order, a worker could meet a two-minute proof last while the other sits idle. Here the
test files are dealt longest first (from the measured durations in `tests/durations.json`; a
test not in it counts as 1 s) into N shares of about equal time, so every worker starts with
its longest files and ends with cheap ones that stealing balances finely. A file is never
split by the dealing (its module-scoped fixtures are built once).

`tests/durations.json` is written by `python -m tests.profile_report DIR --durations_file
tests/durations.json` from a profile (docs/testing.md); a missing or stale entry only costs
balance, never a test.
"""

import json
import os

DURATIONS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "durations.json")
UNKNOWN_SECONDS = 1.0
LIGHT_SECONDS = 0.5  # A file whose tests take less on average only evens out the counts.


def read_durations(path: str = DURATIONS_FILE) -> dict[str, float]:
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except FileNotFoundError:
    return {}


def deal(nodeids: list[str], durations: dict[str, float], workers: int) -> list[str]:
  """`nodeids` reordered: `workers` contiguous shares of about equal expected time and equal
  test counts, each starting with its longest test files.

  A test file stays together, in its own order, so that its module-scoped fixtures are built
  once. Files whose tests take LIGHT_SECONDS or more on average are dealt longest first,
  each to the share with the least time so far (greedy longest-processing-time); the light
  files (hundreds of sub-second tests) then even out the counts, each to the share with the
  fewest tests, since worksteal's first split is by count.
  """
  files: dict[str, list[str]] = {}
  for nodeid in nodeids:
    files.setdefault(nodeid.split("::")[0], []).append(nodeid)
  seconds = {f: sum(durations.get(n, UNKNOWN_SECONDS) for n in tests)
             for f, tests in files.items()}
  ordered = sorted(files, key=lambda f: (-seconds[f], f))
  if workers <= 1:
    return [n for f in ordered for n in files[f]]
  heavy: list[list[str]] = [[] for _ in range(workers)]  # Test ids, per share.
  light: list[list[str]] = [[] for _ in range(workers)]
  totals = [0.0] * workers
  for f in ordered:
    if seconds[f] >= LIGHT_SECONDS * len(files[f]):
      i = min(range(workers), key=lambda s: (totals[s], s))
      heavy[i] += files[f]
      totals[i] += seconds[f]
    else:
      i = min(range(workers), key=lambda s: (len(heavy[s]) + len(light[s]), s))
      light[i] += files[f]
  # Exactly the counts worksteal first sends (the rest split evenly, rounding down): light
  # tests move from the end of a share with too many to one with too few.
  sizes: list[int] = []
  for i in range(workers):
    sizes.append((len(nodeids) - sum(sizes)) // (workers - i))
  spare = []
  for i in range(workers):
    while len(heavy[i]) + len(light[i]) > sizes[i] and light[i]:
      spare.append(light[i].pop())
  for i in range(workers):
    while len(heavy[i]) + len(light[i]) < sizes[i] and spare:
      light[i].append(spare.pop())
  return [n for i in range(workers) for n in heavy[i] + light[i]] + spare[::-1]


def pytest_collection_modifyitems(config, items):
  del config
  workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
  order = deal([item.nodeid for item in items], read_durations(), workers)
  position = {nodeid: i for i, nodeid in enumerate(order)}
  items.sort(key=lambda item: position[item.nodeid])
