"""Masked-LM / next-sentence pretraining data, as google-research/bert makes it.

Reproduces google-research/bert `create_pretraining_data.py` (master, with
`do_whole_word_mask`): the same input format, the same algorithm drawing from one
`random.Random(random_seed)` in the same order, and TFRecords with Google's feature names
and dtypes, which its `run_pretraining.py` reads unchanged. This module reads the corpus
and writes the shards; `tfbert.pretraining_instances` makes the instances (segments, masks,
features) and documents the features and the quirks of Google's it keeps.

Input: UTF-8 text, one sentence per line, a blank line between documents. As in Google's
reader, documents run on across input files (only blank lines separate them), invalid
UTF-8 is dropped and a line that tokenizes to nothing is skipped. Tokens come from tfbert's
in-graph `WordPieceTokenizer`, batched per file: the ids of Google's `FullTokenizer`.

Shards are written under temporary names in the output directory and renamed when all are
complete; the summary JSON is written last, so its presence marks a complete data set. On
failure the temporary (and any renamed) files are removed.
"""

import dataclasses
import glob
import json
import os
import random
import sys
import time
from typing import Callable, Optional, Sequence, TextIO

import tensorflow as tf

from tfbert import pretraining_instances
# The run's config and its shard choices, defined beside the instances that read most of it.
from tfbert.pretraining_instances import SHARD_ASSIGNMENTS, PretrainingDataConfig
from tfbert.tokenization import WordPieceTokenizer, load_vocab

_LINES_PER_BATCH = 4096  # Lines tokenized per in-graph call.


def vocab_info(vocab_file: str) -> pretraining_instances.VocabInfo:
  """The special and "##" ids of a WordPiece vocab file, as instance creation needs them."""
  tokens = load_vocab(vocab_file)
  return pretraining_instances.VocabInfo(
      size=len(tokens), cls_id=tokens.index("[CLS]"), sep_id=tokens.index("[SEP]"),
      mask_id=tokens.index("[MASK]"),
      subword_ids=frozenset(i for i, t in enumerate(tokens) if t.startswith("##")))


class _Progress:
  """Prints a progress line to a stream at most every `every_seconds` (tqdm-free)."""

  def __init__(self, stream: Optional[TextIO], every_seconds: float):
    self._stream, self._every = stream, every_seconds
    self._last = time.monotonic()

  def __call__(self, message: Callable[[], str], force: bool = False):
    now = time.monotonic()
    if self._stream is not None and (force or now - self._last >= self._every):
      print(f"create_pretraining_data: {message()}", file=self._stream, flush=True)
      self._last = now


def expand_input_files(patterns: Sequence[str]) -> list:
  """Paths of the input files: each glob pattern's matches sorted, duplicates dropped.

  Raises:
    ValueError: if `patterns` is empty.
    FileNotFoundError: naming a pattern that matches nothing or a path that is not
      an existing file.
  """
  if not patterns:
    raise ValueError("No input files given")
  files = []
  for pattern in patterns:
    matches = sorted(glob.glob(pattern)) if any(c in pattern for c in "*?[") else [pattern]
    if not matches:
      raise FileNotFoundError(f"No input file matches {pattern!r}")
    for path in matches:
      if not os.path.isfile(path):
        raise FileNotFoundError(f"Input file not found (or not a regular file): {path}")
      if path not in files:
        files.append(path)
  return files


def _line_batches(path: str):
  """Yields lists of stripped lines, read as google-research/bert reads them."""
  try:
    with open(path, "rb") as f:  # Binary: lines end at b"\n" only, like GFile.
      batch = []
      for raw in f:
        batch.append(raw.decode("utf-8", "ignore").strip())
        if len(batch) == _LINES_PER_BATCH:
          yield batch
          batch = []
      yield batch
  except OSError as e:
    raise OSError(f"Cannot read input file {path}: {e}") from e


def _tokenize(tokenizer: WordPieceTokenizer, texts: list) -> list:
  """WordPiece ids of each text, as a list of lists of int."""
  if not texts:
    return []
  ids = tokenizer.tokenize(tf.constant(texts, tf.string))
  flat, splits = ids.flat_values.numpy().tolist(), ids.row_splits.numpy().tolist()
  return [flat[start:end] for start, end in zip(splits[:-1], splits[1:])]


def read_documents(input_files: Sequence[str], tokenizer: WordPieceTokenizer,
                   progress: Callable = pretraining_instances.no_progress) -> list:
  """The corpus as documents, each a list of sentences, each a list of int WordPiece ids.

  Raises:
    ValueError: if the files hold no sentence at all (an empty corpus).
  """
  documents = [[]]
  for path in input_files:
    for lines in _line_batches(path):
      ids = iter(_tokenize(tokenizer, [line for line in lines if line]))
      for line in lines:
        if not line:  # Blank lines separate documents.
          documents.append([])
          continue
        sentence = next(ids)
        if sentence:
          documents[-1].append(sentence)
      progress(lambda: f"reading {path}: {sum(map(bool, documents))} documents so far")
  documents = [d for d in documents if d]
  if not documents:
    raise ValueError(f"Empty corpus: no documents (no line with any WordPiece) in the "
                     f"input files {list(input_files)}")
  return documents


def shard_names(prefix: str, num_shards: int) -> list:
  """Shard file names: `{prefix}-00000-of-00004.tfrecord`, ...; the summary is beside."""
  return [f"{prefix}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]


def summary_path(output_dir: str, prefix: str) -> str:
  return os.path.join(output_dir, f"{prefix}-summary.json")


def write_shards(instances: Sequence[pretraining_instances.TrainingInstance], output_dir: str,
                 prefix: str, config: PretrainingDataConfig,
                 progress: Callable = pretraining_instances.no_progress) -> list:
  """Writes the shards under temporary names, renames them once all are complete.

  Returns:
    list of int, the number of instances in each shard.
  """
  finals = [os.path.join(output_dir, n) for n in shard_names(prefix, config.num_shards)]
  temps = [os.path.join(output_dir, f".{os.path.basename(f)}.{os.getpid()}.tmp")
           for f in finals]
  counts, renamed, writers = [0] * config.num_shards, [], []
  try:
    writers = [tf.io.TFRecordWriter(t) for t in temps]
    for index, instance in enumerate(instances):
      shard = (index % config.num_shards if config.shard_assignment == "round_robin"
               else index * config.num_shards // len(instances))
      writers[shard].write(pretraining_instances.instance_to_example(
          instance, config.max_seq_length, config.max_predictions_per_seq).SerializeToString())
      counts[shard] += 1
      progress(lambda: f"writing: {index + 1}/{len(instances)} instances")
    for writer in writers:
      writer.close()
    for temp, final in zip(temps, finals):
      os.replace(temp, final)  # Atomic per file; the summary (written last) marks the set.
      renamed.append(final)
  except BaseException:
    for writer in writers:
      writer.close()
    for path in temps + renamed:
      if os.path.exists(path):
        os.remove(path)
    raise
  return counts


def _prepare_output_dir(output_dir: str, prefix: str, num_shards: int) -> None:
  """Creates the directory; refuses stale shards of another shard count."""
  os.makedirs(output_dir, exist_ok=True)
  ours = set(shard_names(prefix, num_shards))
  stale = sorted(n for n in os.listdir(output_dir)
                 if n.startswith(f"{prefix}-") and n.endswith(".tfrecord") and n not in ours)
  if stale:
    raise FileExistsError(f"{output_dir} already holds other shards of {prefix!r} "
                          f"({stale[:3]}...); remove them or pick another output_prefix")


def _summary(input_files, documents, instances, counts, prefix, config) -> dict:
  return {
      "num_instances": len(instances), "num_documents": len(documents),
      "num_sentences": sum(len(d) for d in documents),
      "num_tokens": sum(len(s) for d in documents for s in d),
      "num_masked_lm_predictions": sum(len(i.masked_lm_ids) for i in instances),
      "num_random_next": sum(i.is_random_next for i in instances),
      "shards": [{"file": n, "instances": c}
                 for n, c in zip(shard_names(prefix, config.num_shards), counts)],
      "input_files": list(input_files), "config": dataclasses.asdict(config)}


def create_pretraining_data(input_patterns: Sequence[str], output_dir: str,
                            config: PretrainingDataConfig, *, output_prefix: str = "pretraining",
                            log_every_seconds: float = 10.0,
                            log_stream: Optional[TextIO] = None) -> dict:
  """Reads a corpus; writes Google-format pretraining TFRecord shards and a summary JSON.

  Args:
    input_patterns: files or glob patterns of one-sentence-per-line text.
    output_dir: gets `{output_prefix}-NNNNN-of-NNNNN.tfrecord` and
      `{output_prefix}-summary.json` (written last); created if missing.
    config: the data options.
    output_prefix: file name prefix of the shards and the summary.
    log_every_seconds: period of the progress line (files, documents, instances).
    log_stream: where progress goes (default sys.stderr).

  Returns:
    dict, the summary written (counts, shard files, input files, config).

  Raises:
    FileNotFoundError: a missing vocab or input file (named).
    OSError: an unreadable input file (named).
    ValueError: an empty corpus, or fewer instances than shards.
    FileExistsError: `output_dir` holds shards of this prefix with another shard count.
  """
  progress = _Progress(sys.stderr if log_stream is None else log_stream, log_every_seconds)
  vocab = vocab_info(config.vocab_file)
  input_files = expand_input_files(input_patterns)
  _prepare_output_dir(output_dir, output_prefix, config.num_shards)
  tokenizer = WordPieceTokenizer(config.vocab_file, config.do_lower_case)
  documents = read_documents(input_files, tokenizer, progress)
  instances = pretraining_instances.create_training_instances(
      documents, config, vocab, random.Random(config.random_seed), progress)
  if len(instances) < config.num_shards:
    raise ValueError(f"{len(instances)} instances cannot fill {config.num_shards} shards")
  path = summary_path(output_dir, output_prefix)
  if os.path.exists(path):
    os.remove(path)  # The old data set is incomplete from here until the new summary.
  counts = write_shards(instances, output_dir, output_prefix, config, progress)
  summary = _summary(input_files, documents, instances, counts, output_prefix, config)
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=2)
  os.replace(path + ".tmp", path)
  progress(lambda: f"wrote {len(instances)} instances from {len(documents)} documents "
           f"to {config.num_shards} shard(s) in {output_dir}", force=True)
  return summary


def pydoc_corpus(output_path: str, max_documents: Optional[int] = None) -> str:
  """Writes CPython's `pydoc_data.topics` as a google-format corpus: the default corpus.

  One document per help topic (sorted by name), blank lines between them. Sentences are
  cut simply: a paragraph's wrapped lines are joined with spaces (heading underlines
  such as "*****" dropped) and split after every ". " (so "e.g. x" splits too).

  Args:
    output_path: the text file to write.
    max_documents: keep only the first this many topics (default all, 79 on 3.11).

  Returns:
    `output_path`.
  """
  from pydoc_data.topics import topics  # pylint: disable=import-outside-toplevel
  documents = []
  for name in sorted(topics)[:max_documents]:
    lines = []
    for paragraph in topics[name].split("\n\n"):
      text = " ".join(line.strip() for line in paragraph.splitlines()
                      if set(line.strip()) - set("*=-"))
      lines += [s.strip() for s in text.replace(". ", ".\n").split("\n") if s.strip()]
    if lines:
      documents.append("\n".join(lines))
  with open(output_path, "w", encoding="utf-8") as f:
    f.write("\n\n".join(documents) + "\n")
  return output_path
