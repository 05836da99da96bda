"""Tests for tfbert.alignment.alignment_worker: the worker process entry point."""

import pytest

from tfbert.alignment import alignment_worker


def test_usage_error_without_exactly_one_spec(capsys):
  assert alignment_worker.main(["alignment_worker"]) == 2
  assert "usage: python -m tfbert.alignment.alignment_worker SPEC_JSON" in capsys.readouterr().err


def test_a_missing_spec_file_is_named(tmp_path):
  with pytest.raises(FileNotFoundError, match="nope.json"):
    alignment_worker.run_spec_file(str(tmp_path / "nope.json"))
