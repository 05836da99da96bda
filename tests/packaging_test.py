"""tfbert installs as a package that claims only its own names, and the library stays free
of the lab's dependencies.

The repository keeps `tools/` and `flags/` at the top level; pyproject.toml installs them as
`tfbert_tools` and `tfbert_flags`, so `pip install` adds no generic top-level `tools` or
`flags` package to site-packages.
"""

import ast
import configparser
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest

from tests import helpers

with open(os.path.join(helpers.ROOT, "pyproject.toml"), "rb") as _f:
  PYPROJECT = tomllib.load(_f)
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
OWN_NAMES = {"tfbert", "tfbert_tools", "tfbert_flags"}


def _source_packages() -> set[str]:
  """Every folder with an __init__.py under tfbert/, tools/ and flags/, by import name."""
  names = {folder: name for name, folder in SETUPTOOLS["package-dir"].items()}
  found = set()
  for folder in ("tfbert", "tools", "flags"):
    for parent, dirs, files in os.walk(os.path.join(helpers.ROOT, folder)):
      dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
      if "__init__.py" in files:
        parts = os.path.relpath(parent, helpers.ROOT).split(os.sep)
        found.add(".".join([names.get(parts[0], parts[0])] + parts[1:]))
  return found


# In a fresh process where matplotlib and tf_keras cannot be imported (as if not installed;
# Keras itself imports matplotlib when it can, so "not loaded" is shown by "not needed"):
# import tfbert, train a tiny BertPretrainer one step with the full optimizer stack, and
# report which of the lab's modules got loaded.
_TRAIN_ONE_STEP = """
import json, sys
sys.modules["matplotlib"] = sys.modules["tf_keras"] = None  # Their imports now fail.
import numpy as np
import tfbert
from tfbert.training import optimization
config = tfbert.BertConfig(vocab_size=53, hidden_size=16, num_hidden_layers=1,
                           num_attention_heads=2, intermediate_size=19,
                           max_position_embeddings=11)
model = tfbert.BertPretrainer(config)
model.compile(optimizer=tfbert.create_optimizer(optimization.OptimizerConfig(
    optimizer="adamw", learning_rate=1e-3, num_train_steps=2, gradient_accumulation_steps=1)))
rng = np.random.default_rng(0)
batch = {"input_ids": rng.integers(0, 53, (3, 11)).astype("int32"),
         "input_mask": np.ones((3, 11), "int32"), "segment_ids": np.zeros((3, 11), "int32"),
         "masked_lm_positions": np.array([[1, 2]] * 3, "int32"),
         "masked_lm_ids": np.array([[4, 5]] * 3, "int32"),
         "masked_lm_weights": np.ones((3, 2), "float32"),
         "next_sentence_labels": np.zeros((3, 1), "int32")}
logs = model.train_on_batch(batch, return_dict=True)
loaded = [m for m, module in sys.modules.items() if module is not None and (
    m.split(".")[0] in ("tf_keras", "matplotlib", "tools", "flags", "tfbert_tools",
                        "tfbert_flags")
    or m.startswith(("official.nlp.modeling", "official.modeling", "official.core")))]
print(json.dumps({"loss": float(logs["loss"]), "loaded": sorted(loaded)}))
"""


@pytest.mark.slow
def test_training_with_the_library_loads_no_lab_dependency(tmp_path):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  env.pop("PYTHONPATH", None)  # tfbert as installed (bootstrap.sh: pip install -e .).
  run = subprocess.run([sys.executable, "-c", _TRAIN_ONE_STEP], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300, check=False)
  assert run.returncode == 0, run.stderr[-3000:]
  report = json.loads(run.stdout.strip().splitlines()[-1])
  assert report["loss"] > 0
  assert report["loaded"] == []


def test_the_package_list_is_the_source_tree_under_tfbert_names():
  assert set(SETUPTOOLS["packages"]) == _source_packages()
  assert {name.split(".")[0] for name in SETUPTOOLS["packages"]} == OWN_NAMES
  assert SETUPTOOLS["package-dir"] == {"tfbert_tools": "tools", "tfbert_flags": "flags"}


@pytest.mark.slow  # ~15 s: builds the wheel.
def test_the_wheel_has_only_tfbert_names_every_tool_and_no_test(tmp_path):
  source = tmp_path / "source"
  for name in ("tfbert", "tools", "flags"):
    shutil.copytree(os.path.join(helpers.ROOT, name), source / name,
                    ignore=shutil.ignore_patterns("__pycache__"))
  for name in ("pyproject.toml", "README.md"):
    shutil.copy(os.path.join(helpers.ROOT, name), source / name)
  subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                  "--no-build-isolation", "--wheel-dir", str(tmp_path / "wheel"), str(source)],
                 check=True, capture_output=True, cwd=tmp_path)
  [wheel] = os.listdir(tmp_path / "wheel")
  with zipfile.ZipFile(tmp_path / "wheel" / wheel) as archive:
    names = archive.namelist()
    top = {name.split("/")[0] for name in names}
    info = next(t for t in top if t.endswith(".dist-info"))
    assert top - {info} == OWN_NAMES  # No `tools`, no `flags`, no `tests`.
    assert "tfbert/pretraining/pretraining_run.py" in names
    entry_points = configparser.ConfigParser()
    entry_points.read_string(archive.read(f"{info}/entry_points.txt").decode("utf-8"))
    scripts = dict(entry_points["console_scripts"])
    assert scripts == PYPROJECT["project"]["scripts"]
    tools = sorted(f[:-3] for f in os.listdir(os.path.join(helpers.ROOT, "tools"))
                   if f.endswith(".py") and f != "__init__.py")
    # Every tool is an installed command.
    assert sorted(scripts) == sorted(f"tfbert-{tool.replace('_', '-')}" for tool in tools)
    for command, target in scripts.items():
      module, function = target.split(":")
      path = module.replace(".", "/") + ".py"
      assert path in names, (command, path)
      tree = ast.parse(archive.read(path).decode("utf-8"))
      assert function in {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}, (
          command, target)


def test_the_version_is_the_one_pyproject_declares():
  import importlib.metadata

  import tfbert
  assert tfbert.__version__ == PYPROJECT["project"]["version"]
  # The installed distribution (bootstrap.sh installs this tree) says the same.
  assert importlib.metadata.version("tfbert") == tfbert.__version__
