"""Tests for tools.demos.pretraining_demo (the README main job's pretraining part), shortened."""

import json
import logging
import os

import pytest

from tests.demos import output_noise
from tfbert_tools.demos import pretraining_demo


@pytest.mark.slow
def test_demo_pretrains_exports_and_learns(tmp_path, capfd, caplog):
  caplog.set_level(logging.WARNING, logger="tensorflow")
  summary = pretraining_demo.run_pretraining_demo(str(tmp_path), steps=60, log_steps=20)
  # Trained (XLA-compiled kernels) and exported (a frozen model): tfbert's lines only.
  printed = capfd.readouterr()
  assert output_noise.noise(printed.out + printed.err) == []
  assert output_noise.noise_records(caplog.records) == []
  assert summary.instances > 1000  # pydoc_data.topics, dupe_factor 2
  assert [summary.first["step"], summary.last["step"]] == [20, 60]
  assert summary.last["loss"] < summary.first["loss"] - 1.0  # it learns
  run = summary.model_dir
  assert json.load(open(os.path.join(run, "run_config.json")))["dtype"] == "mixed_bfloat16"
  assert os.path.exists(os.path.join(run, "export", "saved_model", "saved_model.pb"))
  text = summary.format()
  assert "tensorboard --logdir" in text and "instances from pydoc_data.topics" in text
