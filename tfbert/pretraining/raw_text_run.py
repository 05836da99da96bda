"""A pretraining run on raw text (`train_text_files`): its settings, checks and batches.

`tfbert.pretraining.pretraining_run` asks this module what is particular to raw text, so
that run, strategies, accumulation and resume stay one: the vocabulary and casing the text
is tokenized with (`resolve`), what the settings must satisfy (`checks`), the pre-run read
of the files (`check_files`) and the worker's dataset (`dataset`,
`tfbert.pretraining.text_pipeline`); and the held-out text (`eval_text_files`): its
sequences counted before the run (`eval_records`) and read in order with the same masks at
every evaluation (`eval_dataset`, `tfbert.pretraining.pretraining_eval`).
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
  if not (config.train_text_files or config.eval_text_files):
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
      _unread_problem(config) if config.input_files and not text else (True, ""),
      (not text or config.max_seq_length >= 3,
       f"max_seq_length ({config.max_seq_length}) must be >= 3 for raw text"),
      # Packed blocks are no sentence pairs: there is nothing for a next-sentence head.
      (not text or getattr(config, "objective", "mlm") == "mlm",
       "train_text_files packs documents into blocks, which are no sentence pairs: pass "
       "objective mlm (no next-sentence head)"),
      # Held-out text is read with the training text's vocabulary, casing and packing.
      (text or not config.eval_text_files, "eval_text_files evaluates a raw-text run (give "
       "train_text_files); a run on TFRecords evaluates on eval_input_files"),
      (not (config.eval_text_files and config.eval_input_files),
       "give eval_input_files (TFRecords) or eval_text_files (raw text), not both"),
  ]


# The settings only raw text reads: how it is split into documents, tokenized and masked.
# TFRecords carry their tokens and masks; given otherwise than their defaults for a run on
# TFRecords, they were recorded and never read (sweep 34, A27, A28).
TEXT_ONLY = ("text_mode", "vocab_file", "do_lower_case", "allow_casing_mismatch",
             "masked_lm_prob", "do_whole_word_mask")


def _unread_problem(config) -> validation.Check:
  """The raw-text settings a run on TFRecords was given otherwise than their defaults."""
  defaults = {field.name: field.default for field in dataclasses.fields(config)}
  given = {name: getattr(config, name) for name in TEXT_ONLY
           if getattr(config, name) != defaults[name]}
  spelled = [f"{name}={str(value).lower() if isinstance(value, bool) else value}"
             for name, value in given.items()]
  return (not given, f"{', '.join(spelled)}: read only from raw text (train_text_files), "
          "tokenized and masked as batches are formed; TFRecords (input_files) carry the "
          "tokens and masks create_pretraining_data wrote: leave "
          f"{'it' if len(given) == 1 else 'them'} out, or remake the data with "
          "create_pretraining_data")


def check_files(config, num_workers: int) -> text_pipeline.TextCheck:
  """Reads the text files once before the run (`text_pipeline.check_text_files`), then
  tokenizes each worker's files until their first sequence forms.

  Raises:
    ValueError: as `check_text_files`, or a worker whose files yield no sequence of S
      WordPiece tokens (named with its files).
  """
  check = text_pipeline.check_text_files(list(config.train_text_files), config.max_seq_length,
                                         num_workers)
  tokenizer = _tokenizer(config)
  for worker in range(num_workers):
    shard = check.files[worker::num_workers]  # `input_pipeline.shard_files`' rule.
    if not text_pipeline.yields_a_sequence(shard, tokenizer, config.max_seq_length,
                                           config.text_mode):
      words = sum(check.words[worker::num_workers])
      raise ValueError(
          f"worker {worker} of {num_workers} reads {shard}: its {words} words give fewer "
          f"than {config.max_seq_length - 2} WordPiece tokens with {config.vocab_file} "
          "(no sequence would ever form: text of characters the tokenizer drops, such as "
          "zero-width spaces?). Give text the vocabulary can read")
  return check


def _tokenizer(config) -> tokenization.WordPieceTokenizer:
  return tokenization.WordPieceTokenizer(config.vocab_file, config.do_lower_case)


def _masking(config):
  return text_pipeline.masking_for(
      config.vocab_file, config.max_predictions_per_seq, masked_lm_prob=config.masked_lm_prob,
      whole_word_mask=config.do_whole_word_mask, seed=config.seed)


def eval_records(config) -> dict[str, int]:
  """The held-out text before the run: each eval file's packed sequences.

  Every file is read once as `check_files` reads the training text (UTF-8 named by
  `path:line`), then tokenized and packed as the evaluation will (`text_pipeline`).

  Returns:
    {eval file: sequences it yields}, for `pretraining_eval.eval_steps`.
  """
  try:
    check = text_pipeline.check_text_files(list(config.eval_text_files), config.max_seq_length)
  except ValueError as e:
    raise ValueError(f"eval_text_files: {e}") from None
  return text_pipeline.count_sequences(check.files, _tokenizer(config), config.max_seq_length,
                                       config.text_mode)


def eval_dataset(config, strategy, batch_size: int, num_workers: int, worker_index: int):
  """This worker's eval batches of `eval_text_files` (`pretraining_eval.Evaluator`): in
  file order, each sequence once, masked by its place in the files with the run's seed (so
  the same tokens at every evaluation).

  Args:
    config: the run's config.
    strategy: the run's strategy.
    batch_size: global sequences per eval batch; a multiple of the replica count.
    num_workers, worker_index: this worker's place.
  """
  local_replicas = strategy.num_replicas_in_sync // num_workers
  return text_pipeline.text_dataset(
      list(config.eval_text_files), batch_size // strategy.num_replicas_in_sync,
      tokenizer=_tokenizer(config), masking=_masking(config),
      seq_length=config.max_seq_length, text_mode=config.text_mode, num_workers=num_workers,
      worker_index=worker_index, shuffle=False, seed=config.seed, repeat=False,
      gradient_accumulation_steps=local_replicas)


def dataset(config, batch_size: int, num_workers: int, worker_index: int,
            gradient_accumulation_steps: int):
  """This worker's micro-batches of the text files (`text_pipeline.text_dataset`), masked
  with the run's seed; the order shuffled with it unless `deterministic`."""
  return text_pipeline.text_dataset(
      list(config.train_text_files), batch_size, tokenizer=_tokenizer(config),
      masking=_masking(config), seq_length=config.max_seq_length, text_mode=config.text_mode,
      num_workers=num_workers, worker_index=worker_index, shuffle=not config.deterministic,
      seed=config.seed, repeat=True, gradient_accumulation_steps=gradient_accumulation_steps)
