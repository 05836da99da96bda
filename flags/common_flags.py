"""Flags every tool has; each tool's flags module adopts them as key flags (shown by --help)."""

import math
import os
import sys

from absl import flags

from tfbert.runtime import cli

TRACEBACK = flags.DEFINE_bool(
    "traceback", False, "On an error, show Python's whole traceback instead of the one-line "
    "message (tool: error: ...).")


def show_in_help(flags_module) -> None:
  """Makes `flags_module`'s key flags the running program's, so that `--help` lists them.

  absl's `--help` lists the key flags of the program named by `sys.argv[0]`: the tool's file
  under `python tools/x.py`, the installed script under `tfbert-x`. `adopt_module_key_flags`
  would register them for the calling module only, which is the program in the first case
  and not in the second.
  """
  key_flags = flags.FLAGS.get_key_flags_for_module(flags_module)
  for flag in key_flags:
    flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    _require_finite(flag)
  cli.set_tool_flags(flag.name for flag in key_flags)  # Refusals name them as `--name`.


def _require_finite(flag) -> None:
  """A float flag refuses nan and inf, which pass any `lower_bound` (absl compares them):
  `demo --squad_epochs=nan` skipped its SQuAD part without a word, and `inf` was refused
  only after the pretraining part, naming an internal field (sweep 19, S1, P1)."""
  if flag.flag_type() != "float" or getattr(flag, "_finite_checked", False):
    return
  flag._finite_checked = True  # pylint: disable=protected-access
  flags.register_validator(
      flag.name, lambda value: value is None or math.isfinite(value),
      message=f"--{flag.name} must be a finite number (not nan or inf)")


# Per-invocation switches, not settings of the run: not written into its flags.txt. Among
# them `--stop_at_step`, a one-off pause ("rerun without it to resume"): recorded, every
# replay of the run (`--flagfile=<run>/flags.txt`) stopped there again.
_NOT_RECORDED = ("traceback", "allow_config_change", "stop_at_step", "helpshort", "helpfull",
                 "help")


# Flags naming files or directories (a list flag: each of its paths or globs), written to
# flags.txt as absolute paths (`flagfile`). `--init_hf_dir=minilm` names the shipped model.
PATH_FLAGS = frozenset({
    "output_dir", "export_dir", "data_dir", "train_file", "eval_file", "predict_file",
    "dev_file", "ir_queries_file", "ir_corpus_file", "ir_qrels_file",
    "sentence_transformers_dir", "vocab_file", "bert_config_file", "init_checkpoint",
    "init_tfbert", "init_hf_dir", "model_dir", "input_files", "train_text_files",
    "eval_input_files", "eval_text_files"})
_NAMES_NOT_PATHS = {"init_hf_dir": ("minilm",)}


def _absolute(name: str, path: str) -> str:
  """A path flag's value as flags.txt records it: absolute (a URL, or a name such as
  `--init_hf_dir=minilm`, as given)."""
  from tfbert.runtime import files  # (Here: the flags modules import no tfbert at load.)
  if not path or path in _NAMES_NOT_PATHS.get(name, ()):
    return path
  return files.absolute(path)


def flagfile(flags_module, leave_out=()) -> str:
  """The run's resolved flags as an absl flagfile (`--name=value` lines), for flags.txt.

  Every key flag of `flags_module` (the tool's own and the shared ones it adopts) that has a
  value, defaults included, so that `--flagfile=<output_dir>/flags.txt` replays the run even
  if a later version changes a default; but those in `leave_out` (flags the run does not
  read). Paths (`PATH_FLAGS`) are absolute, so that a replay from another working directory
  reads the run's files, not others of the same relative name. The first line, a comment,
  names the tool (`tfbert.runtime.cli.WRITTEN_BY`): another tool given the file says whose
  it is.
  """
  from tfbert.runtime.cli import WRITTEN_BY  # (Here: the flags modules import no tfbert at load.)
  tool = flags_module.__name__.rsplit(".", 1)[-1].removesuffix("_flags")
  # A comment (absl skips it): another tool given the file names the one that wrote it.
  lines = [f"{WRITTEN_BY}{tool}"]
  for flag in sorted(flags.FLAGS.get_key_flags_for_module(flags_module), key=lambda f: f.name):
    if flag.name in _NOT_RECORDED or flag.name in leave_out or flag.value is None:
      continue
    if flag.name in PATH_FLAGS and flag.value:
      value = flag.value
      value = ([_absolute(flag.name, v) for v in value] if isinstance(value, list)
               else _absolute(flag.name, value))
      lines.append(f"--{flag.name}={','.join(value) if isinstance(value, list) else value}")
    else:
      lines.append(flag.serialize())
  return "".join(f"{line}\n" for line in lines if line)


def given(flags_module) -> frozenset:
  """The names of `flags_module`'s key flags given on the command line or in a flag file
  (absl's `present`): a run's settings given, the others left to the run
  (`tfbert.tasks.fine_tuning.run_settings`)."""
  return frozenset(flag.name for flag in flags.FLAGS.get_key_flags_for_module(flags_module)
                   if flag.present)


def given_otherwise(name: str) -> bool:
  """Whether the flag `name` was given at a value other than its default: a flag given at
  its default changes nothing, so the flags a run does not read are refused only when given
  otherwise (a replayed flags.txt records every flag, at its default too)."""
  flag = flags.FLAGS[name]
  return bool(flag.present) and flag.value != flag.default


def values(flags_module) -> dict:
  """The parsed values of `flags_module`'s key flags (its own and those it adopts) by name:
  what `tfbert.runtime.cli.config_from_values` builds a tool's config from."""
  return {flag.name: flag.value for flag in flags.FLAGS.get_key_flags_for_module(flags_module)}


def check_optimizer_flags(flags_module, field_flags=None) -> None:
  """Refuses, before any work, the optimizer flags given on the command line (or in a flag
  file) that the chosen --optimizer does not read (e.g. --momentum with --optimizer=lamb,
  --weight_decay_rate with --optimizer=sgd): they would be ignored without a word. A flag
  left or given at its default is not refused (`given_otherwise`: a replayed flags.txt
  records every flag). Then the values the `OptimizerConfig` rules refuse
  (`optimization.setting_problems`), named as the flags, with "its default" for one not
  given (e.g. "--num_warmup_steps (100, its default) must be in [0, --num_train_steps
  (3)]"), not as the config's fields.

  Args:
    flags_module: the tool's flags module.
    field_flags: `OptimizerConfig` field -> the tool's flag that sets it, for a flag named
      otherwise (align's --steps: num_train_steps); a field that is a key flag of
      `flags_module` is that flag. A rule reading a field without a flag is left to the
      config's own checks.

  Raises:
    ValueError: naming the flags, the optimizer and the settings it reads; or the flags
      whose values the optimizer's rules refuse, and what to do.
  """
  import dataclasses  # (Here: the flags modules import no tfbert at load.)

  from tfbert.training import optimization  # (Here: most tools need no optimizer.)
  key_flags = {flag.name for flag in flags.FLAGS.get_key_flags_for_module(flags_module)}
  given = [name for name in key_flags if given_otherwise(name)]
  problem = optimization.unread_problem(flags.FLAGS["optimizer"].value, given, prefix="--")
  if problem:
    raise ValueError(problem)
  mapping = {field.name: field.name
             for field in dataclasses.fields(optimization.OptimizerConfig)
             if field.name in key_flags} | dict(field_flags or {})
  values = {field: flags.FLAGS[flag].value for field, flag in mapping.items()}
  if values.get("clip_norm") == 0:  # The flag's 0: no clipping (`cli.zero_is_none`).
    values["clip_norm"] = None

  def spell(field, value=_NO_VALUE):
    if field not in mapping:  # (A rule of a field without a flag: not reported here.)
      return field
    flag = flags.FLAGS[mapping[field]]
    if value is _NO_VALUE:
      return f"--{flag.name}"
    return f"--{flag.name} ({flag.value}{'' if flag.present else ', its default'})"

  problems = optimization.setting_problems(values, spell)
  if problems:
    raise ValueError("; ".join(problems))


_NO_VALUE = object()


def check_strategy_flags() -> None:
  """Refuses, before any work, --num_cpu_devices given otherwise than its default
  (`given_otherwise`) with a --distribution_strategy that does not read it: one_device
  trains on one device and multi_worker on one per worker, so the run went on with one
  replica without a word (sweep 34, A59).

  Raises:
    ValueError: naming both flags and their values.
  """
  strategy = flags.FLAGS["distribution_strategy"]
  if not given_otherwise("num_cpu_devices") or strategy.value == "mirrored":
    return
  what = ("one device" if strategy.value == "one_device"
          else "one device per worker (TF_CONFIG)")
  raise ValueError(
      f"--num_cpu_devices={flags.FLAGS['num_cpu_devices'].value} is read only with "
      f"--distribution_strategy=mirrored, but --distribution_strategy={strategy.value}"
      f"{'' if strategy.present else ' (its default)'} trains on {what}: pass "
      "--distribution_strategy=mirrored, or leave --num_cpu_devices out")


def check_data_files(names, directory_patterns=None) -> None:
  """Refuses, before any work, the fine-tuning data files given by the flags `names` that
  cannot serve: a special file (a named pipe such as bash's `<(...)` or /dev/stdin, a socket,
  a device), which can be read only once (`tfbert.runtime.paths.special_input_problems`, its
  one wording), a symbolic link to nothing or a loop, a file without read permission
  (`tfbert.pretraining.input_pipeline.entry_problem`).

  Args:
    names: flag names whose value, when set, is a data file.
    directory_patterns: {flag name: glob of its data files inside the directory the flag
      names}, e.g. {"data_dir": "*.tsv"}.

  Raises:
    ValueError: naming each flag and path and what it is.
  """
  from tfbert.pretraining import input_pipeline  # (Here: only the fine-tuning tools need it.)
  inputs = {f"--{name}": flags.FLAGS[name].value for name in names
            if flags.FLAGS[name].value}
  for name, pattern in (directory_patterns or {}).items():
    if flags.FLAGS[name].value:
      inputs[f"--{name}"] = os.path.join(flags.FLAGS[name].value, pattern)
  problems = input_pipeline.input_problems(inputs)
  if problems:
    raise ValueError("; ".join(problems))
