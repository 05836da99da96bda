"""Tests for tfbert.serving.onnx_export: every export's id signature in ONNX Runtime."""

import json
import logging
import os

import keras
import numpy as np
import onnx
import pytest

from tests import helpers, tool_process
from tfbert import BertEncoder
from tfbert.checkpoints import pretrained
from tfbert.runtime import run_directory
from tfbert.serving import export, onnx_export

# ONNX Runtime's float32 kernels against TensorFlow's (eager Keras): the same math in another
# summation order; measured 1.2e-6 here and 2.1e-6 on MiniLM-L6-H384 (module docstring).
TOL = 1e-5
SEQ = 13


@pytest.fixture(scope="module")
def exports(tmp_path_factory, tiny_encoder_export, tiny_span_labeler_export,
            tiny_pair_classifier_export, tiny_tagger_export):
  """{kind: Keras model}, {kind: .onnx file}, {kind: export_dir}: four small exports (shared,
  read only: tests/tiny_exports.py), each converted here."""
  tmp = tmp_path_factory.mktemp("onnx")
  shared = {"encoder": tiny_encoder_export, "squad": tiny_span_labeler_export,
            "classifier": tiny_pair_classifier_export, "tagger": tiny_tagger_export}
  models = {kind: e.model for kind, e in shared.items()}
  models["encoder"] = models["encoder"].encoder  # The pretrainer's encoder is what is served.
  dirs = {kind: e.export_dir for kind, e in shared.items()}
  files = {kind: onnx_export.export_onnx(d, str(tmp / f"{kind}.onnx")) for kind, d in dirs.items()}
  return models, files, dirs


@pytest.mark.slow  # ~20 s: four conversions (and the shared exports).
def test_onnx_runtime_gives_the_keras_outputs_at_any_batch_and_length(exports):
  models, files, _ = exports
  names = {"encoder": ("pooled_output", "sequence_output"),
           "squad": ("end_logits", "start_logits"), "classifier": ("logits", "probabilities"),
           "tagger": ("logits", "probabilities")}
  for kind, model in models.items():
    session = onnx_export.onnx_session(files[kind])
    assert [i.name for i in session.get_inputs()] == list(export.FEATURE_NAMES)
    assert [o.name for o in session.get_outputs()] == list(names[kind])
    graph = onnx.load(files[kind]).graph
    assert all(n.op_type not in ("PartitionedCall", "Assert") for n in graph.node)
    for seed, (batch, seq) in enumerate(((3, SEQ), (1, 7), (5, 4))):  # B and S dynamic.
      features = {k: v for k, v in helpers.random_features(model.config, seed, batch,
                                                           seq).items()
                  if k in export.FEATURE_NAMES}
      got = dict(zip(names[kind], session.run(list(names[kind]), features)))
      want = model(features, training=False)
      if kind in ("classifier", "tagger"):
        want = {"logits": want["logits"],
                "probabilities": keras.ops.softmax(want["logits"], axis=-1)}
      for name in names[kind]:
        assert got[name].shape == tuple(want[name].shape), (kind, name)
        assert helpers.max_abs_diff(got[name], want[name]) < TOL, (kind, name, seed)
      # The check can fail: other features give other outputs.
      other = dict(features, input_ids=(features["input_ids"] + 1) % model.config.vocab_size)
      assert not np.allclose(session.run([names[kind][0]], other)[0], got[names[kind][0]],
                             atol=TOL)


# The environment as the test process started (read at collection, before any conversion).
_LOG_LEVEL = os.environ.get("TF_CPP_MIN_LOG_LEVEL")


def test_a_conversion_leaves_the_processs_environment_as_it_was(exports):
  """tf2onnx's `convert` module sets TF_CPP_MIN_LOG_LEVEL=3 when imported: every process
  started afterwards (the suite's forks fell back to fresh interpreters) was silenced."""
  assert os.environ.get("TF_CPP_MIN_LOG_LEVEL") == _LOG_LEVEL


@pytest.mark.slow  # Shares the ~40 s fixture above.
def test_text_signatures_and_missing_models_are_refused_by_name(exports, tmp_path):
  _, _, dirs = exports
  # An export's ids/ is a SavedModel without the tokenizer: it has no text signature.
  ids_dir = os.path.join(dirs["encoder"], export.ID_DIR)
  with pytest.raises(ValueError, match="no signature 'encode_text'"):
    onnx_export.export_onnx(ids_dir, str(tmp_path / "x.onnx"), signature="encode_text")
  squad_dir = dirs["squad"]
  with pytest.raises(ValueError, match="takes text .*question.*ONNX has no WordPiece ops"):
    onnx_export.export_onnx(squad_dir + "/", str(tmp_path / "x.onnx"),
                            signature="answer_question")
  with pytest.raises(FileNotFoundError, match=f"{tmp_path}: no SavedModel"):
    onnx_export.export_onnx(str(tmp_path), str(tmp_path / "x.onnx"))
  assert not (tmp_path / "x.onnx").exists()


@pytest.mark.slow  # Shares the ~40 s fixture above; one ~3 s conversion.
def test_an_opset_too_old_for_the_graph_is_refused_and_writes_nothing(exports, tmp_path,
                                                                      caplog, monkeypatch):
  """tf2onnx logs the ops it cannot express at opset 9 (strided slices) and returns a model
  still holding them, which ONNX Runtime refuses to load: it was written all the same. Its
  log (an ERROR with a Python traceback per node) came before this one message (sweep 7,
  X02): the message names the first failure instead."""
  _, _, dirs = exports
  monkeypatch.setattr(onnx_export, "MIN_OPSET", 1)  # The conversion's own check, reached.
  with pytest.raises(ValueError, match=(
      r"^opset 9 cannot express this graph \(No Op registered for StridedSlice with "
      r"domain_version of 9; tf2onnx could not convert \d+ node\(s\), the first: StridedSlice: "
      r"attribute new_axis_mask not supported\): convert with a later opset \(the default, 17, "
      r"can\)$")):
    onnx_export.export_onnx(dirs["encoder"], str(tmp_path / "new" / "old.onnx"), opset=9)
  assert os.listdir(tmp_path) == []  # Not even the new directory.
  assert [r.getMessage()[:40] for r in caplog.records if r.name.startswith("tf2onnx")
          and r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize("opset", [9, 0, 12.5, "17"])
def test_an_opset_below_the_minimum_is_refused_before_any_work(tmp_path, opset):
  """The Python API's bound of the tool's --opset: checked first, nothing created (the new
  directory of the .onnx file was left behind empty, sweep 21 H1)."""
  with pytest.raises(ValueError, match=rf"^opset {opset!r} cannot express a tfbert graph .*"
                                       r"pass an int opset >= 10 \(the default, 17\)$"):
    onnx_export.export_onnx(str(tmp_path / "export"), str(tmp_path / "o04" / "m.onnx"),
                            opset=opset)
  assert os.listdir(tmp_path) == []


def test_the_tool_refuses_an_opset_that_cannot_express_bert(tmp_path):
  """--opset=7 was allowed, converted, and failed after tf2onnx's tracebacks; below
  `MIN_OPSET` no tfbert graph converts (measured: module docstring of onnx_export)."""
  run = tool_process.run_tool("export_onnx", f"--export_dir={tmp_path / 'export'}",
                              f"--output={tmp_path / 'out' / 'm.onnx'}", "--opset=9")
  assert run.returncode == 1 and "flag --opset=9: 9 is not integer >= 10" in run.stderr, (
      run.stderr)
  assert os.listdir(tmp_path) == []


@pytest.mark.slow  # ~5 s (after the module's exports): the tool converts a small export.
def test_the_tool_converts_hugging_face_inputs_and_checks_against_the_saved_model(
    exports, tmp_path, monkeypatch):
  from transformers import BertTokenizerFast  # Test-only: Hugging Face's own tokenizer.

  models, _, dirs = exports
  out = tmp_path / "sub" / "classifier.onnx"
  # In this process (tests/tool_process.py), from the repository as its own process ran;
  # stderr holds native (file-descriptor) output too, so "no traceback" still covers
  # what the converter's libraries print.
  monkeypatch.chdir(helpers.ROOT)
  result = tool_process.run_tool("export_onnx", f"--export_dir={dirs['classifier']}",
                                 f"--output={out}", "--signature=serving_hf")
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Traceback" not in result.stderr  # A successful conversion prints none.
  lines = result.stdout.strip().splitlines()
  assert lines[0] == f"wrote {out}"
  diffs = json.loads(lines[-1])["max_abs_diff"]
  assert sorted(diffs) == ["logits", "probabilities"]
  assert all(d < TOL for d in diffs.values()), diffs
  # A Hugging Face tokenizer's NumPy output goes to ONNX Runtime unchanged.
  session = onnx_export.onnx_session(str(out))
  assert sorted((i.name, i.type) for i in session.get_inputs()) == sorted(
      (name, "tensor(int64)") for name in export.HF_FEATURE_NAMES)
  tokenizer = BertTokenizerFast(vocab_file=pretrained.minilm_vocab_file(), do_lower_case=True)
  batch = dict(tokenizer(["He said hi .", "A cat sat on the mat, then left."],
                         ["He greeted us .", "Nobody knows."], padding="max_length",
                         truncation=True, max_length=SEQ, return_tensors="np"))
  assert {v.dtype for v in batch.values()} == {np.dtype(np.int64)}
  logits = session.run(["logits"], batch)[0]
  want = models["classifier"]({"input_ids": batch["input_ids"],
                               "input_mask": batch["attention_mask"],
                               "segment_ids": batch["token_type_ids"]}, training=False)
  assert helpers.max_abs_diff(logits, want["logits"]) < TOL


def test_a_bfloat16_export_is_refused_before_conversion(tmp_path):
  # tf2onnx wrote such a graph with float16 and bfloat16 inputs to one MatMul, which ONNX
  # Runtime refused to load (MiniLM, TF 2.20, tf2onnx 1.17).
  encoder = BertEncoder(helpers.odd_config())
  encoder.build()
  export_dir = export.export_encoder_saved_model(encoder, str(tmp_path / "bf16"),
                                                 export_dtype="bfloat16")
  with pytest.raises(ValueError, match=r"bf16/ids: the export computes in bfloat16 "
                     r"\(serving.json\).*--export_dtype=float32"):
    onnx_export.export_onnx(export_dir, str(tmp_path / "x.onnx"))
  assert not (tmp_path / "x.onnx").exists()


def test_the_tool_refuses_an_output_that_is_a_directory_before_any_work(tmp_path):
  """Named by its flag before the export is read (it does not exist here); the conversion
  ran first, then the rename onto the directory failed naming a temporary file."""
  (tmp_path / "out").mkdir()
  result = tool_process.run_tool("export_onnx", f"--export_dir={tmp_path / 'none'}",
                                 f"--output={tmp_path / 'out'}")
  assert result.returncode == 1
  assert (f"export_onnx: error: --output {tmp_path / 'out'} is an existing directory, not a "
          "file") in result.stderr, result.stderr[-2000:]
  assert sorted(os.listdir(tmp_path)) == ["out"] and not os.listdir(tmp_path / "out")


def test_an_output_that_is_no_onnx_file_is_refused_before_any_work(tmp_path):
  """Sweep 15, N5: --output=notes.txt replaced the user's text file with the ONNX model, no
  word (export_tflite refuses a name without .tflite): refused naming the flag, untouched,
  from the tool and from Python."""
  notes = tmp_path / "notes.txt"
  notes.write_text("my notes\n")
  result = tool_process.run_tool("export_onnx", f"--export_dir={tmp_path / 'none'}",
                                 f"--output={notes}", "--nocheck")
  assert result.returncode == 1 and result.stderr.strip().splitlines() == [
      f"export_onnx: error: --output {notes} must be a .onnx file (its name ends in .onnx)"]
  with pytest.raises(ValueError, match=f"^onnx_file {tmp_path / 'model'} must be a .onnx file"):
    onnx_export.export_onnx(str(tmp_path / "none"), str(tmp_path / "model"))
  assert sorted(os.listdir(tmp_path)) == ["notes.txt"] and notes.read_text() == "my notes\n"
  # Sweep 15, N9: an --output ending in "/" was "o13/: a file, where a directory is expected".
  folder = f"{tmp_path / 'o13'}/"
  result = tool_process.run_tool("export_onnx", f"--export_dir={tmp_path / 'none'}",
                                 f"--output={folder}", "--nocheck")
  assert result.stderr.strip().splitlines() == [
      f"export_onnx: error: --output {folder} names a directory: name the file to write "
      f"inside it, e.g. {folder}model.onnx"]


def test_a_folder_of_exports_names_the_saved_models_inside_it(tmp_path):
  """A pretraining run's export/ holds saved_model/ (with ids/) and google/: named, before
  any conversion (the message said only "no SavedModel here or in ids/")."""
  (tmp_path / "saved_model" / export.ID_DIR).mkdir(parents=True)
  (tmp_path / "saved_model" / "saved_model.pb").write_bytes(b"")
  (tmp_path / "saved_model" / export.ID_DIR / "saved_model.pb").write_bytes(b"")
  (tmp_path / "google").mkdir()
  with pytest.raises(FileNotFoundError) as error:
    onnx_export.saved_model_source(str(tmp_path))
  assert str(error.value) == (
      f"{tmp_path}: no SavedModel (saved_model.pb) here or in ids/; it holds the SavedModel "
      f"folder(s) saved_model/: pass {tmp_path / 'saved_model'} as the export directory")
  assert onnx_export.saved_model_source(str(tmp_path / "saved_model")) == str(
      tmp_path / "saved_model" / export.ID_DIR)


def test_a_run_directory_or_another_model_says_how_to_export_it(tmp_path):
  """A finished fine-tuning run (model.keras, flags.txt), its .keras file or a Hugging Face
  directory given as the export: named as what it is, with how to export it (sweep 11 P3:
  the message said only "no SavedModel here or in ids/")."""
  run = tmp_path / "run"
  run.mkdir()
  (run / "model.keras").write_bytes(b"")
  (run / "flags.txt").write_text("--do_train\n")
  with pytest.raises(FileNotFoundError) as error:
    onnx_export.saved_model_source(str(run))
  assert str(error.value) == (
      f"{run}: no SavedModel (saved_model.pb) here or in ids/; it is a tfbert run directory "
      f"(model.keras), not an export: export it: rerun the tool that trained it with "
      f"--flagfile={run / 'flags.txt'} --export_dir=<new directory> (a finished run exports "
      f'without training again), or in Python tfbert.save(tfbert.load("{run}"), '
      '"<new directory>", "export")')
  with pytest.raises(FileNotFoundError, match=r"model.keras: .*it is a tfbert .keras model, "
                     r"not an export: export it in Python tfbert.save\("):
    onnx_export.saved_model_source(str(run / "model.keras"))
  hf = tmp_path / "hf"
  hf.mkdir()
  (hf / "config.json").write_text("{}")
  (hf / "model.safetensors").write_bytes(b"")
  with pytest.raises(FileNotFoundError, match="it is a Hugging Face directory, not an export"):
    onnx_export.saved_model_source(str(hf))


def test_a_pretraining_run_names_its_export_saved_model(tmp_path):
  """A run_pretraining run directory holds its SavedModel two levels down, in
  export/saved_model/: named, as a folder of exports is."""
  (tmp_path / "export" / "saved_model").mkdir(parents=True)
  (tmp_path / "export" / "saved_model" / "saved_model.pb").write_bytes(b"")
  with pytest.raises(FileNotFoundError) as error:
    onnx_export.saved_model_source(str(tmp_path))
  assert str(error.value).endswith(
      f"it holds the SavedModel folder(s) export/saved_model/: pass "
      f"{tmp_path / 'export' / 'saved_model'} as the export directory")


def test_an_output_beside_a_runs_own_model_is_refused_before_any_work(tmp_path):
  """Sweep 17, o07: --output=<run>/model.onnx was written beside the run's own model, while
  tfbert.save and convert_checkpoint refuse that target: refused naming the argument and
  the run (the tool checks --output the same way first); a folder inside the run is fine."""
  run = tmp_path / "run"
  run.mkdir()
  (run / run_directory.LOCK_FILE).write_text("")
  with pytest.raises(run_directory.RunDirectoryError,
                     match=f"^onnx_file {run / 'model.onnx'}: {run} is a tfbert run directory"):
    onnx_export.export_onnx(str(tmp_path / "none"), str(run / "model.onnx"))
  with pytest.raises(FileNotFoundError, match="no SavedModel"):  # Past the check.
    onnx_export.export_onnx(str(tmp_path / "none"), str(run / "onnx" / "model.onnx"))
  assert sorted(os.listdir(run)) == [run_directory.LOCK_FILE]
