"""Tests for tools.demos.pretraining_demo (the README main job's pretraining part).

The demo's run itself (300 steps: it learns, exports a SavedModel and a Google checkpoint,
prints tfbert's lines only) is checked where the SQuAD part fine-tunes it,
tests/demos/squad_demo_test.py: one run serves both parts' proofs.
"""

import os

from tfbert_tools.demos import pretraining_demo


def test_the_summary_names_the_data_both_logs_the_exports_and_how_to_resume(tmp_path):
  row = {"loss": 7.25, "mlm_accuracy": 0.0125, "nsp_accuracy": 0.5, "examples_per_second": 81}
  summary = pretraining_demo.DemoSummary(
      str(tmp_path / "data"), 1234, str(tmp_path / "run"), {**row, "step": 25},
      {**row, "loss": 5.5, "step": 300})
  lines = summary.format().splitlines()
  assert lines[0] == (f"pretraining data: 1234 instances from pydoc_data.topics in "
                      f"{tmp_path / 'data'}")
  assert lines[1] == ("first log (step 25): loss=7.25 mlm_accuracy=0.0125 nsp_accuracy=0.5 "
                      "examples_per_second=81")
  assert lines[2].startswith("last log  (step 300): loss=5.5 ")
  google = os.path.join(str(tmp_path / "run"), "export", "google", "bert_model.ckpt")
  assert summary.google_checkpoint == google
  assert lines[4] == (f"exports: {tmp_path / 'run' / 'export' / 'saved_model'} "
                      f"(serving_default) and {google}")
  assert lines[5] == ("rerun the same command to resume; view logs with: tensorboard "
                      f"--logdir {tmp_path / 'run'}")
