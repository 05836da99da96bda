"""tf.data pretraining input from google-research/bert TFRecords, sharded per worker.

Reads what `tfbert.pretraining.pretraining_data` (or Google's `create_pretraining_data.py`) writes.

Sharding (docs/pitfalls.md, "Distribution"): the NVIDIA and Model Garden pipelines list files
with an unseeded shuffle and then `.shard()`, so workers see different file orders and
their shards overlap or miss files; the original OneFlow BERT port had every rank read
the same files. Here every worker sorts the same expanded file list and takes
`files[worker_index::num_workers]`: disjoint, together complete, and an error when a
worker would get nothing. Shuffling (seeded) happens only afterwards, within the shard.
tf.data's own auto-sharding is switched off, so a `tf.distribute` strategy cannot shard
a second time.

Exact loss normalization under gradient accumulation: every anchor normalizes the MLM
loss per micro-batch (a mean of means, huggingface/transformers#24725). Each example
therefore carries `window_mlm_weight`, the sum of `masked_lm_weights` over the
`gradient_accumulation_steps` consecutive micro-batches that form this worker's applied step, and
`window_examples` (= gradient_accumulation_steps * batch_size). Dividing each micro-batch's summed
loss by the window totals (all-reduced over workers) makes the accumulated step equal to
one big batch.

Resuming: the iterator is checkpointable, shuffle buffers and file positions included:

  iterator = iter(dataset)
  checkpoint = tf.train.Checkpoint(iterator=iterator)
  checkpoint.save(prefix)        # later: checkpoint.restore(path) on a new iterator
                                 # of the same dataset continues with the next batch.

Shape legend: B micro-batch (per worker), W = gradient_accumulation_steps * B, S seq_length,
P max_predictions.
"""

import errno
import functools
import os
import re
import stat
from typing import Mapping, Optional, Sequence, Union

import tensorflow as tf

from tfbert.runtime import atomic, files, paths
from tfbert.training import data_options

# google-research/bert `run_pretraining.py` reads int64 features and casts them to int32.
_INT_FEATURES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                 "masked_lm_ids", "next_sentence_labels")
# Files read at once per worker (interleaved record by record; `text_pipeline` too).
MAX_CYCLE_LENGTH = 4
MAX_ORDERED_CYCLE_LENGTH = 64  # Files interleaved in the unshuffled (alignment) order.
# Old-style hidden temporaries of create_pretraining_data: `.<shard name>.<pid>.tmp`.
_OLD_TEMPORARY = re.compile(r"^\..+\.\d+\.tmp$")
_SUMMARY_SUFFIX = "-summary.json"  # `{prefix}-summary.json` beside the shards.


def _never_data(name: str) -> bool:
  """Names a pattern must never yield: temporaries (new and old style) and summaries."""
  return (atomic.is_temporary(name) or bool(_OLD_TEMPORARY.match(name))
          or name.endswith(_SUMMARY_SUFFIX))


_WILDCARDS = re.compile(r"[*?[]")


def entry_problem(name: str, path: str, reason: str = paths.RUN_REREADS) -> Optional[str]:
  """Why the existing directory entry `path`, given as `name` ("--input_files", "pretraining
  data file"), cannot serve as a data file, as "name path is ...", or None (a URL, a readable
  file or directory, or nothing there).

  Unreadable: a symbolic link loop, a symbolic link to nothing, no read permission (a
  glob drops the first two, so they read as "no file matches" though `ls` lists them). Not
  a file: a special file (a named pipe such as bash's `<(...)` or a `/dev/fd/N`, a socket,
  a device), which can be read only once, while a run reads every data file more than once
  (the check before the run, then the run, again each epoch; fine-tuning hashes each file
  for its records, then reads it): named in the one wording of
  `tfbert.runtime.paths.special_input_problems`, with `reason`.
  """
  if files.is_url(path) or not os.path.lexists(path):
    return None
  special = paths.special_input_problems({name: path}, reason)
  if special:
    return special[0]
  try:
    mode = os.stat(path).st_mode
  except OSError as error:
    if error.errno == errno.ELOOP:  # (`files.dangling_link` would say "to nothing".)
      return f"{name} {path} is a symbolic link loop (it leads back to itself): point it at a file"
    target = files.dangling_link(path)
    if target is not None:
      return f"{name} {path} is a symbolic link to {target}, which does not exist"
    return f"{name} {path} cannot be read: {error.strerror or error}"
  if stat.S_ISREG(mode) and not os.access(path, os.R_OK):
    return f"{name} {path} cannot be read (permission denied)"
  return None


def _named_entries(pattern: str, found: Sequence[str]) -> list:
  """`found` (a glob's matches), plus the entry a wildcard-free local `pattern` names when
  the glob dropped it (`tf.io.gfile.glob` drops a path it cannot stat: a symbolic link loop
  or a link to nothing)."""
  if found or files.is_url(pattern) or _WILDCARDS.search(pattern):
    return list(found)
  return [pattern] if os.path.lexists(pattern) else []


def input_problems(inputs: Mapping[str, Union[str, Sequence[str]]],
                   reason: str = paths.RUN_REREADS) -> list:
  """What is wrong with the data files that inputs (`{"--input_files": patterns}`) name
  (`entry_problem`, with `reason` for a special file), each as "--flag path is ..." (a
  pattern's matches each named), before any work. A pattern that matches nothing is left
  to `expand_files`."""
  problems = []
  for name, value in inputs.items():
    patterns = [value] if isinstance(value, str) else list(value or ())
    for pattern in patterns:
      if not pattern or files.is_url(pattern):
        continue
      for path in sorted(_named_entries(pattern, tf.io.gfile.glob(pattern))):
        problem = entry_problem(name, path, reason)
        if problem and not _never_data(os.path.basename(path)):
          problems.append(problem)
  return problems


def split_list_problems(lists: Mapping[str, Optional[Sequence[str]]]) -> list:
  """What matches no file among the pieces of comma-separated file-list flags
  (`{"--train_text_files": pieces}`, absl's `DEFINE_list` values), one per flag, as "--flag:
  'piece' (from splitting 'a,b' at commas) matches no file; ...", before any work.

  A list flag is split at every comma, so a path with a comma in a name (`'tx,c/a.txt'`)
  arrives as pieces that name nothing; `expand_files` would name only the first piece, not
  the flag or the split. A flag of one piece is left to `expand_files` (nothing was split);
  a URL's pieces too (not listed here).
  """
  problems = []
  for flag, pieces in lists.items():
    pieces = list(pieces or ())
    if len(pieces) < 2:
      continue
    unmatched = [piece for piece in pieces if not files.is_url(piece) and not _named_entries(
        piece, tf.io.gfile.glob(piece) if piece else [])]
    if unmatched:
      problems.append(
          f"{flag}: {', '.join(map(repr, unmatched))} (from splitting {','.join(pieces)!r} at "
          f"commas) {'matches' if len(unmatched) == 1 else 'match'} no file; the flag is "
          "comma-separated: match a comma in a name with '?'")
  return problems


def expand_files(files: Union[str, Sequence[str]]) -> list:
  """The sorted data files of file names or glob patterns (no temporaries or summaries).

  `tf.io.gfile.glob` matches dotfiles (`dir/*` yields `dir/.x`), unlike a shell or
  Python's `glob`; here a wildcard matches a hidden name only when the pattern's own
  name part starts with ".", as in a shell. Never returned, even when named: tfbert
  temporaries (`.tfbert-tmp-*`, see `tfbert.runtime.atomic`), the old-style `.<name>.<pid>.tmp`
  ones and the `*-summary.json` that `tfbert.pretraining.pretraining_data` writes beside its shards.

  Raises:
    FileNotFoundError: a pattern that matches no data file (named).
    ValueError: a matched entry that cannot serve (`entry_problem`: a symbolic link loop or
      to nothing, no read permission, a named pipe, socket or device), named for what it is.
  """
  patterns = [files] if isinstance(files, str) else list(files)
  expanded = set()
  for pattern in patterns:
    hidden_ok = os.path.basename(pattern).startswith(".")
    found = tf.io.gfile.glob(pattern)
    matches = [m for m in _named_entries(pattern, found) if not _never_data(os.path.basename(m))
               and (hidden_ok or not os.path.basename(m).startswith("."))]
    for match in matches:  # Named for what it is, not as a missing file or a reader's error.
      problem = entry_problem("pretraining data file", match)
      if problem:
        raise ValueError(problem)
    if not matches:
      skipped = f" ({len(found)} temporary, hidden or summary file(s) skipped)" if found else ""
      raise FileNotFoundError(f"No pretraining data file matches {pattern!r}{skipped}")
    expanded.update(matches)
  return sorted(expanded)


def shard_files(files: Union[str, Sequence[str]], num_workers: int,
                worker_index: int) -> list:
  """This worker's files: sorted expansion of `files`, then every num_workers-th one.

  Args:
    files: a file name or glob pattern, or a list of them (see `expand_files`).
    num_workers: number of input workers (processes reading disjoint shards).
    worker_index: this worker, in [0, num_workers).

  Returns:
    list of str, `sorted(all files)[worker_index::num_workers]`; the workers' lists are
    disjoint and together hold every file, whatever order `files` came in.

  Raises:
    ValueError: bad worker arguments, or fewer files than workers (a worker would read
      nothing; write at least num_workers shards).
    FileNotFoundError: a pattern that matches no file (named).
  """
  if num_workers < 1 or not 0 <= worker_index < num_workers:
    raise ValueError(f"worker_index {worker_index} is not in [0, num_workers="
                     f"{num_workers})")
  expanded = expand_files(files)
  if len(expanded) < num_workers:
    raise ValueError(
        f"{len(expanded)} file(s) for {num_workers} workers: worker(s) "
        f"{list(range(len(expanded), num_workers))} would read nothing. Write at least "
        f"{num_workers} shards (create_pretraining_data --num_shards).")
  return expanded[worker_index::num_workers]


def feature_spec(seq_length: int, max_predictions: int,
                 next_sentence_labels: bool = True) -> dict:
  """google-research/bert's `run_pretraining.py` features (int64 / float32); without
  `next_sentence_labels` (the objective "mlm") that feature is not read."""
  ints = lambda n: tf.io.FixedLenFeature([n], tf.int64)  # noqa: E731
  spec = {"input_ids": ints(seq_length), "input_mask": ints(seq_length),
          "segment_ids": ints(seq_length), "masked_lm_positions": ints(max_predictions),
          "masked_lm_ids": ints(max_predictions),
          "masked_lm_weights": tf.io.FixedLenFeature([max_predictions], tf.float32)}
  if next_sentence_labels:
    spec["next_sentence_labels"] = ints(1)
  return spec


def _parse_window(serialized: tf.Tensor, seq_length: int, max_predictions: int,
                  next_sentence_labels: bool = True) -> dict:
  """Parses one window of W records and attaches the window totals to each example.

  Args:
    serialized: tf.string Tensor [W].

  Returns:
    dict of int32 [W, S] / [W, P] / [W] (`next_sentence_labels`) features, float32
    `masked_lm_weights` [W, P], and float32 `window_mlm_weight`, `window_examples` [W].
  """
  parsed = tf.io.parse_example(serialized, feature_spec(seq_length, max_predictions,
                                                       next_sentence_labels))
  features = {name: tf.cast(parsed[name], tf.int32) for name in _INT_FEATURES
              if name in parsed}
  if next_sentence_labels:
    features["next_sentence_labels"] = tf.reshape(features["next_sentence_labels"], [-1])
  features["masked_lm_weights"] = parsed["masked_lm_weights"]   # [W, P]
  return with_window_totals(features)


def with_window_totals(features: dict) -> dict:
  """`features` of one window of W examples with the window totals attached to each:
  float32 `window_mlm_weight` (the sum of `masked_lm_weights` [W, P]) and `window_examples`
  (W), both [W] (the module docstring)."""
  weights = features["masked_lm_weights"]
  window = tf.shape(weights)[0]
  return {**features, "window_mlm_weight": tf.fill([window], tf.reduce_sum(weights)),
          "window_examples": tf.fill([window], tf.cast(window, tf.float32))}


def micro_batches(windows: tf.data.Dataset, batch_size: int, deterministic: bool
                  ) -> tf.data.Dataset:
  """Windows of examples split into this worker's micro-batches of `batch_size` (remainders
  dropped), the element order kept when `deterministic`; never sharded again by a strategy
  (the files already are, per worker), prefetched."""
  options = tf.data.Options()
  options.deterministic = deterministic
  options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
  return data_options.released_promptly(
      windows.unbatch().batch(batch_size, drop_remainder=True).with_options(options)
      .prefetch(tf.data.AUTOTUNE))


def _records(files: list, *, shuffle: bool, seed: int, repeat: bool, ordered: bool,
             shuffle_buffer_size: int) -> tf.data.Dataset:
  """Serialized records of `files`: seeded file and record shuffles, within the shard."""
  if not shuffle:
    # Sorted files read record by record in turn (f0r0, f1r0, f0r1, ...): with one record
    # per replica, one process with R replicas then sees the same examples in each step as
    # R workers reading one file each, which is what alignment runs compare.
    dataset = tf.data.Dataset.from_tensor_slices(files).interleave(
        tf.data.TFRecordDataset, cycle_length=min(len(files), MAX_ORDERED_CYCLE_LENGTH),
        block_length=1)  # Sequential (no num_parallel_calls): always this order.
    return dataset.repeat() if repeat else dataset
  # A new file order each epoch, still a pure function of `seed`.
  dataset = tf.data.Dataset.from_tensor_slices(files).shuffle(
      len(files), seed=seed, reshuffle_each_iteration=True)
  if repeat:
    dataset = dataset.repeat()
  dataset = dataset.interleave(
      tf.data.TFRecordDataset, cycle_length=min(len(files), MAX_CYCLE_LENGTH),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=ordered)
  return dataset.shuffle(shuffle_buffer_size, seed=seed + 1)


def pretraining_dataset(file_patterns: Union[str, Sequence[str]], batch_size: int, *,
                        seq_length: int, max_predictions: int, num_workers: int = 1,
                        worker_index: int = 0, shuffle: bool = True, seed: int = 0,
                        repeat: bool = True, gradient_accumulation_steps: int = 1,
                        deterministic: bool = False,
                        shuffle_buffer_size: int = 1000,
                        next_sentence_labels: bool = True) -> tf.data.Dataset:
  """Micro-batches of this worker's shard of the pretraining records.

  Order: this worker's files (`shard_files`); with `shuffle`, file order shuffled with
  `seed` (anew, still seeded, each epoch), up to 4 files interleaved record by record,
  then a `shuffle_buffer_size` record buffer seeded with `seed + 1`; without, the files'
  records one file after another (google-research/bert's evaluation order). Then
  windows of W = gradient_accumulation_steps * batch_size, parsed with the window totals attached,
  split into micro-batches of `batch_size`. Remainders are dropped (`drop_remainder`),
  so without `repeat` a final incomplete window is not produced.

  Args:
    file_patterns: TFRecord file(s) or glob pattern(s), as for `shard_files`.
    batch_size: B, examples per micro-step on this worker.
    seq_length: S of the records (`max_seq_length` when they were made).
    max_predictions: P of the records (`max_predictions_per_seq`).
    num_workers, worker_index: input sharding, see `shard_files`.
    shuffle: shuffle files and records (seeded); False reads them in sorted order.
    seed: the shuffle seed; the same seed gives the same order.
    repeat: loop over the shard forever.
    gradient_accumulation_steps: micro-batches per applied step (the window of the totals).
    deterministic: make tf.data keep element order in its parallel reads and maps, so
      the order is a pure function of the files and `seed` (for alignment runs).
      Implied by `shuffle=False`. Otherwise the seeded shuffles are unchanged but
      parallel reads may reorder nearby records (a restored iterator then still neither
      loses nor repeats an example).
    shuffle_buffer_size: records in the shuffle buffer.
    next_sentence_labels: read `next_sentence_labels` (the objective "mlm_nsp"); False
      (objective "mlm"): records without it are read too, and batches hold none.

  Returns:
    tf.data.Dataset of dicts: int32 `input_ids`, `input_mask`, `segment_ids` [B, S];
    int32 `masked_lm_positions`, `masked_lm_ids` [B, P]; float32 `masked_lm_weights`
    [B, P]; int32 `next_sentence_labels` [B] (when read); float32 `window_mlm_weight`,
    `window_examples` [B] (see the module docstring).
  """
  if batch_size < 1 or gradient_accumulation_steps < 1:
    raise ValueError(f"batch_size ({batch_size}) and gradient_accumulation_steps "
                     f"({gradient_accumulation_steps}) must be >= 1")
  ordered = deterministic or not shuffle
  dataset = _records(shard_files(file_patterns, num_workers, worker_index), shuffle=shuffle,
                     seed=seed, repeat=repeat, ordered=ordered,
                     shuffle_buffer_size=shuffle_buffer_size)
  dataset = dataset.batch(gradient_accumulation_steps * batch_size, drop_remainder=True).map(
      functools.partial(_parse_window, seq_length=seq_length,
                        max_predictions=max_predictions,
                        next_sentence_labels=next_sentence_labels),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=ordered)
  return micro_batches(dataset, batch_size, ordered)
