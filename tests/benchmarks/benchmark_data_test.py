"""Tests for tools.benchmarks.benchmark_data on tiny real records and a small synthetic SQuAD
set."""

import os

import pytest

from tfbert.squad import squad_features, squad_postprocess
from tfbert_tools.benchmarks import benchmark_data
from tfbert_tools.demos import squad_synthetic

SEQ, PREDICTIONS = 32, 5


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  data_dir = str(tmp_path_factory.mktemp("records"))
  pattern = benchmark_data.make_pretraining_records(data_dir, SEQ, PREDICTIONS, dupe_factor=1,
                                                    max_documents=3, num_shards=2)
  return data_dir, pattern


def test_input_pipeline_benchmark_draws_batches_of_real_records(records):
  _, pattern = records
  result = benchmark_data.measure_input_pipeline(
      pattern, batch_size=3, seq_length=SEQ, max_predictions=PREDICTIONS, seconds=0.2,
      warmup_batches=1)
  assert result["batches"] >= 1 and result["batch_size"] == 3
  assert result["examples_per_second"] == pytest.approx(
      3 * result["batches"] / result["seconds"])


def test_records_are_made_once_and_only_reused_for_the_same_shape(records):
  data_dir, pattern = records
  summary = os.path.join(data_dir, "pretraining-summary.json")
  made = os.path.getmtime(summary)
  assert benchmark_data.make_pretraining_records(data_dir, SEQ, PREDICTIONS) == pattern
  assert os.path.getmtime(summary) == made
  with pytest.raises(ValueError, match="another directory"):
    benchmark_data.make_pretraining_records(data_dir, SEQ + 1, PREDICTIONS)


def test_postprocess_benchmark_answers_every_question(tmp_path):
  path = squad_synthetic.write_squad_json(str(tmp_path / "dev.json"),
                                          squad_synthetic.synthetic_squad(3, seed=0))
  result = benchmark_data.measure_postprocess(
      path, features=squad_features.FeatureConfig(max_seq_length=48, doc_stride=16,
                                                  max_query_length=16),
      postprocess=squad_postprocess.PostprocessConfig(n_best_size=5), repeats=2)
  assert result["questions"] == 12  # 3 paragraphs of 4 questions
  assert result["features"] >= 12 and len(result["postprocess_runs"]) == 2
  assert result["questions_per_second"] > 0 and result["feature_questions_per_second"] > 0


def test_a_postprocess_seq_length_too_short_for_a_question_names_the_flag():
  """It named `FeatureConfig` and a max_query_length the tool has no flag for (sweep 12 P5)."""
  with pytest.raises(ValueError) as raised:
    benchmark_data.postprocess_features(64)
  assert str(raised.value) == ("--seq_length=64: postprocess needs at least 68 (its questions "
                               "take up to 64 pieces)")
  assert benchmark_data.postprocess_features(68).max_seq_length == 68
