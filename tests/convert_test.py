"""Tests for tfbert.convert and tools/convert_checkpoint.py."""

import os
import subprocess
import sys

import numpy as np
import pytest

from tests import helpers, numpy_reference
from tfbert import BertClassifier, BertEncoder, BertPretrainer, BertSpanLabeler, convert
from tfbert.google_checkpoint import read_google_checkpoint, write_google_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_google_to_hf_to_tfbert_to_google_is_bit_exact(shared_data, tmp_path):
  prefix = os.path.join(shared_data, "keras_bert_test_checkpoint", "bert_model.ckpt")
  convert.convert_checkpoint("google", prefix, "hf", str(tmp_path / "hf"))
  convert.convert_checkpoint("hf", str(tmp_path / "hf"), "tfbert", str(tmp_path / "m.keras"))
  model = convert.convert_checkpoint("tfbert", str(tmp_path / "m.keras"), "google",
                                     str(tmp_path / "g" / "bert_model.ckpt"))
  assert isinstance(model, BertPretrainer)
  original = read_google_checkpoint(prefix)
  final = read_google_checkpoint(str(tmp_path / "g" / "bert_model.ckpt"))
  assert len(final) == 46
  for name, value in final.items():
    np.testing.assert_array_equal(value, original[name])


@pytest.mark.parametrize("extra, cls", [
    ({}, BertEncoder),
    ({"cls/squad/output_weights": (2, 32), "cls/squad/output_bias": (2,)}, BertSpanLabeler),
    ({"output_weights": (5, 32), "output_bias": (5,)}, BertClassifier),
])
def test_model_class_follows_the_heads_present(extra, cls, tmp_path):
  config = helpers.odd_config()
  weights = {k: v for k, v in numpy_reference.random_google_weights(config.to_dict(), 0).items()
             if k.startswith("bert/")}
  weights.update({k: np.ones(s, np.float32) for k, s in extra.items()})
  write_google_checkpoint(weights, str(tmp_path / "bert_model.ckpt"))
  config.to_json_file(str(tmp_path / "bert_config.json"))
  model = convert.read_model("google", str(tmp_path / "bert_model.ckpt"))
  assert type(model) is cls
  if cls is BertClassifier:
    assert model.num_classes == 5


def test_bad_format_and_paths_are_named(tmp_path):
  with pytest.raises(ValueError, match="unknown checkpoint format 'onnx'"):
    convert.read_model("onnx", "x")
  with pytest.raises(FileNotFoundError, match="missing.keras"):
    convert.read_model("tfbert", str(tmp_path / "missing.keras"))
  with pytest.raises(ValueError, match="must end in .keras"):
    convert.write_model(BertEncoder(helpers.odd_config()), "tfbert", str(tmp_path / "m.h5"))


def test_command_line_tool_converts(shared_data, tmp_path):
  prefix = os.path.join(shared_data, "keras_bert_test_checkpoint", "bert_model.ckpt")
  result = subprocess.run(
      [sys.executable, os.path.join(ROOT, "tools", "convert_checkpoint.py"),
       f"--input={prefix}", "--output_format=hf", f"--output={tmp_path / 'hf'}"],
      capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  assert "wrote BertPretrainer (46 weights) as hf" in result.stdout
  assert (tmp_path / "hf" / "model.safetensors").exists()
