"""Exports an export's id signature to ONNX (the optional extra `tfbert[onnx]`).

`export_onnx(export_dir, onnx_file)` converts `serving_default` of `<export_dir>/ids/` (the
core-ops SavedModel every tfbert export holds; `tfbert.serving.export`) with `tf2onnx`:
int32 `input_ids`, `input_mask`, `segment_ids` [B, S] (B and S dynamic) -> the export's
float32 outputs under the same names (encoder: `pooled_output` [B, H], `sequence_output`
[B, S, H]; SQuAD: `start_logits`, `end_logits` [B, S]; classifier: `logits`,
`probabilities` [B, C]; tagger: the same per position [B, S, C]). A classifier's or tagger's
label names (the export's `labels.txt`) go into the file's metadata (`LABELS_KEY`).
`signature="serving_hf"` takes Hugging Face's names and dtype instead, int64 `input_ids`,
`attention_mask`, `token_type_ids`: a Hugging Face tokenizer's NumPy output
(`return_tensors="np"`) goes to ONNX Runtime unchanged, as to transformers' own ONNX
exports. Any id signature of `tfbert.serving.export.ID_SIGNATURES` converts.

Two things stand between the SavedModel and tf2onnx, both handled here:

* An XLA-compiled `tf.function` stays a function call (`PartitionedCall`) in a frozen graph,
  which tf2onnx cannot convert ("No Op registered for PartitionedCall"). Exports trace the
  layers as plain ops (`tfbert.layers.serving_ops`); exports made before that hold tfbert's
  XLA-compiled element-wise kernels. Any call's XLA attributes are dropped and the call
  inlined (Grappler), leaving plain TensorFlow ops with the same math.
* A bfloat16 export (`serving.json`'s `compute_dtype`; `export_dtype="bfloat16"`, or "auto"
  on a CPU with fast bfloat16 matmuls) is refused before conversion: tf2onnx 1.17 writes its
  graph with a float16 and a bfloat16 input to one MatMul, which ONNX Runtime refuses to load
  ("Type parameter (T) of Optype (MatMul) bound to different types"; measured on MiniLM).
  The message says to export in float32 for ONNX.
* The SavedModel's in-graph input checks (`Assert`) have no ONNX counterpart: tf2onnx drops
  them, so an ONNX model does not validate its inputs. Validate requests before
  ONNX Runtime sees them (ids in [0, vocab_size), segments in [0, type_vocab_size), mask
  0/1, S <= max_position_embeddings).

Measured (MiniLM-L6-H384, ONNX Runtime 1.31 CPU against the SavedModel): outputs within
3.3e-6 (sequence_output; 2.5e-7 pooled_output); conversion ~30 s.
"""

import contextlib
import json
import logging
import os
from typing import Iterator, Optional

import numpy as np
import tensorflow as tf

from tfbert.checkpoints import model_paths
from tfbert.config import BertConfig
from tfbert.runtime import atomic, files, paths, run_directory, validation
from tfbert.serving import export, serving_dtype

# The model's metadata entry holding a classifier's or tagger's label names (a JSON list, in
# id order, from the export's `labels.txt`); ONNX Runtime reads it as
# `session.get_modelmeta().custom_metadata_map["labels"]` (`onnx_labels`).
LABELS_KEY = "labels"
OPSET = 17  # ONNX Runtime 1.31 runs opsets up to 23; 17 also loads in much older runtimes.
# The lowest opset that expresses every tfbert graph: BERT's strided slices (the position
# embeddings cut to S, `new_axis_mask`) need opset 10's Slice. Measured (tf2onnx 1.17): each
# id signature of the encoder, span labeler, pair classifier and tagger exports converts at
# opsets 10 to 17 and none at 7 to 9 ("No Op registered for StridedSlice"); at opset 10
# ONNX Runtime gives the SavedModels' outputs within 2.4e-6.
MIN_OPSET = 10
_XLA_ATTRIBUTES = ("_XlaMustCompile", "_noinline")


def _import_tf2onnx_convert():
  """`tf2onnx.convert`, the optional extra, imported only here (after the cheap checks),
  leaving the process's environment as it was: tf2onnx 1.16's `convert` module sets
  `TF_CPP_MIN_LOG_LEVEL=3` when imported, which silenced TensorFlow's errors in every
  process the caller started afterwards (and changed what a `TF_CPP_MIN_LOG_LEVEL`-reading
  tool of the same process prints)."""
  before = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
  try:
    import tf2onnx.convert as tf2onnx_convert  # noqa: PLC0415
  finally:
    if before is None:
      os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
    else:
      os.environ["TF_CPP_MIN_LOG_LEVEL"] = before
  return tf2onnx_convert


def inlined_graph(function: tf.types.experimental.ConcreteFunction):
  """A frozen, call-free GraphDef of `function`: variables as constants, every function
  call (XLA-compiled ones included) inlined.

  Returns:
    (graph_def, input tensor names, output tensor names in `tf.nest.flatten` order of
    `function.structured_outputs`, i.e. sorted output names).
  """
  # TensorFlow's own freezing (private, but what its TFLite converter and tf2onnx use); tf2onnx
  # is the optional extra, imported only here.
  from tensorflow.python.framework import convert_to_constants
  from tf2onnx import tf_loader

  frozen = convert_to_constants.convert_variables_to_constants_v2(function,
                                                                   aggressive_inlining=True)
  graph_def = frozen.graph.as_graph_def()
  for node in list(graph_def.node) + [n for f in graph_def.library.function
                                      for n in f.node_def]:
    _drop(node.attr)
  for function_def in graph_def.library.function:
    _drop(function_def.attr)
  inputs = [t.name for t in frozen.inputs if t.dtype != tf.resource]
  outputs = [t.name for t in frozen.outputs]
  with tf.Graph().as_default():  # Grappler's function inlining runs on a v1 graph.
    graph_def = tf_loader.tf_optimize(inputs, outputs, graph_def)
  calls = [n.name for n in graph_def.node if n.op.endswith("PartitionedCall")]
  if calls:
    raise ValueError(f"function calls left after inlining: {calls[:5]}")
  return graph_def, inputs, outputs


def _drop(attributes) -> None:
  for name in _XLA_ATTRIBUTES:
    if name in attributes:
      del attributes[name]


def id_saved_model(export_dir: str) -> str:
  """`<export_dir>/ids/` (the core-ops id signature) when there is one, else `export_dir`
  itself (an `ids/` directory given directly, or another SavedModel)."""
  ids = os.path.join(export_dir, export.ID_DIR)
  return ids if files.isdir(ids) else export_dir


def saved_model_source(export_dir: str, signature: str = export.SERVING_SIGNATURE) -> str:
  """The SavedModel `signature` is converted from: `id_saved_model(export_dir)` for the id
  signatures, else `export_dir`.

  Raises:
    FileNotFoundError: naming `export_dir` when it holds no SavedModel, and the SavedModel
      folders up to two levels down when there are some (a pretraining run's `export/`
      holds `saved_model/` and `google/`), else what `export_dir` is when it is another
      model (a fine-tuning run directory, a .keras file, a Hugging Face, sentence-transformers
      or Google checkpoint) and how to export it (`not_an_export`).
  """
  source = id_saved_model(export_dir) if signature in export.ID_SIGNATURES else export_dir
  if files.isfile(os.path.join(source, "saved_model.pb")):
    return source
  message = f"{export_dir}: no SavedModel (saved_model.pb) here or in {export.ID_DIR}/"
  inside = _saved_models_below(export_dir)
  if inside:
    message += (f"; it holds the SavedModel folder(s) {', '.join(inside)}: pass "
                f"{os.path.join(export_dir, inside[0].rstrip('/'))} as the export directory")
  else:
    message += not_an_export(export_dir)
  raise FileNotFoundError(message)


def not_an_export(path: str) -> str:
  """When `path` is a model but no export (`model_paths.locate`): "; it is <kind>, not an
  export: <how to export it>", for a message that starts with `path`; else ""."""
  from tfbert.checkpoints import model_paths  # pylint: disable=import-outside-toplevel
  try:
    kind, _ = model_paths.locate(path)
  except (ValueError, OSError, TypeError):
    return ""
  python = f'in Python tfbert.save(tfbert.load("{path}"), "<new directory>", "export")'
  if kind == "tfbert" and files.isdir(path):
    flagfile = os.path.join(path, "flags.txt")
    rerun = (f"rerun the tool that trained it with --flagfile={flagfile} --export_dir=<new "
             "directory> (a finished run exports without training again), or "
             if files.isfile(flagfile) else "")
    return (f"; it is a tfbert run directory ({model_paths.RUN_MODEL}), not an export: export "
            f"it: {rerun}{python}")
  what = {"tfbert": "a tfbert .keras model", "hf": "a Hugging Face directory",
          "sentence-transformers": "a sentence-transformers directory",
          "google": "a Google checkpoint"}.get(kind)
  return f"; it is {what}, not an export: export it {python}" if what else ""


def _saved_models_below(directory: str, depth: int = 2) -> list[str]:
  """The folders below `directory` (as `name/` or `name/sub/`, `depth` levels down at most)
  holding a SavedModel, directly or in `ids/`; a SavedModel's own folders are not searched."""
  if depth < 1 or not files.isdir(directory):
    return []
  found = []
  for name in sorted(files.listdir(directory)):
    name = name.rstrip("/")
    path = os.path.join(directory, name)
    if any(files.isfile(os.path.join(where, "saved_model.pb"))
           for where in (path, os.path.join(path, export.ID_DIR))):
      found.append(f"{name}/")
    else:
      found.extend(f"{name}/{below}" for below in _saved_models_below(path, depth - 1))
  return found


SUFFIX = ".onnx"


def export_onnx(export_dir: str, onnx_file: str, *, opset: int = OPSET,
                signature: str = export.SERVING_SIGNATURE, output_name: str = "onnx_file"
                ) -> str:
  """Converts an id signature of `<export_dir>/ids/` (or of `export_dir` itself, when it
  is such a SavedModel, or another `signature` of `export_dir`) to an ONNX file, written
  atomically.

  Args:
    export_dir: a tfbert export directory (or its `ids/`).
    onnx_file: the `.onnx` file to write.
    opset: the ONNX opset.
    signature: the signature to convert (`export.ID_SIGNATURES`' names are read from
      `ids/`); it must take integer features only.
    output_name: how the caller gave `onnx_file`, in the errors about it (a tool: its
      flag, `--output`).

  Returns:
    `onnx_file`.

  Raises:
    FileNotFoundError: naming `export_dir` when it holds no SavedModel.
    ValueError: for an `onnx_file` that is not a `.onnx` file or cannot be written
      (`tfbert.runtime.paths.check_file_output`) or that lies in a tfbert run directory,
      beside the run's own model (`tfbert.runtime.run_directory.check_not_a_run`), before
      any work; an `opset` below `MIN_OPSET`, before any work; when the signature is
      missing or takes strings (raw text needs
      tensorflow-text's ops, which ONNX does not have), or the export computes in bfloat16
      (see the module docstring).
  """
  paths.check_file_output(output_name, onnx_file, SUFFIX)  # Before any work.
  if not validation.is_int(opset) or opset < MIN_OPSET:
    raise ValueError(f"opset {opset!r} cannot express a tfbert graph (BERT's strided slices "
                     f"need opset {MIN_OPSET}'s Slice): pass an int opset >= {MIN_OPSET} (the "
                     f"default, {OPSET})")
  # Not beside a run's own model (`tfbert.save` and convert_checkpoint refuse it too).
  run_directory.check_not_a_run(output_name, onnx_file, files.parent(onnx_file))
  source = saved_model_source(export_dir, signature)
  tf2onnx_convert = _import_tf2onnx_convert()

  record = serving_dtype.read_record(source) or {}
  if record.get("compute_dtype", "float32") != "float32":
    raise ValueError(
        f"{source}: the export computes in {record['compute_dtype']} "
        f"({serving_dtype.RECORD_FILE}), which tf2onnx converts into a graph ONNX Runtime "
        "cannot load: export again with --export_dtype=float32 (export_dtype='float32') "
        "for ONNX")
  loaded = tf.saved_model.load(source)  # Kept alive while the function is frozen.
  if signature not in loaded.signatures:
    raise ValueError(f"{source}: no signature {signature!r} (has {sorted(loaded.signatures)})")
  function = loaded.signatures[signature]
  specs = function.structured_input_signature[1]
  strings = sorted(name for name, spec in specs.items() if spec.dtype == tf.string)
  if strings:
    raise ValueError(f"{source}: signature {signature!r} takes text ({', '.join(strings)}); "
                     "ONNX has no WordPiece ops: convert the id signature")
  graph_def, inputs, outputs = inlined_graph(function)
  rename = {name: name.split(":")[0] for name in inputs}
  rename.update(zip(outputs, sorted(function.structured_outputs)))

  labels = _labels(source)
  with _tf2onnx_log() as records:
    model_proto, _ = tf2onnx_convert.from_graph_def(
        graph_def, input_names=inputs, output_names=outputs, opset=opset,
        tensors_to_rename=rename)
    check_converted(model_proto, opset, records)  # Before anything is written.
  if labels is not None:
    entry = model_proto.metadata_props.add()
    entry.key, entry.value = LABELS_KEY, json.dumps(labels)

  def write(path):
    with files.open_file(path, "wb") as f:  # A URL's temporary too (`atomic.write_with`).
      f.write(model_proto.SerializeToString())

  files.makedirs(files.parent(onnx_file))  # Only now: a refusal leaves no directory.
  atomic.write_with(onnx_file, write)
  return onnx_file


class _Kept(logging.Handler):
  """Keeps the log records it is given (WARNING and worse)."""

  def __init__(self):
    super().__init__(logging.WARNING)
    self.records: list[logging.LogRecord] = []

  def emit(self, record: logging.LogRecord) -> None:
    self.records.append(record)


@contextlib.contextmanager
def _tf2onnx_log() -> Iterator[list[logging.LogRecord]]:
  """Holds back tf2onnx's log records (WARNING and worse) while inside; yields them.

  tf2onnx logs each node it cannot convert as an ERROR with a Python traceback, then returns
  a model that still holds it: three such blocks preceded the one line `check_converted`
  states the problem in (`export_onnx --opset=7`). When the block raises a ValueError (that
  line), they are dropped; otherwise (a conversion that succeeded, or failed otherwise) they
  are logged after all, as tf2onnx logged them. Its INFO progress is dropped either way.
  """
  logger = logging.getLogger("tf2onnx")
  kept, propagate = _Kept(), logger.propagate
  logger.addHandler(kept)
  logger.propagate = False
  stated = False
  try:
    yield kept.records
  except ValueError:
    stated = True
    raise
  finally:
    logger.removeHandler(kept)
    logger.propagate = propagate
    if not stated:
      for record in kept.records:
        logger.handle(record)


def _first_failure(records: list[logging.LogRecord]) -> str:
  """"; tf2onnx could not convert N node(s), the first: <its error>" of tf2onnx's "Failed to
  convert node" records, or "" when there are none."""
  failed = [r for r in records if r.levelno >= logging.ERROR and r.exc_info
            and str(r.msg).startswith("Failed to convert node")]
  if not failed:
    return ""
  error = failed[0].exc_info[1]
  first = (str(error).strip().splitlines() or [type(error).__name__])[0]
  return f"; tf2onnx could not convert {len(failed)} node(s), the first: {first[:200]}"


def check_converted(model_proto, opset: int,
                    records: Optional[list[logging.LogRecord]] = None) -> None:
  """Refuses a conversion ONNX cannot load: tf2onnx logs the ops it could not express in
  `opset` (BERT's strided slices need opset 10 or later) and returns a model that still
  holds them, which ONNX Runtime then refuses to load.

  Args:
    model_proto: the converted model.
    opset: the opset asked for.
    records: tf2onnx's log records of the conversion (`_tf2onnx_log`): the first node it
      could not convert is named from them.

  Raises:
    ValueError: naming the opset, the first op left unconverted and the default opset.
  """
  import onnx  # tf2onnx's own dependency, with the optional extra.

  try:
    onnx.checker.check_model(model_proto)
  except onnx.checker.ValidationError as error:
    first = (str(error).strip().splitlines() or ["invalid model"])[0]
    raise ValueError(f"opset {opset} cannot express this graph ({first[:300]}"
                     f"{_first_failure(records or [])}): convert with a later opset (the "
                     f"default, {OPSET}, can)") from None


def _labels(saved_model_dir: str) -> Optional[list[str]]:
  """The names in the SavedModel's `labels.txt` (a classifier's or tagger's), or None."""
  path = os.path.join(saved_model_dir, model_paths.LABELS_FILE)
  files.check_not_dangling(path, "labels file")  # Not a model without label names.
  if not files.isfile(path):
    return None
  return list(model_paths.read_labels_file(path))


def onnx_labels(session) -> Optional[list[str]]:
  """The label names an ONNX Runtime `session`'s model carries (`LABELS_KEY`), or None."""
  text = session.get_modelmeta().custom_metadata_map.get(LABELS_KEY)
  return None if text is None else json.loads(text)


def onnx_session(onnx_file: str, num_threads: Optional[int] = None):
  """An ONNX Runtime CPU session of `onnx_file` (`num_threads`: intra-op threads).

  ONNX Runtime reads local files only: a URL's file (`gs://...`) is read into memory
  first and the session built from its bytes.
  """
  import onnxruntime  # The optional extra, imported only here.

  options = onnxruntime.SessionOptions()
  if num_threads:
    options.intra_op_num_threads = num_threads
  model = files.read_bytes(onnx_file) if files.is_url(onnx_file) else onnx_file
  return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def check_against_saved_model(export_dir: str, onnx_file: str, *, batch: int = 2,
                              seq_length: int = 16, seed: int = 0,
                              signature: str = export.SERVING_SIGNATURE) -> dict[str, float]:
  """Largest |ONNX Runtime - SavedModel| per output on random valid features.

  Args:
    export_dir: the export the ONNX file was made from (its `bert_config.json` bounds the
      random ids).
    onnx_file: the converted model.
    batch, seq_length: B and S of the features (S at most max_position_embeddings).
    seed: of the features.
    signature: the id signature (`export.ID_SIGNATURES`) the ONNX file was made from: its
      input names and dtype are what the features are fed as, to both.

  Returns:
    {output name: max abs difference}.
  """
  source = id_saved_model(export_dir)
  config = BertConfig.from_json_file(os.path.join(source, export.CONFIG_FILE))
  rng = np.random.default_rng(seed)
  seq_length = min(seq_length, config.max_position_embeddings)
  mask = (np.arange(seq_length)[None] < rng.integers(1, seq_length + 1, (batch, 1)))
  features = {"input_ids": rng.integers(0, config.vocab_size, (batch, seq_length)),
              "input_mask": mask,
              "segment_ids": rng.integers(0, config.type_vocab_size, (batch, seq_length))}
  names, dtype = export.ID_SIGNATURES[signature]
  features = {client: features[name].astype(dtype.as_numpy_dtype)
              for name, client in zip(export.FEATURE_NAMES, names)}
  want = tf.saved_model.load(source).signatures[signature](
      **{k: tf.constant(v) for k, v in features.items()})
  session = onnx_session(onnx_file)
  names = [o.name for o in session.get_outputs()]
  got = dict(zip(names, session.run(names, features)))
  return {name: float(np.max(np.abs(got[name] - want[name].numpy()))) for name in names}
