"""Tests for tfbert.pretraining.data_checks: every mismatch or damage is named before the first
step.

One small data set (3 pydoc topics, S 37, P 5, 2 shards) is made once with
tfbert.pretraining.pretraining_data; each test copies it and breaks the copy one way. Messages must
name the file and the feature, record or byte, and for a mismatch the flag to change.
"""

import io
import json
import os
import re
import shutil

import pytest
import tensorflow as tf

from tfbert.checkpoints import pretrained
from tfbert.pretraining import data_checks, pretraining_data

S, P = 37, 5
VOCAB_SIZE = 30522  # The uncased vocab the data is made with.
SHARD = "pretraining-00000-of-00002.tfrecord"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
  """The directory of a complete data set (2 shards and the summary JSON)."""
  root = tmp_path_factory.mktemp("made")
  corpus = pretraining_data.pydoc_corpus(str(root / "corpus.txt"), max_documents=3)
  config = pretraining_data.PretrainingDataConfig(
      pretrained.minilm_vocab_file(), max_seq_length=S, max_predictions_per_seq=P,
      dupe_factor=1, num_shards=2)
  pretraining_data.create_pretraining_data([corpus], str(root / "data"), config,
                                           log_stream=io.StringIO())
  return root / "data"


@pytest.fixture
def data(made, tmp_path):
  """A fresh copy of the data set; returns its directory."""
  return shutil.copytree(made, tmp_path / "data")


def _check(directory, seq_length=S, predictions=P, vocab_size=VOCAB_SIZE, **kwargs):
  return data_checks.check_pretraining_files(str(directory / "*"), seq_length, predictions,
                                             vocab_size, **kwargs)


def _record_starts(path):
  """Byte offset of each record (TFRecord framing: 12-byte header, data, 4-byte CRC)."""
  starts, offset = [], 0
  for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
    starts.append(offset)
    offset += 16 + len(record)
  return starts


def _flip(path, offset):
  data = bytearray(path.read_bytes())
  data[offset] ^= 0x10
  path.write_bytes(bytes(data))


def test_matching_data_passes_and_counts_every_record(data):
  check = _check(data)
  with open(data / "pretraining-summary.json", encoding="utf-8") as f:
    summary = json.load(f)
  assert [os.path.basename(f) for f in check.files] == [s["file"] for s in summary["shards"]]
  assert check.records == [len(_record_starts(f)) for f in check.files] == [
      s["instances"] for s in summary["shards"]]
  assert min(check.records) > 5 and "checked 2 data file(s)" in check.summary()


@pytest.mark.parametrize("with_summary", [True, False], ids=["summary", "first_record"])
@pytest.mark.parametrize("flag,feature,value", [
    ("max_seq_length", "input_ids", 64), ("max_seq_length", "input_ids", 12),
    ("max_predictions_per_seq", "masked_lm_ids", 20)])
def test_length_mismatch_names_file_feature_length_and_flag(data, with_summary, flag, feature,
                                                            value):
  if not with_summary:
    os.remove(data / "pretraining-summary.json")
  found = S if flag == "max_seq_length" else P
  settings = {"seq_length": value} if flag == "max_seq_length" else {"predictions": value}
  feature_pattern = feature if with_summary else r"\w+"  # The first record names its first.
  with pytest.raises(ValueError, match=(
      rf"^{re.escape(str(data / SHARD))}: {feature_pattern} has {found} values per record.* "
      rf"but --{flag}={value}: pass --{flag}={found}")):
    _check(data, **settings)


@pytest.mark.parametrize("with_summary", [True, False], ids=["summary", "first_record"])
def test_files_of_two_lengths_are_named_as_such_with_a_file_of_each(data, with_summary):
  """A glob over sets of S 24 and S 37 named the S 24 file and advised --max_seq_length=24,
  which then failed on the S 37 files (sweep 34, A34)."""
  corpus = pretraining_data.pydoc_corpus(str(data.parent / "corpus.txt"), max_documents=2)
  pretraining_data.create_pretraining_data(
      [corpus], str(data), pretraining_data.PretrainingDataConfig(
          pretrained.minilm_vocab_file(), max_seq_length=24, max_predictions_per_seq=P,
          dupe_factor=1), output_prefix="other", log_stream=io.StringIO())
  if not with_summary:
    for name in ("pretraining-summary.json", "other-summary.json"):
      os.remove(data / name)
  with pytest.raises(ValueError, match=re.escape(
      f"the data files hold records of 2 lengths: input_ids has 24 values per record in "
      f"{data / 'other-00000-of-00001.tfrecord'}, 37 in {data / SHARD}; a run reads one "
      "(--max_seq_length=37): give only the files of one length, with that --max_seq_length")):
    _check(data, seq_length=S)
  check = data_checks.check_pretraining_files(str(data / "pretraining-*"), S, P, VOCAB_SIZE)
  assert len(check.files) == 2  # One length: no complaint.


@pytest.mark.parametrize("with_summary", [True, False], ids=["summary", "first_record"])
def test_ids_beyond_the_models_vocab_size_are_named(data, with_summary):
  if not with_summary:
    os.remove(data / "pretraining-summary.json")
    message = rf"{re.escape(SHARD)}: record 0 has token id \d+ in input_ids, outside .* 2000"
  else:
    message = rf"{re.escape(SHARD)}: made with a vocab of {VOCAB_SIZE} tokens.* 2000"
  with pytest.raises(ValueError, match=message):
    _check(data, vocab_size=2000)


def _rewrite_record(path, index, change):
  """`path` with its record `index` parsed, passed to `change` (a tf.train.Example) and
  written back; the other records as they were."""
  records = list(tf.data.TFRecordDataset(str(path)).as_numpy_iterator())
  example = tf.train.Example.FromString(records[index])
  change(example)
  records[index] = example.SerializeToString()
  with tf.io.TFRecordWriter(str(path)) as writer:
    for record in records:
      writer.write(record)


@pytest.mark.parametrize("label", [2, -1])
def test_a_next_sentence_label_other_than_0_and_1_is_named_with_its_record(data, label):
  """Seen in a sweep: a label of 2 in record 3 passed the check and stopped the run at step
  5 with TensorFlow's kernel message, naming no file."""
  def set_label(example):
    example.features.feature["next_sentence_labels"].int64_list.value[0] = label
  _rewrite_record(data / SHARD, 3, set_label)
  with pytest.raises(ValueError, match=(
      rf"{re.escape(SHARD)}: record 3 has next_sentence_labels {label}, not 0 .* or 1")):
    _check(data)
  _check(data, next_sentence_labels=False)  # The masked LM alone does not read them.


def test_truncated_file_is_named_with_the_byte_of_its_broken_record(data):
  path = data / SHARD
  starts = _record_starts(path)
  path.write_bytes(path.read_bytes()[:starts[3] + 20])  # Inside record 3's data.
  with pytest.raises(ValueError, match=(
      rf"^{re.escape(str(path))}: bad TFRecord at byte {starts[3]} \(record 3\): .*truncated")):
    _check(data)
  path.write_bytes(path.read_bytes()[:starts[3] + 5])  # Inside record 3's header.
  with pytest.raises(ValueError, match=rf"byte {starts[3]} \(record 3\): the file ends 5 bytes"):
    _check(data)


def test_file_cut_at_a_record_boundary_is_named_by_the_summary_count(data):
  path = data / SHARD
  starts = _record_starts(path)
  path.write_bytes(path.read_bytes()[:starts[-2]])
  with pytest.raises(ValueError, match=(
      rf"{re.escape(SHARD)}: holds {len(starts) - 2} records but .*pretraining-summary.json "
      rf"lists {len(starts)}")):
    _check(data)


def test_flipped_header_byte_is_named_by_the_header_scan(data):
  path = data / SHARD
  starts = _record_starts(path)
  _flip(path, starts[4] + 1)  # Record 4's length.
  with pytest.raises(ValueError, match=(
      rf"{re.escape(SHARD)}: bad TFRecord at byte {starts[4]} \(record 4\): the length's CRC")):
    _check(data)


def test_flipped_data_byte_is_named_when_the_data_is_verified(data):
  path = data / SHARD
  starts = _record_starts(path)
  _flip(path, starts[5] + 40)  # Inside record 5's data: the headers still chain.
  assert _check(data).records[0] == len(starts)
  with pytest.raises(ValueError, match=(
      rf"{re.escape(SHARD)}: bad TFRecord at byte {starts[5]} \(record 5\): the data's CRC")):
    _check(data, verify_data=True)


def test_empty_and_foreign_files_are_named(data):
  (data / "empty.tfrecord").write_bytes(b"")
  with pytest.raises(ValueError, match=r"empty.tfrecord: holds no record"):
    _check(data)
  os.remove(data / "empty.tfrecord")
  (data / "notes.txt").write_text("not a TFRecord, but a glob dir/* matches it\n")
  with pytest.raises(ValueError, match=r"notes.txt: plain UTF-8 text \('not a TFRecord, "):
    _check(data)
  os.remove(data / "notes.txt")
  (data / "notes.bin").write_bytes(b"\x01\x02 binary, but no TFRecord" * 4)
  with pytest.raises(ValueError, match=r"notes.bin: bad TFRecord at byte 0 \(record 0\)"):
    _check(data)


@pytest.mark.parametrize("text", ["The first sentence.\nThe second one, caf\u00e9.\n",
                                  "short", "\u00e9" * 2100])  # A character cut at 4 KB.
def test_a_text_file_given_as_tfrecords_is_named_as_text_with_the_callers_hint(tmp_path,
                                                                              text):
  """Sweep 24 P2: a plain-text corpus to --input_files was "bad TFRecord ... not a TFRecord
  file", without a word of --train_text_files (the reverse mistake is answered)."""
  (tmp_path / "corpus.txt").write_text(text, encoding="utf-8")
  with pytest.raises(data_checks.DataFileError) as e:
    data_checks.check_pretraining_files(str(tmp_path / "corpus.txt"), S, P, VOCAB_SIZE,
                                        text_hint="pass it with --train_text_files")
  assert str(e.value) == (f"{tmp_path / 'corpus.txt'}: plain UTF-8 text "
                          f"({text.split(chr(10))[0][:60]!r}), not a TFRecord file; pass it "
                          "with --train_text_files")


def test_pattern_without_data_files_is_named(tmp_path):
  (tmp_path / ".tfbert-tmp-1-abc-shard").write_bytes(b"x")
  with pytest.raises(FileNotFoundError, match=r"No pretraining data file matches .*\*.*1 "):
    data_checks.check_pretraining_files(str(tmp_path / "*"), S, P, VOCAB_SIZE)


def test_header_crc_is_tensorflows_masked_crc32c(data):
  raw = (data / SHARD).read_bytes()
  assert data_checks.masked_crc32c(raw[:8]) == int.from_bytes(raw[8:12], "little")
  length = int.from_bytes(raw[:8], "little")
  assert data_checks.masked_crc32c(raw[12:12 + length]) == int.from_bytes(
      raw[12 + length:16 + length], "little")


def test_unexplained_data_loss_is_reraised_unchanged(data):
  error = tf.errors.DataLossError(None, None, "corrupted record at 7")  # e.g. a checkpoint.
  with pytest.raises(tf.errors.DataLossError, match="corrupted record at 7"):
    with data_checks.naming_data_errors(str(data / "*.tfrecord")):
      raise error
