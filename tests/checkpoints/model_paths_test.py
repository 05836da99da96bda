"""Tests for tfbert.checkpoints.model_paths: a path's kind of model from its files alone."""

import json
import os
import re

import pytest

from tfbert.checkpoints import model_paths


def test_locate_names_each_kind_by_its_files(tmp_path):
  (tmp_path / "st").mkdir()
  (tmp_path / "st" / "modules.json").write_text(json.dumps([]))
  assert model_paths.locate(str(tmp_path / "st")) == ("sentence-transformers",
                                                      str(tmp_path / "st"))
  (tmp_path / "hf").mkdir()
  for name in ("config.json", "model.safetensors"):
    (tmp_path / "hf" / name).write_text("{}")
  assert model_paths.locate(str(tmp_path / "hf")) == ("hf", str(tmp_path / "hf"))
  (tmp_path / "run").mkdir()
  (tmp_path / "run" / model_paths.RUN_MODEL).write_text("")
  assert model_paths.locate(str(tmp_path / "run")) == (
      "tfbert", str(tmp_path / "run" / "model.keras"))
  (tmp_path / "export").mkdir()
  (tmp_path / "export" / "saved_model.pb").write_text("")
  assert model_paths.locate(str(tmp_path / "export")) == ("export", str(tmp_path / "export"))
  (tmp_path / "google.index").write_text("")
  assert model_paths.locate(str(tmp_path / "google")) == ("google", str(tmp_path / "google"))


@pytest.mark.parametrize("hf_weights", ["model.safetensors", "pytorch_model.bin"])
def test_a_directory_of_two_models_is_refused_naming_both(tmp_path, hf_weights):
  for name in ("config.json", hf_weights, "bert_config.json", "bert_model.ckpt.index"):
    (tmp_path / name).write_text("{}")
  with pytest.raises(ValueError, match=r"holds 2 models, a Hugging Face model \(config.json.*"
                                       r"and a Google checkpoint \(bert_model.ckpt.\*\): which "
                                       r"one to load is ambiguous; pass .*bert_model.ckpt for "
                                       "the google one, or move one"):
    model_paths.locate(str(tmp_path))
  assert model_paths.locate(str(tmp_path / "bert_model.ckpt"))[0] == "google"  # The prefix.
  # A run's bert_config.json beside its model.keras is a record, not a second model.
  (tmp_path / "run").mkdir()
  for name in ("bert_config.json", "run_config.json", model_paths.RUN_MODEL):
    (tmp_path / "run" / name).write_text("{}")
  assert model_paths.locate(str(tmp_path / "run"))[0] == "tfbert"


def test_a_path_of_no_model_is_named_with_what_was_looked_for(tmp_path):
  (tmp_path / "x.txt").write_text("x")
  with pytest.raises(ValueError, match="a file must be a tfbert .keras model"):
    model_paths.locate(str(tmp_path / "x.txt"))
  (tmp_path / "half").mkdir()
  (tmp_path / "half" / "config.json").write_text("{}")
  with pytest.raises(ValueError, match=r"config.json without model.safetensors"):
    model_paths.locate(str(tmp_path / "half"))
  with pytest.raises(FileNotFoundError, match="no such file or directory"):
    model_paths.locate(str(tmp_path / "nothing"))


def test_locate_takes_a_path_like_and_refuses_bytes_naming_the_argument(tmp_path):
  """A `pathlib.Path` or bytes failed with an unrelated TypeError from `path + ".index"`
  ("unsupported operand type(s) for +: 'PosixPath' and 'str'", sweep 6, A06/A07)."""
  (tmp_path / "m.keras").write_text("")
  assert model_paths.locate(tmp_path / "m.keras") == ("tfbert", str(tmp_path / "m.keras"))
  with pytest.raises(TypeError, match="^path must be a str or an os.PathLike such as "
                                      "pathlib.Path, got bytes"):
    model_paths.locate(str(tmp_path / "m.keras").encode())


def test_a_linked_keras_file_is_read_at_its_target_beside_its_records(tmp_path):
  """A link's folder held no vocab.txt (or another's): its records sit beside the file it
  points to (sweep 12, R1)."""
  (tmp_path / "run").mkdir()
  (tmp_path / "run" / "model.keras").write_text("")
  (tmp_path / "lk").mkdir()
  (tmp_path / "lk" / "m.keras").symlink_to(tmp_path / "run" / "model.keras")
  assert model_paths.locate(str(tmp_path / "lk" / "m.keras")) == (
      "tfbert", os.path.realpath(tmp_path / "run" / "model.keras"))


@pytest.mark.parametrize("name, reader", [
    ("m.tflite", r"tfbert.serving.tflite_export.TfliteModel\('.*m.tflite'\)"),
    ("m.onnx", r"onnxruntime.InferenceSession\('.*m.onnx'\)")])
def test_an_id_export_file_names_its_reader(tmp_path, name, reader):
  """A .tflite file tfbert wrote was "not a model tfbert reads" (sweep 12, P6)."""
  (tmp_path / name).write_bytes(b"x")
  with pytest.raises(ValueError, match=f"no raw-text path: run it with {reader}"):
    model_paths.locate(str(tmp_path / name))


@pytest.mark.parametrize("name, beside, reader", [
    ("model.tflite", ("bert_config.json", "vocab.txt", "labels.txt"),
     "a TFLite export .*TfliteModel"),
    ("model.onnx", (), "an ONNX export .*InferenceSession")], ids=["export_tflite", "onnx"])
def test_a_directory_of_an_id_export_names_the_file_and_its_reader(tmp_path, name, beside,
                                                                   reader):
  """export_tflite's output directory (bert_config.json beside model.tflite) was "bert_config
  .json with no checkpoint" (sweep 15, N4): it names the file and what runs it."""
  for file in (name, *beside):
    (tmp_path / file).write_text("x")
  path = str(tmp_path / name)
  with pytest.raises(ValueError, match=(
      f"^{re.escape(str(tmp_path))}: holds no checkpoint but {re.escape(name)}, {reader}"
      rf"\({re.escape(repr(path))}\) \(ids in\), or load the model it was exported from$")):
    model_paths.locate(str(tmp_path))


def test_labels_txt_holds_one_line_str_names(tmp_path):
  """A name holding a newline was written into labels.txt as two names (sweep 15, N2): the
  writer refuses it, writing nothing; the reader names an empty line."""
  path = os.path.join(tmp_path, model_paths.LABELS_FILE)
  with pytest.raises(ValueError, match=rf"^{re.escape(path)}: the labels \['good\\nbad', "
                                       r"'ok'\]: entry 0 .* holds a line break"):
    model_paths.write_labels_file(str(tmp_path), ["good\nbad", "ok"])
  with pytest.raises(TypeError, match=r"entry 0 \(0\) is of type int"):
    model_paths.write_labels_file(str(tmp_path), [0, 1])
  assert not os.path.exists(path)
  model_paths.write_labels_file(str(tmp_path), ["neg", "pos"])
  assert model_paths.read_labels_file(path) == ("neg", "pos")
  with open(path, "w", encoding="utf-8") as f:
    f.write("neg\n\npos\n")
  with pytest.raises(ValueError, match=f"^{re.escape(path)}: line 2 is empty"):
    model_paths.read_labels_file(path)


@pytest.mark.parametrize("names, what", [
    (["config.json", "model.safetensors"],
     "a Hugging Face model (config.json + model.safetensors)"),
    (["modules.json", "config.json"], "a sentence-transformers model (modules.json)"),
    (["bert_config.json", "bert_model.ckpt.index"], "a Google checkpoint (bert_model.ckpt.*)"),
    (["model.keras"], "a tfbert model (model.keras)"),
])
def test_a_tools_workdir_holding_a_model_of_any_kind_is_refused(tmp_path, names, what):
  """Sweep 23 S1 (g7): `align --workdir=<a Hugging Face model directory>` wrote init/, runs/
  and report.json beside its model.safetensors, while an export was refused."""
  for name in names:
    (tmp_path / name).write_text("{}")
  with pytest.raises(ValueError) as raised:
    model_paths.check_not_a_model_directory({"--workdir": str(tmp_path)}, "align")
  assert str(raised.value) == (
      f"--workdir {tmp_path} holds {what}: align would write its own files among that "
      "model's; choose another --workdir, e.g. a new directory")


def test_a_tools_own_or_new_workdir_is_accepted(tmp_path):
  """What a tool itself leaves in its workdir (align's init/, runs/, report.json), a user's
  .keras file beside them (no model directory `locate` reads) and a missing directory pass."""
  for name in ("init", "runs"):
    (tmp_path / name).mkdir()
  (tmp_path / "init" / "bert_model.ckpt.index").write_text("")
  (tmp_path / "report.json").write_text("{}")
  (tmp_path / "m.keras").write_text("")
  model_paths.check_not_a_model_directory(
      {"--workdir": str(tmp_path), "--new": str(tmp_path / "new"), "--unset": None}, "align")
