"""Tests for tfbert.pretraining.raw_text_run: the settings of a raw-text pretraining run,
and the vocabulary and casing its text is tokenized with."""

import dataclasses
import os

import pytest

from tests import helpers
from tfbert.checkpoints import pretrained
from tfbert.pretraining import raw_text_run
from tfbert.pretraining.pretraining_run import PretrainingRunConfig
from tfbert.training import optimization

S, P = 16, 3


def run_config(**overrides):
  values = dict(bert_config=helpers.odd_config(vocab_size=30522, max_position_embeddings=S),
                input_files=[], model_dir="/tmp/unused", optimizer=optimization.OptimizerConfig(),
                train_text_files=["corpus/*.txt"], objective="mlm", max_seq_length=S,
                max_predictions_per_seq=P)
  return PretrainingRunConfig(**{**values, **overrides})


@pytest.mark.parametrize("overrides, message", [
    (dict(input_files=["data/*.tfrecord"]), "give input_files .TFRecords. or train_text_files "
     r".raw text., one of them, not both"),
    (dict(train_text_files=[]), "give input_files .TFRecords. or train_text_files "
     r".raw text., one of them$"),
    (dict(objective="mlm_nsp"), "no sentence pairs: pass objective mlm"),
    (dict(text_mode="paragraphs"), "text_mode must be one of"),
    (dict(train_text_files=[], input_files=["d/*.tfrecord"], do_whole_word_mask=True,
          objective="mlm_nsp"), "^PretrainingRunConfig: do_whole_word_mask=true: read only "
     r"from raw text \(train_text_files\), tokenized and masked as batches are formed; "
     r"TFRecords \(input_files\) carry the tokens and masks create_pretraining_data wrote: "
     "leave it out, or remake the data with create_pretraining_data$"),
    # Recorded in run_config.json and never read (sweep 34, A27, A28).
    (dict(train_text_files=[], input_files=["d/*.tfrecord"], masked_lm_prob=0.3),
     "^PretrainingRunConfig: masked_lm_prob=0.3: read only from raw text"),
    (dict(train_text_files=[], input_files=["d/*.tfrecord"], text_mode="lines",
          vocab_file="v.txt", do_lower_case=False, allow_casing_mismatch=True),
     "^PretrainingRunConfig: text_mode=lines, vocab_file=v.txt, do_lower_case=false, "
     "allow_casing_mismatch=true: read only from raw text .* leave them out"),
    (dict(masked_lm_prob=1.5), r"masked_lm_prob \(1.5\) must be in \(0, 1\]"),
    (dict(train_text_files=[], input_files=["d/*.tfrecord"], eval_text_files=["held/*.txt"]),
     "eval_text_files evaluates a raw-text run .give train_text_files.; a run on TFRecords "
     "evaluates on eval_input_files"),
    (dict(eval_text_files=["held/*.txt"], eval_input_files=["held/*.tfrecord"]),
     r"give eval_input_files \(TFRecords\) or eval_text_files \(raw text\), not both"),
])
def test_raw_text_settings_that_do_not_fit_are_named(overrides, message):
  with pytest.raises(ValueError, match=message):
    run_config(**overrides)


def test_raw_text_settings_at_their_defaults_pass_with_tfrecords():
  """Given at their defaults (a replayed flags.txt records them), they change nothing."""
  run_config(train_text_files=[], input_files=["d/*.tfrecord"], objective="mlm_nsp",
             text_mode="blocks", masked_lm_prob=0.15, do_whole_word_mask=False)


def test_the_vocabulary_defaults_to_the_sources_and_must_fit_the_model(tmp_path):
  with pytest.raises(ValueError, match="vocab_file is needed"):
    raw_text_run.resolve(run_config())
  source = tmp_path / "hf"
  os.makedirs(source)
  (source / "vocab.txt").write_bytes(open(pretrained.minilm_vocab_file(), "rb").read())
  resolved = raw_text_run.resolve(run_config(init_hf_dir=str(source)))
  assert (resolved.vocab_file, resolved.do_lower_case) == (str(source / "vocab.txt"), True)
  small = dataclasses.replace(run_config().bert_config, vocab_size=1000)
  with pytest.raises(ValueError, match="holds 30522 tokens but the model's vocab_size is 1000"):
    raw_text_run.resolve(run_config(bert_config=small, vocab_file=str(source / "vocab.txt")))


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_text_whose_words_give_no_wordpiece_is_refused_before_the_run(tmp_path):
  """240 zero-width spaces between letters-free "words": enough words for the word count,
  no WordPiece for the tokenizer (it drops them), so no sequence would ever form and the
  run would wait forever for its first batch (it did, before this check)."""
  vocab = pretrained.minilm_vocab_file()
  dead = tmp_path / "dead.txt"
  dead.write_text(" ".join(["\u200b"] * 240) + "\n", encoding="utf-8")
  live = tmp_path / "live.txt"
  live.write_text("the quick brown fox jumps over the lazy dog " * 4 + "\n", encoding="utf-8")
  config = run_config(train_text_files=[str(dead)], vocab_file=vocab, do_lower_case=True)
  with pytest.raises(ValueError, match=r"worker 0 of 1 reads \[.*dead.txt'\]: its 240 words "
                                       r"give fewer than 14 WordPiece tokens"):
    raw_text_run.check_files(config, 1)
  config = run_config(train_text_files=[str(dead), str(live)], vocab_file=vocab,
                      do_lower_case=True)
  assert raw_text_run.check_files(config, 1).files == [str(dead), str(live)]  # One is enough.
  with pytest.raises(ValueError, match=r"worker 0 of 2 reads \[.*dead.txt'\]"):
    raw_text_run.check_files(config, 2)  # Worker 0 reads dead.txt alone.
