"""Longest tests first, dealt evenly to the pytest-xdist workers, so that they finish together.

pytest-xdist's `worksteal` scheduler hands each of its N workers one contiguous N-th of the
collection and, when a worker runs dry, moves the tail of the longest queue to it. Left in
file order, a worker could meet a two-minute proof last while the other sits idle. Here each
worker's N-th is its share of the tests dealt longest first (from the measured durations in
`tests/durations.json`; a test not in it counts as 1 s), so every worker starts with its
longest tests and ends with sub-second ones that stealing balances finely.

`tests/durations.json` is written by `python -m tests.profile_report DIR --durations-file
tests/durations.json` from a profile (docs/testing.md); a missing or stale entry only costs
balance, never a test.
"""

import json
import os

DURATIONS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "durations.json")
UNKNOWN_SECONDS = 1.0


def read_durations(path: str = DURATIONS_FILE) -> dict[str, float]:
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except FileNotFoundError:
    return {}


def share_sizes(count: int, workers: int) -> list[int]:
  """How many of `count` tests worksteal first sends each worker: the remaining tests split
  evenly, the earlier workers rounding down."""
  sizes = []
  for i in range(workers):
    sizes.append((count - sum(sizes)) // (workers - i))
  return sizes


def deal(nodeids: list[str], durations: dict[str, float], workers: int) -> list[str]:
  """`nodeids` reordered: `workers` contiguous shares of worksteal's sizes, each longest
  first, of about equal expected time.

  Greedy longest-processing-time: each test, longest first, goes to the share with the least
  time so far that still has room (ties: the lower share); the shares are then concatenated.
  """
  ordered = sorted(nodeids, key=lambda n: (-durations.get(n, UNKNOWN_SECONDS), n))
  if workers <= 1:
    return ordered
  sizes = share_sizes(len(ordered), workers)
  shares: list[list[str]] = [[] for _ in range(workers)]
  totals = [0.0] * workers
  for nodeid in ordered:
    room = [i for i in range(workers) if len(shares[i]) < sizes[i]]
    i = min(room, key=lambda s: (totals[s], s))
    shares[i].append(nodeid)
    totals[i] += durations.get(nodeid, UNKNOWN_SECONDS)
  return [nodeid for share in shares for nodeid in share]


def pytest_collection_modifyitems(config, items):
  del config
  workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
  order = deal([item.nodeid for item in items], read_durations(), workers)
  position = {nodeid: i for i, nodeid in enumerate(order)}
  items.sort(key=lambda item: position[item.nodeid])
