"""Tests for tfbert.checkpoints.model_paths: a path's kind of model from its files alone."""

import json

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
