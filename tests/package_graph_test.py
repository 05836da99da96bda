"""tfbert's packages import each other without a cycle, and never import the tools.

A node is a subpackage of `tfbert` (`tfbert.training`, `tfbert.serving`, ...) or a top-level
module (`tfbert.models`, `tfbert.encoder`, `tfbert.config`); `tfbert/__init__.py` only
re-exports and is left out. Every import counts, a function's local import included: a
cycle closed by a local import is a cycle all the same (one more edit and it fails at import
time, and nothing can be understood or tested apart).
"""

import ast
import os

from tests import helpers

PACKAGE = os.path.join(helpers.ROOT, "tfbert")
# The command-line layer by import name: what no tfbert module may import.
TOOL_PACKAGES = {"tfbert_tools": "tools", "tools": "tools", "tfbert_flags": "flags",
                 "flags": "flags"}


def _node(parts: list[str]) -> str:
  """The graph node of a module path inside tfbert (["training", "precision"] ->
  "training"; ["models"] -> "models")."""
  return parts[0]


def import_graph() -> dict[str, dict[str, list[str]]]:
  """{node: {imported node: [file:line of each import]}} over tfbert's own modules, and
  "tools" / "flags" as nodes when a module imports them (under their installed names
  `tfbert_tools` / `tfbert_flags`, or the folder names)."""
  edges: dict[str, dict[str, list[str]]] = {}
  for directory, _, files in os.walk(PACKAGE):
    for name in sorted(files):
      if not name.endswith(".py"):
        continue
      path = os.path.join(directory, name)
      parts = os.path.relpath(path, PACKAGE)[:-3].split(os.sep)
      if parts == ["__init__"]:
        continue
      source = _node(parts)
      with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
      for item in ast.walk(tree):
        if isinstance(item, ast.Import):
          modules = [alias.name for alias in item.names]
        elif isinstance(item, ast.ImportFrom) and item.module and not item.level:
          modules = [f"{item.module}.{alias.name}" for alias in item.names]
        else:
          continue
        for module in modules:
          target_parts = module.split(".")
          if target_parts[0] in TOOL_PACKAGES:
            target = TOOL_PACKAGES[target_parts[0]]
          elif target_parts[0] == "tfbert" and len(target_parts) > 1:
            target = _node(target_parts[1:])
          else:
            continue
          if target != source:
            where = f"{os.path.relpath(path, helpers.ROOT)}:{item.lineno}"
            edges.setdefault(source, {}).setdefault(target, []).append(where)
  return edges


def cycles(edges: dict[str, dict[str, list[str]]]) -> list[list[str]]:
  """The strongly connected components with more than one node (Tarjan's algorithm), each
  sorted; [] for an acyclic graph."""
  index, low, stack, on_stack, found = {}, {}, [], set(), []
  counter = [0]

  def visit(node):
    index[node] = low[node] = counter[0]
    counter[0] += 1
    stack.append(node)
    on_stack.add(node)
    for target in edges.get(node, {}):
      if target not in index:
        visit(target)
        low[node] = min(low[node], low[target])
      elif target in on_stack:
        low[node] = min(low[node], index[target])
    if low[node] == index[node]:
      component = []
      while True:
        member = stack.pop()
        on_stack.discard(member)
        component.append(member)
        if member == node:
          break
      if len(component) > 1:
        found.append(sorted(component))

  for node in sorted(set(edges) | {t for targets in edges.values() for t in targets}):
    if node not in index:
      visit(node)
  return sorted(found)


def _describe(edges, component):
  return "; ".join(f"{a} -> {b} ({edges[a][b][0]})" for a in component
                   for b in component if b in edges.get(a, {}))


def test_the_package_graph_is_acyclic():
  edges = import_graph()
  found = cycles(edges)
  assert found == [], [_describe(edges, component) for component in found]


def test_the_check_finds_a_cycle_when_one_is_made():
  """The same check on the real graph with one deliberate back edge: the encoder importing
  the alignment harness (which imports, through the models, the encoder)."""
  edges = import_graph()
  assert "encoder" in edges and "alignment" in edges
  edges["encoder"] = {**edges["encoder"], "alignment": ["deliberate"]}
  found = cycles(edges)
  assert len(found) == 1 and {"alignment", "encoder"} <= set(found[0]), found
  assert cycles({"a": {"b": ["x"]}, "b": {"c": ["y"]}, "c": {"a": ["z"]}, "d": {"a": ["w"]}}) \
      == [["a", "b", "c"]]


def test_no_tfbert_module_imports_the_tools_or_their_flags():
  edges = import_graph()
  wrong = {source: targets[name] for source, targets in edges.items()
           for name in ("tools", "flags") if name in targets}
  assert wrong == {}
