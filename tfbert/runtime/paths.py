"""Outputs never destroy inputs: the rule every tool's paths are checked by before any work.

A tool's outputs are written (a directory replaced as a whole, a file renamed into place), its
inputs are read. An output equal to an input, containing one (replacing or cleaning the
output would delete it) or inside one (a model or data directory grows files the run did not
read, and a later replacement of the input takes the output with it) is refused, naming both.
Two outputs must not be equal or contain one another either: the export's atomic replacement
of `export_dir == output_dir` deleted the run it came from. The one nesting allowed is the
one tfbert lays out itself: outputs inside the run directory (`container`), e.g.
`--export_dir=<output_dir>/export`; the run directory's own entries stay its own. A run that
does not train may read its directory's own model (`--do_eval --init_tfbert=<run>/model.keras`
into the same run): it never writes that file.

Paths are compared after `realpath` (a symlink to an input is that input); a glob compares by
its fixed leading directories (`data/*.tfrecord` is in `data/`); URLs compare as strings.
"""

import glob as glob_lib
import os
from typing import Iterable, Mapping, Optional, Sequence, Union

from tfbert.runtime import files

PathValue = Union[None, str, os.PathLike, Sequence[Union[str, os.PathLike]]]


def _resolved(path) -> str:
  """`path` absolute with symlinks resolved; a glob's fixed leading directories; a URL as is."""
  path = os.fspath(path)
  if files.is_url(path):
    return files.absolute(path)
  if glob_lib.has_magic(path):
    fixed = []
    for part in path.split(os.sep):
      if glob_lib.has_magic(part):
        break
      fixed.append(part)
    path = os.sep.join(fixed) or "."
  return os.path.realpath(path)


def _each(value: PathValue) -> list[str]:
  if value is None or value == "":
    return []
  if isinstance(value, (str, os.PathLike)):
    return [os.fspath(value)]
  return [os.fspath(v) for v in value if v]


def _relation(a: str, b: str) -> Optional[str]:
  """How `a` stands to `b`: "is", "contains", "lies inside" or None."""
  if a == b:
    return "is"
  if files.inside(b, a):
    return "contains"
  if files.inside(a, b):
    return "lies inside"
  return None


def overlap_problems(inputs: Mapping[str, PathValue], outputs: Mapping[str, PathValue], *,
                     container: Optional[str] = None,
                     read_from_container: Sequence[str] = ()) -> list[str]:
  """Every overlap of an output with an input or with another output, one message each.

  Args:
    inputs: setting name (as the user types it, e.g. "--train_file") -> path(s) read.
    outputs: setting name -> path(s) written.
    container: the name in `outputs` of the run directory, inside which other outputs may
      lie (never equal to it).
    read_from_container: names in `inputs` that may lie inside the container: what a run
      reads of its own directory and does not write (an evaluation of the run's own
      `model.keras`).

  Returns:
    Messages naming both settings and their paths ([] when all are apart).
  """
  named_inputs = [(name, path) for name, value in inputs.items() for path in _each(value)]
  named_outputs = [(name, path) for name, value in outputs.items() for path in _each(value)]
  problems = []
  for out_name, out_path in named_outputs:
    out = _resolved(out_path)
    for in_name, in_path in named_inputs:
      relation = _relation(out, _resolved(in_path))
      if relation == "contains" and out_name == container and in_name in read_from_container:
        continue
      if relation:
        problems.append(f"output {out_name} {out_path} {relation} input {in_name} {in_path}: "
                        "writing it could destroy or change what the run reads; choose "
                        f"another {out_name}")
  for i, (name_a, path_a) in enumerate(named_outputs):
    for name_b, path_b in named_outputs[i + 1:]:
      relation = _relation(_resolved(path_a), _resolved(path_b))
      nested_in_run = ((relation == "contains" and name_a == container)
                       or (relation == "lies inside" and name_b == container))
      if relation and not nested_in_run:
        problems.append(f"output {name_a} {path_a} {relation} output {name_b} {path_b}: one "
                        "would replace or delete the other; give them separate paths")
  return problems


def check_apart(inputs: Mapping[str, PathValue], outputs: Mapping[str, PathValue], *,
                container: Optional[str] = None, read_from_container: Sequence[str] = ()) -> None:
  """Raises ValueError listing every `overlap_problems` message (see there)."""
  problems = overlap_problems(inputs, outputs, container=container,
                              read_from_container=read_from_container)
  if problems:
    raise ValueError("; ".join(problems))


def fields(config, names: Iterable[str]) -> dict[str, PathValue]:
  """`--<name>` -> the config's value, for the names `config` has."""
  return {f"--{name}": getattr(config, name) for name in names if hasattr(config, name)}
