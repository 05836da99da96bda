"""A pretraining run on raw text (`train_text_files`): its settings, checks and batches.

`tfbert.pretraining.pretraining_run` asks this module what is particular to raw text, so
that run, strategies, accumulation and resume stay one: the vocabulary and casing the text
is tokenized with (`resolve`), what the settings must satisfy (`checks`), the pre-run read
of the files (`check_files`) and the worker's dataset (`dataset`,
`tfbert.pretraining.text_pipeline`).
"""

import dataclasses

from absl import logging

from tfbert.pretraining import text_pipeline
from tfbert.runtime import validation
from tfbert.tasks import fine_tuning
from tfbert.text import casing, tokenization


def resolve(config):
  """`config` with the vocabulary and casing raw text is tokenized with, before any work.

  `vocab_file`, else the `vocab.txt` beside the source (`init_hf_dir`, `init_checkpoint`,
  `init_tfbert`); `do_lower_case` checked against the source's and the vocabulary's casing
  (`tfbert.text.casing`; `allow_casing_mismatch` lets the setting win). A run on TFRecords
  is returned as it is (its data carries its tokens).

  Raises:
    ValueError: no vocabulary, one larger than the model's, or a casing mismatch.
  """
  if not config.train_text_files:
    return config
  vocab_file = fine_tuning.resolve_vocab_file(config)
  size = len(tokenization.load_vocab(vocab_file))
  if size > config.bert_config.vocab_size:
    raise ValueError(f"vocab_file {vocab_file} holds {size} tokens but the model's "
                     f"vocab_size is {config.bert_config.vocab_size}")
  source = next((getattr(config, name) for name in ("init_hf_dir", "init_checkpoint",
                                                    "init_tfbert") if getattr(config, name)),
                None)
  evidence = casing.checkpoint_casing(source, vocab_file)
  do_lower_case = casing.resolve_do_lower_case(config.do_lower_case, evidence,
                                               allow_mismatch=config.allow_casing_mismatch)
  logging.info("tokenizing the text files with %s, do_lower_case=%s (%s)", vocab_file,
               do_lower_case, casing.describe(evidence))
  return dataclasses.replace(config, vocab_file=vocab_file, do_lower_case=do_lower_case)


def checks(config) -> list[validation.Check]:
  """What the data settings of a pretraining run must satisfy (`tfbert.runtime.validation`)."""
  text = bool(config.train_text_files)
  return [
      (text != bool(config.input_files), "give input_files (TFRecords) or train_text_files "
       "(raw text), one of them" + (", not both" if text else "")),
      (config.text_mode in text_pipeline.TEXT_MODES,
       f"text_mode must be one of {text_pipeline.TEXT_MODES}, got {config.text_mode!r}"),
      (0.0 < config.masked_lm_prob <= 1.0,
       f"masked_lm_prob ({config.masked_lm_prob}) must be in (0, 1]"),
      (text or not config.do_whole_word_mask, "do_whole_word_mask masks raw text "
       "(train_text_files); TFRecords carry the masks they were written with"),
      (not text or config.max_seq_length >= 3,
       f"max_seq_length ({config.max_seq_length}) must be >= 3 for raw text"),
      # Packed blocks are no sentence pairs: there is nothing for a next-sentence head.
      (not text or getattr(config, "objective", "mlm") == "mlm",
       "train_text_files packs documents into blocks, which are no sentence pairs: pass "
       "objective mlm (no next-sentence head)"),
  ]


def check_files(config, num_workers: int) -> text_pipeline.TextCheck:
  """Reads the text files once before the run (`text_pipeline.check_text_files`)."""
  return text_pipeline.check_text_files(list(config.train_text_files), config.max_seq_length,
                                        num_workers)


def dataset(config, batch_size: int, num_workers: int, worker_index: int,
            gradient_accumulation_steps: int):
  """This worker's micro-batches of the text files (`text_pipeline.text_dataset`), masked
  with the run's seed; the order shuffled with it unless `deterministic`."""
  masking = text_pipeline.masking_for(
      config.vocab_file, config.max_predictions_per_seq, masked_lm_prob=config.masked_lm_prob,
      whole_word_mask=config.do_whole_word_mask, seed=config.seed)
  return text_pipeline.text_dataset(
      list(config.train_text_files), batch_size,
      tokenizer=tokenization.WordPieceTokenizer(config.vocab_file, config.do_lower_case),
      masking=masking, seq_length=config.max_seq_length, text_mode=config.text_mode,
      num_workers=num_workers, worker_index=worker_index, shuffle=not config.deterministic,
      seed=config.seed, repeat=True, gradient_accumulation_steps=gradient_accumulation_steps)
