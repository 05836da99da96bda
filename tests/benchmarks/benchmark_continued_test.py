"""Tests for tools.benchmarks.benchmark_continued (the run itself: BENCHMARKS.md)."""

import os
from pydoc_data.topics import topics

import pytest

from tfbert.checkpoints import pretrained
from tfbert_tools.benchmarks import benchmark_continued


def test_every_tenth_topic_is_held_out_and_no_document_is_in_both(tmp_path):
  train, held_out = benchmark_continued.write_corpus(str(tmp_path))
  assert not os.path.exists(tmp_path / "all.txt")
  with open(train, encoding="utf-8") as f:
    trained = f.read().strip().split("\n\n")
  with open(held_out, encoding="utf-8") as f:
    kept = f.read().strip().split("\n\n")
  assert len(trained) + len(kept) <= len(topics) and len(kept) >= 7
  assert len(set(trained)) == len(trained)  # Each text once (two topics may share one).
  assert len(trained) == pytest.approx(9 * len(kept), abs=9)
  assert not set(trained) & set(kept)


def test_the_run_continues_minilm_on_the_text_with_the_held_out_text_as_eval(tmp_path):
  case = benchmark_continued.ContinuedCase(train_steps=20, batch_size=4, seq_length=32)
  config = benchmark_continued.run_config(case, str(tmp_path))
  assert config.init_hf_dir == pretrained.minilm_dir() and config.objective == "mlm"
  assert config.train_text_files == [str(tmp_path / "train.txt")]
  assert config.eval_text_files == [str(tmp_path / "held_out.txt")]
  assert config.bert_config.hidden_size == 384 and config.max_predictions_per_seq == 5
  assert (config.num_train_steps, config.optimizer.num_warmup_steps, config.log_steps) == (
      20, 2, 2)
  assert config.vocab_file and config.do_lower_case  # MiniLM's uncased vocabulary.


def test_the_rows_name_the_corpus_the_scores_and_the_speed():
  case = benchmark_continued.ContinuedCase(train_steps=10, batch_size=4, seq_length=32)
  metrics = {"mlm_loss": 2.0, "mlm_perplexity": 7.389, "mlm_accuracy": 0.5}
  text = benchmark_continued.format_result(case, {
      "before": {**metrics, "mlm_loss": 3.0, "mlm_perplexity": 20.09}, "after": metrics,
      "seconds": 61.2, "examples_per_second": 12.34, "held_out_sequences": 9,
      "train_sequences": 80, "eval_sequences": 8})
  assert "| before | 3.0000 | 20.09 | 0.5000 |" in text
  assert "| after | 2.0000 | 7.39 | 0.5000 |" in text
  assert "10 steps (0.50 epochs)" in text and "12.3 sequences/s" in text


def test_settings_out_of_range_are_named():
  with pytest.raises(ValueError, match=r"seq_length \(4\) must be in \[8, 512\]"):
    benchmark_continued.ContinuedCase(seq_length=4)


def test_a_run_too_short_to_time_a_step_is_refused():
  """One step logged no sequences/s (its traced step is left out): a row of nan."""
  with pytest.raises(ValueError, match=r"train_steps \(1\) must be >= 2: the first step traces "
                                       "and is left out of sequences/s"):
    benchmark_continued.ContinuedCase(train_steps=1)
  assert benchmark_continued.ContinuedCase(train_steps=2).train_steps == 2
