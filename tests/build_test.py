"""BUILD must mirror the layout: a target per module, test and tool, with true deps.

Bazel cannot be installed here, so this test keeps BUILD from rotting: it derives every
target (py_library per `tfbert/` and `flags/` module, py_test per `tests/*_test.py`,
py_binary per `tools/*.py`, one testonly py_library for the shared test helpers) and its
dependencies from the source tree and its imports, and compares with the committed BUILD.

To regenerate BUILD after adding a file: `.venv/bin/python tests/build_test.py`.
"""

import ast
import difflib
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Third-party import name -> PyPI requirement (rules_python `requirement()`).
THIRD_PARTY = {
    "absl": "absl-py", "keras": "keras", "numpy": "numpy", "official": "tf-models-official",
    "pytest": "pytest", "safetensors": "safetensors", "scipy": "scipy",
    "sklearn": "scikit-learn", "tensorflow": "tensorflow", "tensorflow_text": "tensorflow-text",
    "tf_keras": "tf-keras",
}
HELPERS = "test_helpers"  # tests/ modules that are not *_test.py files.

HEADER = '''# Bazel targets mirroring the layout; checked against the sources by tests/build_test.py
# (regenerate with `.venv/bin/python tests/build_test.py`). Third-party packages come from
# requirements.txt through rules_python's pip integration.
load("@pypi//:requirements.bzl", "requirement")
load("@rules_python//python:defs.bzl", "py_binary", "py_library", "py_test")

package(default_visibility = ["//visibility:public"])
'''


def _python_files(folder):
  path = os.path.join(ROOT, folder)
  return sorted(f"{folder}/{f}" for f in os.listdir(path) if f.endswith(".py"))


def _target_of(path):
  folder, name = path[:-3].split("/")
  if folder == "tests":
    return name if name.endswith("_test") else HELPERS
  if folder == "tools":
    return name
  return f"{folder}_{name}" if name != "__init__" else folder


def _imports(path):
  with open(os.path.join(ROOT, path), encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names.update(a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      names.add(node.module)
      names.update(f"{node.module}.{a.name}" for a in node.names)
  return names


def _deps(paths, own):
  local, external = set(), set()
  modules = {p[:-3].replace("/", ".").replace(".__init__", ""): p
             for f in ("tfbert", "flags", "tests") for p in _python_files(f)}
  for path in paths:
    for name in _imports(path):
      if name in modules and _target_of(modules[name]) != own:
        local.add(_target_of(modules[name]))
      top = name.split(".")[0]
      if top in THIRD_PARTY:
        external.add(THIRD_PARTY[top])
  return sorted(f":{d}" for d in local) + sorted(f'requirement("{e}")' for e in external)


def _rule(kind, name, srcs, deps, extra=()):
  lines = [f"{kind}(", f'    name = "{name}",',
           "    srcs = [" + ", ".join(f'"{s}"' for s in srcs) + "],", *extra]
  if deps:
    quoted = [d if d.startswith("requirement(") else f'"{d}"' for d in deps]
    lines += ["    deps = ["] + [f"        {d}," for d in quoted] + ["    ],"]
  return "\n".join(lines) + "\n)\n"


def expected_build():
  """The BUILD text that the current source tree calls for."""
  targets = {}
  for folder in ("tfbert", "flags", "tests", "tools"):
    for path in _python_files(folder):
      targets.setdefault(_target_of(path), []).append(path)
  parts = [HEADER]
  for name, srcs in sorted(targets.items()):
    folder = srcs[0].split("/")[0]
    deps = _deps(srcs, name)
    if folder in ("tfbert", "flags"):
      parts.append(_rule("py_library", name, srcs, deps))
    elif name == HELPERS:
      parts.append(_rule("py_library", name, srcs, deps, ["    testonly = True,"]))
    elif folder == "tests":
      parts.append(_rule("py_test", name, srcs, deps, ['    size = "large",']))
    else:
      parts.append(_rule("py_binary", name, srcs, deps))
  return "\n".join(parts)


def test_build_lists_every_module_test_and_tool_with_true_deps():
  with open(os.path.join(ROOT, "BUILD"), encoding="utf-8") as f:
    actual = f.read()
  want = expected_build()
  diff = "".join(difflib.unified_diff(actual.splitlines(True), want.splitlines(True),
                                      "BUILD (committed)", "BUILD (from the sources)"))
  assert actual == want, ("BUILD is out of date; regenerate with "
                          "`.venv/bin/python tests/build_test.py`:\n" + diff)


def test_every_library_module_has_a_test_file():
  modules = [p for f in ("tfbert",) for p in _python_files(f) if not p.endswith("__init__.py")]
  missing = [m for m in modules
             if not os.path.exists(os.path.join(ROOT, "tests", os.path.basename(m)[:-3] + "_test.py"))]
  assert not missing, f"modules without tests/<module>_test.py: {missing}"


def test_a_module_missing_from_build_is_detected(tmp_path, monkeypatch):
  # The check above must be able to fail: pretend a new module appeared.
  new = os.path.join(ROOT, "tfbert", "zz_new_module_for_build_test.py")
  with open(new, "w") as f:
    f.write('"""Temporary."""\n')
  try:
    with open(os.path.join(ROOT, "BUILD"), encoding="utf-8") as f:
      assert f.read() != expected_build()
    assert 'name = "tfbert_zz_new_module_for_build_test"' in expected_build()
  finally:
    os.remove(new)


if __name__ == "__main__":
  with open(os.path.join(ROOT, "BUILD"), "w", encoding="utf-8") as f:
    f.write(expected_build())
  print("wrote", os.path.join(ROOT, "BUILD"), file=sys.stderr)
