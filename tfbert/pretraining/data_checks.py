"""Pretraining data checked before a run starts, and data errors that name their file.

A mismatch between the data and the run's settings otherwise fails deep inside TensorFlow
with a message that names nothing (`parse_example`'s "Key: input_ids ... Values size: 128
but output shape: [64]", an embedding gather's index error), and a damaged TFRecord fails
only when the reader reaches it, possibly hours in, as a `DataLossError` without the
file's name. So:

* `check_pretraining_files` runs before the first step: for every file it walks the
  TFRecord framing (`scan_tfrecord`), compares the `{prefix}-summary.json` that
  `tfbert.pretraining.pretraining_data` writes beside its shards (when there is one) and the first
  records with the run's `max_seq_length`, `max_predictions_per_seq` and `vocab_size`,
  and raises `DataFileError` naming the file, the record or byte, and the flag to change.
* `naming_data_errors` wraps the code that consumes the tf.data iterator. TensorFlow has
  no in-graph try/except and `ignore_errors` would skip data silently, so a
  `DataLossError` is caught where it reaches Python; the record offset in its message
  ("corrupted record at N") is then looked up in the files (their framing walked up to
  N, that record's data CRC checked) and the error is raised again as a `DataFileError`
  naming the file and the byte. An error no data file explains is re-raised unchanged.

TFRecord framing (tensorflow/core/lib/io/record_writer.cc), per record: uint64 length,
uint32 masked CRC-32C of those 8 bytes, the data, uint32 masked CRC-32C of the data; all
little-endian. The header walk reads 12 bytes per record and seeks past the rest (the
length CRCs are checked in vectorized batches); the data CRCs are checked by TensorFlow's
own reader (`verify_data=True`), about 5x slower (speeds in `scan_tfrecord`).
"""

import codecs
import contextlib
import os
import re
import struct
import time
from typing import Iterator, NamedTuple, Optional, Sequence, Union

import numpy as np
import tensorflow as tf
from google.protobuf import message

from tfbert.pretraining import input_pipeline
from tfbert.runtime import files, json_values

_HEADER = struct.Struct("<QI")  # length, masked CRC-32C of the length
_FOOTER = struct.Struct("<I")  # masked CRC-32C of the data
# The flag that sets each feature's length (next_sentence_labels always has 1 value).
_LENGTH_FLAG = {"input_ids": "max_seq_length", "input_mask": "max_seq_length",
                "segment_ids": "max_seq_length",
                "masked_lm_positions": "max_predictions_per_seq",
                "masked_lm_ids": "max_predictions_per_seq",
                "masked_lm_weights": "max_predictions_per_seq"}
_ID_FEATURES = ("input_ids", "masked_lm_ids")
_SHARD_NAME = re.compile(r"^(?P<prefix>.+)-\d{5}-of-\d{5}\.tfrecord$")
_BAD_LENGTH = "the length's CRC does not match (a damaged file, or not a TFRecord file)"
_HEADER_BATCH = 1 << 16  # Headers whose CRCs are checked at once.


class DataFileError(ValueError):
  """A data file that cannot be used as it is; the one-line message names the file."""


class DataCheck(NamedTuple):
  """What `check_pretraining_files` found: the files, their record counts, bytes, time."""
  files: list
  records: list
  num_bytes: int
  seconds: float

  def summary(self) -> str:
    return (f"checked {len(self.files)} data file(s): {sum(self.records)} records, "
            f"{self.num_bytes / 1e6:.1f} MB in {self.seconds:.2f} s")


def _crc32c_table() -> tuple:
  table = []
  for byte in range(256):
    crc = byte
    for _ in range(8):
      crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)  # Castagnoli, reflected.
    table.append(crc)
  return tuple(table)


_CRC32C_TABLE = _crc32c_table()
_CRC32C_NUMPY = np.array(_CRC32C_TABLE, np.uint32)


def masked_crc32c(data: bytes) -> int:
  """TFRecord's masked CRC-32C of `data` (pure Python: for headers and single records)."""
  crc = 0xFFFFFFFF
  for byte in data:
    crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
  crc ^= 0xFFFFFFFF
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _open(path: str, buffering: int = 1 << 20):
  if files.is_url(path):  # gs://, hdfs://, ram://, ...: TensorFlow's file system layer.
    return files.open_file(path, "rb")
  return open(path, "rb", buffering=buffering)  # pylint: disable=consider-using-with


def _size(path: str) -> int:
  return files.size(path)


def _framing_error(path: str, index: int, offset: int, what: str) -> DataFileError:
  return DataFileError(f"{path}: bad TFRecord at byte {offset} (record {index}): {what}")


def _walk(path: str, f, size: int, stop_at: Optional[int] = None) -> Iterator[tuple]:
  """Yields (index, start, data length, 12-byte header) of each record; CRCs unchecked.

  Raises `DataFileError` where the framing breaks: a short header, or a length that runs
  past the end of the file (reported as a damaged length when its CRC fails). Stops after
  the record that contains byte `stop_at` when it is given.
  """
  index, offset = 0, 0
  while offset < size and (stop_at is None or offset <= stop_at):
    header = f.read(_HEADER.size)
    if len(header) < _HEADER.size:
      raise _framing_error(path, index, offset, f"the file ends {size - offset} bytes into "
                           f"a {_HEADER.size}-byte record header (truncated)")
    length, crc = _HEADER.unpack(header)
    end = offset + _HEADER.size + length + _FOOTER.size
    if end > size:
      _check_header(path, index, offset, header)
      raise _framing_error(path, index, offset, f"a {length}-byte record runs past the "
                           f"end of the file ({size} bytes): truncated")
    yield index, offset, length, header
    f.seek(end)
    index, offset = index + 1, end


def _check_header(path: str, index: int, start: int, header: bytes) -> None:
  if masked_crc32c(header[:8]) != _HEADER.unpack(header)[1]:
    raise _framing_error(path, index, start, _BAD_LENGTH)


def _text_head(path: str) -> Optional[str]:
  """The first line of `path` when its first bytes (up to 4 KB) read as UTF-8 text (no NUL:
  a TFRecord's 8-byte length always holds one), else None."""
  with _open(path) as f:
    head = f.read(4096)
  if not head or b"\0" in head:
    return None
  try:  # A character cut at the end of the 4 KB is no error.
    text = codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
  except UnicodeDecodeError:
    return None
  text = text.lstrip("\ufeff")
  if any(not (c.isprintable() or c in "\t\n\r") for c in text):
    return None
  return text.strip().split("\n", 1)[0].strip()[:60]


def _first_bad_header(headers: bytearray) -> Optional[int]:
  """Index of the first 12-byte header whose length CRC fails (vectorized), or None."""
  rows = np.frombuffer(bytes(headers), np.uint8).reshape(-1, _HEADER.size)
  crc = np.full(len(rows), 0xFFFFFFFF, np.uint32)
  for column in range(8):
    crc = _CRC32C_NUMPY[(crc ^ rows[:, column]) & 0xFF] ^ (crc >> 8)
  crc ^= np.uint32(0xFFFFFFFF)
  masked = ((crc >> 15) | (crc << 17)) + np.uint32(0xA282EAD8)  # Wraps modulo 2**32.
  stored = np.ascontiguousarray(rows[:, 8:]).view("<u4")[:, 0]
  bad = np.flatnonzero(masked != stored)
  return int(bad[0]) if bad.size else None


def _scan_headers(path: str, f, size: int) -> int:
  """Walks every header, checking the length CRCs in vectorized batches; returns the count."""
  count, starts, headers, broken = 0, [], bytearray(), None

  def check():
    bad = _first_bad_header(headers) if headers else None
    if bad is not None:
      raise _framing_error(path, count - len(starts) + bad, starts[bad], _BAD_LENGTH)
    starts.clear()
    headers.clear()

  try:
    for _, start, _, header in _walk(path, f, size):
      count += 1
      starts.append(start)
      headers += header
      if len(starts) == _HEADER_BATCH:
        check()
  except DataFileError as error:
    broken = error  # A damaged length earlier in the batch is the first error.
  check()
  if broken is not None:
    raise broken
  return count


def _check_data_crc(path: str, f, index: int, start: int, length: int) -> bytes:
  """The record's data, its CRC checked."""
  f.seek(start + _HEADER.size)
  data = f.read(length)
  (crc,) = _FOOTER.unpack(f.read(_FOOTER.size))
  if masked_crc32c(data) != crc:
    raise _framing_error(path, index, start, "the data's CRC does not match (a damaged "
                         "record)")
  return data


def _reader_message(error: tf.errors.OpError) -> str:
  """The reader's line of an op error ("corrupted record at N"), without TensorFlow's
  function and op decorations (in graph mode it follows "Graph execution error:")."""
  lines = [line for line in error.message.splitlines() if line.strip()] or [""]
  line = next((line for line in lines if "record at" in line), lines[0])
  line = re.sub(r"\{\{function_node [^}]*\}\}\s*|^\s*\(\d+\) [A-Z_]+:\s*", "", line)
  return line.split(" [Op:")[0].split("\t [[")[0].strip()


def _reader_offset(error: tf.errors.OpError) -> Optional[int]:
  """N of the reader's "corrupted record at N" / "truncated record at N"."""
  match = re.search(r"record at (\d+)", error.message)
  return int(match.group(1)) if match else None


def _verify_with_tensorflow(path: str) -> None:
  """Reads every record with TensorFlow's reader, which checks the data CRCs."""
  try:
    for _ in tf.data.TFRecordDataset(path, buffer_size=8 << 20).batch(4096):
      pass
  except tf.errors.DataLossError as error:
    offset = _reader_offset(error)
    found = None if offset is None else _bad_record_at(path, offset)
    raise found or DataFileError(f"{path}: {_reader_message(error)}") from None


def scan_tfrecord(path: str, verify_data: bool = False) -> int:
  """Walks a TFRecord file's framing; returns its number of records.

  Measured on this machine (2 shared cores, page cache warm, a 41 MB file of S 128 / P 20
  records, 825 bytes each): the header walk runs at 500-800 MB/s (about 1 us a record);
  with `verify_data` TensorFlow's full read follows at 120-210 MB/s, 105-180 MB/s in
  all. Records are smaller than a page, so on a cold cache both read the whole file
  from disk and run at most at the disk's speed.

  Args:
    path: a TFRecord file.
    verify_data: also check every record's data CRC (reads the whole file).

  Returns:
    int, the number of records.

  Raises:
    DataFileError: naming the file, the record and the byte offset of the first bad
      record (a truncated file, a damaged header or, with `verify_data`, damaged data).
    OSError: the file cannot be read.
  """
  size = _size(path)
  with _open(path) as f:
    count = _scan_headers(path, f, size)
  if verify_data:
    _verify_with_tensorflow(path)
  return count


def read_records(path: str, count: int) -> list:
  """The first `count` records' data (fewer if the file has fewer), CRCs checked."""
  records = []
  with _open(path, buffering=1 << 16) as f:
    for index, start, length, header in _walk(path, f, _size(path)):
      if index >= count:
        break
      _check_header(path, index, start, header)
      records.append(_check_data_crc(path, f, index, start, length))
  return records


def _bad_record_at(path: str, offset: int) -> Optional[DataFileError]:
  """The first bad record of `path` up to the one at `offset` (the reader names the start
  of a record or of its data), its data CRC checked; None if all are sound."""
  size = _size(path)
  if size <= offset:
    return None
  try:
    with _open(path) as f:
      for index, start, length, header in _walk(path, f, size, offset):
        _check_header(path, index, start, header)
        if offset in (start, start + _HEADER.size):
          _check_data_crc(path, f, index, start, length)
  except DataFileError as error:
    return error
  return None


def locate_data_loss(error: tf.errors.DataLossError,
                     file_patterns: Union[str, Sequence[str]]) -> Optional[DataFileError]:
  """The `DataFileError` that names the file behind a reader's `DataLossError`, or None.

  Args:
    error: raised while iterating a dataset of `file_patterns` ("corrupted record at N",
      "truncated record at N").
    file_patterns: the data files or globs the dataset reads.

  Returns:
    DataFileError naming the file, record and byte, with the reader's message; None when
    no file is damaged there (then the error came from elsewhere, e.g. a checkpoint).
  """
  offset = _reader_offset(error)
  for path in input_pipeline.expand_files(file_patterns):
    if offset is not None:
      found = _bad_record_at(path, offset)
    else:
      try:
        scan_tfrecord(path, verify_data=True)
        found = None
      except DataFileError as bad:
        found = bad
    if found is not None:
      return DataFileError(f"{found} (the reader: {_reader_message(error)})")
  return None


@contextlib.contextmanager
def naming_data_errors(file_patterns: Union[str, Sequence[str]]) -> Iterator[None]:
  """Re-raises a `DataLossError` of the block as a `DataFileError` naming the data file.

  Wrap the code that pulls batches from a `tfbert.pretraining.input_pipeline` dataset (eager
  iteration or the `tf.function` that calls `next(iterator)`):

    with data_checks.naming_data_errors(input_files):
      micro_steps(iterator, count)

  A `DataLossError` that no file of `file_patterns` explains is re-raised unchanged.
  """
  try:
    yield
  except tf.errors.DataLossError as error:
    located = locate_data_loss(error, file_patterns)
    if located is None:
      raise
    raise located from error


def _summary_of(path: str, cache: dict) -> tuple:
  """(summary path, parsed summary) of the data set `path` belongs to, or (None, None)."""
  match = _SHARD_NAME.match(os.path.basename(path))
  if not match:
    return None, None
  summary_path = os.path.join(os.path.dirname(path), f"{match.group('prefix')}-summary.json")
  if summary_path not in cache:
    cache[summary_path] = None
    if files.isfile(summary_path):
      try:
        cache[summary_path] = json_values.read(summary_path)
      except ValueError as error:  # Bad bytes or JSON, a key given twice.
        raise DataFileError(f"{error} (a summary create_pretraining_data writes beside its "
                            "shards)") from None
      if not isinstance(cache[summary_path], dict):
        raise DataFileError(f"{summary_path}: not a summary (a JSON object) of "
                            f"create_pretraining_data")
  return (summary_path, cache[summary_path]) if cache[summary_path] else (None, None)


def data_summaries(files: Sequence[str]) -> dict:
  """{summary path: summary} of the `create_pretraining_data` sets `files` belong to.

  Files without a summary beside them (e.g. made by google-research/bert's own script)
  contribute nothing.
  """
  cache = {}
  for path in files:
    _summary_of(path, cache)
  return {path: summary for path, summary in cache.items() if summary}


class _LengthError(DataFileError):
  """A file whose records are of another length than the run's `flag` (`_length_error`)."""

  def __init__(self, text: str, flag: str):
    super().__init__(text)
    self.flag = flag


def _length_error(path: str, name: str, found: int, flag: str, value: int,
                  source: str = "") -> DataFileError:
  return _LengthError(
      f"{path}: {name} has {found} values per record{source} but --{flag}={value}: pass "
      f"--{flag}={found}, or remake the data with create_pretraining_data --{flag}={value}",
      flag)


# The feature whose length each length flag sets.
_FLAG_FEATURE = {"max_seq_length": "input_ids", "max_predictions_per_seq": "masked_lm_ids"}


def _file_length(path: str, flag: str, summaries: dict) -> Optional[int]:
  """The length `flag` of `path`'s records: its summary's, else its first record's; None
  when neither can be read (the file's own check names why)."""
  try:
    _, summary = _summary_of(path, summaries)
    length = (summary or {}).get("config", {}).get(flag)
    if length is None:
      features = tf.train.Example.FromString(read_records(path, 1)[0]).features.feature
      length = len(features[_FLAG_FEATURE[flag]].int64_list.value)
  except (DataFileError, message.DecodeError, IndexError, KeyError, OSError):
    return None
  return length if isinstance(length, int) else None


def _mixed_lengths_error(paths: Sequence[str], error: _LengthError, summaries: dict,
                         value: int) -> DataFileError:
  """`error` (a file of another length than the run's), or when the files hold records of
  more than one length, that, naming a file of each: the advice to pass the first file's
  length then failed on the next (sweep 34, A34)."""
  lengths = {}  # {length: its first file}
  for path in paths:
    length = _file_length(path, error.flag, summaries)
    if length is not None:
      lengths.setdefault(length, path)
  if len(lengths) < 2:
    return error
  flag, name = error.flag, _FLAG_FEATURE[error.flag]
  (first, path), *others = sorted(lengths.items())
  each = [f"{name} has {first} values per record in {path}",
          *[f"{length} in {path}" for length, path in others]]
  return DataFileError(
      f"the data files hold records of {len(lengths)} lengths: {', '.join(each)}; a run reads "
      f"one (--{flag}={value}): give only the files of one length, with that --{flag}")


def _check_summary(path: str, summary_path: str, summary: dict, settings: dict,
                   vocab_size: int) -> Optional[int]:
  """Compares the summary's config with the run; returns its count of `path`'s records."""
  config = summary.get("config", {})
  source = f" ({os.path.basename(summary_path)})"
  for flag, value in settings.items():
    if flag in config and config[flag] != value:
      name = "input_ids" if flag == "max_seq_length" else "masked_lm_ids"
      raise _length_error(path, name, config[flag], flag, value, source)
  made_with = summary.get("vocab_size")
  if made_with is not None and made_with > vocab_size:
    raise DataFileError(
        f"{path}: made with a vocab of {made_with} tokens (ids up to {made_with - 1}, "
        f"{os.path.basename(summary_path)}) but the model's vocab_size is {vocab_size} "
        f"(bert_config.json)")
  listed = {s.get("file"): s.get("instances") for s in summary.get("shards", [])}
  return listed.get(os.path.basename(path))


def _check_record(path: str, index: int, data: bytes, settings: dict,
                  vocab_size: int, next_sentence_labels: bool = True) -> None:
  """One record's features against the run's settings (shapes, kinds, id ranges)."""
  try:
    example = tf.train.Example.FromString(data)
  except message.DecodeError:
    raise DataFileError(f"{path}: record {index} is not a tf.train.Example") from None
  spec = input_pipeline.feature_spec(settings["max_seq_length"],
                                     settings["max_predictions_per_seq"], next_sentence_labels)
  features = example.features.feature
  for name, wanted in spec.items():
    if name == "next_sentence_labels" and name not in features:
      raise DataFileError(f"{path}: record {index} has no feature {name!r}, which the "
                          "objective mlm_nsp trains on: pass --objective=mlm to pretrain the "
                          "masked LM alone")
    if name not in features:
      raise DataFileError(f"{path}: record {index} has no feature {name!r} (not "
                          f"google-research/bert pretraining data?)")
    kind = "float_list" if wanted.dtype == tf.float32 else "int64_list"
    if features[name].WhichOneof("kind") != kind:
      raise DataFileError(f"{path}: record {index}: {name} is a "
                          f"{features[name].WhichOneof('kind')}, not a {kind}")
    found = len(getattr(features[name], kind).value)
    if found != wanted.shape[0]:
      flag = _LENGTH_FLAG.get(name)
      if flag is None:
        raise DataFileError(f"{path}: record {index}: {name} has {found} values, not 1")
      raise _length_error(path, name, found, flag, settings[flag])
  for name in _ID_FEATURES:
    values = features[name].int64_list.value
    if values and not 0 <= min(values) <= max(values) < vocab_size:
      bad = max(values) if max(values) >= vocab_size else min(values)
      raise DataFileError(
          f"{path}: record {index} has token id {bad} in {name}, outside the model's "
          f"vocab_size {vocab_size} (bert_config.json): the data was made with another vocab")
  labels = features["next_sentence_labels"].int64_list.value if next_sentence_labels else ()
  if any(label not in (0, 1) for label in labels):
    raise DataFileError(f"{path}: record {index} has next_sentence_labels {labels[0]}, not 0 "
                        "(B follows A) or 1 (B is random): the objective mlm_nsp trains on "
                        "these two classes only")
  positions = features["masked_lm_positions"].int64_list.value
  if positions and not 0 <= min(positions) <= max(positions) < settings["max_seq_length"]:
    raise DataFileError(f"{path}: record {index}: masked_lm_positions outside "
                        f"[0, {settings['max_seq_length']})")


def check_pretraining_files(file_patterns: Union[str, Sequence[str]], max_seq_length: int,
                            max_predictions_per_seq: int, vocab_size: int, *,
                            records_per_file: int = 4, verify_data: bool = False,
                            next_sentence_labels: bool = True,
                            text_hint: str = "make TFRecords of it with "
                                             "create_pretraining_data.py") -> DataCheck:
  """Checks pretraining TFRecords against a run's settings before any step runs.

  Per file (expanded as `tfbert.pretraining.input_pipeline` expands them, temporaries and summaries
  skipped): the summary JSON beside it, when there is one (its config's
  `max_seq_length`, `max_predictions_per_seq`, vocab size and this file's record count);
  the TFRecord framing (`scan_tfrecord`); the first `records_per_file` records' feature
  names, kinds and lengths and their ids (< `vocab_size`).

  Args:
    file_patterns: file(s) or glob pattern(s), as the run's --input_files.
    max_seq_length, max_predictions_per_seq: the run's S and P.
    vocab_size: the model's vocab size (bert_config.json).
    records_per_file: records parsed per file (the framing is walked for all of them).
    verify_data: also check every record's data CRC (a full read; see `scan_tfrecord`).
    next_sentence_labels: the records must hold `next_sentence_labels` (the objective
      "mlm_nsp"); False ("mlm"): it is not looked at.
    text_hint: what to do with a file that is plain text, not TFRecords (the caller's
      raw-text flags), ending that message.

  Returns:
    DataCheck (files, records per file, bytes, seconds); `.summary()` is a log line.

  Raises:
    DataFileError (a ValueError): naming the file, the feature, record or byte, and for
      a mismatch the flag to change, e.g. "data/pretraining-00000-of-00004.tfrecord:
      input_ids has 128 values per record but --max_seq_length=64: ...".
    FileNotFoundError: a pattern that matches no data file.
  """
  started = time.monotonic()
  settings = {"max_seq_length": max_seq_length,
              "max_predictions_per_seq": max_predictions_per_seq}
  paths = input_pipeline.expand_files(file_patterns)
  summaries, counts, num_bytes = {}, [], 0
  try:  # A file of another length: said of all files when they hold several lengths.
    for path in paths:
      summary_path, summary = _summary_of(path, summaries)
      listed = summary and _check_summary(path, summary_path, summary, settings, vocab_size)
      try:
        count = scan_tfrecord(path, verify_data)
      except DataFileError:
        first_line = _text_head(path)
        if first_line is None:
          raise
        raise DataFileError(f"{path}: plain UTF-8 text ({first_line!r}), not a TFRecord "
                            f"file; {text_hint}") from None
      if count == 0:
        raise DataFileError(f"{path}: holds no record (an empty file)")
      if listed is not None and listed != count:
        raise DataFileError(f"{path}: holds {count} records but {summary_path} lists "
                            f"{listed}: the file was truncated or replaced")
      for index, data in enumerate(read_records(path, records_per_file)):
        _check_record(path, index, data, settings, vocab_size, next_sentence_labels)
      counts.append(count)
      num_bytes += _size(path)
  except _LengthError as error:
    raise _mixed_lengths_error(paths, error, summaries, settings[error.flag]) from None
  return DataCheck(paths, counts, num_bytes, time.monotonic() - started)
