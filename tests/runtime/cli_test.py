"""tfbert.runtime.cli and the tools' shared behaviour: one-line errors, --traceback, --help, quiet
start."""

import logging
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from tests import helpers
from tfbert.runtime import cli

REPO = helpers.ROOT
# Every tool, with one flag its own flags module defines (must be listed by --help).
TOOL_FLAGS = {
    "align": "--variants", "benchmark": "--benchmark", "convert_checkpoint": "--input_format",
    "create_pretraining_data": "--max_predictions_per_seq", "demo": "--pretrain_steps",
    "evaluate_squad": "--na_prob_file", "run_classifier": "--task_name",
    "evaluate_ner": "--tag_scheme", "run_ner": "--doc_stride",
    "run_pretraining": "--save_checkpoints_steps", "run_squad": "--doc_stride",
    "export_onnx": "--opset", "export_tflite": "--quantize",
}
# Flags each tool must also list: shared ones adopted from other flags modules.
SHARED_FLAGS = {
    "run_classifier": ["--init_hf_dir", "--allow_config_change", "--export_dtype"],
    "run_squad": ["--learning_rate", "--allow_config_change", "--allow_casing_mismatch",
                  "--export_dtype"],
    "run_pretraining": ["--allow_config_change", "--export_dtype"],
    "run_ner": ["--learning_rate", "--tag_column", "--allow_config_change", "--export_dtype"],
    "convert_checkpoint": ["--do_lower_case", "--allow_casing_mismatch"],
    "create_pretraining_data": ["--do_lower_case", "--allow_casing_mismatch"],
    "export_tflite": ["--do_lower_case", "--allow_casing_mismatch"],
}


def _env():
  return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def _tool(name, *args):
  return subprocess.Popen([sys.executable, f"tools/{name}.py", *args], cwd=REPO, env=_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_one_line_keeps_the_first_line_of_an_op_error():
  error = tf.errors.InvalidArgumentError(None, None, "input_ids holds 40 at [0, 3]\n\t [[{{node "
                                         "GatherV2}}]]\nGraph trace ...")
  assert cli.one_line(error) == "input_ids holds 40 at [0, 3]"


def test_one_line_names_the_file_of_an_os_error():
  assert cli.one_line(FileNotFoundError(2, "No such file or directory", "a/vocab.txt")) == \
      "[Errno 2] No such file or directory: 'a/vocab.txt'"
  assert cli.one_line(FileNotFoundError(2, "No such file")) == "[Errno 2] No such file"


@pytest.mark.slow
def test_every_tools_help_lists_its_own_flags():
  runs = {name: _tool(name, "--help") for name in TOOL_FLAGS}
  for name, process in runs.items():
    out, err = process.communicate(timeout=240)
    assert out, (name, err[-2000:])  # absl's --help exits with status 1.
    for flag in [TOOL_FLAGS[name], "--traceback", *SHARED_FLAGS.get(name, [])]:
      shown = (flag, flag.replace("--", "--[no]"))  # Booleans show as --[no]name.
      assert any(f"  {s}:" in out for s in shown), (name, flag, out[:2000])
    assert "cuInit" not in err, (name, err)


def test_an_expected_error_is_one_line_and_exit_status_1(tmp_path):
  missing = tmp_path / "dev-v1.1.json"
  process = _tool("evaluate_squad", str(missing), str(tmp_path / "predictions.json"))
  out, err = process.communicate(timeout=240)
  assert process.returncode == 1
  assert err.strip().splitlines() == [err.strip()], err
  assert err.startswith("evaluate_squad: error: ") and str(missing) in err
  assert "cuInit" not in err and "Traceback" not in err
  assert out == ""


def test_traceback_flag_shows_the_whole_trace(tmp_path):
  process = _tool("evaluate_squad", str(tmp_path / "x.json"), str(tmp_path / "y.json"),
                  "--traceback")
  _, err = process.communicate(timeout=240)
  assert process.returncode == 1
  assert "Traceback (most recent call last)" in err and "FileNotFoundError" in err


_PROBE = """
import os, sys
import tensorflow as tf
from tfbert.runtime import cli
def noisy():
  os.write(2, b"E cuda_platform.cc:51] failed call to cuInit: INTERNAL: CUDA error\\n"
              b"W a real warning\\n")
tf.config.list_physical_devices = noisy
cli.quiet_device_probe()
"""


def test_the_device_probe_drops_only_the_no_driver_noise():
  run = subprocess.run([sys.executable, "-c", _PROBE], cwd=REPO, env={**_env(), "PYTHONPATH": REPO},
                       capture_output=True, text=True, timeout=240, check=False)
  assert run.returncode == 0, run.stderr
  assert run.stderr == "W a real warning\n"


def test_a_bug_keeps_its_traceback():
  def main(argv):
    del argv
    raise KeyError("a bug")

  class Flag:
    value = False

  with pytest.raises(KeyError):
    cli.guarded(main, Flag(), "tool")([])


def test_one_line_joins_a_multi_line_message_and_caps_its_length():
  error = ValueError("2 weights missing from the source:\n  bert/pooler/dense/bias\n  x")
  assert cli.one_line(error) == "2 weights missing from the source: bert/pooler/dense/bias x"
  long = cli.one_line(ValueError("y" * 5000), limit=100)
  assert len(long) <= 100 and long.endswith("(--traceback shows all)")


def test_logging_is_plain_info_to_stdout_problems_to_stderr(capsys):
  root = logging.getLogger()
  saved = (list(root.handlers), root.level)
  try:
    cli.plain_logging()
    logging.getLogger("tfbert.x").info("read 12 features")
    logging.getLogger("tensorflow").warning("a real warning")
    captured = capsys.readouterr()
  finally:
    for handler in list(root.handlers):
      root.removeHandler(handler)
    for handler in saved[0]:
      root.addHandler(handler)
    root.setLevel(saved[1])
  assert captured.out == "read 12 features\n"
  assert captured.err == "WARNING: a real warning\n"
