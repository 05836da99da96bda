"""BUILD must mirror the layout: a target per module, test and tool, with true deps.

Bazel cannot be installed here, so this test keeps BUILD from rotting: it derives every
target (py_library per module of `tfbert/`, `flags/` and the packages under `tools/`, py_test
per `tests/**/*_test.py`, py_binary per `tools/*.py`, one testonly py_library for the shared
test helpers) and its
dependencies from the source tree and its imports, and compares with the committed BUILD.

To regenerate BUILD after adding a file: `.venv/bin/python tests/build_test.py`.
"""

import ast
import difflib
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Third-party import name -> PyPI requirement (rules_python `requirement()`).
THIRD_PARTY = {
    "absl": "absl-py", "keras": "keras", "numpy": "numpy", "official": "tf-models-official",
    "pytest": "pytest", "safetensors": "safetensors", "scipy": "scipy",
    "sklearn": "scikit-learn", "tensorflow": "tensorflow", "tensorflow_text": "tensorflow-text",
    "tf_keras": "tf-keras", "seqeval": "seqeval", "matplotlib": "matplotlib",
    "onnx": "onnx", "onnxruntime": "onnxruntime",
    "tf2onnx": "tf2onnx", "ai_edge_litert": "ai-edge-litert",
}
HELPERS = "test_helpers"  # tests/ modules that are not *_test.py files.
FOLDERS = ("tfbert", "flags", "tests", "tools")

HEADER = '''# Bazel targets mirroring the layout; checked against the sources by tests/build_test.py
# (regenerate with `.venv/bin/python tests/build_test.py`). Third-party packages come from
# requirements.txt through rules_python's pip integration.
load("@pypi//:requirements.bzl", "requirement")
load("@rules_python//python:defs.bzl", "py_binary", "py_library", "py_test")

package(default_visibility = ["//visibility:public"])
'''


def _python_files(folder):
  """The .py files under `folder` (recursively), as sorted repository-relative paths."""
  found = []
  for parent, dirs, files in os.walk(os.path.join(ROOT, folder)):
    dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__"))]
    rel = os.path.relpath(parent, ROOT)
    found += [f"{rel}/{f}" for f in files if f.endswith(".py")]
  return sorted(found)


def _target_of(path):
  """tfbert/layers/attention.py -> tfbert_layers_attention; a package's __init__ -> the
  package; tests: the test's name, or the shared helpers; tools/*.py -> the tool's name."""
  parts = path[:-3].split("/")
  if parts[0] == "tests":
    return parts[-1] if parts[-1].endswith("_test") else HELPERS
  if parts[0] == "tools" and len(parts) == 2 and parts[1] != "__init__":
    return parts[1]
  if parts[-1] == "__init__":
    parts = parts[:-1]
  return "_".join(parts)


# Folders installed (and imported) under another name (pyproject.toml's package-dir).
IMPORT_NAMES = {"tools": "tfbert_tools", "flags": "tfbert_flags"}


def _module_of(path):
  top, _, rest = path[:-3].partition("/")
  return f"{IMPORT_NAMES.get(top, top)}/{rest}".replace("/", ".").removesuffix(".__init__")


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
  modules = {_module_of(p): p for f in FOLDERS for p in _python_files(f)}
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
  for folder in FOLDERS:
    for path in _python_files(folder):
      targets.setdefault(_target_of(path), []).append(path)
  parts = [HEADER]
  for name, srcs in sorted(targets.items()):
    deps = _deps(srcs, name)
    if name == HELPERS:
      parts.append(_rule("py_library", name, srcs, deps, ["    testonly = True,"]))
    elif srcs[0].startswith("tests/"):
      parts.append(_rule("py_test", name, srcs, deps, ['    size = "large",']))
    elif srcs[0].startswith("tools/") and srcs[0].count("/") == 1 and name != "tools":
      parts.append(_rule("py_binary", name, srcs, deps))
    else:
      parts.append(_rule("py_library", name, srcs, deps))
  return "\n".join(parts)


def test_build_lists_every_module_test_and_tool_with_true_deps():
  with open(os.path.join(ROOT, "BUILD"), encoding="utf-8") as f:
    actual = f.read()
  want = expected_build()
  diff = "".join(difflib.unified_diff(actual.splitlines(True), want.splitlines(True),
                                      "BUILD (committed)", "BUILD (from the sources)"))
  assert actual == want, ("BUILD is out of date; regenerate with "
                          "`.venv/bin/python tests/build_test.py`:\n" + diff)


def _test_file_of(path):
  """The test file of a library module: tfbert/<package>/<module>.py ->
  tests/<package>/<module>_test.py (tools/<package>/... likewise)."""
  parts = path[:-3].split("/")
  return "/".join(["tests", *parts[1:-1], parts[-1] + "_test.py"])


def test_every_library_module_has_a_test_file():
  modules = [p for f in ("tfbert", "tools/benchmarks", "tools/demos") for p in _python_files(f)
             if not p.endswith("__init__.py")]
  missing = [_test_file_of(m) for m in modules
             if not os.path.exists(os.path.join(ROOT, _test_file_of(m)))]
  assert not missing, f"modules without their test file: {missing}"


def test_tests_mirror_the_layout():
  strays = [t for t in _python_files("tests") if t.endswith("_test.py") and t.count("/") > 1
            and not any(_test_file_of(m) == t for f in ("tfbert", "tools")
                        for m in _python_files(f))]
  assert not strays, f"tests in a subfolder that mirrors no module: {strays}"


@pytest.mark.slow
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
