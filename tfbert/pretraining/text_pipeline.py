"""Pretraining input from raw text: tokenized in the pipeline, packed, masked dynamically.

What transformers' `run_mlm.py` does with a text corpus, with BERT's specials and exact
resume. Two ways to read documents (`text_mode`):

  blocks  a document per blank-line-separated block of lines (google-research/bert's
          corpus format; its lines are run together);
  lines   a document per non-blank line.

Each file is tokenized in the graph with `tfbert.text.tokenization.WordPieceTokenizer` (the
ids of Google's `FullTokenizer`, with the run's vocabulary and casing), its documents run
together with a [SEP] after each, and the stream cut into chunks of S - 2 pieces; a
sequence is `[CLS] chunk [SEP]`, all S positions real (`input_mask` 1, `segment_ids` 0),
as `run_mlm.py`'s `group_texts` but per file: a file's last partial chunk is dropped (and a
chunk may begin or end with a document's [SEP]). Masks are drawn as windows are formed
(`tfbert.pretraining.dynamic_masking`) from the example's key (epoch, file, chunk of the
file): its place in the data.

Sharding is `input_pipeline`'s rule: every worker sorts the same expanded file list and
reads `files[worker_index::num_workers]` (disjoint, together complete). Order: without
`shuffle`, the worker's files read chunk by chunk in turn (as the TFRecord pipeline reads
records), so one process with R replicas sees in each step the examples that R workers
reading one file each see, with the same keys, hence the same masks. With `shuffle`, each
epoch's file order is a stateless permutation of (seed, epoch), up to 4 files interleave,
then a `shuffle_buffer_size` buffer seeded with `seed + 1`. The output is the TFRecord
pipeline's feature dict with its window totals (`input_pipeline`), so the loss and its
exact normalization are unchanged. The iterator is checkpointable (file positions, the
packing remainder, the shuffle buffer), so a resumed run reads on exactly.

Before the run, `check_text_files` reads every file once: bytes that are not UTF-8 are
named by file and line (`tfbert.runtime.files.decode_utf8`), and a worker whose files hold
fewer words than one sequence is refused (it would wait forever for a first chunk). Each
file is thus read at least twice, so a pipe (bash's `<(...)`) is refused first, as are a
symbolic link loop and a link to nothing, each named as what it is
(`input_pipeline.entry_problem`).

Shape legend: B micro-batch (per worker), W = gradient_accumulation_steps * B, S
seq_length, P max_predictions, L lines of one tokenizer call, N pieces.
"""

import dataclasses
import functools
from typing import Sequence, Union

import tensorflow as tf

from tfbert.pretraining import dynamic_masking, input_pipeline
from tfbert.runtime import files
from tfbert.text import tokenization

TEXT_MODES = ("blocks", "lines")
_LINES_PER_CALL = 256  # Lines tokenized per in-graph call.
_SEPARATOR = -1  # A document boundary in the piece stream, until it becomes [SEP].


@dataclasses.dataclass(frozen=True)
class TextCheck:
  """What `check_text_files` found: the sorted files, their lines and words."""
  files: list
  lines: list
  words: list

  def summary(self) -> str:
    return (f"{len(self.files)} text file(s), {sum(self.lines)} lines, {sum(self.words)} "
            "whitespace-separated words")


def check_text_files(patterns: Union[str, Sequence[str]], seq_length: int,
                     num_workers: int = 1) -> TextCheck:
  """Reads every text file once: UTF-8 throughout, and enough words for every worker.

  Raises:
    FileNotFoundError: a pattern that matches no file (named).
    ValueError: bytes that are not UTF-8 or a NUL byte, a binary file's
      (`path:line`), fewer files than workers, or a
      worker's files with fewer words than one sequence's S - 2 pieces.
  """
  paths = input_pipeline.expand_files(patterns)
  lines, words = [], []
  for path in paths:
    data = files.read_bytes(path)
    if b"\0" in data:  # No text file holds one (a TFRecord given as a corpus).
      raise ValueError(files.binary_message(
          path, data.count(b"\n", 0, data.index(b"\0")) + 1,
          "a raw-text run reads plain UTF-8 text (documents separated by blank lines, or one "
          "per line: --text_mode); create_pretraining_data's TFRecords go to --input_files"))
    text = files.decode_utf8(data, path)
    lines.append(text.count("\n") + (not text.endswith("\n") and bool(text)))
    words.append(len(text.split()))
  for worker in range(num_workers):
    shard = slice(worker, None, num_workers)
    if sum(words[shard]) < seq_length - 2:
      raise ValueError(
          f"worker {worker} of {num_workers} reads {paths[shard] or 'no file'}: "
          f"{sum(words[shard])} words, fewer than one sequence of {seq_length} tokens. "
          "Give more text (or at least one file per worker)")
  return TextCheck(paths, lines, words)


def masking_for(vocab_file: str, max_predictions: int, **settings) -> dynamic_masking.Masking:
  """The `Masking` of a vocabulary file (its special and "##" ids) and `settings`."""
  vocab = tokenization.load_vocab(vocab_file)
  return dynamic_masking.Masking(
      max_predictions=max_predictions, vocab_size=len(vocab), cls_id=vocab.index("[CLS]"),
      sep_id=vocab.index("[SEP]"), pad_id=vocab.index("[PAD]"), mask_id=vocab.index("[MASK]"),
      subword_ids=tuple(i for i, t in enumerate(vocab) if t.startswith("##")), **settings)


def _pieces(tokenizer, lines: tf.Tensor, text_mode: str) -> tf.Tensor:
  """The piece stream of `lines` (tf.string [L]): int32 [N], `_SEPARATOR` after each
  document ("blocks": at each blank line; "lines": after each line that has pieces)."""
  ids = tokenizer.tokenize(lines)                                          # [L, (T)]
  if text_mode == "lines":
    has_pieces = ids.row_lengths() > 0
    ends = tf.where(has_pieces, _SEPARATOR, 0)[:, None]
    ends = tf.RaggedTensor.from_tensor(ends, lengths=tf.cast(has_pieces, tf.int64))
  else:
    blank = tf.equal(tf.strings.strip(lines), "")
    ends = tf.RaggedTensor.from_tensor(tf.fill([tf.size(lines), 1], _SEPARATOR),
                                       lengths=tf.cast(blank, tf.int64))
  return tf.concat([ids, ends], axis=1).flat_values


def _pack(chunk: int, sep_id: int, state, pieces: tf.Tensor):
  """One step of the per-file packing scan.

  Args:
    state: (remainder int32 [R < chunk], after_separator bool (the stream so far is empty
      or ends with a separator), next chunk index int64).
    pieces: int32 [N], the next lines' piece stream.

  Returns:
    (new state, (chunks int32 [n, chunk], their indices in the file int64 [n])).
  """
  remainder, after_separator, next_index = state
  # A separator right after another (blank lines in a row) or at the file's start is dropped.
  previous = tf.concat([[after_separator], tf.equal(pieces[:-1], _SEPARATOR)], 0)
  pieces = tf.boolean_mask(pieces, ~(tf.equal(pieces, _SEPARATOR) & previous))
  after_separator = tf.cond(tf.size(pieces) > 0,
                            lambda: tf.equal(pieces[-1], _SEPARATOR), lambda: after_separator)
  stream = tf.concat([remainder, tf.where(tf.equal(pieces, _SEPARATOR), sep_id, pieces)], 0)
  count = tf.size(stream) // chunk
  chunks = tf.reshape(stream[:count * chunk], [count, chunk])
  indices = next_index + tf.range(tf.cast(count, tf.int64))
  return ((stream[count * chunk:], after_separator, next_index + tf.cast(count, tf.int64)),
          (chunks, indices))


def _file_chunks(path, file_index, tokenizer, chunk: int, text_mode: str) -> tf.data.Dataset:
  """(chunk int32 [S - 2], key int64 [2] = (file index, chunk index)) of one file."""
  initial = (tf.zeros([0], tf.int32), tf.constant(True), tf.constant(0, tf.int64))
  packed = tf.data.TextLineDataset(path).batch(_LINES_PER_CALL).map(
      lambda lines: _pieces(tokenizer, lines, text_mode)).scan(
          initial, functools.partial(_pack, chunk, tokenizer.sep_id)).unbatch()
  return packed.map(lambda tokens, index: (tokens, tf.stack([file_index, index])))


def count_sequences(paths: Sequence[str], tokenizer: tokenization.WordPieceTokenizer,
                    seq_length: int, text_mode: str = "blocks") -> dict:
  """{path: sequences of S tokens that file yields} (`text_dataset`'s packing), reading the
  files through the pipeline once. The count a held-out evaluation is planned by
  (`tfbert.pretraining.pretraining_eval.eval_steps`)."""
  paths = list(paths)
  chunks = _chunks_in_order(paths, tokenizer, seq_length, text_mode)
  counts = chunks.reduce(tf.zeros([len(paths)], tf.int64), lambda counts, chunk: (
      tf.tensor_scatter_nd_add(counts, [[chunk[1][1]]], tf.ones([1], tf.int64))))  # Key's file.
  return dict(zip(paths, (int(n) for n in counts.numpy())))


def yields_a_sequence(paths: Sequence[str], tokenizer: tokenization.WordPieceTokenizer,
                      seq_length: int, text_mode: str = "blocks") -> bool:
  """Whether `paths` (one worker's files) yield at least one sequence of S tokens through
  the pipeline: read only until the first one forms. Text whose words give no WordPiece
  (zero-width spaces, control characters) yields none, and a run on it would wait forever
  for its first batch."""
  chunks = _chunks_in_order(list(paths), tokenizer, seq_length, text_mode)
  return int(chunks.take(1).reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)) > 0


def _chunks_in_order(paths: list, tokenizer, seq_length: int, text_mode: str
                     ) -> tf.data.Dataset:
  """`_chunks` of `paths` read once in file order, each file keyed by its place in `paths`."""
  return _chunks(paths, list(range(len(paths))), tokenizer, seq_length - 2, text_mode,
                 shuffle=False, seed=0, repeat=False)


def _chunks(paths: list, indices: list, tokenizer, chunk: int, text_mode: str, *,
            shuffle: bool, seed: int, repeat: bool) -> tf.data.Dataset:
  """(chunk [S - 2], key int64 [3] = (epoch, file, chunk)) of the worker's files."""
  paths_t, indices_t = tf.constant(paths), tf.constant(indices, tf.int64)
  cycle = min(len(paths), input_pipeline.MAX_CYCLE_LENGTH if shuffle
              else input_pipeline.MAX_ORDERED_CYCLE_LENGTH)

  def epoch(number):
    order = tf.range(len(paths))
    if shuffle:  # A new file order each epoch, a pure function of (seed, epoch).
      order = tf.argsort(tf.random.stateless_uniform([len(paths)], tf.stack(
          [tf.constant(seed, tf.int64), number])))
    read = tf.data.Dataset.from_tensor_slices(order).interleave(
        lambda i: _file_chunks(paths_t[i], indices_t[i], tokenizer, chunk, text_mode),
        cycle_length=cycle, block_length=1)  # Sequential: always this order.
    return read.map(lambda tokens, key: (tokens, tf.concat([[number], key], 0)))

  epochs = tf.data.Dataset.counter() if repeat else tf.data.Dataset.range(1)
  return epochs.flat_map(epoch)


def _window(masking: dynamic_masking.Masking, cls_id: int, sep_id: int, chunks,
            drawn) -> dict:
  """A window of W chunks [W, S - 2] as masked features with the window totals."""
  count = tf.shape(chunks)[0]
  tokens = tf.concat([tf.fill([count, 1], cls_id), chunks, tf.fill([count, 1], sep_id)], 1)
  features = dynamic_masking.mask_window(masking, tokens, drawn)
  features["input_mask"] = tf.ones_like(tokens)
  features["segment_ids"] = tf.zeros_like(tokens)
  return input_pipeline.with_window_totals(features)


def text_dataset(file_patterns: Union[str, Sequence[str]], batch_size: int, *,
                 tokenizer: tokenization.WordPieceTokenizer, masking: dynamic_masking.Masking,
                 seq_length: int, text_mode: str = "blocks", num_workers: int = 1,
                 worker_index: int = 0, shuffle: bool = True, seed: int = 0,
                 repeat: bool = True, gradient_accumulation_steps: int = 1,
                 shuffle_buffer_size: int = 1000) -> tf.data.Dataset:
  """Micro-batches of this worker's shard of the text files, packed and masked.

  Args:
    file_patterns: text file(s) or glob pattern(s) (`input_pipeline.expand_files`).
    batch_size: B, examples per micro-step on this worker.
    tokenizer: the run's `WordPieceTokenizer` (vocabulary and casing).
    masking: how masks are drawn (`dynamic_masking.Masking`, its seed the run's).
    seq_length: S.
    text_mode: "blocks" or "lines" (module docstring).
    num_workers, worker_index: input sharding (`input_pipeline.shard_files`' rule).
    shuffle: shuffle files and chunks (seeded); False reads them in sorted order.
    seed: the shuffle seed.
    repeat: loop over the shard forever (each epoch its own masks).
    gradient_accumulation_steps: micro-batches per applied step (the window of the totals).
    shuffle_buffer_size: chunks in the shuffle buffer.

  Returns:
    tf.data.Dataset of the dicts of `input_pipeline.pretraining_dataset` without
    `next_sentence_labels` (packed blocks are no sentence pairs: the objective "mlm").
  """
  if text_mode not in TEXT_MODES:
    raise ValueError(f"text_mode must be one of {TEXT_MODES}, got {text_mode!r}")
  if batch_size < 1 or gradient_accumulation_steps < 1 or seq_length < 3:
    raise ValueError(f"batch_size ({batch_size}), gradient_accumulation_steps "
                     f"({gradient_accumulation_steps}) must be >= 1, seq_length ({seq_length}) "
                     ">= 3")
  paths = input_pipeline.shard_files(file_patterns, num_workers, worker_index)
  every = input_pipeline.expand_files(file_patterns)
  chunks = _chunks(paths, [every.index(p) for p in paths], tokenizer, seq_length - 2,
                   text_mode, shuffle=shuffle, seed=seed, repeat=repeat)
  if shuffle:
    chunks = chunks.shuffle(shuffle_buffer_size, seed=seed + 1)
  drawn = chunks.map(lambda tokens, key: (tokens, dynamic_masking.draws(masking, key,
                                                                        seq_length)))
  dataset = drawn.batch(gradient_accumulation_steps * batch_size, drop_remainder=True).map(
      lambda tokens, draws: _window(masking, tokenizer.cls_id, tokenizer.sep_id, tokens,
                                    draws))
  return input_pipeline.micro_batches(dataset, batch_size, deterministic=True)
