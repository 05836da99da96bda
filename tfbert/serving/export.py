"""Exports a tfbert encoder as a self-describing, relocatable TF SavedModel.

The SavedModel holds an `EncoderExport` module (the encoder, plus an optional
`TextPreprocessor`) and these signatures:

* `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [B, S] ->
  float32 `sequence_output` [B, S, H] and `pooled_output` [B, H].
* `encode_text` (only with a vocab): tf.string `text` [B] -> the same two
  outputs plus the int32 `input_mask` [B, S] of the packed `[CLS] text [SEP]`
  inputs (S = `seq_length`), tokenized in the graph by `WordPieceTokenizer`.

Outputs are float32 whatever the model's dtype policy: a `mixed_bfloat16`
encoder computes in bfloat16 and the signature casts its results, so clients
never see bfloat16.

Every signature (these and the task exports') validates its inputs in the graph
before any tokenizer op or embedding gather runs (`validate_texts`,
`validate_features`): ranks, equal batch sizes of the texts, equal shapes of the
three features, ids in [0, vocab_size), segment ids in [0, type_vocab_size),
mask values 0 or 1, S in [1, max_position_embeddings]. A bad request raises
`tf.errors.InvalidArgumentError` naming the signature, the input and the limit,
e.g. "assertion failed: [serving_default: input_ids holds 30522 at [0, 3],
outside the vocabulary [0, 30522)]" or "[classify_text: text_b has batch size 1
but text_a has 2]"; a wrong rank gives TensorFlow's "Shape of tensor text_a [2,1]
is not compatible with expected shape [?]", a wrong dtype its "input #0 ... was
expected to be a int32 tensor". No request aborts the process (unchecked, mismatched
text batches crash tensorflow-text). The checks add asserts and control
dependencies, no arithmetic: valid requests give the outputs they gave without them
(measured bit for bit on every signature of four small exports).

The export directory explains itself: `bert_config.json` beside
`saved_model.pb`, and with a vocab, `assets/<vocab file name>`. Its `ids/`
subdirectory is a second SavedModel holding `serving_default` alone (`IdExport`):
only core TensorFlow ops, so it loads where `tensorflow_text` is not installed. The export's
own graph adds `TEXT_OPS` alone, tensorflow-text's WordPiece op, which TF Serving's model
server links too (`non_core_ops` lists an export's). Nothing in the
graph reads a file at load time (the tokenizer's tables are constants), so the
directory can be moved or copied anywhere; the vocab asset is for people and
for tools that want the id -> token table. The model's weights are graph constants too
(`FrozenOutputs`): what is computed from them alone (the fused query/key/value kernel, the
bfloat16 casts of a mixed-precision model) is folded once at load instead of recomputed per
request, and `variables/` is empty.

Task SavedModels (`tfbert.squad.squad_export`, `tfbert.classifier.classifier_export`) subclass
`TaskExport`, which holds the model, the vocab asset, the tokenizer and
`serving_default`, and add their raw-text signature; `save_atomically` and
`write_export` are shared.

Shape legend: B batch, S sequence, H hidden.
"""

import functools
import os
from typing import Callable, Optional

import keras
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import convert_to_constants

from tfbert import encoder, models
from tfbert.checkpoints import model_paths
from tfbert.encoder import BertEncoder
from tfbert.layers import serving_ops
from tfbert.runtime import atomic, files, validation
from tfbert.serving import freeze_quietly, serving_dtype
from tfbert.text import casing, inputs, tokenization

SERVING_SIGNATURE = "serving_default"
TEXT_SIGNATURE = "encode_text"
CONFIG_FILE = "bert_config.json"
ID_DIR = "ids"  # Inside an export directory: `serving_default` alone, core TF ops only.
# google-research/bert's feature names; also the signature's input names.
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
# The same features under Hugging Face's names (a tokenizer's output, transformers' models).
HF_FEATURE_NAMES = ("input_ids", "attention_mask", "token_type_ids")
# Every id signature of an export and of its `ids/`: name -> (input names, in
# `FEATURE_NAMES` order, and their dtype). One model behind all; each validates its inputs
# under the names and in the dtype the client sent (an int64 id past int32 is refused, not
# wrapped), then casts to int32. `serving_hf` takes a Hugging Face tokenizer's NumPy output
# (`return_tensors="np"`: int64) unchanged; `serving_hf_int32` its TensorFlow output.
HF_SIGNATURE = "serving_hf"
ID_SIGNATURES = {
    SERVING_SIGNATURE: (FEATURE_NAMES, tf.int32),
    "serving_int64": (FEATURE_NAMES, tf.int64),
    HF_SIGNATURE: (HF_FEATURE_NAMES, tf.int64),
    "serving_hf_int32": (HF_FEATURE_NAMES, tf.int32),
}
OUTPUT_NAMES = encoder.OUTPUT_NAMES  # An encoder's.
SPAN_OUTPUT_NAMES = models.SPAN_OUTPUT_NAMES  # A span labeler's (SQuAD).
# The only ops outside core TensorFlow (`tf.raw_ops`) that an export may hold, all in its
# raw-text signature's tokenizer; `ids/` holds none. A server that registers these serves
# every signature: Python after `import tensorflow_text`, TF Serving's model server, which
# links the ops of a pinned tensorflow-text (2.12.1 in releases 2.12.0 to 2.19.1).
# Normalization, word splitting, truncation and packing are core ops
# (`tfbert.text.tokenization`, `tfbert.text.inputs`): tensorflow-text's `RoundRobinTrimmer`
# would add `TFText>RoundRobinTrim` (tensorflow-text >= 2.13), which those servers lack.
# Check an export with `non_core_ops(export_dir) <= TEXT_OPS` and
# `not non_core_ops(f"{export_dir}/ids")`.
TEXT_OPS = frozenset({
    # tensorflow-text's `FastWordpieceTokenizer` (tensorflow-text >= 2.7), the WordPiece
    # step (greedy longest-match-first) of `WordPieceTokenizer.tokenize` and
    # `tokenize_with_offsets` alike: no core op matches words against a vocabulary.
    "FastWordpieceTokenizeWithOffsets",
})


def graph_ops(saved_model_dir: str) -> set[str]:
  """Every op type in a SavedModel: the nodes of each graph and of every function in its
  library (a signature's ops sit in functions that the graph only calls).

  Reads `saved_model.pb` alone, loads nothing, so it works in a process that lacks the
  ops it finds (where `tf.saved_model.load` would fail with "Op type not registered").

  Args:
    saved_model_dir: a SavedModel directory, e.g. an export or its `ids/`.

  Returns:
    op type names, e.g. {"MatMul", "FastWordpieceTokenizeWithOffsets", ...}.
  """
  proto = saved_model_pb2.SavedModel()
  proto.ParseFromString(files.read_bytes(os.path.join(saved_model_dir, "saved_model.pb")))
  ops = set()
  for meta_graph in proto.meta_graphs:
    graph = meta_graph.graph_def
    ops.update(node.op for node in graph.node)
    ops.update(node.op for function in graph.library.function for node in function.node_def)
  return ops


def non_core_ops(saved_model_dir: str) -> set[str]:
  """The ops of `graph_ops` that core TensorFlow lacks: those a server must register from
  elsewhere (tensorflow-text's appear as e.g. "FastWordpieceTokenizeWithOffsets" or
  "TFText>RoundRobinTrim"). Core means `tf.raw_ops`, which lists TensorFlow's own ops only,
  even in a process that imported tensorflow_text."""
  return graph_ops(saved_model_dir) - set(dir(tf.raw_ops))


def id_functions(outputs_of: Callable[[dict], dict], config
                 ) -> dict[str, tf.types.experimental.PolymorphicFunction]:
  """The `tf.function` of every id signature (`ID_SIGNATURES`), by signature name.

  Each takes its inputs as [B, S] tensors of its dtype under its names, validates them
  there (`validate_features`, messages naming the client's inputs), casts them to int32
  (a no-op for the int32 signatures) and returns `outputs_of` of the Google-name features.

  Args:
    outputs_of: the export's outputs of int32 Google-name features (`outputs_function`).
    config: the model's `BertConfig`, which bounds the ids.
  """
  functions = {}
  for signature, (names, dtype) in ID_SIGNATURES.items():
    def serve(*values, signature=signature, names=names):
      features = validate_features(signature, dict(zip(FEATURE_NAMES, values)), config,
                                   input_names=dict(zip(FEATURE_NAMES, names)))
      return outputs_of({name: tf.cast(value, tf.int32) for name, value in features.items()})
    functions[signature] = tf.function(serve, autograph=False, input_signature=[
        tf.TensorSpec([None, None], dtype, name=name) for name in names])
  return functions


class TextPreprocessor(tf.Module):
  """Raw text -> BERT input features, in the graph; the vocab travels as an asset.

  Attributes:
    vocab: `tf.saved_model.Asset` of the vocab file (copied into `assets/`).
    tokenizer: the `tokenization.WordPieceTokenizer`.
    seq_length: S of the packed features.
  """

  def __init__(self, vocab_file: str, do_lower_case: bool, seq_length: int,
               name: Optional[str] = None):
    """Builds the tokenizer (a few seconds the first time per casing).

    Args:
      vocab_file: path of the WordPiece vocab.
      do_lower_case: True for uncased vocabs.
      seq_length: S, including [CLS] and [SEP]; longer texts are truncated.
      name: optional `tf.Module` name.
    """
    super().__init__(name=name)
    self.vocab = tf.saved_model.Asset(vocab_file)
    self.tokenizer = tokenization.WordPieceTokenizer(vocab_file, do_lower_case)
    self.seq_length = seq_length

  def __call__(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
    """Tokenizes and packs one segment per text.

    Args:
      text: tf.string Tensor [B].

    Returns:
      dict of int32 `input_ids`, `input_mask`, `segment_ids` [B, S].
    """
    ids = self.tokenizer.tokenize(text)  # [B, (T)]
    return inputs.pack_inputs([ids], self.seq_length, self.tokenizer.cls_id,
                              self.tokenizer.sep_id)


class EncoderExport(tf.Module):
  """What the SavedModel holds: the encoder's outputs (`FrozenOutputs`) and, optionally, a
  preprocessor.

  Attributes:
    encoder: the `BertEncoder`, not saved: the signatures call `FrozenOutputs` of it.
    preprocessor: a `TextPreprocessor` or None.
    id_functions: the `tf.function`s behind the id signatures (`ID_SIGNATURES`) by name.
    encode_text: `tf.function` behind `encode_text` (only with a preprocessor).
  """

  def __init__(self, encoder: BertEncoder,
               preprocessor: Optional[TextPreprocessor] = None,
               name: Optional[str] = None):
    super().__init__(name=name)
    self._outputs_of = outputs_function(encoder)
    self.encoder = _saved_if_read(encoder, self._outputs_of, self)
    self.preprocessor = preprocessor
    self.id_functions = id_functions(self._encode, encoder.config)
    if preprocessor is not None:
      self.encode_text = tf.function(self._encode_text, autograph=False, input_signature=[
          tf.TensorSpec([None], tf.string, name="text")])

  def signatures(self) -> dict[str, tf.types.experimental.PolymorphicFunction]:
    """The signatures to save, by name."""
    signatures = id_signatures(self)
    if self.preprocessor is not None:
      signatures[TEXT_SIGNATURE] = self.encode_text
    return signatures

  def _encode_text(self, text):
    # One text: only its rank to check. The packed ids are checked against the model too
    # (a vocab file larger than vocab_size would otherwise fail inside a gather).
    text = validate_texts(TEXT_SIGNATURE, {"text": text})["text"]
    features = validate_features(TEXT_SIGNATURE, self.preprocessor(text), self.encoder.config,
                                 packed_from="text")
    return {**self._encode(features), "input_mask": features["input_mask"]}

  def _encode(self, features):
    """float32 `sequence_output` [B, S, H] and `pooled_output` [B, H]."""
    return self._outputs_of(features)


def served_outputs(model: keras.Model, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
  """The float32 outputs every export serves for the int32 features of `model`.

  One definition for the SavedModels' id signatures (and the raw-text ones built on them),
  the TFLite file and so the ONNX file: the model's own `served_outputs` (a new task model
  defines its own; no table here to extend), traced in the serving scope:

  * `BertClassifier`: `logits`, `probabilities` (softmax) [B, C]; regression (C = 1):
    `score` [B];
  * `BertTokenClassifier`: `logits`, `probabilities` [B, S, C];
  * `BertSpanLabeler`: `start_logits`, `end_logits` [B, S];
  * `BertEncoder`: `sequence_output` [B, S, H], `pooled_output` [B, H]; a `BertPretrainer`
    serves its encoder's.

  Outputs are float32 whatever the model's dtype policy. The layers trace their serving
  form (`tfbert.layers.serving_ops`): plain ops that oneDNN fuses into the MatMuls instead
  of the training graph's XLA calls.

  Args:
    model: a tfbert model (anything with `served_outputs(features)`).
    features: int32 `input_ids`, `input_mask`, `segment_ids` [B, S].
  """
  with serving_ops.scope():
    return model.served_outputs(features)  # Each model defines its own.


class FrozenOutputs:
  """`served_outputs(model, features)` traced once with the weights as graph constants.

  What every SavedModel signature calls. In a graph that reads its weights from variables,
  whatever is computed from the weights alone runs again on every request: the attention's
  [H, 3H] query/key/value kernel (the three kernels side by side, the query scaled), and
  under a mixed policy the cast of every kernel to the compute dtype. At batch 1 that was
  a large share of the time not spent in matmuls (MiniLM-L6-H384, S 128, in a profile:
  1.7 of 24.0 ms in float32, 4.5 of 21.7 ms in bfloat16). With the weights as constants,
  TensorFlow's graph optimizer (Grappler's constant folding, when a loaded function first
  runs) computes each such tensor once: in TF 2.20 it folded casts up to [2048, 4096]
  (16.8 MB in bfloat16), more than BERT-Large's largest kernel. The folded tensors are the
  same float32 operations, so the outputs are those of the variable graph.

  The cost is at load: the SavedModel holds the weights in its graph (`saved_model.pb`)
  instead of `variables/`, and the first request waits for the folding (MiniLM-L6-H384:
  load 1.5 s and first call 3.4 s, against 0.7 s and 0.4 s reading variables). Protocol
  buffers cap a graph at 2 GiB: BERT-Large in float32 (1.3 GB) fits, and `outputs_function`
  keeps larger weights in variables. The graph is for serving: it is not differentiated
  (`SAVE_OPTIONS`).

  Args:
    model: one of `served_outputs`' four.
    extra_inputs: specs of features beyond `FEATURE_NAMES` that the model's `served_outputs`
      reads, by name (a pretrainer's `masked_lm_positions`); every call then passes them.
  """

  def __init__(self, model: keras.Model,
               extra_inputs: Optional[dict[str, tf.TensorSpec]] = None):
    spec = {name: tf.TensorSpec([None, None], tf.int32, name) for name in FEATURE_NAMES}
    spec.update(extra_inputs or {})
    self._names = tuple(spec)
    traced = tf.function(lambda features: served_outputs(model, features),
                         autograph=False).get_concrete_function(spec)
    self._structure = traced.structured_outputs
    with freeze_quietly.quiet_table_initializer_warning():  # Noise of the tokenizer's tables.
      self._function = convert_to_constants.convert_variables_to_constants_v2(traced)

  def __call__(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """Args: features: int32 `input_ids`, `input_mask`, `segment_ids` [B, S] (and the
    `extra_inputs`)."""
    flat = tf.nest.flatten({name: features[name] for name in self._names})
    return tf.nest.pack_sequence_as(self._structure, self._function(*flat))


# Largest weights `outputs_function` puts into a graph: protocol buffers cap a SavedModel's
# graph at 2 GiB, and the root export holds the tokenizer's tables too (~3 MB).
MAX_FROZEN_BYTES = 1536 * 1024 * 1024


def outputs_function(model: keras.Model,
                     extra_inputs: Optional[dict[str, tf.TensorSpec]] = None
                     ) -> Callable[[dict], dict[str, tf.Tensor]]:
  """What a SavedModel's signatures call for `served_outputs`: `FrozenOutputs(model,
  extra_inputs)`, or for weights above `MAX_FROZEN_BYTES` (larger than BERT-Large in float32)
  the model itself, its weights then saved in `variables/`."""
  size = sum(int(np.prod(weight.shape)) * tf.as_dtype(weight.dtype).size
             for weight in model.weights)
  if size <= MAX_FROZEN_BYTES:
    return FrozenOutputs(model, extra_inputs)
  return functools.partial(served_outputs, model)


def _saved_if_read(model: keras.Model, outputs_of, module: tf.Module):
  """`model` as a module attribute: saved (its variables) only if the signatures read it."""
  return model if not isinstance(outputs_of, FrozenOutputs) else module._no_dependency(model)


def encoder_of(encoder_or_model) -> BertEncoder:
  """The `BertEncoder` itself, or the `.encoder` of a tfbert model.

  Raises:
    TypeError: for anything else, naming its type.
  """
  encoder = getattr(encoder_or_model, "encoder", encoder_or_model)
  if not isinstance(encoder, BertEncoder):
    raise TypeError("expected a BertEncoder or a tfbert model with .encoder, got "
                    f"{type(encoder_or_model).__name__}")
  return encoder


def export_encoder_saved_model(encoder_or_model, export_dir: str, *,
                               vocab_file: Optional[str] = None,
                               do_lower_case: Optional[bool] = None,
                               seq_length: int = 128,
                               export_dtype: str = "model",
                               allow_casing_mismatch: bool = False) -> str:
  """Writes the encoder as a SavedModel, replacing `export_dir` atomically.

  Args:
    encoder_or_model: a `BertEncoder` or a tfbert model with `.encoder` (only
      the encoder is exported; heads are not).
    export_dir: local directory or URL (`gs://...`) to create or replace.
    vocab_file: WordPiece vocab; when given, adds the `encode_text` signature
      and copies the vocab into `assets/`.
    do_lower_case: the casing `encode_text` tokenizes with; None: the vocabulary's
      (`tfbert.text.casing`: cased entries mean cased), as `attach_text` takes it. A given
      one that the vocabulary contradicts is refused unless `allow_casing_mismatch`: an
      uncased vocabulary read cased made "HELLO" [UNK] (sweep 34, B65).
    seq_length: S of `encode_text`'s packed inputs (an int >= 3: [CLS], one token, [SEP]);
      at most `max_position_embeddings`.
    export_dtype: "model" (its policy), "float32", "bfloat16" or "auto" (the faster on this
      CPU); see `tfbert.serving.serving_dtype`. Recorded in `serving.json`.
    allow_casing_mismatch: tokenize with the given `do_lower_case` whatever the vocabulary
      says (logged); for a caller that resolved the casing itself.

  Returns:
    `export_dir`.

  Raises:
    TypeError: see `encoder_of`.
    ValueError: before anything is written: `seq_length` not an int >= 3 (sweep 34, B63:
      16.5 reached TensorFlow as "Expected int64, but got 16.5") or beyond
      `max_position_embeddings`; `do_lower_case` or `allow_casing_mismatch` not a bool.
    FileNotFoundError: `vocab_file` does not exist.
    tfbert.text.casing.CasingMismatchError: `do_lower_case` contradicts the vocabulary.
  """
  seq_length = validation.plain_int("seq_length", seq_length, minimum=3)
  do_lower_case = validation.plain_bool("do_lower_case", do_lower_case, optional=True)
  allow_casing_mismatch = validation.plain_bool("allow_casing_mismatch", allow_casing_mismatch)
  encoder = encoder_of(encoder_or_model)
  if vocab_file is not None:
    vocab_file = files.as_path(vocab_file, "vocab_file")
    if not files.isfile(vocab_file):
      raise FileNotFoundError(files.missing_file_message(vocab_file, "vocabulary"))
    limit = encoder.config.max_position_embeddings
    if seq_length > limit:
      raise ValueError(f"seq_length {seq_length} exceeds max_position_embeddings {limit}")
    do_lower_case = casing.vocabulary_casing(do_lower_case, vocab_file,
                                             "export_encoder_saved_model",
                                             allow_casing_mismatch)
  encoder, serving = serving_dtype.for_serving(encoder, export_dtype)
  preprocessor = None
  if vocab_file is not None:
    preprocessor = TextPreprocessor(vocab_file, do_lower_case, seq_length)
  module = EncoderExport(encoder, preprocessor)
  save_atomically(lambda path: write_export(module, encoder.config, path, serving), export_dir,
                  export_task(encoder))
  return export_dir


def export_ids_saved_model(model: keras.Model, export_dir: str, *,
                           export_dtype: str = "model") -> str:
  """Writes the id signatures (`ID_SIGNATURES`) of any tfbert model as a SavedModel, as an
  export's `ids/` holds them, replacing `export_dir` atomically. What `model.export()` does.

  Beside `saved_model.pb`: `bert_config.json`, `serving.json`, and for a model with label
  names (`model.labels`) `labels.txt`. No raw-text signature: that needs the vocabulary
  (`export_encoder_saved_model`, the task exporters).

  Args:
    model: a tfbert model or encoder (a `BertPretrainer` serves its encoder's outputs).
    export_dir: local directory or URL (`gs://...`) to create or replace.
    export_dtype: see `export_encoder_saved_model`.

  Returns:
    `export_dir`.
  """
  served, serving = serving_dtype.for_serving(model, export_dtype)
  outputs_of = outputs_function(served)
  module = IdExport(served, outputs_of)
  module.id_functions = id_functions(outputs_of, served.config)
  labels = getattr(model, "labels", None)

  def write(path):
    tf.saved_model.save(module, path, signatures=id_signatures(module), options=SAVE_OPTIONS)
    served.config.to_json_file(os.path.join(path, CONFIG_FILE))
    serving_dtype.write_record(path, serving)
    if labels is not None:
      model_paths.write_labels_file(path, labels)

  save_atomically(write, export_dir, export_task(model) + ID_TASK_SUFFIX)
  return export_dir


# The bucket step of the raw-text signatures: a batch runs at the smallest multiple of it
# (or S) holding its longest text, as fine-tuning's default `length_bucket`.
TEXT_LENGTH_BUCKET = 8


class TaskExport(tf.Module):
  """The part every task SavedModel shares: model, vocab asset, tokenizer, id signatures.

  The id signatures (`ID_SIGNATURES`: `serving_default` and its Hugging Face / int64
  variants) serve `served_outputs` of the model and validate their features here.
  Subclasses define `signatures()`: `id_signatures(self)` plus their raw-text signature,
  which passes its texts through `validate_texts` before tokenizing and its packed
  features through `validate_features`.

  Args (besides the attributes'):
    frozen: the signatures call `outputs_function(model)` (`FrozenOutputs`: what a
      SavedModel holds); False: `served_outputs` of the model's live variables (what
      `tfbert.inference` calls in Python, never saved).
    extra_inputs: features beyond `FEATURE_NAMES` that `served_outputs` reads (see
      `FrozenOutputs`); a subclass then overrides `_outputs` for the id signatures.

  Attributes:
    model: the Keras model, not saved: the signatures call `FrozenOutputs` of it.
    vocab: `tf.saved_model.Asset` of the vocab file (copied into `assets/`).
    tokenizer: the `tokenization.WordPieceTokenizer`.
    max_seq_length: S of the raw-text signature.
    id_functions: the `tf.function`s behind the id signatures (`ID_SIGNATURES`) by name.
  """

  def __init__(self, model: keras.Model, vocab_file: str, do_lower_case: bool,
               max_seq_length: int, name: Optional[str] = None, frozen: bool = True,
               extra_inputs: Optional[dict[str, tf.TensorSpec]] = None):
    super().__init__(name=name)
    # Unfrozen (`tfbert.inference`'s raw-text calls in Python): the signatures read the
    # model's variables as they are at each call, so a model trained further answers with
    # its new weights; the same graph otherwise.
    self._outputs_of = (outputs_function(model, extra_inputs) if frozen
                        else functools.partial(served_outputs, model))
    self.model = _saved_if_read(model, self._outputs_of, self)
    self.vocab = tf.saved_model.Asset(vocab_file)
    self.tokenizer = tokenization.WordPieceTokenizer(vocab_file, do_lower_case)
    self.max_seq_length = max_seq_length
    self.id_functions = id_functions(self._outputs, model.config)

  def _outputs(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    return self._outputs_of(features)

  def _text_outputs(self, features: dict[str, tf.Tensor], *,
                    pad: bool = True) -> dict[str, tf.Tensor]:
    """`_outputs` of raw text packed to S, computed on the batch cut to its length bucket
    (`TEXT_LENGTH_BUCKET`, `inputs.cut_to_bucket`): a batch of short texts costs its
    tokens, not S, with the same outputs at every real position. `pad`: per-position
    outputs padded back to [B, S, ...] (False: [B, L, ...])."""
    outputs = self._outputs(inputs.cut_to_bucket(features, self.max_seq_length,
                                                 TEXT_LENGTH_BUCKET))
    return inputs.pad_outputs(outputs, self.max_seq_length) if pad else outputs


def id_signatures(module: tf.Module) -> dict[str, tf.types.experimental.PolymorphicFunction]:
  """The id signatures of an `EncoderExport` or `TaskExport` to save, by name.

  Each is its `tf.function` (with an input signature), not a concrete function traced here:
  `tf.saved_model.save` traces every function inside its save context, and a trace made
  outside it has another cache key, so each signature (its input checks, the frozen model,
  a tokenizer) was traced twice per export. The tasks' `signatures()` hand over their
  raw-text `tf.function` likewise; the export's `ids/` (a second save, with the same
  options) reuses the traces.
  """
  return dict(module.id_functions)


def check_seq_length(model: keras.Model, max_seq_length: int) -> None:
  """Raises ValueError when S exceeds the model's `max_position_embeddings`."""
  limit = model.config.max_position_embeddings
  if max_seq_length > limit:
    raise ValueError(f"max_seq_length {max_seq_length} exceeds max_position_embeddings {limit}")


def validate_texts(signature: str, texts: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
  """The text inputs of a raw-text signature, gated on equal batch sizes and UTF-8 text.

  Packing does not check that its segments share a batch size: tensorflow-text's
  `RoundRobinTrimmer` and `combine_segments` (which packed before `tfbert.text.inputs`
  used core ops) aborted the process (`std::length_error`) on batches of 2 and 1, or
  gathered garbage ids, and broadcast 1 against 3; the core ops fail naming no input
  ("Incompatible shapes: [2] vs. [3]") or also broadcast a first segment of batch 1
  (measured). So no tokenizer op may see the texts before this check has passed. The rank
  is checked first (see `_with_rank`). Then every text must be UTF-8, as the Python API
  requires (`tfbert.inference`): the tokenizer would silently drop the bad bytes, so a
  client's Latin-1 "caf\\xe9" would be classified as "caf". Checked with core ops only
  (`UnicodeTranscode`: a text is UTF-8 when replacing its bad bytes leaves it as it is).

  Args:
    signature: the signature's name, for the messages.
    texts: tf.string Tensors [B] by input name; the first one's B is the reference.

  Returns:
    the same texts (identities that run only after the check).

  Raises:
    tf.errors.InvalidArgumentError: when the graph runs, e.g.
      "classify_text: text_b has batch size 1 but text_a has 2", "classify_text: text_a
      row 3 is not UTF-8 ...".
  """
  texts = _with_rank(texts, 1)
  (first, reference), *others = texts.items()
  checks = [_checker(tf.equal(tf.shape(text)[0], tf.shape(reference)[0]),
                     f"{signature}: {name} has batch size {{}} but {first} has {{}}",
                     lambda text=text: [tf.shape(text)[0], tf.shape(reference)[0]])
            for name, text in others]
  for name, text in texts.items():
    utf8 = tf.equal(tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace",
                                                 replacement_char=0xFFFD), text)  # [B]
    checks.append(_checker(
        tf.reduce_all(utf8),
        f"{signature}: {name} row {{}} is not UTF-8 text; send every text encoded as UTF-8 "
        "(decode it from its own encoding first, or replace its bad bytes)",
        lambda utf8=utf8: [_first_row(~utf8)]))
  return _after(checks, texts)


def _first_row(bad: tf.Tensor) -> tf.Tensor:
  """int64 index of the first True of `bad` [B]; 0 when there is none (a batch of 0
  passes)."""
  return tf.concat([tf.where(bad)[:, 0], tf.zeros([1], tf.int64)], 0)[0]


def validate_features(signature: str, features: dict[str, tf.Tensor], config,
                      packed_from: Optional[str] = None,
                      input_names: Optional[dict[str, str]] = None) -> dict[str, tf.Tensor]:
  """The int32 features, gated on fitting the model, so no gather sees a bad index.

  Checked in this order (the first failure is the one reported): rank 2 (see
  `_with_rank`); `input_mask` and `segment_ids` have `input_ids`' shape; the sequence
  length S is in [1, max_position_embeddings]; `input_ids` in [0, vocab_size);
  `segment_ids` in [0, type_vocab_size); `input_mask` 0 or 1. Without these, an id past
  a table fails deep inside a gather naming no input, a negative id silently reads a row
  from the end of the table (Keras' `take` wraps negative indices; measured), and
  features of different shapes fail inside the attention.

  Args:
    signature: the signature's name, for the messages.
    features: int32 or int64 `input_ids`, `input_mask`, `segment_ids` [B, S] (checked in
      their own dtype, so no int64 value is wrapped into range).
    config: the model's `BertConfig`.
    packed_from: for a raw-text signature, the text inputs the features were packed
      from (named in the messages instead of a client's feature input).
    input_names: the client's name of each feature (e.g. `input_mask` ->
      `attention_mask`), for the messages; default the Google names.

  Returns:
    the same features (identities that run only after the checks).

  Raises:
    tf.errors.InvalidArgumentError: when the graph runs, e.g. "serving_default:
      input_ids holds 30522 at [0, 3], outside the vocabulary [0, 30522)".
  """
  client = input_names or {name: name for name in FEATURE_NAMES}
  label = {name: client[name] if packed_from is None else f"{name} (packed from {packed_from})"
           for name in FEATURE_NAMES}
  features = _with_rank(features, 2)
  ids, mask, segments = (features[name] for name in FEATURE_NAMES)
  shape, limit = tf.shape(ids), config.max_position_embeddings
  checks = [_checker(tf.reduce_all(tf.equal(tf.shape(features[name]), shape)),
                     f"{signature}: {label[name]} has shape {{}} but {label['input_ids']} has "
                     "{}",
                     lambda name=name: [tf.shape(features[name]), shape])
            for name in FEATURE_NAMES[1:]]
  checks.append(_checker((shape[1] >= 1) & (shape[1] <= limit),
                         f"{signature}: {label['input_ids']} has sequence length {{}}, outside "
                         f"[1, {limit}] (max_position_embeddings)", lambda: [shape[1]]))
  for values, name, high, what in (
      (ids, "input_ids", config.vocab_size, f"the vocabulary [0, {config.vocab_size})"),
      (segments, "segment_ids", config.type_vocab_size,
       f"the token types [0, {config.type_vocab_size})"),
      (mask, "input_mask", 2, "the mask values 0 and 1")):
    outside = (values < 0) | (values >= high)                             # [B, S]
    checks.append(_checker(~tf.reduce_any(outside),
                           f"{signature}: {label[name]} holds {{}} at [{{}}, {{}}], outside {what}",
                           lambda values=values, outside=outside: _first(values, outside)))
  return _after(checks, features)


def _with_rank(tensors: dict[str, tf.Tensor], rank: int) -> dict[str, tf.Tensor]:
  """`tensors`, each checked at run time to have `rank` dimensions (`tf.ensure_shape`).

  A loaded SavedModel signature does NOT enforce its TensorSpecs' ranks (measured, TF
  2.20: a [2, 1] `text_a` or a [2, 7, 1] `input_ids` reaches the graph; a [2, 1] `text_a`
  was even classified), while the graph is built for them: `tf.rank(x)` is a constant
  at trace time and Grappler folds `tf.size(tf.shape(x))`, so checks built on them
  always pass. `EnsureShape` survives and fails with "Shape of tensor input_ids
  [2,7,1] is not compatible with expected shape [?,?]" (the signature input's name).
  """
  return {name: tf.ensure_shape(tensor, [None] * rank) for name, tensor in tensors.items()}


def _first(values: tf.Tensor, outside: tf.Tensor) -> list[tf.Tensor]:
  """[value, row, column] of the first `outside` element of integer `values` [B, S].

  Zeros when there is none (the message is then not shown), without indexing an empty
  tensor: a request of batch 0 must pass.
  """
  value = tf.concat([tf.boolean_mask(values, outside), tf.zeros([1], values.dtype)], 0)[0]
  position = tf.concat([tf.where(outside), tf.zeros([1, 2], tf.int64)], 0)[0]  # [2]
  return [value, position[0], position[1]]


def _checker(ok: tf.Tensor, template: str, message_args: Callable[[], list]):
  """A check for `_after`: an Assert raising `template` (tf.strings.format) unless `ok`."""
  return lambda: tf.debugging.Assert(ok, [tf.strings.format(template, message_args())])


def _after(checks: list, tensors: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
  """Identities of `tensors` that run after all `checks`, which run one after another.

  In order, so that when several checks fail, the first in `checks` is the one reported.
  """
  done = []
  for check in checks:
    with tf.control_dependencies(done[-1:]):
      done.append(check())
  with tf.control_dependencies(done[-1:]):
    return {name: tf.identity(tensor) for name, tensor in tensors.items()}


class IdExport(tf.Module):
  """An export's int32 id signature alone, saved in `<export_dir>/ids/`.

  Its graph holds the model (weights as constants, `FrozenOutputs`) and the input checks
  only, no tokenizer: every op is a core TensorFlow op, so a process that has `tensorflow`
  but not `tensorflow_text` (a bare install, a TF Serving build without it) loads and serves
  it, where the export directory itself, whose raw-text signature tokenizes in the graph,
  needs `import tensorflow_text`.

  Attributes:
    model: the exported model or encoder, saved only when the signature reads its variables
      (`_saved_if_read`), as in the export it comes from.
  """

  def __init__(self, model: keras.Model, outputs_of, name: Optional[str] = None):
    super().__init__(name=name)
    self.model = _saved_if_read(model, outputs_of, self)


# Serving graphs are not differentiated: the fused kernels' custom gradients stay out.
SAVE_OPTIONS = tf.saved_model.SaveOptions(experimental_custom_gradients=False)


def write_export(module: tf.Module, config, path: str, serving: dict) -> None:
  """Saves `module` with its signatures and `bert_config.json` into `path`, and its id
  signatures alone into `path/ids/` (`IdExport`, with `bert_config.json` too); writes
  `serving` (`serving_dtype.for_serving`'s record) into both as `serving.json`, and what
  the export serves (`export_task` of its model) as `path`'s `OUTPUT_MARKER`
  (`save_atomically` reads it there)."""
  signatures = module.signatures()
  tf.saved_model.save(module, path, signatures=signatures, options=SAVE_OPTIONS)
  config.to_json_file(os.path.join(path, CONFIG_FILE))
  ids = os.path.join(path, ID_DIR)
  model = module.model if hasattr(module, "model") else module.encoder
  # What it serves, for `save_atomically`: only an export of the same model replaces it.
  atomic.write_marker(path, atomic.OutputRecord(EXPORT_KIND, export_task(model)))
  tf.saved_model.save(IdExport(model, module._outputs_of), ids, options=SAVE_OPTIONS,
                      signatures={name: signatures[name] for name in ID_SIGNATURES})
  config.to_json_file(os.path.join(ids, CONFIG_FILE))
  serving_dtype.write_record(path, serving, ID_DIR)


def write_labels(path: str, labels) -> None:
  """Writes `labels.txt` into the export directory `path` and into its `ids/`, whose outputs
  are per label id too."""
  for folder in (path, os.path.join(path, ID_DIR)):
    model_paths.write_labels_file(folder, labels)


# What an export directory is (`tfbert.runtime.atomic.OUTPUT_MARKER`): only an export
# replaces an export, and only one of the same model (`export_task`) and run.
EXPORT_KIND = "SavedModel export"
ID_TASK_SUFFIX = " (id signatures only)"  # `export_ids_saved_model`'s: no raw-text signature.


def export_task(model) -> str:
  """What an export of `model` (a model, or its class) serves
  (`tfbert.runtime.atomic.OutputRecord.task`): the class's name, e.g. "BertClassifier",
  "BertSpanLabeler", "BertEncoder"."""
  return (model if isinstance(model, type) else type(model)).__name__


def save_atomically(write: Callable[[str], None], export_dir: str,
                    task: Optional[str] = None) -> None:
  """Runs `write(tmp)` into a fresh sibling directory, then renames it into place.

  Readers see either the old export or the complete new one, never a partial
  one: `write` fills a temporary sibling (same filesystem, so renames are
  atomic), and only then does the old directory move aside and the new one
  move in (`tfbert.runtime.atomic.replace_directory`). POSIX cannot rename a
  directory onto a non-empty one, so there is a window of two renames in which
  `export_dir` is absent; if the second rename fails, the old export is moved
  back. On any error the temporary directory is removed and the old export is
  left as it was. Only an export of the same model replaces an export (`EXPORT_KIND`, the
  task `export_task`, and the run that wrote it when both are known:
  `tfbert.runtime.atomic.check_replaceable`): `export_dir` naming a run directory, anything
  else tfbert did not write as an export, or another task's or run's export is refused,
  untouched; before anything is written when the task is given, else when `write` has
  recorded it (`write_export` does).

  On a URL (`gs://`, `s3://`, `ram://`: any `tf.io.gfile` filesystem) the staging
  and the renames are the same, but a rename is the filesystem's: on object stores
  (`gs://`, `s3://`) it is a copy then a delete, file by file, so there a reader may
  see the new directory half moved in (with the old one already moved aside); the
  export is still never written in place.

  Args:
    write: fills the directory it is given.
    export_dir: local directory or URL to create or replace.
    task: what the export serves (`export_task`); None: what `write` records in the
      directory's `OUTPUT_MARKER` (`write_export` does), else unknown.
  """
  export_dir = files.absolute(export_dir)
  atomic.check_replaceable(export_dir, EXPORT_KIND, task)  # Before the (long) write.
  files.makedirs(files.parent(export_dir))
  staging = atomic.temporary_sibling(export_dir, "export")
  files.mkdir(staging)  # Locally `os.mkdir`: the umask's mode, readable by a model server.
  try:
    write(staging)
    written = atomic.read_marker(staging)
    if task is None and written is not None and written.kind == EXPORT_KIND:
      task = written.task
    atomic.replace_directory(staging, export_dir, EXPORT_KIND, task)
  finally:
    if files.exists(staging):  # Gone already after the rename.
      atomic.remove_quietly(staging)
