"""Exports a tfbert model as a TFLite (LiteRT) flatbuffer, and runs one with checked inputs.

`export_tflite(model, "x/model.tflite", seq_length=128, quantize=False)` writes one
`.tflite` file with one signature, `serving_default`, the int32 id signature of the
SavedModel exports (`tfbert.serving.export`, the `ids/` SavedModel) at a fixed S:

* inputs: int32 `input_ids`, `input_mask`, `segment_ids` [B, S];
* outputs (float32), by model:
  `BertEncoder` (or any other tfbert model: its encoder): `sequence_output` [B, S, H] and
  `pooled_output` [B, H];
  `BertClassifier`: `logits`, `probabilities` (softmax) [B, C], regression (C = 1):
  `score` [B];
  `BertSpanLabeler`: `start_logits`, `end_logits` [B, S];
  `BertTokenClassifier`: `logits`, `probabilities` [B, S, C].

S is fixed at export (shorter inputs are padded by the client, as in training): converted
with a dynamic S (the `ids/` SavedModel's [None, None]) a StridedSlice in the attention
needed a Flex op (measured). The batch B is dynamic: the file records [-1, S], the
interpreter allocates [1, S] and `SignatureRunner` (or `resize_tensor_input`) resizes to
any B. The graph holds TFLite builtin ops only (no Flex / SELECT_TF_OPS, no custom op), so
the stock LiteRT runtime, including on Android and iOS, runs it.

`quantize=True` applies dynamic-range quantization (`tf.lite.Optimize.DEFAULT` without a
representative dataset): weights are stored as int8 with per-channel scales (about 4x
smaller), the dense layers quantize their activations on the fly per batch, and everything
else computes in float32. Outputs are close, not equal: fine-tuned MiniLM-L6-H384 on the
MRPC dev set (logits in [-1.9, 2.1]) moved its logits by 0.22 at most and 2 of 408
decisions, with the same accuracy and F1 (`tools/export_tflite.py --quantize
--eval_data_dir=...`).

Inputs are NOT validated in the graph. The SavedModels' checks (`export.validate_features`)
are `tf.debugging.Assert` ops, which the TFLite converter drops without a word (measured:
the same builtin ops with and without them, and no check runs). Unchecked, an id >= the
vocabulary fails inside GATHER ("gather index out of bounds") but a negative id silently
reads some row, and a segment id past the token types likewise. `TfliteModel`, the Python
runner, checks every request first (`check_features`) and raises a ValueError naming the
input; other clients must check ids, segment ids and mask values themselves.

Raw text is not supported: tfbert's tokenizer reproduces Google's normalization with core
TensorFlow ops that have no TFLite kernel (hash table lookups, `UnicodeDecode` /
`UnicodeEncode`, `StaticRegexReplace`, `RaggedRange`, `DenseBincount`, string `SelectV2`),
so it would need Flex ops; clients tokenize (e.g. with the vocab written beside the file)
and send ids. tensorflow-text's `FastBertTokenizer` has TFLite kernels (custom ops
`FastBertNormalize`, `FastWordpieceTokenizeWithOffsets`), but its ICU normalization is not
Google's (see `tfbert.text.tokenization`) and its op registrar loads into TensorFlow's
deprecated `tf.lite` interpreter only: LiteRT's reports "Encountered unresolved custom op"
(measured, tensorflow-text 2.20.1, ai-edge-litert 2.3.0).

Beside the file (the same directory, one exported model per directory; a float32 and a
quantized file of the same model may share it): `bert_config.json`, `labels.txt` for a
classifier given its labels and for a tagger (one name per line, in id order), and
`vocab.txt` when a vocab is given. The `.tflite` file itself is written last and appears
only when complete (a temporary sibling renamed into place, `tfbert.runtime.atomic`).

Paths may be URLs (`gs://...`, any `tf.io.gfile` filesystem: `tfbert.runtime.files`); there
the rename is the filesystem's (an object store's copy then delete: the object still appears
only complete). LiteRT reads local files only, so `TfliteModel` gives it a URL's bytes.

Shape legend: B batch, S sequence, H hidden, C classes or labels.
"""

import os
import time
from typing import Any, Callable, Mapping, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from tfbert import models
from tfbert.checkpoints import model_paths
from tfbert.config import BertConfig
from tfbert.runtime import atomic, files, json_values, paths, run_directory, validation
from tfbert.serving import export
from tfbert.text import casing, feature_checks

SIGNATURE = export.SERVING_SIGNATURE
SUFFIX = ".tflite"
VOCAB_FILE = "vocab.txt"


class _TfliteModule(tf.Module):
  """What the converter sees: the model, its variables and the fixed-S id signature.

  The converter saves the module as a SavedModel and converts that (falling back, without a
  word, to freezing the concrete function when the save fails: a file without the
  `serving_default` signature `TfliteModel` reads). The module holds what the save needs and
  nothing it would trace again: the signature's concrete function, traced once, and the
  variables it reads. A `tf.function` attribute was traced a second time inside the save,
  and the model as an attribute was saved with all its objects: about half of a tiny
  conversion's CPU (a 3-layer H32 classifier: 1.4-1.9 s, now 0.7 s; TF 2.20). The model as
  an attribute also brought Keras' default `serving_default`, traced there with float32
  inputs, which the feature checks refuse for a model that was called before (built by a
  call, not `build()`): its save failed, and its file had no signature.

  Attributes:
    model: the Keras model (or encoder) exported, not saved (its variables are).
    variables_to_freeze: the model's weights as the `tf.Variable`s under the Keras variables.
    serve: the concrete function behind `serving_default`.
  """

  def __init__(self, model: keras.Model, seq_length: int):
    super().__init__()
    if not model.built:  # Built in the trace, it was traced twice (the variable-creating
      model.build()      # trace first) and its variables were not tracked for the save.
    self.model = self._no_dependency(model)
    # The converter freezes only the tf.Variables it finds tracked by the module it is
    # given. Reached through a Keras 3 model alone, every weight stayed a resource variable
    # with no value in the file (VAR_HANDLE / READ_VARIABLE ops, NaN outputs; measured,
    # TF 2.20); Keras' own ExportArchive tracks the underlying variables the same way.
    self.variables_to_freeze = [weight.value for weight in model.weights]
    self.serve = tf.function(self._serve, autograph=False, input_signature=[
        tf.TensorSpec([None, seq_length], tf.int32, name=name)
        for name in export.FEATURE_NAMES]).get_concrete_function()

  def _serve(self, input_ids, input_mask, segment_ids):
    features = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
    return export.served_outputs(self.model, features)


def float32_model(model: keras.Model) -> keras.Model:
  """`model` itself if it computes in float32, else a float32 copy with its weights.

  A mixed-precision model would put bfloat16 / float16 casts and ops into the graph, which
  TFLite's CPU kernels do not run; its weights are float32 variables anyway.
  """
  if model.dtype_policy.compute_dtype == "float32":
    return model
  copy = type(model).from_config({**model.get_config(), "dtype": "float32"})
  copy.build()
  copy.set_weights(model.get_weights())
  return copy


def export_tflite(model_or_encoder: keras.Model, path: str, *, seq_length: int,
                  quantize: bool = False, labels: Optional[Sequence[str]] = None,
                  vocab_file: Optional[str] = None) -> str:
  """Writes `model_or_encoder` as a `.tflite` file with its sidecar files beside it.

  Args:
    model_or_encoder: a `BertClassifier`, `BertSpanLabeler`, `BertTokenClassifier` or
      `BertEncoder`; any other tfbert model (a `BertPretrainer`) exports its encoder.
      A mixed-precision model is exported in float32 (`float32_model`).
    path: `.tflite` path (local or a URL, `gs://...`) to create or replace; its directory is
      created.
    seq_length: S of the inputs, in [3, max_position_embeddings] (`check_seq_length`;
      `default_seq_length` when the caller has none).
    quantize: dynamic-range quantization (int8 weights) instead of float32.
    labels: a classifier's label names in class-id order (C >= 2 of them), written to
      `labels.txt`; None writes none (and is the only choice for regression and for the
      other models; a tagger's labels are its own).
    vocab_file: a WordPiece vocab to copy beside the file as `vocab.txt`, or None (a
      warning says that clients then need the vocabulary from elsewhere).

  Returns:
    `path`.

  Raises:
    TypeError: for a model that is not a tfbert one (see `export.encoder_of`).
    ValueError: for a `quantize` that is not a bool or a `seq_length` that is not an int
      (before any work: `bool("no")` is True), a path that is not a `.tflite` file or that
      lies in a tfbert run directory (`run_directory.check_not_a_run`: its sidecars would
      replace the run's), an S outside the model's range, or labels that do not match the
      model.
  """
  quantize = validation.plain_bool("quantize", quantize)  # Before any work.
  check_seq_length_type(seq_length)
  paths.check_file_output("path", path, SUFFIX)
  directory = files.parent(path)
  run_directory.check_not_a_run("path", path, directory)  # The sidecars go beside the file.
  model = _exported_model(model_or_encoder)
  check_seq_length(model, seq_length)
  seq_length = int(seq_length)  # A NumPy integer too.
  labels = _checked_labels(model, labels)
  _check_sidecars(path, directory, model.config.to_dict(), labels, vocab_file)
  flatbuffer = convert(float32_model(model), seq_length, quantize)
  files.makedirs(directory)
  model.config.to_json_file(os.path.join(directory, export.CONFIG_FILE))
  if labels is not None:
    model_paths.write_labels_file(directory, labels)
  if vocab_file is not None:
    target = os.path.join(directory, VOCAB_FILE)
    if files.absolute(vocab_file) != files.absolute(target):
      atomic.write_with(target, lambda tmp: files.copy(vocab_file, tmp))
  elif not files.isfile(os.path.join(directory, VOCAB_FILE)):
    logging.warning("%s: no vocab_file given, so no vocab.txt is written beside it; clients "
                    "tokenize with the model's vocabulary: pass vocab_file= to put it there",
                    path)

  def write(tmp):
    with files.open_file(tmp, "wb") as f:
      f.write(flatbuffer)
      if not files.is_url(tmp):  # A URL filesystem has no fsync.
        f.flush()
        os.fsync(f.fileno())

  return atomic.write_with(path, write)  # Last: the sidecars are in place when it appears.


def _check_sidecars(path: str, directory: str, config: dict,
                    labels: Optional[Sequence[str]], vocab_file: Optional[str]) -> None:
  """Refuses a directory whose sidecar files are another model's: they would be replaced
  (or, a `labels.txt` beside a model without labels, left to describe it) without a word.
  A float32 and a quantized file of the same model share theirs.

  Raises:
    ValueError: naming `path` and the file that differs, or the model the directory holds
      (`model_paths.models_in`: a Hugging Face directory sharing the vocabulary once took a
      `bert_config.json` and a `labels.txt`, which `read_model` then reads as its labels).
  """
  found = model_paths.models_in(directory, any_keras=True)
  if found:
    raise ValueError(f"{path}: {directory} holds {' and '.join(what for _, what in found)}: "
                     "the file's bert_config.json, labels.txt and vocab.txt would go among "
                     "that model's files (a labels.txt beside a model is read as its labels): "
                     "write it to another directory")

  def differs(name: str, wanted: Optional[str]) -> bool:
    target = os.path.join(directory, name)
    return files.isfile(target) and (wanted is None or files.read_text(target) != wanted)

  config_file = os.path.join(directory, export.CONFIG_FILE)
  other = []
  if files.isfile(config_file) and json_values.read(config_file) != config:
    other.append(export.CONFIG_FILE)
  if differs(model_paths.LABELS_FILE,
             None if labels is None else "".join(f"{n}\n" for n in labels)):
    other.append(model_paths.LABELS_FILE)
  if vocab_file is not None and differs(VOCAB_FILE, files.read_text(vocab_file)):
    other.append(VOCAB_FILE)
  if other:
    raise ValueError(f"{path}: {directory} holds another model's {', '.join(other)} (one "
                     "exported model per directory; a float32 and a quantized file of one "
                     "model may share it): write it to another directory")


def convert(model: keras.Model, seq_length: int, quantize: bool = False) -> bytes:
  """The TFLite flatbuffer of `model`'s `serving_default` at S = `seq_length`.

  Args:
    model: a float32 tfbert model or encoder (see `export.served_outputs`).
    seq_length: S.
    quantize: dynamic-range quantization.

  Returns:
    the `.tflite` file's bytes.

  Raises:
    ValueError: for a `quantize` that is not a bool or a `seq_length` that is not an int.
  """
  quantize = validation.plain_bool("quantize", quantize)
  check_seq_length_type(seq_length)
  module = _TfliteModule(model, int(seq_length))
  converter = tf.lite.TFLiteConverter.from_concrete_functions(
      [module.serve], module)
  # Builtins only: a file that needs Flex ops would not run on the stock LiteRT runtime.
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
  if quantize:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  return converter.convert()


# S of a model's TFLite inputs when none is given or recorded (`default_seq_length`).
DEFAULT_SEQ_LENGTH = 128


def default_seq_length(model_or_encoder: keras.Model) -> int:
  """S for a model whose S nobody gave: `DEFAULT_SEQ_LENGTH`, or all its positions when it
  has fewer (a tiny model of 16 positions was refused for an S of 128 it was never given).
  """
  positions = _exported_model(model_or_encoder).config.max_position_embeddings
  return min(DEFAULT_SEQ_LENGTH, positions)


# A TFLite flatbuffer's file identifier, at bytes 4-8 of every `.tflite` file.
TFLITE_IDENTIFIER = b"TFL3"

# The smallest S: [CLS], one token and [SEP] (as `tfbert.load` and the training tools).
MIN_SEQ_LENGTH = 3


def check_seq_length(model_or_encoder: keras.Model, seq_length: int,
                     name: str = "seq_length") -> None:
  """Refuses an S the model cannot take or no text fits in: outside [`MIN_SEQ_LENGTH`,
  max_position_embeddings] (an S of 1 or 2 was written, a file no input fits).

  Args:
    model_or_encoder: as `export_tflite`'s.
    seq_length: the S given.
    name: how the caller gave it (`--seq_length` for the tool).

  Raises:
    ValueError: naming `name`, the value and the model's limit; or that it must be an int.
  """
  check_seq_length_type(seq_length, name)
  positions = _exported_model(model_or_encoder).config.max_position_embeddings
  if not MIN_SEQ_LENGTH <= seq_length <= positions:
    raise ValueError(f"{name} {seq_length} is outside [{MIN_SEQ_LENGTH}, {positions}]: an "
                     f"input holds [CLS], a token and [SEP] at least, and the model has "
                     f"{positions} positions (max_position_embeddings); give {name} in that "
                     "range")


def check_seq_length_type(seq_length: Any, name: str = "seq_length") -> None:
  """Refuses an S that is not an integer (NumPy's too): a float (32.0) failed inside
  TensorFlow's shape code naming no argument, and a bool (True) is no length.

  Raises:
    ValueError: "<name> must be an int, got <value!r>".
  """
  if not validation.is_int(seq_length):
    raise ValueError(f"{name} must be an int, got {seq_length!r}")


def _exported_model(model: keras.Model) -> keras.Model:
  """The model itself when it says what it serves (`served_outputs`: every tfbert model
  and the encoder), else the encoder `export.encoder_of` finds (or its TypeError)."""
  return model if hasattr(model, "served_outputs") else export.encoder_of(model)


def _checked_labels(model: keras.Model, labels: Optional[Sequence[str]]
                    ) -> Optional[tuple[str, ...]]:
  """The labels to write to `labels.txt`: `labels` checked by the model itself (its
  `hf_task`, the rule its Hugging Face export applies), or a tagger's own tags; None when
  there are none."""
  if labels is None and getattr(model, "labels", None) is None:
    return None
  if not hasattr(model, "hf_task"):
    raise ValueError(f"labels are for a classifier or tagger, not a {type(model).__name__}")
  fields = model.hf_task(labels)
  return tuple(fields["id2label"][str(i)] for i in range(fields["num_labels"]))


def check_features(features: Mapping[str, np.ndarray], config: BertConfig,
                   seq_length: int) -> dict[str, np.ndarray]:
  """The three features as int32 arrays, checked as `export.validate_features` checks them.

  In this order (the first failure is the one reported): no name the export does not read
  (`feature_checks.check_names`, as Keras predict: Hugging Face's `token_type_ids` left unread
  beside a zero `segment_ids` would answer for the wrong segments); each is present, an integer
  array of rank 2; `input_mask` and `segment_ids` have `input_ids`' shape; S is the
  export's; `input_ids` in [0, vocab_size); `segment_ids` in [0, type_vocab_size);
  `input_mask` 0 or 1.

  Args:
    features: `input_ids`, `input_mask`, `segment_ids` [B, S] (any integer dtype).
    config: the exported model's `BertConfig`.
    seq_length: the export's S.

  Returns:
    dict of int32 [B, S] arrays by feature name.

  Raises:
    ValueError: naming the input and the limit, e.g. "input_ids holds 30522 at [0, 3],
      outside the vocabulary [0, 30522)"; naming the names it does not read and those it does.
  """
  if isinstance(features, Mapping) and "input_ids" in features:  # Else: "input_ids is missing".
    feature_checks.check_names(features, export.FEATURE_NAMES)
  arrays = {}
  for name in export.FEATURE_NAMES:
    if name not in features:
      raise ValueError(f"{name} is missing")
    array = np.asarray(features[name])
    if array.ndim != 2 or not (np.issubdtype(array.dtype, np.integer) or array.size == 0):
      raise ValueError(f"{name} must be an integer array [batch, {seq_length}], got "
                       f"{array.dtype} {list(array.shape)}")
    arrays[name] = array
  shape = arrays["input_ids"].shape
  for name in export.FEATURE_NAMES[1:]:
    if arrays[name].shape != shape:
      raise ValueError(f"{name} has shape {list(arrays[name].shape)} but input_ids has "
                       f"{list(shape)}")
  if shape[1] != seq_length:
    raise ValueError(f"input_ids has sequence length {shape[1]}, the export's is "
                     f"{seq_length} (pad or truncate to it)")
  for name, high, what in (
      ("input_ids", config.vocab_size, f"the vocabulary [0, {config.vocab_size})"),
      ("segment_ids", config.type_vocab_size, f"the token types [0, {config.type_vocab_size})"),
      ("input_mask", 2, "the mask values 0 and 1")):
    outside = (arrays[name] < 0) | (arrays[name] >= high)                  # [B, S]
    if outside.any():
      row, column = np.argwhere(outside)[0]
      raise ValueError(f"{name} holds {arrays[name][row, column]} at [{row}, {column}], "
                       f"outside {what}")
  return {name: array.astype(np.int32) for name, array in arrays.items()}


class TfliteModel:
  """A `.tflite` export run by LiteRT's interpreter, every request checked first.

  Needs `ai-edge-litert` (the `tflite` extra), not TensorFlow's deprecated
  `tf.lite.Interpreter`.

  Attributes:
    path: the `.tflite` file.
    config: the model's `BertConfig` (the limits of the checks).
    seq_length: the export's S.
    num_threads: the interpreter's CPU threads.
    output_names: the signature's outputs.
  """

  def __init__(self, path: str, config: Optional[BertConfig] = None,
               num_threads: Optional[int] = None):
    """Loads the file.

    Args:
      path: a `.tflite` file written by `export_tflite`.
      config: its model's `BertConfig`; default: `bert_config.json` beside it.
      num_threads: the interpreter's CPU threads (an int >= 1); None: every core this
        process may use
        (LiteRT's own default is one thread: MiniLM-L6 at S 128 ran 22.7 against 40.7
        sequences/s with two, B 32 on a 2-core AMD EPYC Zen 3).

    Raises:
      FileNotFoundError: for a missing file or (without `config`) a missing
        `bert_config.json` beside it.
      ImportError: when `ai_edge_litert` is not installed.
      ValueError: for a file that is no TFLite flatbuffer (`TFLITE_IDENTIFIER`), or one
        without the `serving_default` id signature, or a `num_threads` that is not an int >= 1.
    """
    try:
      from ai_edge_litert import interpreter as litert  # pylint: disable=import-outside-toplevel
    except ImportError as e:
      raise ImportError("running a .tflite file needs LiteRT: pip install ai-edge-litert "
                        "(the tflite extra)") from e
    if num_threads is not None:  # Before the file is read: True, 1.5 or "2" are no count.
      num_threads = validation.plain_int("num_threads", num_threads)
    if not files.isfile(path):
      raise FileNotFoundError(files.missing_file_message(path, "TFLite file"))
    with files.open_file(path, "rb") as f:  # Before its config: an .onnx file was taken for
      identifier = f.read(8)[4:]            # one whose bert_config.json was missing.
    if identifier != TFLITE_IDENTIFIER:
      raise ValueError(f"{path}: not a TFLite file (a TFLite flatbuffer holds "
                       f"{TFLITE_IDENTIFIER.decode()} at bytes 4-8, this file "
                       f"{identifier!r}): pass a .tflite file that export_tflite wrote")
    self.path = path
    self.config = config or BertConfig.from_json_file(
        os.path.join(files.parent(path), export.CONFIG_FILE))
    self.num_threads = num_threads or (len(os.sched_getaffinity(0))
                                       if hasattr(os, "sched_getaffinity") else os.cpu_count())
    if files.is_url(path):  # LiteRT reads local files only: a URL's file is read into memory.
      self.interpreter = litert.Interpreter(model_content=files.read_bytes(path),
                                            num_threads=self.num_threads)
    else:
      self.interpreter = litert.Interpreter(model_path=path, num_threads=self.num_threads)
    signature = self.interpreter.get_signature_list().get(SIGNATURE)
    if signature is None or sorted(signature["inputs"]) != sorted(export.FEATURE_NAMES):
      raise ValueError(f"{path}: no {SIGNATURE} signature with inputs "
                       f"{', '.join(export.FEATURE_NAMES)}")
    self._runner = self.interpreter.get_signature_runner(SIGNATURE)
    inputs = self._runner.get_input_details()
    self.seq_length = int(inputs["input_ids"]["shape_signature"][1])
    self._outputs = self._runner.get_output_details()
    self.output_names = tuple(sorted(self._outputs))

  def __call__(self, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Checks `features` (`check_features`) and runs the signature on them.

    Args:
      features: `input_ids`, `input_mask`, `segment_ids` [B, S], any B (0 included).

    Returns:
      dict of float32 output arrays by name (see the module docstring).

    Raises:
      ValueError: for features the model cannot take, naming the input.
    """
    features = check_features(features, self.config, self.seq_length)
    batch = features["input_ids"].shape[0]
    if batch == 0:  # TFLite cannot allocate an empty tensor; the answer is known anyway.
      return {name: np.zeros([0, *details["shape_signature"][1:]], details["dtype"])
              for name, details in self._outputs.items()}
    return {name: np.array(value) for name, value in self._runner(**features).items()}


def predict(predict_batch: Callable[[dict[str, np.ndarray]], Mapping[str, np.ndarray]],
            features: Mapping[str, np.ndarray], batch_size: int) -> dict[str, np.ndarray]:
  """Runs `predict_batch` (a `TfliteModel`, or any function of features) over `features`
  in batches of at most `batch_size` rows; returns the outputs concatenated ([N, ...])."""
  count = len(features["input_ids"])
  parts = [predict_batch({name: array[start:start + batch_size]
                          for name, array in features.items()})
           for start in range(0, count, batch_size)]
  return {name: np.concatenate([np.asarray(part[name]) for part in parts])
          for name in parts[0]}


def median_latency_ms(predict_batch: Callable[[dict[str, np.ndarray]], object],
                      features: Mapping[str, np.ndarray], runs: int) -> float:
  """Median wall time in ms of `predict_batch` on single examples of `features`.

  Example i % N of the N given is sent as a batch of 1, after one untimed call (the
  interpreter allocates, `tf.function` traces there).
  """
  count = len(features["input_ids"])

  def one(i):
    return {name: array[i % count:i % count + 1] for name, array in features.items()}

  predict_batch(one(0))
  times = []
  for i in range(runs):
    example = one(i)
    start = time.perf_counter()
    predict_batch(example)
    times.append(time.perf_counter() - start)
  return float(np.median(times) * 1000)


def run_config_of(model_path: str) -> Optional[dict[str, Any]]:
  """The `run_config.json` values of the tfbert run that wrote the `.keras` file
  `model_path` (beside it, or one level up for `<run>/best/model.keras`), or None."""
  for directory in casing.checkpoint_directories(model_path):
    path = os.path.join(directory, casing.RUN_CONFIG)
    if files.isfile(path):
      return json_values.read(path)
  return None


def scoring_problem(model: keras.Model, model_path: str, given: Sequence[str], task,
                    vocab_file: Optional[str], is_pair: Optional[bool] = None
                    ) -> Optional[str]:
  """Why the dev-set scoring flags `given` (e.g. ["--eval_file"]) cannot score the model
  read from `model_path`, or None: only a classifier is scored (its task's metrics), and it
  needs its task and a vocab.

  Args:
    model: the model read from `model_path`.
    model_path: the `--model` path, named in the message.
    given: the scoring flags set, named in the message.
    task: the classifier's task (None: neither --task_name nor the run names one).
    vocab_file: the vocab found (None: neither --vocab_file nor vocab.txt beside the model).
    is_pair: the classifier's recorded arity (`loading.recorded_settings`), or None: a task
      of the other arity is refused (a pair classifier was scored on SST-2's single texts
      without a word: sweep 27, B77).
  """
  flags_given, plural = "/".join(given), len(given) > 1
  scores, need = ("score", "need") if plural else ("scores", "needs")
  if not isinstance(model, models.BertClassifier):
    return (f"{flags_given} {scores} classifiers only (on their task's dev set); {model_path} is "
            f"a {type(model).__name__}: leave out {flags_given}")
  if task is None:
    return (f"{flags_given} {need} the classifier's task: give --task_name (no run_config.json "
            f"beside {model_path} names one)")
  if vocab_file is None:
    return (f"{flags_given} {need} the classifier's vocab: give --vocab_file (there is no "
            f"vocab.txt beside {model_path})")
  if is_pair is not None and task.is_pair != is_pair:
    def reads(pairs):
      return "(text_a, text_b) pairs" if pairs else "single texts"
    return (f"{model_path} is a classifier of {reads(is_pair)} (as recorded beside it), but "
            f"the task {task.name} holds {reads(task.is_pair)}: give --task_name of the "
            "classifier's own task (or leave it out for its run's)")
  return None

