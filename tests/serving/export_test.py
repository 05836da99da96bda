"""Tests for tfbert.serving.export: a relocatable SavedModel that a fresh process serves exactly.

One export (a `BertPretrainer` with odd sizes but the real 30,522-entry uncased vocab, so
the text signature tokenizes real words; tests/tiny_exports.py, which deletes the vocab
source it was made from) is copied, the copy moved elsewhere, and served from there by ONE
fresh Python process that imports only `tensorflow` and `tensorflow_text`
(tfbert is not importable there). The tests compare what that process printed with the
in-process Keras model. The same process first serves the `ids/` of every shared export,
before it imports `tensorflow_text` (`SERVE_SCRIPT`).

Why 1e-5: both sides run the same float32 ops on the same CPU, but the SavedModel runs a
Grappler-optimized graph and Keras runs eagerly, so reductions (matmul, softmax, LayerNorm
moments) may be ordered differently. Each such reordering costs a few float32 ulps
(~6e-8 relative); over 3 layers with outputs up to ~3 that stays near 1e-6 (measured:
1.7e-6 on `sequence_output`, 1.4e-6 on `pooled_output`, both signatures). 1e-5 leaves
room for other CPUs while a real bug (a missing mask, a wrong segment input, a weight
not loaded) moves outputs by > 1e-2. Against the float64 NumPy reference the eager float32 model
itself is only within ~2e-6, so exact equality is not the right bar.
"""

import os
import pathlib
import re
import shutil
import stat
import types

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from tests import helpers, numpy_reference, tiny_exports
from tfbert import BertConfig, BertEncoder
from tfbert.checkpoints import pretrained
from tfbert.classifier import classifier_export
from tfbert.runtime import atomic
from tfbert.serving import export
from tfbert.squad import squad_export
from tfbert.tagging import tagging_export
from tfbert.text import inputs, tokenization

TOL = 1e-5  # See the module docstring.
TEXT_SEQ = tiny_exports.TEXT_SEQ  # The shared encoder export's S; the other tests' too.
TEXTS = ["Hello, world!", "Café naïve résumé", "",
         "a sentence long enough that packing must truncate it to eleven pieces",
         "BERT是一个模型。"]

# Runs in the fresh process: argv = inputs .npz, outputs .npz, the moved export, the export
# directories whose `ids/` are served. First, without tensorflow_text: serves each
# `<dir>/ids` and lists its ops that this process's TensorFlow does not know (none may
# remain: a tokenizer op would be one). Then imports tensorflow_text and serves the moved
# export's signatures.
SERVE_SCRIPT = r"""
import json, os, sys
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

inputs_path, outputs_path, export_dir, *dirs = sys.argv[1:]
given = np.load(inputs_path)
out, unknown = {}, {}
core = set(dir(tf.raw_ops))
for index, ids_of in enumerate(dirs):
  ids = os.path.join(ids_of, "ids")
  proto = saved_model_pb2.SavedModel()
  with open(os.path.join(ids, "saved_model.pb"), "rb") as f:
    proto.ParseFromString(f.read())
  graph = proto.meta_graphs[0].graph_def
  ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
  unknown[ids_of] = sorted(ops - core)
  serve = tf.saved_model.load(ids).signatures["serving_default"]
  features = {n: tf.constant(given["ids/" + n]) for n in ("input_ids", "input_mask",
                                                          "segment_ids")}
  for name, value in serve(**features).items():
    out[f"ids/{index}/{name}"] = value.numpy()
ids_report = {"unknown_ops": unknown, "tensorflow_text": "tensorflow_text" in sys.modules}

import tensorflow_text  # noqa: F401  Registers the tokenizer's ops.

loaded = tf.saved_model.load(export_dir)
features = {n: tf.constant(given[n]) for n in ("input_ids", "input_mask", "segment_ids")}
for name, value in loaded.signatures["serving_default"](**features).items():
  out["serving_default/" + name] = value.numpy()
for name, value in loaded.signatures["encode_text"](text=tf.constant(given["text"])).items():
  out["encode_text/" + name] = value.numpy()
np.savez(outputs_path, **out)

def specs(structure):
  return {k: [v.dtype.name, v.shape.as_list()] for k, v in structure.items()}

print(json.dumps({
    "signatures": {name: {"inputs": specs(fn.structured_input_signature[1]),
                          "outputs": specs(fn.structured_outputs)}
                   for name, fn in loaded.signatures.items()},
    "vocab_asset": loaded.preprocessor.vocab.asset_path.numpy().decode(),
    "ids": ids_report,
    "tfbert_imported": "tfbert" in sys.modules,
}))
"""


def _features(config):
  f = helpers.random_features(config)
  return {name: f[name] for name in export.FEATURE_NAMES}


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_encoder_export, every_export):
  """Moves a copy of the shared export (whose vocab source was deleted after exporting:
  tests/tiny_exports.py) elsewhere and serves it there, in the fresh process that serves
  the `ids/` of `every_export` first."""
  root = tmp_path_factory.mktemp("export")
  written = root / "first" / "bert"
  shutil.copytree(tiny_encoder_export.export_dir, written)  # The shared one stays as it is.
  moved = root / "moved" / "bert"
  moved.parent.mkdir()
  shutil.move(written, moved)
  shutil.rmtree(root / "first")
  work = root / "work"
  work.mkdir()
  config = tiny_encoder_export.config
  features = _features(config)
  ids_features = _features(every_export.config)
  outputs, report = helpers.serve_in_fresh_process(
      SERVE_SCRIPT, work, {"text": np.array(TEXTS), **features,
                           **{f"ids/{k}": v for k, v in ids_features.items()}},
      moved, *every_export.dirs.values())
  ids_outputs = {k[len("ids/"):]: v for k, v in outputs.items() if k.startswith("ids/")}
  outputs = {k: v for k, v in outputs.items() if not k.startswith("ids/")}
  return types.SimpleNamespace(model=tiny_encoder_export.model, config=config,
                               features=features, written=written, moved=moved,
                               outputs=outputs, report=report,
                               vocab_text=tiny_encoder_export.vocab_text,
                               ids_features=ids_features, ids_outputs=ids_outputs)


@pytest.mark.slow  # Shares the ~25 s `served` fixture.
def test_fresh_process_serves_the_keras_encoder_outputs(served):
  want = served.model(served.features, training=False)
  for name in export.OUTPUT_NAMES:
    got = served.outputs[f"serving_default/{name}"]
    assert got.dtype == np.float32 and got.shape == tuple(want[name].shape)
    assert helpers.max_abs_diff(got, want[name]) < TOL
  assert not served.report["tfbert_imported"]


@pytest.mark.slow  # Shares the ~25 s `served` fixture.
def test_signatures_have_bert_feature_names_dtypes_and_shapes(served):
  h, s = served.config.hidden_size, TEXT_SEQ
  ids = {"serving_default": (export.FEATURE_NAMES, "int32"),
         "serving_int64": (export.FEATURE_NAMES, "int64"),
         "serving_hf": (("input_ids", "attention_mask", "token_type_ids"), "int64"),
         "serving_hf_int32": (("input_ids", "attention_mask", "token_type_ids"), "int32")}
  assert served.report["signatures"] == {
      **{signature: {
          "inputs": {n: [dtype, [None, None]] for n in names},
          "outputs": {"sequence_output": ["float32", [None, None, h]],
                      "pooled_output": ["float32", [None, h]]}}
         for signature, (names, dtype) in ids.items()},
      "encode_text": {
          "inputs": {"text": ["string", [None]]},
          "outputs": {"sequence_output": ["float32", [None, s, h]],
                      "pooled_output": ["float32", [None, h]],
                      "input_mask": ["int32", [None, s]]}},
  }


@pytest.mark.slow  # Shares the ~25 s `served` fixture.
def test_text_signature_equals_python_tokenize_pack_and_encode(served):
  tokenizer = tokenization.WordPieceTokenizer(pretrained.minilm_vocab_file(), True)
  features = inputs.pack_inputs([tokenizer.tokenize(tf.constant(TEXTS))], TEXT_SEQ,
                                tokenizer.cls_id, tokenizer.sep_id)
  lengths = features["input_mask"].numpy().sum(axis=1)
  assert lengths.max() == TEXT_SEQ and lengths[2] == 2  # Truncated; "" is [CLS] [SEP].
  want = served.model.encoder(features, training=False)
  np.testing.assert_array_equal(served.outputs["encode_text/input_mask"],
                                features["input_mask"])
  for name in export.OUTPUT_NAMES:
    assert helpers.max_abs_diff(served.outputs[f"encode_text/{name}"], want[name]) < TOL


@pytest.mark.slow  # Shares the ~25 s `served` fixture.
def test_moved_export_is_self_describing(served):
  assert not os.path.exists(served.written)  # Served from `moved` only.
  config_file = served.moved / export.CONFIG_FILE
  assert BertConfig.from_json_file(str(config_file)) == served.config
  asset = served.report["vocab_asset"]
  assert asset == str(served.moved / "assets" / "vocab.txt")
  with open(asset, "rb") as f:
    assert f.read() == served.vocab_text


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_failed_save_leaves_no_directory_and_keeps_the_old_export(tmp_path, monkeypatch):
  encoder = BertEncoder(helpers.odd_config())
  old = tmp_path / "old"
  old.mkdir()
  (old / "saved_model.pb").write_bytes(b"previous export")
  # An export of this model tfbert wrote.
  atomic.write_marker(str(old), atomic.OutputRecord(export.EXPORT_KIND, "BertEncoder"))

  def broken_save(*args, **kwargs):
    del args, kwargs
    raise OSError("disk full")

  monkeypatch.setattr(tf.saved_model, "save", broken_save)
  for target in (tmp_path / "new", old):
    with pytest.raises(OSError, match="disk full"):
      export.export_encoder_saved_model(encoder, str(target))
  assert sorted(os.listdir(tmp_path)) == ["old"]  # No "new", no temporary siblings.
  assert sorted(os.listdir(old)) == [atomic.OUTPUT_MARKER, "saved_model.pb"]
  assert (old / "saved_model.pb").read_bytes() == b"previous export"


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_an_export_traces_each_signature_once_for_itself_and_its_ids(tmp_path, monkeypatch):
  """`tf.saved_model.save` traces a module's `tf.function`s inside its save context, where a
  concrete function traced before the save has another cache key: the signatures were
  traced twice per export (each trace builds the input checks, the frozen model and, for
  the raw-text signature, the tokenizer), about 45% of a warm tiny export's CPU. Now each
  signature is traced once, in the first save, and the export's `ids/` reuses it."""
  traced = []
  checks = export.validate_features

  def counted(signature, *args, **kwargs):
    traced.append(signature)
    return checks(signature, *args, **kwargs)

  monkeypatch.setattr(export, "validate_features", counted)
  export.export_encoder_saved_model(BertEncoder(helpers.odd_config()), str(tmp_path / "e"),
                                    vocab_file=pretrained.minilm_vocab_file(), seq_length=9)
  assert sorted(traced) == sorted([*export.ID_SIGNATURES, export.TEXT_SIGNATURE])
  assert sorted(os.listdir(tmp_path / "e" / export.ID_DIR)).count("saved_model.pb") == 1


def test_an_export_records_its_model_and_is_replaced_only_by_an_export_of_it(
    tmp_path, tiny_encoder_export):
  """Every export once recorded one kind, "SavedModel export": any export replaced any other
  (a SQuAD export replaced a classifier's). The export is a copy of the shared encoder
  export (`export_encoder_saved_model` of a pretrainer's encoder: tests/tiny_exports.py)."""
  encoder = tiny_encoder_export.model.encoder
  target = tmp_path / "export"
  shutil.copytree(tiny_encoder_export.export_dir, target)
  assert atomic.read_marker(str(target)) == atomic.OutputRecord(export.EXPORT_KIND,
                                                                "BertEncoder")
  before = sorted(os.listdir(target))
  with pytest.raises(FileExistsError, match=re.escape(
      f"{target} exists and is a SavedModel export of a BertEncoder tfbert wrote; this would "
      "replace it with a SavedModel export of a BertEncoder (id signatures only)")):
    export.export_ids_saved_model(encoder, str(target))
  assert sorted(os.listdir(target)) == before and sorted(os.listdir(tmp_path)) == ["export"]


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_mixed_bfloat16_encoder_replaces_old_export_with_float32_outputs(tmp_path):
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  config = helpers.odd_config()
  weights = numpy_reference.random_google_weights(config.to_dict(), seed=5)
  encoder = helpers.loaded(BertEncoder(config), weights, allow_unused=True)
  target, plain = tmp_path / "bert", tmp_path / "plain"
  target.mkdir()
  plain.mkdir()  # Permissions that the umask gives a new directory.
  (target / "stale.txt").write_text("from an older export")
  atomic.write_marker(str(target), atomic.OutputRecord(export.EXPORT_KIND, "BertEncoder"))
  export.export_encoder_saved_model(encoder, str(target))
  assert sorted(os.listdir(tmp_path)) == ["bert", "plain"]  # No temporary siblings.
  assert not (target / "stale.txt").exists()
  assert stat.S_IMODE(target.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)
  features = _features(config)
  got = tf.saved_model.load(str(target)).signatures["serving_default"](
      **{k: tf.constant(v) for k, v in features.items()})
  assert encoder(features, training=False)["sequence_output"].dtype == "bfloat16"
  want = numpy_reference.bert_forward(weights, config.to_dict(),
                                      *(features[n] for n in export.FEATURE_NAMES))
  for name in export.OUTPUT_NAMES:
    assert got[name].dtype == tf.float32
    # Computed in bfloat16, then cast: every value is a bfloat16 number.
    np.testing.assert_array_equal(tf.cast(tf.cast(got[name], tf.bfloat16), tf.float32),
                                  got[name])
    # bfloat16 keeps 8 mantissa bits (~4e-3 relative) through 3 layers; outputs are O(1)
    # (measured: 0.05). Graph and eager bfloat16 differ by such roundings too (0.03).
    assert helpers.max_abs_diff(got[name], want[name]) < 0.1


@pytest.mark.slow
def test_weights_above_the_graph_limit_stay_in_variables(tmp_path, monkeypatch,
                                                         tiny_encoder_export):
  """`outputs_function`: weights too large for a graph constant (here: any, the limit
  lowered to 0) are saved in `variables/` and read there, by both SavedModels, with the
  same outputs as the constant graph (the shared export of the same encoder, made with the
  limit as it is: tests/tiny_exports.py). No vocab: the id signatures are what is compared."""
  encoder = tiny_encoder_export.model.encoder
  monkeypatch.setattr(export, "MAX_FROZEN_BYTES", 0)
  export.export_encoder_saved_model(encoder, str(tmp_path / "variables"))
  features = {k: tf.constant(v) for k, v in _features(tiny_encoder_export.config).items()}
  frozen = tf.saved_model.load(os.path.join(tiny_encoder_export.export_dir, export.ID_DIR))
  outputs = frozen.signatures[export.SERVING_SIGNATURE](**features)
  for saved in (tmp_path / "variables", tmp_path / "variables" / "ids"):
    stored = dict(tf.train.list_variables(str(saved / "variables" / "variables")))
    assert len(stored) > len(encoder.weights), saved  # Every weight (+ object graph).
    assert "ReadVariableOp" in export.graph_ops(str(saved)), saved
    got = tf.saved_model.load(str(saved)).signatures[export.SERVING_SIGNATURE](**features)
    for name in export.OUTPUT_NAMES:
      # The same float32 formulas on folded constants or on variables; oneDNN fuses more
      # into the MatMuls of the constant graph (the residual add), which rounds otherwise:
      # measured 1.2e-6 on outputs up to ~3 (float32 ulp 2.4e-7 above 2).
      assert helpers.max_abs_diff(got[name], outputs[name]) < 3e-6, (saved, name)


def test_rejects_non_encoders_and_too_long_text_inputs(tmp_path):
  with pytest.raises(TypeError, match="Dense"):
    export.export_encoder_saved_model(keras.layers.Dense(3), str(tmp_path / "x"))
  encoder = BertEncoder(helpers.odd_config())  # max_position_embeddings 19.
  with pytest.raises(ValueError, match="max_position_embeddings 19"):
    export.export_encoder_saved_model(encoder, str(tmp_path / "x"),
                                      vocab_file=pretrained.minilm_vocab_file(), seq_length=20)
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize("seq_length", [16.5, "16", True, 2, np.float64(16)])
def test_a_seq_length_not_an_int_of_at_least_3_is_refused_before_any_write(tmp_path,
                                                                          seq_length):
  # Sweep 34, B63: 16.5 reached TensorFlow as "Expected int64, but got 16.5".
  with pytest.raises(ValueError, match=f"^seq_length must be an int >= 3, got "
                                       f"{re.escape(repr(seq_length))}$"):
    export.export_encoder_saved_model(BertEncoder(helpers.odd_config()), str(tmp_path / "e"),
                                      vocab_file=pretrained.minilm_vocab_file(),
                                      seq_length=seq_length)
  assert not os.listdir(tmp_path)


class _Stop(Exception):
  """Raised by a stand-in `TextPreprocessor` once it has recorded the casing."""


def _export_casing(monkeypatch, tmp_path, vocab_words, **kwargs) -> bool:
  """The do_lower_case `export_encoder_saved_model` builds its preprocessor with, for a vocab
  of `vocab_words` (the export stops there: nothing is written)."""
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("".join(f"{w}\n" for w in [*tokenization.SPECIAL_TOKENS,
                                                *vocab_words]))
  casings = []

  def preprocessor(vocab_file, do_lower_case, seq_length):
    casings.append(do_lower_case)
    raise _Stop

  monkeypatch.setattr(export, "TextPreprocessor", preprocessor)
  with pytest.raises(_Stop):
    export.export_encoder_saved_model(BertEncoder(helpers.odd_config()), str(tmp_path / "e"),
                                      vocab_file=str(vocab), seq_length=9, **kwargs)
  assert not (tmp_path / "e").exists()
  return casings[0]


def test_the_casing_follows_the_vocabulary_and_a_contradicting_one_is_refused(
    monkeypatch, tmp_path):
  # Sweep 34, B65: do_lower_case=False with an uncased vocab was exported without a word, and
  # "HELLO World" and "hello world" then embedded differently.
  assert _export_casing(monkeypatch, tmp_path, ["hello", "world"]) is True
  assert _export_casing(monkeypatch, tmp_path, ["Hello", "world"]) is False
  with pytest.raises(export.casing.CasingMismatchError,
                     match=r"do_lower_case=false.*so it is uncased.*allow_casing_mismatch=True "
                           r"if this is intended \(keyword arguments of "
                           r"export_encoder_saved_model\)"):
    _export_casing(monkeypatch, tmp_path, ["hello", "world"], do_lower_case=False)
  assert _export_casing(monkeypatch, tmp_path, ["hello", "world"], do_lower_case=False,
                        allow_casing_mismatch=True) is False
  assert _export_casing(monkeypatch, tmp_path, ["hello"], do_lower_case=True) is True
  with pytest.raises(ValueError, match="^do_lower_case must be True, False or None, got 'no'"):
    _export_casing(monkeypatch, tmp_path, ["hello"], do_lower_case="no")


# Small odd models of every export kind, all with the real vocab (tests/tiny_exports.py:
# an encoder, a pair classifier, the pair being what truncates two segments, a tagger and a
# span labeler, built once per session); the raw-text signature each export must hold.
EXPORT_KINDS = {"encoder": export.TEXT_SIGNATURE, "classifier": classifier_export.TEXT_SIGNATURE,
                "tagger": tagging_export.TEXT_SIGNATURE,
                "squad": squad_export.SQUAD_TEXT_SIGNATURE}


@pytest.fixture(scope="module")
def every_export(tiny_encoder_export, tiny_pair_classifier_export, tiny_tagger_export,
                 tiny_span_labeler_export):
  """The shared exports of every kind (read only)."""
  shared = {"encoder": tiny_encoder_export, "classifier": tiny_pair_classifier_export,
            "tagger": tiny_tagger_export, "squad": tiny_span_labeler_export}
  models = {kind: e.model for kind, e in shared.items()}
  models["encoder"] = models["encoder"].encoder  # The pretrainer's encoder is what is served.
  return types.SimpleNamespace(config=helpers.odd_config(vocab_size=tiny_exports.VOCAB_SIZE),
                               models=models,
                               dirs={kind: e.export_dir for kind, e in shared.items()})


@pytest.mark.slow  # Shares the `served` fixture's fresh process (and the shared exports).
def test_every_export_serves_ids_with_core_ops_only_where_tensorflow_text_is_absent(
    every_export, served):
  """Every export kind holds `ids/`: a SavedModel whose graph has only ops a bare
  TensorFlow knows, served in a process without tensorflow_text (not yet imported there:
  `SERVE_SCRIPT`), with the Keras outputs."""
  models, dirs = every_export.models, list(every_export.dirs.values())
  tagger = every_export.dirs["tagger"]
  assert (pathlib.Path(tagger) / "ids" / "labels.txt").read_text() == "O\nB-x\nI-x\n"
  features, outputs, report = served.ids_features, served.ids_outputs, served.report["ids"]
  assert not report["tensorflow_text"] and not served.report["tfbert_imported"]
  assert report["unknown_ops"] == {d: [] for d in dirs}
  names = {"encoder": export.OUTPUT_NAMES, "classifier": ("logits",), "tagger": ("logits",),
           "squad": squad_export.SPAN_OUTPUT_NAMES}
  for index, (kind, model) in enumerate(models.items()):
    want = model(features, training=False)
    for name in names[kind]:
      # Grappler-optimized float32 graph against eager Keras: ~1e-6 (module docstring).
      assert helpers.max_abs_diff(outputs[f"{index}/{name}"], want[name]) < 1e-5, (kind, name)


@pytest.mark.slow  # ~1 s, but shares the exports of `every_export`.
def test_every_export_holds_its_weights_as_graph_constants(every_export):
  """`FrozenOutputs`: no function of any signature reads a variable (so what is computed
  from weights alone is folded once, not recomputed per request), and `variables/` holds
  no weight (the checkpoint is empty). The only variable left is the top-level graph's
  scalar string of the vocab asset's path."""
  variable_ops = {"VarHandleOp", "ReadVariableOp", "ResourceGather", "VariableV2"}
  for kind, export_dir in every_export.dirs.items():
    for saved in (export_dir, f"{export_dir}/ids"):
      proto = saved_model_pb2.SavedModel()
      with open(f"{saved}/saved_model.pb", "rb") as f:
        proto.ParseFromString(f.read())
      ops = {node.op for function in proto.meta_graphs[0].graph_def.library.function
             for node in function.node_def}
      assert {"Const", "MatMul"} <= ops and not ops & variable_ops, (saved, ops & variable_ops)
      stored = tf.train.list_variables(f"{saved}/variables/variables")
      assert [name for name, _ in stored] == ["_CHECKPOINTABLE_OBJECT_GRAPH"], (saved, stored)


@pytest.mark.slow  # < 1 s, but shares the exports of `every_export`.
def test_raw_text_exports_need_only_core_ops_and_the_wordpiece_op(every_export):
  """What TF Serving needs: each export's graph (every node of every function, so every
  signature) holds core TensorFlow ops and `export.TEXT_OPS` only, and `ids/` core ops
  only. The tokenizer's op must be found, so a listing that missed functions would fail;
  a tensorflow-text trimmer (`TFText>RoundRobinTrim`) would fail the subset check."""
  core = set(dir(tf.raw_ops))
  assert export.TEXT_OPS and not export.TEXT_OPS & core
  for kind, export_dir in every_export.dirs.items():
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((pathlib.Path(export_dir) / "saved_model.pb").read_bytes())
    signatures = {n for n in proto.meta_graphs[0].signature_def if not n.startswith("__")}
    assert signatures == {*export.ID_SIGNATURES, EXPORT_KINDS[kind]}, kind  # Not init ops.
    ops, id_ops = export.graph_ops(export_dir), export.graph_ops(f"{export_dir}/ids")
    assert {"MatMul", "Softmax"} <= id_ops <= core, (kind, sorted(id_ops - core))
    assert ops - core <= export.TEXT_OPS, (kind, sorted(ops - core - export.TEXT_OPS))
    assert ops & export.TEXT_OPS, kind
    assert "UnicodeTranscode" in ops, kind  # `validate_texts`' UTF-8 check, a core op.
    assert export.non_core_ops(export_dir) == ops - core, kind
    assert not export.non_core_ops(f"{export_dir}/ids"), kind


@pytest.mark.parametrize("bad", [b"caf\xe9 ok", b"\xed\xa0\x80", b"\xc0\x80", b"\xff"])
def test_validate_texts_refuses_text_that_is_not_utf8_naming_input_and_row(bad):
  """As the Python API refuses it: the tokenizer would silently drop the bad bytes. Valid
  text (an encoded U+FFFD, a BOM, NUL, an empty batch) passes unchanged."""
  check = tf.function(lambda a, b: export.validate_texts("classify_text",
                                                         {"text_a": a, "text_b": b}))
  good = tf.constant(["ok", "caf\u00e9 \ufffd", "\ufeffbom", "a\x00b"])
  for name, value in check(good, good).items():
    np.testing.assert_array_equal(value.numpy(), good.numpy(), err_msg=name)
  empty = tf.constant([], tf.string)
  assert check(empty, empty)["text_a"].shape == (0,)
  worse = tf.constant([b"ok", b"fine", bad, b"ok"])
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="classify_text: text_b row 2 is not UTF-8 text"):
    check(good, worse)


def test_a_new_task_model_serves_its_own_outputs_through_every_export_path():
  """The exports ask the model what it serves (`served_outputs`), so a fourth task's model
  needs no entry in a serving table: here a two-choice scorer over the encoder's pooled
  output, traced in the serving scope like the built-in models."""

  class TwoChoice(keras.Model):
    def __init__(self, config):
      super().__init__()
      self.encoder = BertEncoder(config)
      self.score = keras.layers.Dense(1)

    def call(self, features, training=None):
      return self.score(self.encoder(features, training=training)["pooled_output"])

    def served_outputs(self, features):
      return {"choice_score": tf.cast(self(features, training=False)[:, 0], tf.float32)}

  model = TwoChoice(helpers.odd_config())
  features = {k: tf.constant(v) for k, v in helpers.random_features(
      model.encoder.config, batch=3, seq=7).items() if k in export.FEATURE_NAMES}
  served = export.served_outputs(model, features)
  assert list(served) == ["choice_score"] and served["choice_score"].shape == (3,)
  # The serving form's plain ops against the training form's fused ones (module docstring).
  assert helpers.max_abs_diff(served["choice_score"], model(features, training=False)[:, 0]) \
      < TOL
