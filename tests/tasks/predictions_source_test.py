"""Tests for tfbert.tasks.predictions_source: what each predictions file predicts."""

import json

import pytest

from tfbert.tasks import predictions_source


def test_a_replacement_by_another_file_is_said_and_each_file_keeps_its_entry(tmp_path,
                                                                             caplog):
  """Sweep 26, A91/A92: run_ner's and run_classifier's test predictions of another
  --predict_file replaced the earlier ones, recording nothing."""
  caplog.set_level("INFO", logger="absl")
  out, record = str(tmp_path), tmp_path / predictions_source.SOURCE_FILE
  first = predictions_source.describe(str(tmp_path / "a" / "test.tsv"))
  second = predictions_source.describe(str(tmp_path / "b" / "test.tsv"))
  predictions_source.replacing(out, "test_predictions.tsv", first)
  (tmp_path / "test_predictions.tsv").write_text("index\tprediction\n")
  predictions_source.record(out, "test_predictions.tsv", first)
  predictions_source.record(out, "dev_predictions.tsv", second)
  predictions_source.replacing(out, "test_predictions.tsv", first)  # The same: nothing said.
  assert "replacing" not in caplog.text
  # Dropped until the new predictions are written; the other file's entry stays.
  assert json.loads(record.read_text()) == {"dev_predictions.tsv": second}
  predictions_source.record(out, "test_predictions.tsv", first)
  predictions_source.replacing(out, "test_predictions.tsv", second)
  assert (f"replacing the predictions of {first} (test_predictions.tsv) with those of "
          f"{second}") in caplog.text
  caplog.clear()
  predictions_source.replacing(out, "dev_predictions.tsv", second)
  assert not record.exists()  # No entry left.
  predictions_source.replacing(out, "test_predictions.tsv", second)  # Unrecorded ones.
  assert (f"replacing test_predictions.tsv (their source was not recorded) with the "
          f"predictions of {second}") in caplog.text


def test_an_earlier_run_squad_record_and_an_unreadable_one_are_read_as_such(tmp_path):
  record = tmp_path / predictions_source.SOURCE_FILE
  record.write_text(json.dumps({"predict_file": "/d/dev.json", "articles": "1:2"}))
  predictions_source.record(str(tmp_path), "test_predictions.conll", "/d/test.conll")
  assert json.loads(record.read_text()) == {"predictions.json": "/d/dev.json (articles 1:2)",
                                            "test_predictions.conll": "/d/test.conll"}
  record.write_text("{not json")
  predictions_source.record(str(tmp_path), "predictions.json", "/d/dev.json")
  assert json.loads(record.read_text()) == {"predictions.json": "/d/dev.json"}
  assert predictions_source.describe("/d/dev.json", "3:4") == "/d/dev.json (articles 3:4)"


def test_written_records_the_source_after_the_write_and_none_when_it_fails(tmp_path):
  path = str(tmp_path / "test_predictions.tsv")
  predictions_source.record(str(tmp_path), "test_predictions.tsv", "/d/old.tsv")

  def failing():
    raise OSError("disk full")
  with pytest.raises(OSError, match="disk full"):
    predictions_source.written(path, "/d/new.tsv", failing)
  assert not (tmp_path / predictions_source.SOURCE_FILE).exists()  # Never the old file's.
  assert predictions_source.written(path, "/d/new.tsv", lambda: "done") == "done"
  assert json.loads((tmp_path / predictions_source.SOURCE_FILE).read_text()) == {
      "test_predictions.tsv": "/d/new.tsv"}
