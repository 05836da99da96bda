"""tfbert installs as a package, and the library stays free of the lab's dependencies."""

import json
import os
import subprocess
import sys
import zipfile

from tests import helpers

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
    m.split(".")[0] in ("tf_keras", "matplotlib", "tools", "flags")
    or m.startswith(("official.nlp.modeling", "official.modeling", "official.core")))]
print(json.dumps({"loss": float(logs["loss"]), "loaded": sorted(loaded)}))
"""


def test_training_with_the_library_loads_no_lab_dependency(tmp_path):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  env.pop("PYTHONPATH", None)  # tfbert as installed (bootstrap.sh: pip install -e .).
  run = subprocess.run([sys.executable, "-c", _TRAIN_ONE_STEP], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300, check=False)
  assert run.returncode == 0, run.stderr[-3000:]
  report = json.loads(run.stdout.strip().splitlines()[-1])
  assert report["loss"] > 0
  assert report["loaded"] == []


def test_the_wheel_holds_the_library_tools_and_flags_and_their_commands(tmp_path):
  build = subprocess.run(
      [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
       "-w", str(tmp_path), helpers.ROOT], capture_output=True, text=True, timeout=300,
      check=False)
  assert build.returncode == 0, build.stderr[-3000:]
  wheels = [f for f in os.listdir(tmp_path) if f.endswith(".whl")]
  assert len(wheels) == 1, wheels
  with zipfile.ZipFile(tmp_path / wheels[0]) as wheel:
    names = wheel.namelist()
    entry_points = next(wheel.read(n).decode() for n in names
                        if n.endswith(".dist-info/entry_points.txt"))
  packages = {os.path.dirname(n) for n in names if n.endswith("/__init__.py")}
  for package in ("tfbert", "tfbert/layers", "tfbert/training", "tfbert/squad", "tools",
                  "tools/benchmarks", "tools/demos", "flags"):
    assert package in packages, package
  assert not any(n.startswith("tests/") for n in names)  # Tests are not shipped.
  assert "tfbert/pretraining/pretraining_run.py" in names
  tools = sorted(f[:-3] for f in os.listdir(os.path.join(helpers.ROOT, "tools"))
                 if f.endswith(".py") and f != "__init__.py")
  for tool in tools:  # Every tool is an installed command.
    assert f"tfbert-{tool.replace('_', '-')} = tools.{tool}:run" in entry_points, tool
