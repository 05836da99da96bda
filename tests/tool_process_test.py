"""Tests for tests/tool_process.py: tools run one after another in this process, each as in a
fresh one."""

import pytest
from absl import flags

from tests import tool_process


@pytest.fixture
def clashing_flag():
  """A flag another module defined under a tool's flag name: Model Garden's
  create_pretraining_data's `max_seq_length` where a peer test imported it in this worker,
  else one defined here."""
  if "max_seq_length" in flags.FLAGS:
    yield flags.FLAGS["max_seq_length"]
    return
  flags.DEFINE_integer("max_seq_length", 512, "Another module's flag.")
  yield flags.FLAGS["max_seq_length"]
  delattr(flags.FLAGS, "max_seq_length")


def test_a_tool_defines_its_flags_though_another_module_has_one_of_their_names(clashing_flag):
  default = clashing_flag.default
  run = tool_process.run_tool("run_pretraining", "--helpshort")
  assert run.returncode == 1 and "--max_seq_length:" in run.stdout, run.stderr[-2000:]
  # The other module's flag is back afterwards, with its own default.
  assert flags.FLAGS["max_seq_length"] is clashing_flag
  assert clashing_flag.default == default


def test_tools_sharing_flag_names_run_in_turn_each_from_its_own_flags():
  known = set(flags.FLAGS)
  for tool in ("run_classifier", "run_ner", "run_classifier"):
    run = tool_process.run_tool(tool, "--helpshort")
    assert run.returncode == 1 and "--output_dir:" in run.stdout, (tool, run.stderr[-2000:])
  assert set(flags.FLAGS) == known  # Every tool flag is forgotten again.
  bad = tool_process.run_tool("run_classifier", "--task_name=mnli-mm")  # Not a GLUE task.
  assert bad.returncode == 1 and "--task_name=mnli-mm" in bad.stderr
