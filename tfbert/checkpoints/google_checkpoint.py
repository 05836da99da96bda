"""Reads and writes google-research/bert TF1 name-based checkpoints.

Loading is strict by default: every model weight must be set and every checkpoint tensor
that is not an optimizer slot or step counter must be used; shapes must match exactly. The
returned `LoadReport` says which tensors were used and which weights were set.

Writing uses the `SaveV2` op directly, so the checkpoint holds exactly Google's names (no
object-graph keys) and loads in google-research/bert's own code. The files of a checkpoint
(`.data-00000-of-00001`, `bert_config.json`, `vocab.txt`, and the `.index` last) appear
together (`write_google_checkpoint` says how).

Reading names the checkpoint prefix, the file (`.index` or a `.data-*` shard) and what is
wrong with it (missing, truncated, corrupt) instead of TensorFlow's bare `IndexError` or
`OpError`.
"""

import dataclasses
import difflib
import json
import os
import re
import weakref
from typing import Any, Mapping, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from tfbert.checkpoints import google_names, huggingface
from tfbert.config import BertConfig
from tfbert.runtime import atomic, files

# What a user may pass instead of the prefix: one of the checkpoint's own files.
_PART_SUFFIX = re.compile(r"\.(index|meta|data-\d{5}-of-\d{5})$")


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
    FileNotFoundError: naming the prefix and the missing `.index` or data file.
    ValueError: naming the prefix and the truncated or corrupt `.index` or data file.
  """
  prefix = files.as_path(prefix, "prefix")
  reader = _open_index(prefix)
  problem = training_checkpoint_problem(prefix, reader.get_variable_to_shape_map())
  if problem:
    raise ValueError(problem)
  data_files = sorted(tf.io.gfile.glob(prefix + ".data-?????-of-?????"))
  if not data_files:
    raise FileNotFoundError(f"checkpoint {prefix}: data file {prefix}.data-00000-of-00001 is "
                            "missing (no .data-* file beside the .index)")
  weights = {}
  for name in sorted(reader.get_variable_to_shape_map()):
    try:
      weights[name] = reader.get_tensor(name)
    except (tf.errors.OpError, IndexError, ValueError, RuntimeError) as e:
      raise _data_error(prefix, data_files, name, e) from e
  return weights


def list_google_checkpoint(prefix: str) -> dict[str, tuple[int, ...]]:
  """Names and shapes of a checkpoint, read from its index alone (no data shard needed).

  Raises:
    FileNotFoundError, ValueError: as `read_google_checkpoint` for the `.index`.
  """
  prefix = files.as_path(prefix, "prefix")
  reader = _open_index(prefix)
  return {name: tuple(shape) for name, shape in sorted(reader.get_variable_to_shape_map().items())}


# The scopes of a tfbert training checkpoint (`tf.train.Checkpoint(model=..., optimizer=...)`,
# as `tfbert.training.training_loop` saves it in a run's checkpoints/): object-based names,
# `<scope>/.../.ATTRIBUTES/VARIABLE_VALUE`, never a Google checkpoint's `bert/...`.
TRAINING_SCOPES = ("model/", "optimizer/")
RUN_MODELS = ("model.keras", os.path.join("best", "model.keras"))


def training_checkpoint_problem(prefix: str, names: Optional[Any] = None) -> Optional[str]:
  """Where a Google checkpoint (or a model) is wanted: the message naming `prefix` as a
  tfbert run's training checkpoint and the run's model to use instead; None for any other
  prefix (no readable index: the callers name that their own way).

  Args:
    prefix: a checkpoint prefix (`<prefix>.index`).
    names: its tensor names, when already read (else read from the index alone).
  """
  if names is None:
    try:
      names = list_google_checkpoint(prefix)
    except (OSError, ValueError):
      return None
  if not any(name.startswith(TRAINING_SCOPES) and "/.ATTRIBUTES/" in name for name in names):
    return None
  directory = os.path.dirname(os.path.abspath(prefix))
  run = os.path.dirname(directory) if os.path.basename(directory) == "checkpoints" else None
  if run is None or not files.isfile(os.path.join(run, "run_config.json")):
    return (f"{prefix} is a training checkpoint of a tfbert run (its model and optimizer "
            "state, to resume training), not a model to read: use the run's model.keras "
            "(convert_checkpoint --input_format=tfbert --input=<run>/model.keras)")
  found = [os.path.join(run, name) for name in RUN_MODELS
           if files.isfile(os.path.join(run, name))]
  if found:
    return (f"{prefix} is a training checkpoint of the tfbert run {run} (its model and "
            f"optimizer state, to resume training), not a model to read: convert "
            f"{' (or '.join(found)}{')' if len(found) > 1 else ''} "
            f"(convert_checkpoint --input_format=tfbert --input={found[0]})")
  return (f"{prefix} is a training checkpoint of the tfbert run {run} (its model and "
          f"optimizer state, to resume training), not a model to read, and the run has no "
          f"{os.path.join(run, 'model.keras')} yet (evaluating does not write one): finish "
          f"its training (rerun its command, --do_train --output_dir={run}: it resumes from "
          "its latest checkpoint and writes model.keras at the end), then convert that")


def prefixes_in(directory: str) -> list[str]:
  """The checkpoint prefixes (names, sorted) of the `.index` files in `directory`."""
  return sorted(name[:-len(".index")] for name in files.listdir(directory)
                if name.endswith(".index"))


def check_prefix(prefix: str, flag: str = "") -> None:
  """Checks that `prefix` names a checkpoint as a prefix does (`<prefix>.index` exists).

  Args:
    prefix: the checkpoint's prefix (e.g. `.../bert_model.ckpt`).
    flag: the flag that gave it (e.g. "--init_checkpoint"), named in the errors.

  Raises:
    ValueError: `prefix` is a directory (naming a prefix found in it).
    FileNotFoundError: no `.index` for `prefix` (with a hint when a file's suffix was given).
  """
  said = f"{flag} " if flag else ""
  if files.isdir(prefix):  # Not tf.io.gfile's: `ram://` calls any prefix a directory.
    found = prefixes_in(prefix)
    example = os.path.join(prefix, found[0] if found else "bert_model.ckpt")
    raise ValueError(f"{said}{prefix} is a directory: give the checkpoint's prefix, its "
                     f".index file's path without .index (e.g. {example})")
  index = prefix + ".index"
  if files.dangling_link(index) is not None:  # tf.io.gfile.exists follows the link.
    raise FileNotFoundError(f"{said}no checkpoint at {prefix!r}: "
                            + files.missing_file_message(index, "its index file"))
  if not tf.io.gfile.exists(index):
    hint = ""
    if prefix.endswith(".keras") and files.isfile(prefix):
      hint = ("; it is a tfbert .keras model, not a Google checkpoint: give it as "
              "--init_tfbert (convert_checkpoint: --input_format=tfbert)")
    elif _PART_SUFFIX.search(prefix):
      hint = f"; give the prefix {_PART_SUFFIX.sub('', prefix)}, without the file's suffix"
    raise FileNotFoundError(f"{said}no checkpoint at {prefix!r} ({index} does not exist"
                            f"{hint})")


def _open_index(prefix: str):
  """A reader of the checkpoint's `.index`; errors name the file."""
  check_prefix(prefix)
  index = prefix + ".index"
  try:
    # The prefix itself, not `tf.train.load_checkpoint`'s reading of it: that takes a
    # directory's latest checkpoint, and `ram://` calls any prefix of a file a directory.
    return tf.compat.v1.train.NewCheckpointReader(prefix)
  except (tf.errors.OpError, IndexError, ValueError, RuntimeError) as e:
    raise ValueError(f"checkpoint {prefix}: index file {index} is truncated or corrupt "
                     f"({_one_line(e)})") from e


def _data_error(prefix: str, data_files: Sequence[str], tensor: str,
                error: Exception) -> Exception:
  """The error to raise when reading `tensor` from the data file(s) failed."""
  message = _one_line(error)
  files = " / ".join(data_files)
  if "No such file" in message:
    missing = message.split(";")[0]
    return FileNotFoundError(f"checkpoint {prefix}: data file {missing} is missing")
  if isinstance(error, IndexError) or "less bytes" in message:
    what = "truncated"
  elif "Checksum" in message or "checksum" in message:
    what = "corrupt"
  else:
    what = "unreadable"
  return ValueError(f"checkpoint {prefix}: data file {files} is {what} "
                    f"(reading {tensor}: {message})")


# The config fields a checkpoint's tensor shapes record, in the order a mismatch is named:
# (field, Google name, axis of its shape that holds the field).
CONFIG_SHAPES = (("hidden_size", "bert/embeddings/word_embeddings", 1),
                 ("vocab_size", "bert/embeddings/word_embeddings", 0),
                 ("intermediate_size", "bert/encoder/layer_0/intermediate/dense/kernel", 1),
                 ("max_position_embeddings", "bert/embeddings/position_embeddings", 0),
                 ("type_vocab_size", "bert/embeddings/token_type_embeddings", 0))
_LAYER = re.compile(r"^bert/encoder/layer_(\d+)/")


def config_mismatch(config: BertConfig, weights: Mapping[str, Any], where: str
                    ) -> Optional[str]:
  """The first field of `config` that the checkpoint's tensors contradict, or None: a config
  that does not describe the checkpoint gives one shape mismatch per tensor, and the cause
  is the config, not the tensors.

  Args:
    config: the config a model is (to be) built with.
    weights: the checkpoint's `{google_name: array or shape}`.
    where: where `config` came from, e.g. "--bert_config_file=cfg.json".

  Returns:
    e.g. "hidden_size 64 in --bert_config_file=cfg.json, but the checkpoint's
    bert/embeddings/word_embeddings is [30522, 32]".
  """
  def shape(value):
    return tuple(value) if isinstance(value, (tuple, list)) else tuple(np.shape(value))
  for field, name, axis in CONFIG_SHAPES:
    if name in weights and len(shape(weights[name])) > axis:
      if shape(weights[name])[axis] != getattr(config, field):
        return (f"{field} {getattr(config, field)} in {where}, but the checkpoint's {name} is "
                f"{list(shape(weights[name]))}")
  layers = {int(m.group(1)) for m in map(_LAYER.match, weights) if m}
  if layers and len(layers) != config.num_hidden_layers:
    return (f"num_hidden_layers {config.num_hidden_layers} in {where}, but the checkpoint has "
            f"{len(layers)} (bert/encoder/layer_{min(layers)} to layer_{max(layers)})")
  return None


def _one_line(error: Exception) -> str:
  return " ".join(str(error).split()) or type(error).__name__


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
  config = getattr(model, "config", None)
  cause = (config_mismatch(config, candidates, "the model's config")
           if mismatched and isinstance(config, BertConfig) else None)
  if cause:  # First: one line names the cause of every mismatch below.
    problems.append(f"{cause}: build the model with the config the checkpoint was trained "
                    "with.")
  if mismatched:
    problems.append("shape mismatch:\n  " + "\n  ".join(mismatched))
  # A NaN or inf weight made every output NaN without a word (sweep 34, B78).
  broken = [f"{n}: {int(np.size(w) - np.count_nonzero(np.isfinite(w)))} of {np.size(w)} "
            "values" for n, w in sorted(candidates.items())
            if n in variables and np.issubdtype(np.asarray(w).dtype, np.floating)
            and not np.isfinite(w).all()]
  if broken:
    problems.append("weights that are not finite numbers (NaN or inf; a damaged or "
                    "diverged checkpoint):\n  " + "\n  ".join(broken))
  unused = sorted(set(candidates) - set(variables))
  if unused and not allow_unused:
    problems.append("source tensors with no model weight:\n  " + "\n  ".join(unused)
                    + "\n  pass allow_unused=True to skip them (e.g. the pretraining heads "
                      "cls/... of a pretrained checkpoint, or a fine-tuned head)")
  missing = sorted(set(variables) - set(candidates))
  allowed = component_names(model, variables, allow_missing)
  not_allowed = [n for n in missing if n not in allowed]
  if not_allowed:
    owners = missing_components(model, variables, not_allowed)
    heads = tuple(owner for owner in owners if owner != "encoder")
    fixes = ([f"pass allow_missing={heads!r} to keep the head's initial values (a new head)"]
             if heads else []) + (
        ["the encoder's weights are never left out: load a checkpoint of this encoder (its "
         "config's layers and sizes)"] if "encoder" in owners else [])
    problems.append("model weights missing from the source:\n  " + "\n  ".join(not_allowed)
                    + "".join(f"\n  {fix}" for fix in fixes))
  if problems:
    raise ValueError(f"cannot load {source} into {type(model).__name__}:\n" + "\n".join(problems))
  used = sorted(set(candidates) & set(variables))
  for name in used:
    variables[name].assign(np.asarray(candidates[name], dtype=variables[name].dtype))
  if isinstance(source, str) and files.isfile(source + ".index"):
    _read_from.setdefault(model, set()).add(files.absolute(source))
  return LoadReport(source=source, used=tuple(used),
                    set_weights=tuple(variables[n].path for n in used), ignored=tuple(skipped),
                    unused=tuple(unused), missing=tuple(missing))


def missing_components(model: keras.Model, variables: Mapping, names: Sequence[str]
                       ) -> tuple[str, ...]:
  """The components (`allow_missing`'s names, in `google_names.components` order) that
  hold the weights `names` (Google names of `variables`)."""
  wanted = {id(variables[name]) for name in names}
  return tuple(attribute for attribute, _, _, layer in google_names.components(model)
               if wanted & {id(w) for w in layer.weights})


def component_names(model: keras.Model, variables: Mapping, components: Sequence[str]
                    ) -> set[str]:
  """Google names of the weights of `components` (by weight identity, not by name prefix:
  the classifier head's Google scope is empty, so a prefix would match every name)."""
  attributes = [attribute for attribute, _, _, _ in google_names.components(model)]
  if isinstance(components, (str, bytes)):  # Iterated, "span_head" named 's', 'p', ...
    raise TypeError(f"allow_missing must be a sequence of component names, e.g. "
                    f"[{components!r}], got the string {components!r}")
  owned = set()
  for component in components:
    if component not in attributes:
      close = difflib.get_close_matches(str(component), attributes, n=1)
      raise ValueError(f"{type(model).__name__} has no component {component!r}"
                       f"{f' (did you mean {close[0]!r}?)' if close else ''}; its components: "
                       f"{', '.join(attributes)}")
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
  prefix = files.as_path(prefix, "prefix")
  return assign_google_weights(model, read_google_checkpoint(prefix), prefix,
                               allow_unused=allow_unused, allow_missing=allow_missing)


# {model: absolute prefixes of the Google checkpoints its weights were read from}, so that
# `export_google_checkpoint` never writes a model over its own source: a released model-only
# checkpoint holds exactly the tensors tfbert writes (`check_replaceable_checkpoint` cannot
# tell it from tfbert's own export). Weak keys: no model is kept alive by it.
_read_from: "weakref.WeakKeyDictionary[keras.Model, set]" = weakref.WeakKeyDictionary()


def check_not_the_source(model: keras.Model, prefix: str) -> None:
  """Raises ValueError when `prefix` is a Google checkpoint `model` was read from
  (`load_google_checkpoint`, `tfbert.load`): writing the model there would replace an input
  (a pretrained release fine-tuned, then saved back over the release)."""
  if files.absolute(prefix) in _read_from.get(model, ()):
    raise ValueError(f"{prefix} is the checkpoint this {type(model).__name__} was read from: "
                     "writing over it would replace that input; write to another prefix or "
                     "into another folder")


def carry_source(model: keras.Model, derived: keras.Model) -> keras.Model:
  """`derived` (a model built with `model`'s weights: another head on its encoder, its
  labels named) read from where `model` was, for `check_not_the_source`. Returns it."""
  if model in _read_from:
    _read_from.setdefault(derived, set()).update(_read_from[model])
  return derived


def google_weights(model: keras.Model) -> dict[str, np.ndarray]:
  """Returns the model's weights as a Google-name dict of numpy arrays."""
  return {name: v.numpy() for name, v in google_names.google_variable_map(model).items()}


def write_google_checkpoint(weights: Mapping[str, np.ndarray], prefix: str, *,
                            config: Optional[BertConfig] = None,
                            vocab_file: Optional[str] = None,
                            do_lower_case: Optional[bool] = None,
                            model_max_length: Optional[int] = None) -> None:
  """Writes `{name: array}` as a TF checkpoint holding exactly these names (SaveV2).

  The files appear together, the `.index` last (`tfbert.runtime.atomic.file_set`): everything is
  written into a staging directory beside `prefix`, so a full disk fails there and leaves
  the directory as it was; then the old `.index` is removed, the data file,
  `bert_config.json` and `vocab.txt` are renamed into place, and the new `.index` last.
  Readers (TensorFlow, google-research/bert, tfbert) find a checkpoint through its
  `.index`, so until it appears there is no checkpoint rather than a truncated one or an
  old index over new data. Not a whole-directory rename: a prefix's directory may hold
  other files (a run's export, other checkpoints, the user's own) that must survive.

  Args:
    weights: `{google_name: array}`.
    prefix: the checkpoint prefix, local or a URL, e.g. `.../bert_model.ckpt`.
    config: written as `bert_config.json` beside the checkpoint when given.
    vocab_file: copied as `vocab.txt` beside the checkpoint when given.
    do_lower_case: with `vocab_file`, the tokenizer's JSON files are written too
      (`tfbert.checkpoints.huggingface.write_tokenizer_files`).
    model_max_length: their `model_max_length` (default: `max_position_embeddings`).

  Raises:
    OSError: naming `prefix`, when a file cannot be written (a full disk).
    ValueError: a prefix whose writing would damage what is there (`check_writable_prefix`),
      or that holds a checkpoint with tensors this one does not write
      (`check_replaceable_checkpoint`).
  """
  prefix = files.as_path(prefix, "prefix")
  sides = {"bert_config.json": None if config is None else json.dumps(config.to_dict())}
  if vocab_file:
    sides["vocab.txt"] = files.read_bytes(vocab_file)
  check_writable_prefix(prefix, {name: value for name, value in sides.items()
                                 if value is not None})
  check_replaceable_checkpoint(prefix, weights)
  directory = files.parent(prefix)
  files.makedirs(directory)
  base = os.path.basename(prefix)
  names = sorted(weights)
  try:
    with atomic.file_set(directory, base + ".index", "ckpt") as staging:
      tf.raw_ops.SaveV2(prefix=os.path.join(staging, base), tensor_names=names,
                        shape_and_slices=[""] * len(names),
                        tensors=[tf.convert_to_tensor(weights[n]) for n in names])
      if config is not None:
        config.to_json_file(os.path.join(staging, "bert_config.json"))
      if vocab_file and do_lower_case is not None:
        max_length = model_max_length or (config.max_position_embeddings if config else 512)
        huggingface.write_tokenizer_files(staging, vocab_file, do_lower_case, max_length)
      elif vocab_file:
        files.copy(vocab_file, os.path.join(staging, "vocab.txt"))
      # Every side file as written (the tokenizer's too), before any is moved into place.
      check_writable_prefix(prefix, _staged_sides(staging, base))
  except tf.errors.OpError as e:
    # SaveV2's message names a temporary that is gone: "<graph> <temporary>; <reason> [Op:..]".
    reason = e.message.rsplit(";", 1)[-1].split(" [Op:")[0].strip()
    raise OSError(f"cannot write {prefix}: {reason}") from e


def check_writable_prefix(prefix: str, sides: Mapping[str, Any]) -> None:
  """Refuses a checkpoint prefix whose writing would damage what is there.

  * `prefix` an existing directory: the files would land beside it, in its parent.
  * A prefix inside an output tfbert wrote (an export, `best/`) or a SavedModel
    (`tfbert.runtime.atomic.enclosing_output`): the checkpoint and its side files would
    change that model's files (in a SavedModel's `variables/`, replace its weights).
  * A side file already in the prefix's directory (`bert_config.json`, `vocab.txt`, the
    tokenizer's files: `sides`, by name, with the content about to be written, str or bytes)
    whose content differs, unless it belongs to this prefix's own checkpoint alone (a
    rewrite of it): it describes another checkpoint beside it, or is another model's, or an
    input (`--bert_config_file`, `--vocab_file`), and replacing it would break or change
    that. The same content is written as before (a rerun).

  Raises:
    ValueError: naming the prefix, the file and (when there is one) the other checkpoint.
  """
  if files.isdir(prefix) and not files.isfile(prefix + ".index"):
    raise ValueError(f"{prefix} is a directory: a Google checkpoint is written at a prefix "
                     f"such as {os.path.join(prefix, 'bert_model.ckpt')}")
  enclosing = atomic.enclosing_output(prefix, include_self=False)
  if enclosing is not None:
    raise ValueError(f"{prefix} lies inside {enclosing[0]}, {enclosing[1]}: a Google "
                     "checkpoint written there would change that model's files; write it "
                     "into a directory of its own")
  directory = files.parent(prefix)
  if not files.isdir(directory):
    return
  base = os.path.basename(prefix)
  found = prefixes_in(directory)
  others = [name for name in found if name != base]
  if found and not others:
    return  # This prefix's own checkpoint alone: its side files are rewritten with it.
  for name, content in sides.items():
    path = os.path.join(directory, name)
    if not files.isfile(path) or files.same_content(name, files.read_bytes(path), content):
      continue
    if others:
      raise ValueError(
          f"{prefix}: {path} describes the checkpoint {os.path.join(directory, others[0])} "
          f"beside it, and this model's {name} differs: writing it would break that "
          "checkpoint; write into a directory of its own")
    raise ValueError(
        f"{prefix}: {path} is already there, and this model's {name} differs: writing it "
        "would replace another model's file (or an input such as --bert_config_file or "
        "--vocab_file); write into a directory of its own, or remove it if it is no longer "
        "needed")


def check_replaceable_checkpoint(prefix: str, names: Any) -> None:
  """Refuses to write a checkpoint of tensors `names` over an existing one at `prefix` that
  tfbert did not write: one holding a tensor the write would not rewrite.

  tfbert's Google checkpoints hold exactly a model's Google names (`google_weights`): never
  an optimizer slot (`adam_m`, `adam_v`) nor `global_step`, which every google-research/bert
  training checkpoint holds. So a tensor outside `names` marks a checkpoint tfbert did not
  write (or another model's, e.g. a pretrainer's `cls/` heads under a classifier's export),
  and writing over it would lose that tensor (an input's optimizer state and step, e.g.
  `export_google_checkpoint(tfbert.load(g), g + "/bert_model.ckpt")`). Rewriting tfbert's
  own export of the model (the same names) is allowed. Needs no extra file: the `.index`
  alone is read.

  Raises:
    ValueError: naming the prefix, how many tensors would be lost, a few of them, and what
      to do.
  """
  if not files.isfile(prefix + ".index"):
    return
  try:
    existing = list(list_google_checkpoint(prefix))
  except (OSError, ValueError):
    return  # No readable checkpoint there: nothing in it can be lost.
  lost = sorted(set(existing) - set(names))
  if lost:
    shown = ", ".join(lost[:3]) + (", ..." if len(lost) > 3 else "")
    raise ValueError(
        f"{prefix} already holds a checkpoint of {len(existing)} tensors, {len(lost)} of which "
        f"this model's checkpoint does not write ({shown}): writing over it would lose them "
        "(it is an input, e.g. the checkpoint the model was read from, or another model's, "
        "not tfbert's export of this model); write to another prefix or into another folder")


def _staged_sides(staging: str, base: str) -> dict[str, bytes]:
  """The files of a staged checkpoint set other than the checkpoint's own (`base.index`,
  `base.data-*`): those that go beside it, by name, with their content."""
  return {name: files.read_bytes(os.path.join(staging, name))
          for name in files.listdir(staging)
          if not (name.startswith(base + ".") and _PART_SUFFIX.search(name))}


def export_google_checkpoint(model: keras.Model, prefix: str, config_file: bool = True,
                             vocab_file: Optional[str] = None,
                             do_lower_case: Optional[bool] = None,
                             model_max_length: Optional[int] = None,
                             allow_casing_mismatch: bool = False) -> None:
  """Writes the model as a google-research/bert checkpoint, `bert_config.json` beside it.

  Args:
    model: a tfbert model.
    prefix: the checkpoint prefix.
    config_file: write `bert_config.json` beside the checkpoint.
    vocab_file: copied as `vocab.txt` beside the checkpoint when given.
    do_lower_case: with `vocab_file`, also write `tokenizer_config.json` (which records the
      casing, a Google checkpoint's usual missing piece) and `special_tokens_map.json`.
    model_max_length: the sequence length `tokenizer_config.json` records (default:
      `max_position_embeddings`); at most `max_position_embeddings`.
    allow_casing_mismatch: record a `do_lower_case` that the vocabulary contradicts (cased
      entries mean cased: `tfbert.text.casing`); refused otherwise, as `tfbert.load` would
      refuse to read it back.

  Raises:
    ValueError: for a model whose head google-research/bert has no form for (the model's
      `google_checkpoint_head` is False: a tagger's would read back as a sentence classifier);
      a prefix in a folder holding a model of another kind (or another checkpoint), which
      would then hold two (`model_paths.check_no_other_model`, as `tfbert.save`);
      `do_lower_case` or `model_max_length` without `vocab_file` (nothing records them:
      sweep 33, B99/B100), a `model_max_length` beyond the model's positions (B98).
    tfbert.text.casing.CasingMismatchError: a `do_lower_case` the vocabulary contradicts
      (B96).
  """
  # model_paths reads checkpoints through this module: imported here, not at its top.
  from tfbert.checkpoints import model_paths  # pylint: disable=import-outside-toplevel
  from tfbert.text import casing  # pylint: disable=import-outside-toplevel
  prefix = files.as_path(prefix, "prefix")
  given = [name for name, value in (("do_lower_case", do_lower_case),
                                    ("model_max_length", model_max_length))
           if value is not None]
  if given and not vocab_file:
    raise ValueError(f"{', '.join(given)}: recorded in tokenizer_config.json beside the "
                     "vocabulary, which is written only with vocab_file; pass vocab_file")
  if model_max_length is not None:
    limit = model.config.max_position_embeddings
    if (not isinstance(model_max_length, int) or isinstance(model_max_length, bool)
        or not 1 <= model_max_length <= limit):
      raise ValueError(f"model_max_length must be an int in [1, {limit}] (the model's "
                       f"max_position_embeddings), got {model_max_length!r}")
  if vocab_file and do_lower_case is not None:
    casing.vocabulary_casing(do_lower_case, vocab_file, "export_google_checkpoint",
                             allow_casing_mismatch)
  if not getattr(model, "google_checkpoint_head", True):
    raise ValueError(f"google-research/bert has no {type(model).__name__} head: its "
                     "checkpoint would read back as another model; write a Hugging Face "
                     "directory or a .keras file instead")
  model_paths.check_no_other_model(prefix, "google")
  check_not_the_source(model, prefix)
  write_google_checkpoint(google_weights(model), prefix,
                          config=model.config if config_file else None, vocab_file=vocab_file,
                          do_lower_case=do_lower_case, model_max_length=model_max_length)
