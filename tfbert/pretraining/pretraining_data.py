"""Masked-LM / next-sentence pretraining data, as google-research/bert makes it.

Reproduces google-research/bert `create_pretraining_data.py` (master, with
`do_whole_word_mask`): the same input format, the same algorithm drawing from one
`random.Random(random_seed)` in the same order, and TFRecords with Google's feature names
and dtypes, which its `run_pretraining.py` reads unchanged. This module reads the corpus
and writes the shards; `tfbert.pretraining.pretraining_instances` makes the instances (segments,
masks, features) and documents the features and the quirks of Google's it keeps.

Input: UTF-8 text, one sentence per line, a blank line between documents. As in Google's
reader, documents run on across input files (only blank lines separate them), invalid
UTF-8 is dropped and a line that tokenizes to nothing is skipped. Tokens come from tfbert's
in-graph `WordPieceTokenizer`, batched per file: the ids of Google's `FullTokenizer`.
What Google does silently is counted and reported (a warning line and the summary): the
lines with invalid UTF-8 per file, and the share of [UNK] among the WordPieces, a vocab
that does not fit the text (`UNK_WARNING_RATE`).

Shards are written under `tfbert.runtime.atomic` temporary names (hidden, without ".tfrecord", so
no shard glob matches them) in the output directory and renamed when all are complete;
the summary JSON is written last, so its presence marks a complete data set. On failure
the temporary (and any renamed) files are removed by a cleanup that cannot itself fail
(on a full disk `close()` fails again). A run first removes the temporaries that killed
runs left behind. The input files and the output directory may be URLs (`gs://...`, any
`tf.io.gfile` filesystem): the renames are then the filesystem's (`tfbert.runtime.files`; on
an object store a copy then a delete, each file still appearing only complete).
SIGTERM gets the cleanup of Ctrl-C too: the tools turn it into an exception
(`tfbert.runtime.cli.sigterm_unwinds`); its default ended the process at once, leaving the
hidden temporaries and a directory the run had created.
"""

import dataclasses
import os
import random
import re
import sys
import time
from typing import Callable, Optional, Sequence, TextIO

import tensorflow as tf

from tfbert.pretraining import pretraining_instances

# The run's config and its shard choices, defined beside the instances that read most of it.
from tfbert.pretraining.pretraining_instances import SHARD_ASSIGNMENTS, PretrainingDataConfig  # noqa: F401  (re-exported)
from tfbert.runtime import atomic, files, paths
from tfbert.text.tokenization import WordPieceTokenizer, load_vocab

_LINES_PER_BATCH = 4096  # Lines tokenized per in-graph call.
# Warn when more of the corpus' WordPieces than this are [UNK]. Measured (uncased vocab
# with --do_lower_case, cased vocab without): 0% on the pydoc corpus, 0% and 0.38% on
# google-research/bert's sample_text.txt (its Unicode test line). A mismatch: the uncased
# vocab without lower-casing 4.6% (pydoc) and 5.7% (sample_text), a vocab without Latin
# pieces (the uncased vocab's CJK entries, standing in for a Chinese vocab) 99.5%. 2% is
# 5x the worst fitting vocab and under half the mildest mismatch. (A cased vocab with
# --do_lower_case is not caught this way: 0% and 0.38%; its lower-case pieces exist.)
UNK_WARNING_RATE = 0.02
# Warn when more of the documents than this have one sentence: each of their instances is a
# "random next" pair (Google's algorithm draws B from another document when A's chunk holds
# one sentence), so the next-sentence labels stop being about the text. A corpus in the
# documented layout (a blank line between documents only) has few: google-research/bert's
# sample_text.txt and the pydoc corpus none; a blank line after every line, all.
SINGLE_SENTENCE_WARNING_SHARE = 0.5
# Warn, when most sentences fill the pair's max_seq_length - 3 tokens alone (a chunk of one
# sentence: "random next" as above), when more instances than this are random next (about
# half in the documented use). Measured on sample_text.txt: at --max_seq_length 8, 31 of 31
# random; at 16, 27 of 29.
RANDOM_NEXT_WARNING_SHARE = 0.75
# Warn, whatever else is warned of, when the instances hold less than this share of the
# corpus' tokens (times dupe_factor): the rest was truncated away. sample_text.txt keeps 15%
# at --max_seq_length 8, 43% at 32; a paragraph per line (sweep 23 r10) 1.5% at 32.
KEPT_TOKENS_WARNING_SHARE = 0.5
# A line over this many WordPieces (and over the pair's max_seq_length - 3) is no sentence
# but a paragraph or document (English sentences average ~30 pieces): when such lines hold
# most of the corpus, the kept-tokens warning says to split them into sentences.
PARAGRAPH_LINE_TOKENS = 100
# Old-style temporaries of this module: `.<shard name>.<pid>.tmp`.
_OLD_TEMPORARY = re.compile(r"^\.(?P<name>.+\.tfrecord)\.(?P<pid>\d+)\.tmp$")


@dataclasses.dataclass
class CorpusStats:
  """What reading the corpus found beyond its documents (filled by `read_documents`).

  Attributes:
    invalid_utf8_lines: input file -> number of its lines with invalid UTF-8 (dropped
      bytes, as Google's reader drops them); only files that have any.
    num_wordpieces, num_unk: WordPieces of the kept sentences, and how many are [UNK].
  """
  invalid_utf8_lines: dict = dataclasses.field(default_factory=dict)
  num_wordpieces: int = 0
  num_unk: int = 0

  @property
  def unk_rate(self) -> float:
    return self.num_unk / self.num_wordpieces if self.num_wordpieces else 0.0


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

  Local paths and URLs (`gs://...`) alike. As in a shell or Python's `glob`, a wildcard
  matches a hidden name only when the pattern's own name part starts with "."
  (`tf.io.gfile.glob` alone would match dotfiles).

  Raises:
    ValueError: if `patterns` is empty.
    FileNotFoundError: naming a pattern that matches nothing or a path that is not
      an existing file.
  """
  if not patterns:
    raise ValueError("No input files given")
  found = []
  for pattern in patterns:
    matches = [pattern]
    if any(c in pattern for c in "*?["):
      hidden_ok = os.path.basename(pattern).startswith(".")
      matches = [m for m in files.glob(pattern)
                 if hidden_ok or not os.path.basename(m).startswith(".")]
    if not matches:
      raise FileNotFoundError(f"No input file matches {pattern!r}")
    for path in matches:
      if not files.isfile(path):
        files.check_found(path, "Input file")  # Missing, or a link to nothing, named so.
        raise FileNotFoundError(f"Input file not found (or not a regular file): {path}")
      if path not in found:
        found.append(path)
  return found


MOSTLY_INVALID = 0.5  # A file with invalid UTF-8 in more of its lines is not text.
# What --input_file takes: said when a file is not that (`_line_batches`).
CORPUS_FORMAT = ("--input_file takes a text corpus: plain UTF-8 text, one sentence per line, "
                 "a blank line between documents")


def _decode(raw: bytes, path: str, stats: CorpusStats) -> str:
  """The line as Google decodes it (invalid bytes dropped); counts lines that had some."""
  try:
    return raw.decode("utf-8")
  except UnicodeDecodeError:
    stats.invalid_utf8_lines[path] = stats.invalid_utf8_lines.get(path, 0) + 1
    return raw.decode("utf-8", "ignore")


def _line_batches(path: str, stats: CorpusStats):
  """Yields lists of stripped lines, read as google-research/bert reads them.

  A line with invalid UTF-8 is dropped, as Google's reader does, but a file that is not text
  is refused (a TFRecord given by mistake once became instances of its fragments): a NUL
  byte, which no text file holds, or invalid UTF-8 in most of its lines (`MOSTLY_INVALID`).

  Raises:
    ValueError: a UTF-16 or gzip file, or one that is not text; naming it and
      `CORPUS_FORMAT`.
  """
  try:
    with files.open_file(path, "rb") as f:  # Binary: lines end at b"\n" only, like GFile.
      batch, number = [], -1
      for number, raw in enumerate(f):
        if number == 0 and raw.startswith(files.UTF16_MARKS):  # Not line noise to drop.
          raise ValueError(files.utf16_message(path))
        if number == 0 and raw.startswith(files.GZIP_MAGIC):  # Nor is a compressed file.
          raise ValueError(files.gzip_message(path))
        if b"\0" in raw:  # Nor is a binary file.
          raise ValueError(files.binary_message(path, number + 1, CORPUS_FORMAT))
        batch.append(_decode(raw, path, stats).strip())
        if len(batch) == _LINES_PER_BATCH:
          yield batch
          batch = []
      invalid = stats.invalid_utf8_lines.get(path, 0)
      if invalid > MOSTLY_INVALID * (number + 1):
        raise ValueError(f"{path}: {invalid} of its {number + 1} lines are not UTF-8: it is "
                         f"not a text corpus (or not UTF-8: save it as UTF-8); "
                         f"{CORPUS_FORMAT}")
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
                   progress: Callable = pretraining_instances.no_progress,
                   stats: Optional[CorpusStats] = None) -> list:
  """The corpus as documents, each a list of sentences, each a list of int WordPiece ids.

  Args:
    input_files: text files, read in this order.
    tokenizer: gives the WordPiece ids.
    progress: `progress(message_fn, force=False)` callback (see `_Progress`); gets the
      documents so far and the [UNK] rate, and a warning per file with invalid UTF-8.
    stats: filled with the invalid UTF-8 and [UNK] counts when given.

  Raises:
    ValueError: if the files hold no sentence at all (an empty corpus).
  """
  stats = CorpusStats() if stats is None else stats
  unk_id, documents = tokenizer.unk_id, [[]]
  for path in input_files:
    for lines in _line_batches(path, stats):
      ids = iter(_tokenize(tokenizer, [line for line in lines if line]))
      for line in lines:
        if not line:  # Blank lines separate documents.
          documents.append([])
          continue
        sentence = next(ids)
        if sentence:
          documents[-1].append(sentence)
          stats.num_wordpieces += len(sentence)
          stats.num_unk += sentence.count(unk_id)
      progress(lambda: f"reading {path}: {sum(map(bool, documents))} documents so far, "
               f"[UNK] {stats.unk_rate:.2%} of WordPieces")
    if path in stats.invalid_utf8_lines:
      progress(lambda: f"warning: {path}: {stats.invalid_utf8_lines[path]} line(s) with "
               f"invalid UTF-8 bytes (dropped, as google-research/bert does)", force=True)
  documents = [d for d in documents if d]
  if not documents:
    raise ValueError(f"Empty corpus: no documents (no line with any WordPiece) in the "
                     f"input files {list(input_files)}")
  return documents


def pairs_warning(input_files: Sequence[str], documents: Sequence[list], instances: Sequence,
                  config: PretrainingDataConfig) -> Optional[str]:
  """The one warning line for a corpus whose pairs teach little, else None: a single
  document (every "random next" B then comes from A's own document), mostly
  one-sentence documents (over `SINGLE_SENTENCE_WARNING_SHARE`: their next-sentence pairs
  are all random), or a max_seq_length most sentences fill alone, so that most pairs are
  random (`RANDOM_NEXT_WARNING_SHARE`). How much of the text the instances keep is
  `kept_tokens_warning`'s, checked apart.

  Args:
    input_files: the corpus files (named in the message).
    documents: the corpus; each document a list of sentences, each a list of ids.
    instances: the `TrainingInstance`s made from it.
    config: their `PretrainingDataConfig`.
  """
  single = sum(len(d) == 1 for d in documents)
  random_next = sum(i.is_random_next for i in instances)
  named = _named(input_files)
  if len(documents) < 2 and not random_next:  # Sweep 29, A82: "the 0 of 3 ... some are".
    return (f"warning: {named} {'holds' if len(input_files) == 1 else 'hold'} 1 document (no "
            f"blank line between documents), and none of its {len(instances)} instances is a "
            "next-sentence pair drawn at random (\"random next\"): every next-sentence label "
            "is \"is next\", so that objective learns nothing. Separate the documents with "
            "blank lines, or pretrain with --objective=mlm")
  if len(documents) < 2:
    return (f"warning: {named} {'holds' if len(input_files) == 1 else 'hold'} "
            f"{len(documents)} document (no blank line between documents), so the {random_next} "
            f"of {len(instances)} instances that are next-sentence pairs drawn at random "
            "(\"random next\") take their B from that same document (as google-research/bert "
            "does): some are a nearby or even the true next sentence, labelled random all "
            "the same. Separate the documents with blank lines, or pretrain with --objective=mlm")
  if single > SINGLE_SENTENCE_WARNING_SHARE * len(documents):
    return (f"warning: {single} of {len(documents)} documents of {named} have one sentence, "
            f"so {random_next} of {len(instances)} instances are next-sentence pairs drawn at "
            "random (\"random next\"): the next-sentence objective learns nothing from them. "
            "The input is one sentence per line, a blank line only between documents; with a "
            "blank line after every sentence, remove those, or pretrain with --objective=mlm")
  room = config.max_seq_length - 3  # [CLS], [SEP], [SEP].
  sentences = [len(s) for d in documents for s in d]
  filling = sum(length >= room for length in sentences)
  if filling <= len(sentences) / 2 or random_next <= RANDOM_NEXT_WARNING_SHARE * len(instances):
    return None
  return (f"warning: --max_seq_length {config.max_seq_length} leaves {room} tokens per "
          f"sentence pair ([CLS] and two [SEP] take 3) and {filling} of {len(sentences)} "
          f"sentences of {named} fill that alone: {random_next} of {len(instances)} instances "
          "are next-sentence pairs drawn at random (\"random next\"): give a larger "
          "--max_seq_length (Google's is 128)")


def kept_tokens_warning(input_files: Sequence[str], documents: Sequence[list],
                        instances: Sequence, config: PretrainingDataConfig) -> Optional[str]:
  """The warning line when the instances hold less than `KEPT_TOKENS_WARNING_SHARE` of the
  corpus' tokens (times dupe_factor; the rest truncated away), else None. Checked whatever
  `pairs_warning` says. When lines over `PARAGRAPH_LINE_TOKENS` (and the pair's room) hold
  most of the tokens, a paragraph or document per line, it says to split them into sentences.

  Args: as `pairs_warning`.
  """
  room = config.max_seq_length - 3  # [CLS], [SEP], [SEP].
  sentences = [len(s) for d in documents for s in d]
  total = sum(sentences) * config.dupe_factor
  # An instance's own text: A, and B when it is A's continuation (a random B is another's).
  kept = sum(i.segment_ids.count(0) - 2 + (0 if i.is_random_next else i.segment_ids.count(1) - 1)
             for i in instances)
  if kept >= KEPT_TOKENS_WARNING_SHARE * total:
    return None
  longer = sum(length > room for length in sentences)
  text = (f"warning: the instances hold {kept} of the {total} tokens of {_named(input_files)} "
          f"({kept / max(total, 1):.0%}, over {config.dupe_factor} pass(es)), the rest "
          f"truncated away: --max_seq_length {config.max_seq_length} leaves {room} tokens per "
          f"sentence pair ([CLS] and two [SEP] take 3) and {longer} of {len(sentences)} lines "
          "are longer than that")
  paragraphs = [length for length in sentences if length > max(room, PARAGRAPH_LINE_TOKENS)]
  if sum(paragraphs) * 2 <= sum(sentences):
    return text + ": give a larger --max_seq_length (Google's is 128)"
  return (text + f", {len(paragraphs)} of them over {PARAGRAPH_LINE_TOKENS} WordPieces (the "
          f"longest {max(paragraphs)}): a paragraph or document per line? The input is one "
          "sentence per line (google-research/bert's format), a blank line between "
          "documents: split the text into sentences (or give a larger --max_seq_length)")


def _named(input_files: Sequence[str]) -> str:
  return ", ".join(list(input_files)[:3]) + (" ..." if len(input_files) > 3 else "")


def shard_names(prefix: str, num_shards: int) -> list:
  """Shard file names: `{prefix}-00000-of-00004.tfrecord`, ...; the summary is beside."""
  return [f"{prefix}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]


def summary_path(output_dir: str, prefix: str) -> str:
  return os.path.join(output_dir, f"{prefix}-summary.json")


def check_output_prefix(output_dir: str, prefix: str, num_shards: int) -> None:
  """Refuses, before any work, an `output_prefix` that is no file name prefix, or whose files
  (the last shard's name is the longest, beside the summary) cannot be named in `output_dir`
  (`tfbert.runtime.paths.output_problems`: too long for its file system, ...).

  Raises:
    ValueError: naming --output_prefix and the problem.
  """
  if not prefix or "/" in prefix or os.sep in prefix or prefix.startswith("."):
    raise ValueError(f"--output_prefix {prefix!r} must be a file name prefix (no '/', not "
                     "starting with '.', which readers skip as hidden): the shards go into "
                     "--output_dir")
  names = [shard_names(prefix, num_shards)[-1], os.path.basename(summary_path("", prefix))]
  paths.check_outputs({"--output_prefix": [os.path.join(output_dir, n) for n in names]},
                      "file")


def write_shards(instances: Sequence[pretraining_instances.TrainingInstance], output_dir: str,
                 prefix: str, config: PretrainingDataConfig,
                 progress: Callable = pretraining_instances.no_progress) -> list:
  """Writes the shards under temporary names, renames them once all are complete.

  Returns:
    list of int, the number of instances in each shard.

  Raises:
    OSError: a shard cannot be written (a full disk, ...), naming its final path; no
      temporary and no shard is left behind.
  """
  finals = [os.path.join(output_dir, n) for n in shard_names(prefix, config.num_shards)]
  temps = [atomic.temporary_sibling(f, "shard") for f in finals]
  counts, renamed, writers = [0] * config.num_shards, [], []
  try:
    shard = 0
    try:
      for shard, temp in enumerate(temps):
        writers.append(tf.io.TFRecordWriter(temp))
      for index, instance in enumerate(instances):
        shard = (index % config.num_shards if config.shard_assignment == "round_robin"
                 else index * config.num_shards // len(instances))
        writers[shard].write(pretraining_instances.instance_to_example(
            instance, config.max_seq_length,
            config.max_predictions_per_seq).SerializeToString())
        counts[shard] += 1
        progress(lambda: f"writing: {index + 1}/{len(instances)} instances")
      for shard, writer in enumerate(writers):
        writer.close()
    except tf.errors.OpError as error:  # TensorFlow's ENOSPC is a ResourceExhaustedError.
      reason = error.message.strip().splitlines()[0].replace(f"{temps[shard]}; ", "")
      raise OSError(f"Cannot write pretraining shard {finals[shard]}: {reason}") from error
    for temp, final in zip(temps, finals):
      files.rename(temp, final)  # Atomic per file; the summary (written last) marks the set.
      renamed.append(final)
  except BaseException:
    _discard(writers, temps + renamed)
    raise
  return counts


def _discard(writers: list, paths: list) -> None:
  """Cleanup after a failure that cannot fail itself (the first error is the one raised)."""
  for writer in writers:
    try:
      writer.close()  # On a full disk close() flushes and fails again.
    except (tf.errors.OpError, OSError):
      pass
  for path in paths:
    atomic.remove_quietly(path)


def remove_stale_temporaries(output_dir: str) -> list:
  """Removes the temporaries of killed runs: tfbert's and the old `.<shard>.<pid>.tmp`.

  Returns:
    The removed paths.
  """
  removed = atomic.remove_stale_temporaries(output_dir)
  for name in sorted(files.listdir(output_dir)):
    match = _OLD_TEMPORARY.match(name)
    pid = int(match.group("pid")) if match else os.getpid()
    # On a URL filesystem another machine's PID means nothing (as in `atomic`).
    if pid != os.getpid() and (files.is_url(output_dir) or not atomic.process_alive(pid)):
      atomic.remove_quietly(os.path.join(output_dir, name))
      removed.append(os.path.join(output_dir, name))
  return removed


def _prepare_output_dir(output_dir: str, prefix: str, num_shards: int,
                        progress: Callable = pretraining_instances.no_progress) -> None:
  """Removes stale temporaries; refuses shards of another count. Creates nothing: a missing
  directory is made once there are shards to write (`_write_data_set`)."""
  if not files.isdir(output_dir):
    return
  removed = remove_stale_temporaries(output_dir)
  if removed:
    progress(lambda: f"removed {len(removed)} temporary file(s) of killed runs from "
             f"{output_dir}: {[os.path.basename(r) for r in removed][:3]}", force=True)
  ours = set(shard_names(prefix, num_shards))
  stale = sorted(n for n in files.listdir(output_dir)
                 if n.startswith(f"{prefix}-") and n.endswith(".tfrecord") and n not in ours)
  if stale:
    raise FileExistsError(f"{output_dir} already holds other shards of {prefix!r} "
                          f"({stale[:3]}...); remove them or pick another output_prefix")


def _summary(input_files, documents, instances, counts, prefix, config, vocab,
             stats) -> dict:
  return {
      "num_instances": len(instances), "num_documents": len(documents),
      "vocab_size": vocab.size, "num_unk_tokens": stats.num_unk,
      "unk_rate": round(stats.unk_rate, 6),
      "invalid_utf8_lines": dict(stats.invalid_utf8_lines),
      "num_sentences": sum(len(d) for d in documents),
      "num_tokens": sum(len(s) for d in documents for s in d),
      "num_masked_lm_predictions": sum(len(i.masked_lm_ids) for i in instances),
      "num_random_next": sum(i.is_random_next for i in instances),
      "shards": [{"file": n, "instances": c}
                 for n, c in zip(shard_names(prefix, config.num_shards), counts)],
      "input_files": list(input_files), "config": dataclasses.asdict(config)}


def _write_data_set(instances, output_dir: str, prefix: str, config: PretrainingDataConfig,
                    progress: Callable, summary: Callable[[list], dict]) -> dict:
  """Writes the shards, then `summary(counts)` as the summary JSON; returns the summary.

  Creates `output_dir` when missing, and removes it again (then empty: `write_shards`
  leaves nothing on failure) when the writing fails.
  """
  created = not files.isdir(output_dir)
  files.makedirs(output_dir)
  try:
    path = summary_path(output_dir, prefix)
    if files.exists(path):
      files.remove(path)  # The old data set is incomplete from here until the new summary.
    values = summary(write_shards(instances, output_dir, prefix, config, progress))
    atomic.write_json(path, values)
  except BaseException:
    if created:
      try:
        if not files.listdir(output_dir):
          files.rmtree(output_dir)
      except OSError:
        pass  # The writing's error is the one to raise.
    raise
  return values


def create_pretraining_data(input_patterns: Sequence[str], output_dir: str,
                            config: PretrainingDataConfig, *, output_prefix: str = "pretraining",
                            log_every_seconds: float = 10.0,
                            log_stream: Optional[TextIO] = None) -> dict:
  """Reads a corpus; writes Google-format pretraining TFRecord shards and a summary JSON.

  Args:
    input_patterns: files or glob patterns of one-sentence-per-line text.
    output_dir: gets `{output_prefix}-NNNNN-of-NNNNN.tfrecord` and
      `{output_prefix}-summary.json` (written last); created if missing, once the corpus
      has given the instances (a failure leaves no directory it created).
    config: the data options.
    output_prefix: file name prefix of the shards and the summary.
    log_every_seconds: period of the progress line (files, documents, instances).
    log_stream: where progress goes (default sys.stderr).

  Returns:
    dict, the summary written (counts, shard files, input files, config, vocab size,
    [UNK] count and rate, lines with invalid UTF-8 per input file).

  Raises:
    FileNotFoundError: a missing vocab or input file (named).
    OSError: an unreadable input file (named).
    ValueError: an empty corpus, or fewer instances than shards; an `output_dir` that is a
      file or cannot be created (`tfbert.runtime.paths.output_problems`), or an
      `output_prefix` whose files cannot be named there (`check_output_prefix`), before any
      work.
    FileExistsError: `output_dir` holds shards of this prefix with another shard count.
  """
  paths.check_outputs({"--output_dir": output_dir}, required=True)  # Before any work.
  check_output_prefix(output_dir, output_prefix, config.num_shards)
  progress = _Progress(sys.stderr if log_stream is None else log_stream, log_every_seconds)
  vocab = vocab_info(config.vocab_file)
  input_files = expand_input_files(input_patterns)
  _prepare_output_dir(output_dir, output_prefix, config.num_shards, progress)
  tokenizer = WordPieceTokenizer(config.vocab_file, config.do_lower_case)
  stats = CorpusStats()
  documents = read_documents(input_files, tokenizer, progress, stats)
  if stats.unk_rate > UNK_WARNING_RATE:
    progress(lambda: f"warning: {stats.unk_rate:.1%} of the corpus' WordPieces are [UNK] "
             f"(over {UNK_WARNING_RATE:.0%}): the vocab {config.vocab_file} does not fit "
             f"the text; check --vocab_file and --do_lower_case (an uncased vocab needs "
             f"--do_lower_case=true, a cased one false)", force=True)
  instances = pretraining_instances.create_training_instances(
      documents, config, vocab, random.Random(config.random_seed), progress)
  for warning in (pairs_warning(input_files, documents, instances, config),
                  kept_tokens_warning(input_files, documents, instances, config)):
    if warning:
      progress(lambda warning=warning: warning, force=True)
  if len(instances) < config.num_shards:
    raise ValueError(f"{len(instances)} instances cannot fill {config.num_shards} shards")
  summary = _write_data_set(instances, output_dir, output_prefix, config, progress,
                            lambda counts: _summary(input_files, documents, instances, counts,
                                                    output_prefix, config, vocab, stats))
  progress(lambda: f"wrote {len(instances)} instances from {len(documents)} documents "
           f"to {config.num_shards} shard(s) in {output_dir} ([UNK] {stats.unk_rate:.2%} "
           f"of WordPieces)", force=True)
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
  return atomic.write_text(output_path, "\n\n".join(documents) + "\n")
