"""Longest tests first, dealt evenly to the pytest-xdist workers, so that they finish together.

pytest-xdist's `worksteal` scheduler hands each of its N workers one contiguous N-th of the
collection and, when a worker runs dry, moves the tail of the longest queue to it. Left in
file order, a worker could meet a two-minute proof last while the other sits idle. Here the
test files are dealt longest first (from the measured durations in `tests/durations.json`; a
test not in it counts as 1 s) into N shares of about equal time, so every worker starts with
its longest files and ends with cheap ones that stealing balances finely. A file is never
split by the dealing (its module-scoped fixtures are built once), and files whose tests
request the same session-scoped fixture of tests/ (tests/tiny_exports.py's exports, say)
are dealt together to one worker, which builds it once (`session_fixtures`, `groups_of`).

`tests/durations.json` is written by `python -m tests.profile_report DIR --durations_file
tests/durations.json` from a profile (docs/testing.md); a missing or stale entry only costs
balance, never a test.
"""

import inspect
import json
import os
from typing import Optional

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
DURATIONS_FILE = os.path.join(TESTS_DIR, "durations.json")
UNKNOWN_SECONDS = 1.0
LIGHT_SECONDS = 0.5  # A file whose tests take less on average only evens out the counts.


def read_durations(path: str = DURATIONS_FILE) -> dict[str, float]:
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except FileNotFoundError:
    return {}


def deal(nodeids: list[str], durations: dict[str, float], workers: int,
         groups: Optional[dict[str, str]] = None) -> list[str]:
  """`nodeids` reordered: `workers` contiguous shares of about equal expected time and equal
  test counts, each starting with its longest test files.

  A test file stays together, in its own order, so that its module-scoped fixtures are built
  once; so do the files of one group (`groups`: file -> group name, `groups_of`), longest
  file first, so that the session fixtures they share are built once. Groups of several
  files and files whose tests take LIGHT_SECONDS or more on average are dealt longest first,
  each to the share with the least time so far (greedy longest-processing-time); the light
  files (hundreds of sub-second tests) then even out the counts, each to the share with the
  fewest tests, since worksteal's first split is by count.
  """
  files: dict[str, list[str]] = {}
  for nodeid in nodeids:
    files.setdefault(nodeid.split("::")[0], []).append(nodeid)
  seconds = {f: sum(durations.get(n, UNKNOWN_SECONDS) for n in tests)
             for f, tests in files.items()}
  units: dict[str, list[str]] = {}  # A group's files (or one file), longest first.
  for f in sorted(files, key=lambda f: (-seconds[f], f)):
    units.setdefault((groups or {}).get(f, f), []).append(f)
  tests = {u: [n for f in members for n in files[f]] for u, members in units.items()}
  unit_seconds = {u: sum(seconds[f] for f in members) for u, members in units.items()}
  ordered = sorted(units, key=lambda u: (-unit_seconds[u], u))
  if workers <= 1:
    return [n for u in ordered for n in tests[u]]
  heavy: list[list[str]] = [[] for _ in range(workers)]  # Test ids, per share.
  light: list[list[str]] = [[] for _ in range(workers)]
  totals = [0.0] * workers
  for u in ordered:
    if len(units[u]) > 1 or unit_seconds[u] >= LIGHT_SECONDS * len(tests[u]):
      i = min(range(workers), key=lambda s: (totals[s], s))
      heavy[i] += tests[u]
      totals[i] += unit_seconds[u]
    else:
      i = min(range(workers), key=lambda s: (len(heavy[s]) + len(light[s]), s))
      light[i] += tests[u]
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


def session_fixtures(item, root: str = TESTS_DIR) -> set[str]:
  """The session-scoped fixtures defined under `root` that the test `item` requests, by
  argument or through the fixtures it requests (autouse ones aside), each as
  "<file of its definition>::<name>"; none where pytest keeps no fixture information.

  Reads pytest's `item._fixtureinfo` (not public API): should pytest change it, this finds
  no fixture, and only the time of a second build is lost (tests/scheduling_test.py fails).
  """
  info = getattr(item, "_fixtureinfo", None)
  found: set[str] = set()
  todo, seen = list(getattr(info, "argnames", ())), set()
  while todo:
    name = todo.pop()
    definitions = info.name2fixturedefs.get(name) if name not in seen else None
    seen.add(name)
    if not definitions:
      continue
    definition = definitions[-1]  # The one this item sees (the closest override).
    todo += definition.argnames
    try:
      source = os.path.abspath(inspect.getsourcefile(definition.func) or "")
    except TypeError:  # A built-in: no source file.
      continue
    if definition.scope == "session" and source.startswith(root + os.sep):
      found.add(f"{os.path.relpath(source, root)}::{name}")
  return found


def groups_of(uses: dict[str, set[str]]) -> dict[str, str]:
  """{file: group name} for `uses` ({file: the session fixtures its tests request}): files
  that share a fixture, directly or through other files, are one group, named by its first
  file in sorted order. Files that request none are in no group."""
  parent: dict[str, str] = {}

  def root(key: str) -> str:
    while parent.setdefault(key, key) != key:
      key = parent[key]
    return key

  for f, fixtures in uses.items():
    for fixture in fixtures:
      a, b = root(f), root(fixture)
      parent[max(a, b)] = min(a, b)
  members: dict[str, list[str]] = {}
  for f in uses:
    if uses[f]:
      members.setdefault(root(f), []).append(f)
  return {f: min(fs) for fs in members.values() for f in fs}


def pytest_collection_modifyitems(config, items):
  del config
  workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
  uses: dict[str, set[str]] = {}
  for item in items:
    uses.setdefault(item.nodeid.split("::")[0], set()).update(session_fixtures(item))
  order = deal([item.nodeid for item in items], read_durations(), workers, groups_of(uses))
  position = {nodeid: i for i, nodeid in enumerate(order)}
  items.sort(key=lambda item: position[item.nodeid])
