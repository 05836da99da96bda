"""tfbert.runtime.cli and the tools' shared behaviour: one-line errors, --traceback, --help, quiet
start."""

import dataclasses
import importlib
import logging
import os
import re
import signal
import subprocess
import sys
import types
from typing import Optional

import pytest
import tensorflow as tf
from absl import flags

from tests import helpers, tool_process
from tfbert.checkpoints import pretrained
from tfbert.config import BertConfig
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


def common_flags_values(flags_module: str) -> dict:
  """`common_flags.values` of `tfbert_flags.<flags_module>`, its flags parsed from defaults."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  common_flags = importlib.import_module("tfbert_flags.common_flags")
  module = importlib.import_module(f"tfbert_flags.{flags_module}")
  flags.FLAGS(["x"])
  return common_flags.values(module)


def _env():
  return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def _tool(name, *args):
  return subprocess.Popen([sys.executable, f"tools/{name}.py", *args], cwd=REPO, env=_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_one_line_keeps_the_first_line_of_an_op_error():
  error = tf.errors.InvalidArgumentError(None, None, "input_ids holds 40 at [0, 3]\n\t [[{{node "
                                         "GatherV2}}]]\nGraph trace ...")
  assert cli.one_line(error) == "input_ids holds 40 at [0, 3]"


def test_one_line_states_the_reason_of_an_error_inside_a_tf_function():
  """Inside a tf.function an op error's first line is "Graph execution error:": the reason
  comes after the Python frames; several errors number theirs."""
  @tf.function
  def gather(indices):
    return tf.gather(tf.zeros([4, 2]), indices)

  with pytest.raises(tf.errors.InvalidArgumentError) as error:
    gather(tf.constant([7]))
  assert error.value.message.startswith("Graph execution error:")  # What TF gives.
  assert cli.one_line(error.value) == "indices[0] = 7 is not in [0, 4)"
  several = tf.errors.InvalidArgumentError(None, None, (
      "Graph execution error:\n\nDetected at node G defined at (most recent call last):\n"
      "  File \"x.py\", line 3, in f\n\n2 root error(s) found.\n  (0) INVALID_ARGUMENT:  "
      "input_ids holds 40 at [0, 3]\n\t [[{{node G}}]]\n  (1) INVALID_ARGUMENT:  same"))
  assert cli.one_line(several) == "input_ids holds 40 at [0, 3]"


def test_one_line_names_the_file_of_an_os_error():
  assert cli.one_line(FileNotFoundError(2, "No such file or directory", "a/vocab.txt")) == \
      "a/vocab.txt: No such file or directory"
  assert cli.one_line(FileNotFoundError(2, "No such file")) == "[Errno 2] No such file"
  # A directory where a file was named (a data dir holding a folder train.tsv), and back.
  assert cli.one_line(IsADirectoryError(21, "Is a directory", "d/train.tsv")) == \
      "d/train.tsv: a directory, where a file is expected"
  assert cli.one_line(NotADirectoryError(20, "Not a directory", "f/x")) == \
      "f/x: a file, where a directory is expected"


def test_one_line_names_the_output_of_a_rename_from_a_staging_path_never_the_staging_path():
  """`os.replace(staging, output)`'s error names the staging file first: the line read
  "<run>/.tfbert-tmp-5473-...: a directory, where a file is expected" (sweep 8, DF02)."""
  for staged in ("r/.tfbert-tmp-5473-7df0", "r/.tfbert-tmp-5473-7df0/eval_results.json"):
    error = IsADirectoryError(21, "Is a directory", staged, None, "r/eval_results.json")
    assert cli.one_line(error) == "r/eval_results.json: a directory, where a file is expected"
  error = OSError(18, "Invalid cross-device link", "r/a.json", None, "r/b.json")
  assert cli.one_line(error) == "r/a.json: Invalid cross-device link"  # Not a staging path.


def test_every_tools_help_lists_its_own_flags():
  # In this process (tests/tool_process.py): what --help lists is the subject, not the
  # process; that a tool starts quietly (no GPU-driver noise) is the subprocess test below.
  for name in TOOL_FLAGS:
    run = tool_process.run_tool(name, "--help")
    assert run.returncode == 1 and run.stdout, (name, run.stderr[-2000:])  # absl's --help.
    for flag in [TOOL_FLAGS[name], "--traceback", *SHARED_FLAGS.get(name, [])]:
      shown = (flag, flag.replace("--", "--[no]"))  # Booleans show as --[no]name.
      assert any(f"  {s}:" in run.stdout for s in shown), (name, flag, run.stdout[:2000])


@pytest.mark.slow
def test_an_expected_error_is_one_line_and_exit_status_1(tmp_path):
  missing = tmp_path / "dev-v1.1.json"
  process = _tool("evaluate_squad", str(missing), str(tmp_path / "predictions.json"))
  out, err = process.communicate(timeout=240)
  assert process.returncode == 1
  assert err.strip().splitlines() == [err.strip()], err
  assert err.startswith("evaluate_squad: error: ") and str(missing) in err
  assert "cuInit" not in err and "Traceback" not in err
  assert out == ""


@pytest.mark.slow
def test_traceback_flag_shows_the_whole_trace(tmp_path):
  process = _tool("evaluate_squad", str(tmp_path / "x.json"), str(tmp_path / "y.json"),
                  "--traceback")
  _, err = process.communicate(timeout=240)
  assert process.returncode == 1
  assert "Traceback (most recent call last)" in err and "FileNotFoundError" in err


_PROBE = """
import os, sys
import tensorflow as tf
from absl import flags
from tfbert.runtime import cli
def noisy():
  os.write(2, b"E cuda_platform.cc:51] failed call to cuInit: INTERNAL: CUDA error\\n"
              b"W a real warning\\n")
tf.config.list_physical_devices = noisy
cli.quiet_device_probe()
"""


@pytest.mark.slow
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


def test_a_refusal_names_the_tools_flags_as_typed_and_no_config_class():
  names = ["max_seq_length", "train_file", "output_dir", "task", "do_eval"]
  line = ("NerRunConfig: max_seq_length (2) must be >= 3; do_eval needs train_file; "
          "the task reads /data/train_file/x.tsv and train_file.tsv; run_config.json records "
          "\"max_seq_length\": 3; --output_dir x; output_dir=/tmp/o")
  assert cli.in_flag_words(line, names) == (
      "--max_seq_length (2) must be >= 3; --do_eval needs --train_file; the task reads "
      "/data/train_file/x.tsv and train_file.tsv; run_config.json records "
      "\"max_seq_length\": 3; --output_dir x; --output_dir=/tmp/o")
  # Outside a tool (no flags known) only the class goes.
  assert cli.in_flag_words("SquadRunConfig: doc_stride (0) must be >= 1", []) == (
      "doc_stride (0) must be >= 1")


def test_one_line_joins_a_multi_line_message_and_caps_its_length():
  error = ValueError("2 weights missing from the source:\n  bert/pooler/dense/bias\n  x")
  assert cli.one_line(error) == "2 weights missing from the source: bert/pooler/dense/bias x"
  long = cli.one_line(ValueError("y" * 5000), limit=100)
  assert len(long) <= 100 and long.endswith("(cut: --traceback shows all)")
  # The head names the problem and the tail says what to do (sweep 13 P2: a long list of
  # files cut the remedy off): both are kept, the middle cut.
  listed = cli.one_line(ValueError("run holds other data: " + "a.tfrecord; " * 200
                                   + "use another directory"), limit=200)
  assert len(listed) <= 200 and listed.startswith("run holds other data: a.tfrecord; ")
  assert listed.endswith("use another directory (cut: --traceback shows all)"), listed


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


@dataclasses.dataclass(frozen=True)
class _Inner:
  doc_stride: int = 5
  clip_norm: Optional[float] = 1.0


@dataclasses.dataclass(frozen=True)
class _Outer:
  output_dir: str
  inner: _Inner = _Inner()
  seed: int = 3
  custom: Optional[str] = None


def test_a_config_is_built_by_name_nested_fields_and_converters_included():
  values = {"output_dir": "runs/x", "doc_stride": 7, "clip_norm": 0.0, "unrelated": 1}
  config = cli.config_from_values(_Outer, values, {"clip_norm": cli.zero_is_none},
                                  custom="given")
  assert config == _Outer("runs/x", _Inner(7, None), 3, "given")
  assert cli.config_from_values(_Outer, {"output_dir": "y", "clip_norm": 2.5}).inner == \
      _Inner(5, 2.5)
  assert cli.setting_names(_Outer) == {"output_dir", "doc_stride", "clip_norm", "seed", "custom"}


def test_a_config_without_a_required_value_or_with_a_stray_one_is_refused():
  with pytest.raises(ValueError, match=r"_Outer.output_dir: no value given and no default"):
    cli.config_from_values(_Outer, {"seed": 1})
  with pytest.raises(TypeError, match="_Outer has no field colour"):
    cli.config_from_values(_Outer, {"output_dir": "x"}, colour="red")


# Per training tool: its flags module, its config, the flags that are not settings of the
# config (the tool reads them itself) and the config's settings that have no flag (their
# defaults or the tool's explicit values hold).
_TOOL_CONFIGS = {
    "run_classifier": ("run_classifier_flags", "tfbert.classifier.classifier_run",
                       "ClassifierRunConfig",
                       {"traceback", "custom_text_a_column", "custom_text_b_column",
                        "custom_label_column", "custom_header", "custom_delimiter",
                        "custom_labels", "custom_regression"}, {"custom", "given_settings"}),
    "run_squad": ("run_squad_flags", "tfbert.squad.squad_run", "SquadRunConfig",
                  {"traceback"}, {"given_settings"}),
    "run_ner": ("run_ner_flags", "tfbert.tagging.tagging_run", "NerRunConfig",
                {"traceback"}, {"given_settings"}),
    "run_pretraining": ("run_pretraining_flags", "tfbert.pretraining.pretraining_run",
                        "PretrainingRunConfig", {"traceback", "bert_config_file"},
                        {"bert_config", "window_normalization", "end_learning_rate", "power",
                         "exclude_from_weight_decay", "exclude_from_layer_adaptation",
                         "accumulation_reduction", "loss_scale", "initial_loss_scale",
                         "loss_scale_growth_steps", "momentum"}),
}


@pytest.mark.parametrize("tool", sorted(_TOOL_CONFIGS))
def test_every_flag_of_a_training_tool_is_a_config_setting_of_the_same_name(tool):
  """One name per setting: what the tool's `main` builds with `config_from_values` reaches
  every field by its flag, and no flag is left unread."""
  flags_module, config_module, config_class, tool_only, no_flag = _TOOL_CONFIGS[tool]
  explicit = ["bert_config"] if tool == "run_pretraining" else ["custom"] * (
      tool == "run_classifier")  # What each tool's main gives itself.
  with tool_process.tool_modules():  # The flags module is imported here and forgotten after.
    flag_values = common_flags_values(flags_module)
    config = getattr(importlib.import_module(config_module), config_class)
    flag_names, settings = set(flag_values), cli.setting_names(config, explicit)
  assert flag_names - settings == tool_only
  assert settings - flag_names == no_flag


@pytest.mark.parametrize("flags_module", ["run_classifier_flags", "run_pretraining_flags"])
def test_flags_txt_records_the_runs_settings_not_the_one_off_switches(flags_module):
  """Sweep 18, c22/m12: `--stop_at_step` was recorded in flags.txt, so every replay of the
  run (`--flagfile=<run>/flags.txt`) stopped there again, trained nothing and said "nothing
  more to train"; like `--traceback` and `--allow_config_change`, it is this invocation's."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  with tool_process.tool_modules():
    common_flags = importlib.import_module("tfbert_flags.common_flags")
    module = importlib.import_module(f"tfbert_flags.{flags_module}")
    flags.FLAGS(["x", "--stop_at_step=5", "--traceback", "--allow_config_change",
                 "--seed=7"])
    recorded = common_flags.flagfile(module).splitlines()
  # Whose flags they are (sweep 28, A93: another tool given the file names the writer).
  assert recorded[0] == f"# flags of {flags_module.removesuffix('_flags')}"
  assert "--seed=7" in recorded
  assert not [line for line in recorded if line.startswith(
      ("--stop_at_step", "--traceback", "--notraceback", "--allow_config_change",
       "--noallow_config_change"))]


@pytest.mark.parametrize("flag, message", [
    ("--pretrain_steps=-5", "flag --pretrain_steps=-5"),
    ("--squad_epochs=-1", "flag --squad_epochs=-1"),
    ("--squad_epochs=nan", "flag --squad_epochs=nan: --squad_epochs must be a finite number"),
    ("--squad_epochs=inf", "flag --squad_epochs=inf: --squad_epochs must be a finite number"),
])
def test_a_negative_count_ends_the_demo_before_any_work(tmp_path, flag, message):
  """A negative count once skipped the work and exited 0; absl's bound now refuses it. nan
  and inf pass any bound: nan skipped the SQuAD part without a word, inf was refused after
  the pretraining part naming an internal field (sweep 19, S1, P1); every tool's float
  flags refuse them (`common_flags.show_in_help`)."""
  run = tool_process.run_tool("demo", flag, f"--workdir={tmp_path / 'demo'}")
  assert run.returncode == 1 and message in run.stderr, run.stderr[-2000:]
  assert not (tmp_path / "demo").exists()


@pytest.mark.slow
def test_an_installed_commands_help_starts_with_the_tools_description():
  """pip's console-script wrapper is the __main__ of `tfbert-run-squad`; absl's --help
  printed its (empty) docstring, so the installed command lost the tool's description."""
  command = os.path.join(os.path.dirname(sys.executable), "tfbert-run-squad")
  assert os.path.isfile(command), "bootstrap.sh installs the package and its commands"
  done = subprocess.run([command, "--help"], cwd=REPO, env=_env(), capture_output=True,
                        text=True, timeout=240, check=False)
  assert done.stdout.startswith("Fine-tunes BERT on SQuAD"), done.stdout[:500]


def test_a_flagfile_on_a_url_is_read_in_where_it_stands(ram_root, tmp_path):
  """absl opens flag files with Python's `open`: a run's flags.txt on a bucket (here
  `ram://`) is read by tfbert instead, a nested URL flag file too, and local ones alike."""
  from tfbert.runtime import files  # pylint: disable=import-outside-toplevel
  with files.open_file(f"{ram_root}/base.txt", "w") as f:
    f.write("--learning_rate=0.001\n")
  with files.open_file(f"{ram_root}/flags.txt", "w") as f:
    f.write(f"--flagfile={ram_root}/base.txt\n--output_dir={ram_root}/run\n")
  local_file = tmp_path / "local.txt"
  local_file.write_text("# a comment\n\n  --do_train  \n// another\n")
  assert cli.read_flagfiles(["tool", f"--flagfile={ram_root}/flags.txt",
                             f"--flagfile={local_file}", "--verbose=2"]) == [
      "tool", "--learning_rate=0.001", f"--output_dir={ram_root}/run", "--do_train",
      "--verbose=2"]
  with pytest.raises(ValueError, match="--flagfile .*nope.txt"):
    cli.read_flagfiles(["tool", f"--flagfile={ram_root}/nope.txt"])


def test_a_flag_file_with_a_byte_order_mark_keeps_its_first_flag(tmp_path):
  """Windows editors start a UTF-8 file with a byte-order mark; absl read it into the first
  line, which then was no flag and was dropped without a word."""
  values = flags.FlagValues()
  flags.DEFINE_float("learning_rate", 1e-4, "", flag_values=values)
  flags.DEFINE_bool("do_train", False, "", flag_values=values)
  bom = tmp_path / "flags.txt"
  bom.write_bytes(b"\xef\xbb\xbf--learning_rate=0.5\r\n--do_train\r\n")
  values(["tool", f"--flagfile={bom}"])  # absl alone: the first flag is lost.
  assert (values.learning_rate, values.do_train) == (1e-4, True)
  values.unparse_flags()
  for argv in (["tool", f"--flagfile={bom}"], ["tool", "--flagfile", str(bom)]):
    values(cli.read_flagfiles(cli.flagfiles_first(argv)))
    assert (values.learning_rate, values.do_train) == (0.5, True)
    values.unparse_flags()
  plain = tmp_path / "plain.txt"
  plain.write_text("--do_train\n", encoding="utf-8")
  assert cli.read_flagfiles(["tool", f"--flagfile={plain}", "--", "--flagfile", "x"]) == [
      "tool", "--do_train", "--", "--flagfile", "x"]  # Nothing after `--` is absl's.


def test_a_flag_file_including_itself_is_refused_naming_the_chain(tmp_path):
  """absl printed a warning and dropped the inclusion; a cycle is a mistake in the files."""
  first, second = tmp_path / "a.txt", tmp_path / "b.txt"
  first.write_text(f"--do_train\n--flagfile={second}\n", encoding="utf-8")
  second.write_text(f"--flagfile={first}\n", encoding="utf-8")
  with pytest.raises(ValueError, match=f"--flagfile {first} includes itself"):
    cli.read_flagfiles(["tool", f"--flagfile={first}"])
  lonely = tmp_path / "lonely.txt"
  lonely.write_text("--flagfile\n", encoding="utf-8")
  with pytest.raises(ValueError, match=f"{lonely}:1: --flagfile without its file"):
    cli.read_flagfiles(["tool", f"--flagfile={lonely}"])


@pytest.mark.parametrize("lines, line, expected", [
    # absl stopped at the `--`: every flag after the file was an "unexpected argument".
    (["--task_name=mrpc", "--", "--do_train"], 2,
     "a '--' line would end the flags there: every flag after it, the command line's "
     "included, would be read as a leftover word; remove the line"),
    # absl: "Unknown command line flag 'flagfile /x/inner.txt'".
    (["--do_train", "--flagfile {inner}"], 2,
     "'--flagfile {inner}' is read as one argument, the value part of the flag's name: "
     "write --flagfile={inner}"),
    (["  --task_name\tmrpc"], 1,
     "'--task_name\\tmrpc' is read as one argument, the value part of the flag's name: "
     "write --task_name=mrpc"),
    # Sweep 25 P1: "task file not found: "sst/train.tsv"" for a file that exists.
    (["--do_train", '--train_file="sst/train.tsv"'], 2,
     "'--train_file=\"sst/train.tsv\"': a flag file is read without a shell, so the quotes "
     "would be part of the value; write --train_file=sst/train.tsv"),
], ids=["dashdash", "flagfile_space_form", "flag_space_form", "quoted_value"])
def test_a_flag_file_line_absl_would_misread_is_refused_naming_file_and_line(
    tmp_path, lines, line, expected):
  inner = tmp_path / "inner.txt"
  inner.write_text("--do_eval\n", encoding="utf-8")
  outer = tmp_path / "flags.txt"
  outer.write_text("# the run's flags\n" + "\n".join(lines).format(inner=inner) + "\n",
                   encoding="utf-8")
  run = tool_process.run_tool("run_classifier", f"--flagfile={outer}",
                              f"--output_dir={tmp_path / 'out'}", "--do_predict")
  assert _one_error_line(run, "run_classifier") == (
      f"run_classifier: error: {outer}:{line + 1}: {expected.format(inner=inner)}")
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text, shown, code", [
    # absl: "Unknown command line flag 'do_train '. Did you mean: do_train ?" (sweep 7, C18).
    ("--do_train\x00", "--do_train\\x00", "U+0000"),
    ("--task_name=mr\x1bpc", "--task_name=mr\\x1bpc", "U+001B"),
    # A form feed is no line end to absl: one line, refused as such.
    ("--do_eval\x0c--do_train", "--do_eval\\x0c--do_train", "U+000C"),
    ("--task_name=mr\x85pc", "--task_name=mr\\x85pc", "U+0085"),
], ids=["nul", "escape", "form_feed", "c1_next_line"])
def test_a_flag_file_line_or_argument_holding_a_control_character_is_refused(
    tmp_path, text, shown, code):
  flag_file = tmp_path / "flags.txt"
  flag_file.write_text(f"# the run's flags\n--do_predict\n{text}\n", encoding="utf-8")
  expected = (f"'{shown}' holds the control character {code}, which no flag name or value "
              "holds (a terminal does not show it: absl named the flag unknown, as if spelt "
              "right); remove it")
  run = tool_process.run_tool("run_classifier", f"--flagfile={flag_file}",
                              f"--output_dir={tmp_path / 'out'}")
  assert _one_error_line(run, "run_classifier") == (
      f"run_classifier: error: {flag_file}:3: {expected}")
  if "\x00" not in text:  # No operating system passes a NUL in an argument.
    run = tool_process.run_tool("run_classifier", text, f"--output_dir={tmp_path / 'out'}")
    assert _one_error_line(run, "run_classifier") == (
        f"run_classifier: error: argument {expected}")
  with pytest.raises(ValueError, match=re.escape(code)):
    cli.check_control_characters(["tool", "--ok", text])
  cli.check_control_characters(["tool", "--custom_delimiter=\t", "--task_name=é"])
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [["--task_name=mrpc", "--flagfile"],
                                  ["--flagfile", "--do_train"], ["--flagfile", "--", "x"],
                                  ["-flagfile"]],
                         ids=["last", "before_a_flag", "before_dashdash", "single_dash"])
def test_a_flagfile_without_its_file_on_the_command_line_is_refused(tmp_path, argv):
  """Moved first, a last `--flagfile` took the next flag for its file: "--flagfile
  --task_name=mrpc: No such file or directory"."""
  flag = argv[argv.index("--flagfile") if "--flagfile" in argv else 0]
  for expand in (cli.flagfiles_first, lambda a: a):
    with pytest.raises(ValueError, match=f"^{flag} needs a value \\({flag}=FILE\\)$"):
      cli.read_flagfiles(expand(["tool", *argv]))
  run = tool_process.run_tool("run_classifier", f"--output_dir={tmp_path / 'out'}", *argv)
  assert _one_error_line(run, "run_classifier") == (
      f"run_classifier: error: {flag} needs a value ({flag}=FILE)")


def _one_error_line(run, tool):
  assert run.returncode == 1, (run.returncode, run.stderr[-3000:])
  lines = run.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(f"{tool}: error: "), run.stderr[-3000:]
  return lines[0]


def test_a_flag_file_that_is_not_utf8_ends_the_tool_with_one_line_naming_its_line(tmp_path):
  """A Latin-1 "é" in a flag file's comment ended the tool with absl's UnicodeDecodeError
  traceback: flag files were parsed outside the one-line guard. A nested file too."""
  latin1 = tmp_path / "flags_latin1.txt"
  latin1.write_bytes(b"--task_name=mrpc\n# caf\xe9\n")
  outer = tmp_path / "outer.txt"
  outer.write_text(f"--do_train\n--flagfile={latin1}\n", encoding="utf-8")
  for flagfile in (latin1, outer):
    run = tool_process.run_tool("run_classifier", f"--flagfile={flagfile}",
                                f"--output_dir={tmp_path / 'out'}")
    line = _one_error_line(run, "run_classifier")
    assert f"--flagfile {latin1}:2: not UTF-8" in line, line
  run = tool_process.run_tool("run_classifier", "--flagfile", str(tmp_path / "missing.txt"))
  assert f"--flagfile {tmp_path / 'missing.txt'}: No such file" in _one_error_line(
      run, "run_classifier")
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("tool, argv, expected", [
    # absl set the flag true and left "false" for main, which dropped it: a silent wrong run.
    ("run_pretraining", ["--do_whole_word_mask", "false", "--model_dir={out}"],
     "unexpected argument 'false' after the boolean flag --do_whole_word_mask, which takes "
     "no separate value: use --do_whole_word_mask=false or --nodo_whole_word_mask"),
    ("run_classifier", ["--nodo_train", "Yes", "--output_dir={out}"],
     "use --do_train=true or --do_train"),
    ("export_tflite", ["--model={out}/m.keras", "--output={out}/m.tflite", "extra", "words"],
     "unexpected arguments 'extra', 'words': this tool takes flags only"),
])
def test_a_word_left_after_the_flags_is_refused_by_a_tool_that_takes_none(
    tmp_path, tool, argv, expected):
  out = tmp_path / "out"
  run = tool_process.run_tool(tool, *(arg.format(out=out) for arg in argv))
  assert expected in _one_error_line(run, tool)
  assert not out.exists()


def test_the_tools_that_take_arguments_are_the_evaluators():
  """Only evaluate_squad and evaluate_ner read words after their flags (their files)."""
  folder = os.path.join(REPO, "tools")
  taking = set()
  for name in sorted(os.listdir(folder)):
    if name.endswith(".py"):
      with open(os.path.join(folder, name), encoding="utf-8") as f:
        if "takes_arguments=True" in f.read():
          taking.add(name[:-3])
  assert taking == {"evaluate_squad", "evaluate_ner"}


@pytest.mark.parametrize("argv, expected", [
    # absl applies flags in order: a file after a flag overrode the flag.
    (["tool", "--output_dir=new", "--flagfile=old/flags.txt"],
     ["tool", "--flagfile=old/flags.txt", "--output_dir=new"]),
    (["tool", "--a=1", "--flagfile", "f1", "--b=2", "-flagfile=f2", "--", "--flagfile=x"],
     ["tool", "--flagfile", "f1", "-flagfile=f2", "--a=1", "--b=2", "--", "--flagfile=x"]),
    (["tool", "--flagfile=f", "--a=1"], ["tool", "--flagfile=f", "--a=1"]),
    (["tool"], ["tool"]),
])
def test_flag_files_go_first_so_the_command_line_wins(argv, expected):
  assert cli.flagfiles_first(argv) == expected


@pytest.mark.parametrize("argv, shown, meant", [
    (["--output_dir=~/C21"], "--output_dir=~/C21", "--output_dir={home}/C21"),
    (["-input_file=a.txt,~/b.txt"], "-input_file=a.txt,~/b.txt", "-input_file=a.txt,{home}/b.txt"),
    (["--do_train", "--", "~"], "~", "{home}"),
], ids=["flag_value", "list_element", "word_after_the_flags"])
def test_a_tilde_the_shell_left_is_refused_naming_the_flag_and_the_home(tmp_path, monkeypatch,
                                                                       argv, shown, meant):
  monkeypatch.setenv("HOME", str(tmp_path))
  meant = meant.format(home=tmp_path)
  with pytest.raises(ValueError, match=(
      f"^{re.escape(shown)}: '~' was not expanded by the shell .*, and tfbert, like absl and "
      f"tf.io.gfile, takes it literally: a directory named '~' below {re.escape(os.getcwd())}; "
      f"write {re.escape(meant)} \\(or .*\\./~.* for such a directory\\)$")):
    cli.check_home_prefixes(["tool", *argv])


def test_a_tilde_no_shell_would_expand_or_a_flag_files_own_passes(tmp_path, monkeypatch):
  monkeypatch.setenv("HOME", str(tmp_path))
  cli.check_home_prefixes(["tool", "--output_dir=./~/run", "--labels=a~b,~no-such-user-here",
                           "--flagfile=~/flags.txt", "--flagfile", "~/more.txt",
                           "--input=gs://bucket/~/x"])


def _tilde_setup(tmp_path, monkeypatch):
  """A home holding S01/model.keras, a working directory apart, and a tiny run's flags."""
  home, cwd = tmp_path / "home", tmp_path / "cwd"
  (home / "S01").mkdir(parents=True)
  (home / "S01" / "model.keras").write_bytes(b"PK\x03\x04")
  cwd.mkdir()
  monkeypatch.setenv("HOME", str(home))
  monkeypatch.chdir(cwd)
  (tmp_path / "mrpc").mkdir()
  (tmp_path / "mrpc" / "train.tsv").write_text(
      "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA cat sat.\tA cat sat down.\n",
      encoding="utf-8")
  BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
             intermediate_size=19, max_position_embeddings=32).to_json_file(
                 str(tmp_path / "bert_config.json"))
  return home, cwd, ["--task_name=mrpc", f"--data_dir={tmp_path / 'mrpc'}", "--do_train",
                     f"--bert_config_file={tmp_path / 'bert_config.json'}",
                     f"--vocab_file={pretrained.minilm_vocab_file()}", "--max_seq_length=16",
                     "--max_train_steps=1", "--train_batch_size=2"]


def test_a_tool_refuses_a_tilde_the_shell_left_in_any_path_flag(tmp_path, monkeypatch):
  """`--output_dir=~/C21` trained into ./~/C21 and ended "wrote: ~/C21/model.keras", which
  reads as the home directory; `--input=~/S01/model.keras` said "no such file" with the file
  in the home directory (sweep 6, C21, K07). Quoted (`--output_dir '~/C21'`) and in a flag
  file, the shell leaves it too."""
  home, cwd, run_flags = _tilde_setup(tmp_path, monkeypatch)
  flag_file = tmp_path / "flags.txt"
  flag_file.write_text("--do_train\n--output_dir=~/C21\n", encoding="utf-8")
  for tool, args, shown, how in [
      ("run_classifier", [*run_flags, "--output_dir=~/C21"], "--output_dir=~/C21",
       "by the shell"),
      ("run_classifier", [*run_flags, "--output_dir", "~/C21"], "--output_dir ~/C21",
       "by the shell"),
      ("run_classifier", [*run_flags, f"--flagfile={flag_file}"],
       f"{flag_file}:2: --output_dir=~/C21", "in a flag file"),
      ("convert_checkpoint", ["--input_format=tfbert", "--input=~/S01/model.keras",
                              "--output_format=hf", f"--output={tmp_path / 'hf'}"],
       "--input=~/S01/model.keras", "by the shell")]:
    line = _one_error_line(tool_process.run_tool(tool, *args), tool)
    meant = shown.replace("~", str(home), 1).split(": ")[-1]
    assert line.startswith(f"{tool}: error: {shown}: '~' was not expanded {how}"), line
    assert f"write {meant} (or " in line, line
  assert not os.listdir(cwd) and sorted(os.listdir(home)) == ["S01"]
  assert not (tmp_path / "hf").exists()


def test_the_closing_lines_name_absolute_paths(tmp_path, monkeypatch):
  """A relative or odd path printed as given reads as another place (`~/C21/model.keras`
  for ./~/C21/model.keras); absolute, it names the place written."""
  monkeypatch.chdir(tmp_path)
  assert cli.format_written(["~/C21/model.keras", "out/eval_results.json", "gs://b/export/"]) == (
      f"wrote:\n  {tmp_path}/~/C21/model.keras\n  {tmp_path}/out/eval_results.json\n"
      "  gs://b/export")
  assert cli.format_written([]) == "wrote nothing new"


def test_every_tools_first_import_ends_a_ctrl_c_while_it_starts():
  """Its later imports (TensorFlow's) take seconds, before `run_tool`'s handler exists: a
  Ctrl-C then ended the tool with a traceback (sweep 7, I09). The subprocess test below
  proves the handler on one tool; this, that every tool installs it first."""
  import ast  # pylint: disable=import-outside-toplevel
  for name in TOOL_FLAGS:
    with open(os.path.join(REPO, "tools", f"{name}.py"), encoding="utf-8") as f:
      tree = ast.parse(f.read())
    first = next(node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)))
    assert (isinstance(first, ast.Import)
            and [a.name for a in first.names] == ["tfbert_tools"]), name


def test_run_tool_ends_a_ctrl_c_outside_main_with_one_line(monkeypatch, capsys):
  """The device probe and absl's own steps run outside the guards of `parse_flags` and
  `main`: a Ctrl-C there kept its traceback."""
  def probe():
    raise KeyboardInterrupt

  monkeypatch.setattr(cli, "quiet_device_probe", probe)
  monkeypatch.setattr(sys, "argv", ["tools/some_tool.py"])
  try:
    cli.run_tool(lambda argv: None, types.SimpleNamespace(value=False))
  except KeyboardInterrupt:  # Not to pytest, which would take it for the user's Ctrl-C.
    pytest.fail("the Ctrl-C escaped run_tool")
  except SystemExit as done:
    assert done.code == 130
  else:
    pytest.fail("run_tool returned")
  assert capsys.readouterr().err == "some_tool: interrupted\n"


def test_sigterm_in_main_runs_its_cleanups_and_ends_with_one_line_and_143(capsys, tmp_path):
  """SIGTERM's default ended a tool at once: the hidden temporaries and a directory it had
  created stayed (create_pretraining_data, convert_checkpoint, the exporters). Inside `main`
  it now unwinds as Ctrl-C does (a `finally` runs), and the handler before is back after."""
  cleaned = tmp_path / "cleaned"

  def main(argv):
    del argv
    try:
      os.kill(os.getpid(), signal.SIGTERM)  # Raised on return to the main thread's bytecode.
      for _ in range(10**6):
        pass
    finally:
      cleaned.write_text("yes")
    pytest.fail("main went on after SIGTERM")

  before = signal.signal(signal.SIGTERM, lambda *_: pytest.fail("SIGTERM not taken by main"))
  try:
    cli.guarded(main, types.SimpleNamespace(value=False), "some_tool")([])
  except SystemExit as done:
    assert done.code == 143
  else:
    pytest.fail("the guard returned")
  finally:
    after = signal.signal(signal.SIGTERM, before)
  assert cleaned.read_text() == "yes"
  assert capsys.readouterr().err == "some_tool: terminated\n"
  assert getattr(after, "__name__", "") == "<lambda>"  # The test's own handler, back again.


# A tool run as `python tools/<tool>.py ARGS` would be, except that its import of TensorFlow
# stops at its start (a finder first in `sys.meta_path`), says so on stderr and sleeps there
# until a signal ends the sleep: a Ctrl-C sent then lands inside the tool's imports however
# busy the machine is (reading `-X importtime` lines raced the import on a loaded machine).
_PARKED_AT_TENSORFLOW = """
import os, runpy, sys, time
class Park:
  def find_spec(self, name, path=None, target=None):
    if name == "tensorflow":
      sys.meta_path.remove(self)
      print("parked: import tensorflow", file=sys.stderr, flush=True)
      time.sleep(300)
    return None
sys.meta_path.insert(0, Park())
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow  # A process: one interpreter, interrupted while it imports TensorFlow.
def test_ctrl_c_while_a_tool_imports_tensorflow_is_one_line_and_status_130(tmp_path):
  """The tool is parked at the start of its TensorFlow import (`_PARKED_AT_TENSORFLOW`), so
  the signal lands inside the tool's imports without relying on timing; `-X importtime`
  shows that its flags module was never imported."""
  child = subprocess.Popen(
      [sys.executable, "-X", "importtime", "-c", _PARKED_AT_TENSORFLOW, "tools/export_onnx.py",
       f"--export_dir={tmp_path / 'export'}", f"--output={tmp_path / 'm.onnx'}"],
      cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  seen = []
  for line in child.stderr:
    seen.append(line)
    if line == "parked: import tensorflow\n":
      child.send_signal(signal.SIGINT)
      break
  out, err = child.communicate(timeout=300)
  err = "".join(seen) + err
  assert "parked: import tensorflow\n" in seen, err[-3000:]
  assert "tfbert_flags.export_onnx_flags" not in err  # Interrupted inside the imports.
  assert "tfbert_tools" in err  # The tool's first import, which installs the handler, ran.
  shown = [line for line in err.splitlines()
           if not line.startswith(("import time:", "parked:"))]
  assert child.returncode == 130, err[-3000:]
  assert "Traceback" not in err and shown[-1:] == ["export_onnx: interrupted"], err[-3000:]
  assert not out and not os.listdir(tmp_path)


_TASK_READS = {"pretraining": ("input_files",), "squad": ("train_file",),
               "classifier": ("train_file", "task_name")}


def test_a_flag_the_chosen_choice_does_not_read_is_named_with_the_choices_that_read_it():
  cli.check_flags_read(_TASK_READS, "task", "classifier", ["train_file", "task_name", "seed"])
  with pytest.raises(ValueError) as raised:
    cli.check_flags_read(_TASK_READS, "task", "pretraining", ["train_file", "seed"])
  assert str(raised.value) == (
      "--train_file (squad, classifier): not read by --task=pretraining (the tasks that read "
      "it in brackets): leave it out or choose a task it belongs to")
  with pytest.raises(ValueError, match=r"^--input_files \(pretraining\), --task_name "
                                       r"\(classifier\): not read by --task=squad .* leave "
                                       "them out or choose a task they belong to$"):
    cli.check_flags_read(_TASK_READS, "task", "squad", ["task_name", "input_files"])


@pytest.mark.parametrize("argv, expected", [
    (["align", "--task=pretraining", "--train_file=dev.tsv"],
     "--train_file (squad, classifier): not read by --task=pretraining"),
    (["align", "--task=squad", "--num_warmup_steps=3"],
     "--num_warmup_steps (pretraining): not read by --task=squad"),
    (["align", "--task=squad", "--max_predictions_per_seq=5"],
     "--max_predictions_per_seq (pretraining): not read by --task=squad"),
    (["align", "--task=squad", "--input_files=x.tfrecord"],
     "--input_files (pretraining): not read by --task=squad"),
    (["align", "--task=squad", "--task_name=sst-2"],
     "--task_name (classifier): not read by --task=squad"),
    (["align", "--workdir={run}/align"], "--workdir {run}/align lies inside the tfbert run "
                                         "directory {run}"),
    (["demo", "--pretrain_steps=0", "--workdir={run}"], "--workdir {run} is the directory of "
                                                        "a tfbert run"),
    (["benchmark", "--benchmark=input_pipeline", "--pretraining_data_dir={run}/data"],
     "--pretraining_data_dir {run}/data lies inside the tfbert run directory {run}"),
])
def test_tools_refuse_an_unread_task_flag_or_a_workdir_in_a_run_before_any_work(
    tmp_path, argv, expected):
  """Sweep 13 S3, S4: align --task=pretraining --train_file=... trained on its own records
  without a word; demo --workdir=<a run directory> wrote its export into the run."""
  run = tmp_path / "run"
  run.mkdir()
  (run / ".tfbert-run.lock").write_text("")
  before = sorted(os.listdir(tmp_path)), sorted(os.listdir(run))
  args = [a.format(run=run) for a in argv[1:]]
  if argv[0] == "align" and not any(a.startswith("--workdir") for a in args):
    args.append(f"--workdir={tmp_path / 'out'}")
  result = tool_process.run_tool(argv[0], *args)
  lines = result.stderr.strip().splitlines()
  assert result.returncode == 1 and len(lines) == 1, result.stderr[-3000:]
  assert lines[0].startswith(f"{argv[0]}: error: {expected.format(run=run)}"), lines[0]
  assert (sorted(os.listdir(tmp_path)), sorted(os.listdir(run))) == before
