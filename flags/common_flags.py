"""Flags every tool has; each tool's flags module adopts them as key flags (shown by --help)."""

import sys

from absl import flags

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
  for flag in flags.FLAGS.get_key_flags_for_module(flags_module):
    flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)


# Per-invocation switches, not settings of the run: not written into its flags.txt.
_NOT_RECORDED = ("traceback", "allow_config_change", "helpshort", "helpfull", "help")


def flagfile(flags_module) -> str:
  """The run's resolved flags as an absl flagfile (`--name=value` lines), for flags.txt.

  Every key flag of `flags_module` (the tool's own and the shared ones it adopts) that has a
  value, defaults included, so that `--flagfile=<output_dir>/flags.txt` replays the run even
  if a later version changes a default.
  """
  lines = []
  for flag in sorted(flags.FLAGS.get_key_flags_for_module(flags_module), key=lambda f: f.name):
    if flag.name not in _NOT_RECORDED and flag.value is not None:
      lines.append(flag.serialize())
  return "".join(f"{line}\n" for line in lines if line)


def values(flags_module) -> dict:
  """The parsed values of `flags_module`'s key flags (its own and those it adopts) by name:
  what `tfbert.runtime.cli.config_from_values` builds a tool's config from."""
  return {flag.name: flag.value for flag in flags.FLAGS.get_key_flags_for_module(flags_module)}
