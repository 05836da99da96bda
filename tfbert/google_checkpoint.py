"""Reads and writes google-research/bert TF1 name-based checkpoints.

Loading is strict by default: every model weight must be set and every checkpoint tensor
that is not an optimizer slot or step counter must be used; shapes must match exactly. The
returned `LoadReport` says which tensors were used and which weights were set.

Writing uses the `SaveV2` op directly, so the checkpoint holds exactly Google's names (no
object-graph keys) and loads in google-research/bert's own code.
"""

import dataclasses
import os
from typing import Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from tfbert import google_names


@dataclasses.dataclass(frozen=True)
class LoadReport:
  """What a load did.

  Attributes:
    source: The checkpoint path or file that was read.
    used: Source tensor names assigned to model weights.
    set_weights: tfbert weight paths that were assigned.
    ignored: Source names skipped on purpose (optimizer slots, step counters, buffers).
    unused: Source tensors with no model weight (allowed only with `allow_unused`).
    missing: Google names of model weights that the source lacks (allowed only for the
      components named in `allow_missing`).
  """
  source: str
  used: tuple[str, ...]
  set_weights: tuple[str, ...]
  ignored: tuple[str, ...] = ()
  unused: tuple[str, ...] = ()
  missing: tuple[str, ...] = ()

  def summary(self) -> str:
    return (f"{self.source}: {len(self.used)} tensors used, {len(self.set_weights)} weights set, "
            f"{len(self.ignored)} ignored, {len(self.unused)} unused, {len(self.missing)} missing")


def read_google_checkpoint(prefix: str) -> dict[str, np.ndarray]:
  """Reads every tensor of a TF checkpoint into `{name: array}`.

  Raises:
    FileNotFoundError: naming the expected `.index` file.
  """
  if not tf.io.gfile.exists(prefix + ".index"):
    raise FileNotFoundError(f"no checkpoint at {prefix!r} ({prefix}.index does not exist)")
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def list_google_checkpoint(prefix: str) -> dict[str, tuple[int, ...]]:
  """Names and shapes of a checkpoint, read from its index alone (no data shard needed)."""
  if not tf.io.gfile.exists(prefix + ".index"):
    raise FileNotFoundError(f"no checkpoint at {prefix!r} ({prefix}.index does not exist)")
  return {name: tuple(shape) for name, shape in tf.train.list_variables(prefix)}


def assign_google_weights(model: keras.Model, weights: Mapping[str, np.ndarray], source: str,
                          *, allow_unused: bool = False, allow_missing: Sequence[str] = (),
                          ignored: Sequence[str] = ()) -> LoadReport:
  """Assigns a Google-name dict to a tfbert model, strictly.

  Args:
    model: A tfbert model.
    weights: `{google_name: array}`; optimizer slots and step counters are ignored.
    source: Where the weights came from, for messages.
    allow_unused: Accept source tensors that the model has no weight for (e.g. the
      pretraining heads when initializing a SQuAD model).
    allow_missing: Model components (`"mlm_head"`, `"nsp_head"`, `"span_head"`,
      `"classifier_head"`, `"encoder"`) whose weights may be absent from the source and keep
      their initial values.
    ignored: Further source names skipped on purpose (reported as ignored).

  Returns:
    A `LoadReport`.

  Raises:
    ValueError: listing every shape mismatch, unmatched source tensor and unset weight.
  """
  variables = google_names.google_variable_map(model)
  skipped = sorted(set(ignored) | {n for n in weights if google_names.is_ignored(n)})
  candidates = {n: w for n, w in weights.items() if n not in set(skipped)}
  problems = []
  mismatched = [f"{n}: source {tuple(np.shape(w))} vs model {tuple(variables[n].shape)}"
                for n, w in sorted(candidates.items())
                if n in variables and tuple(np.shape(w)) != tuple(variables[n].shape)]
  if mismatched:
    problems.append("shape mismatch:\n  " + "\n  ".join(mismatched))
  unused = sorted(set(candidates) - set(variables))
  if unused and not allow_unused:
    problems.append("source tensors with no model weight:\n  " + "\n  ".join(unused))
  missing = sorted(set(variables) - set(candidates))
  allowed = _component_names(model, variables, allow_missing)
  not_allowed = [n for n in missing if n not in allowed]
  if not_allowed:
    problems.append("model weights missing from the source:\n  " + "\n  ".join(not_allowed))
  if problems:
    raise ValueError(f"cannot load {source} into {type(model).__name__}:\n" + "\n".join(problems))
  used = sorted(set(candidates) & set(variables))
  for name in used:
    variables[name].assign(np.asarray(candidates[name], dtype=variables[name].dtype))
  return LoadReport(source=source, used=tuple(used),
                    set_weights=tuple(variables[n].path for n in used), ignored=tuple(skipped),
                    unused=tuple(unused), missing=tuple(missing))


def _component_names(model: keras.Model, variables: Mapping, components: Sequence[str]) -> set:
  """Google names of the weights of `components` (by weight identity, not by name prefix:
  the classifier head's Google scope is empty, so a prefix would match every name)."""
  attributes = {attribute for attribute, _, _, _ in google_names.components(model)}
  owned = set()
  for component in components:
    if component not in attributes:
      raise ValueError(f"{type(model).__name__} has no component {component!r}")
    owned |= {id(w) for w in getattr(model, component).weights}
  return {name for name, variable in variables.items() if id(variable) in owned}


def load_google_checkpoint(model: keras.Model, prefix: str, *, allow_unused: bool = False,
                           allow_missing: Sequence[str] = ()) -> LoadReport:
  """Loads a google-research/bert TF1 checkpoint (`bert/...`, `cls/...`) into a tfbert model.

  Args:
    model: A tfbert model.
    prefix: Checkpoint prefix, e.g. `.../bert_model.ckpt`.
    allow_unused, allow_missing: See `assign_google_weights`.

  Returns:
    A `LoadReport`.
  """
  return assign_google_weights(model, read_google_checkpoint(prefix), prefix,
                               allow_unused=allow_unused, allow_missing=allow_missing)


def google_weights(model: keras.Model) -> dict[str, np.ndarray]:
  """Returns the model's weights as a Google-name dict of numpy arrays."""
  return {name: v.numpy() for name, v in google_names.google_variable_map(model).items()}


def write_google_checkpoint(weights: Mapping[str, np.ndarray], prefix: str) -> None:
  """Writes `{name: array}` as a TF checkpoint holding exactly these names (SaveV2)."""
  directory = os.path.dirname(prefix)
  if directory:
    tf.io.gfile.makedirs(directory)
  names = sorted(weights)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.convert_to_tensor(weights[n]) for n in names])


def export_google_checkpoint(model: keras.Model, prefix: str, config_file: bool = True) -> None:
  """Writes the model as a google-research/bert checkpoint (+ `bert_config.json` beside it)."""
  write_google_checkpoint(google_weights(model), prefix)
  if config_file:
    model.config.to_json_file(os.path.join(os.path.dirname(prefix) or ".", "bert_config.json"))
