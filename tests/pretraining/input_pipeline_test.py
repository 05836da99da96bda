"""Tests for tfbert.pretraining.input_pipeline: disjoint complete worker shards, exact window
totals, seeded order and resumable iterators.

Synthetic records (odd sizes: S 11, P 3, 7 files of 5..11 records) carry a unique example
id in `input_ids[1]` and 1..P predictions, so every example and every weight sum can be
traced; one test reads real shards made by tfbert.pretraining.pretraining_data.
"""

import os
import re

import numpy as np
import pytest
import tensorflow as tf

from tfbert.checkpoints import pretrained
from tfbert.pretraining import data_checks, input_pipeline, pretraining_data, pretraining_instances

S, P = 11, 3
RECORDS_PER_FILE = (5, 6, 7, 8, 9, 10, 11)  # 56 examples in 7 files.
FIRST_ID = 1000


def _instance(example_id):
  """A valid instance whose id is input_ids[1] and with 1..P predictions."""
  k = 1 + example_id % P
  input_ids = [101, example_id, 7, 102, 8, 9, 102][:7]
  return pretraining_instances.TrainingInstance(
      input_ids=input_ids, segment_ids=[0, 0, 0, 0, 1, 1, 1],
      masked_lm_positions=[1, 2, 4][:k], masked_lm_ids=[example_id, 7, 8][:k],
      is_random_next=bool(example_id % 2))


@pytest.fixture
def data_files(tmp_path):
  """7 TFRecord files (written in a shuffled name order); returns their glob pattern."""
  next_id = FIRST_ID
  for index in (3, 0, 6, 1, 5, 2, 4):
    with tf.io.TFRecordWriter(str(tmp_path / f"part-{index}.tfrecord")) as writer:
      for _ in range(RECORDS_PER_FILE[index]):
        writer.write(pretraining_instances.instance_to_example(
            _instance(next_id), S, P).SerializeToString())
        next_id += 1
  return str(tmp_path / "part-*.tfrecord")


def _dataset(pattern, batch_size=1, **kwargs):
  kwargs.setdefault("repeat", False)
  return input_pipeline.pretraining_dataset(pattern, batch_size, seq_length=S,
                                            max_predictions=P, **kwargs)


def _ids(dataset):
  return [int(i) for batch in dataset for i in batch["input_ids"][:, 1].numpy()]


def _ids_in_file(path):
  spec = input_pipeline.feature_spec(S, P)
  return [tf.io.parse_single_example(r, spec)["input_ids"].numpy()
          for r in tf.data.TFRecordDataset(path)]


def _batches(iterator, count):
  return [{k: v.numpy() for k, v in next(iterator).items()} for _ in range(count)]


def _assert_same_batches(a, b):
  assert len(a) == len(b)
  for x, y in zip(a, b):
    assert x.keys() == y.keys()
    for key in x:
      np.testing.assert_array_equal(x[key], y[key], err_msg=key)


@pytest.mark.parametrize("num_workers", [1, 2, 3])
def test_worker_shards_are_disjoint_complete_and_order_independent(data_files, num_workers):
  everything = sorted(tf.io.gfile.glob(data_files))
  shards = [input_pipeline.shard_files(data_files, num_workers, w) for w in range(num_workers)]
  assert sorted(f for shard in shards for f in shard) == everything
  assert [len(s) for s in shards] == [len(everything[w::num_workers])
                                      for w in range(num_workers)]
  # The same split whatever order or form the file list comes in.
  assert shards == [input_pipeline.shard_files(list(reversed(everything)), num_workers, w)
                    for w in range(num_workers)]


def test_shard_files_refuses_a_worker_without_files_and_bad_arguments(data_files, tmp_path):
  with pytest.raises(ValueError, match=r"worker\(s\) \[7\] would read nothing"):
    input_pipeline.shard_files(data_files, 8, 0)
  with pytest.raises(ValueError, match="worker_index 2 is not in"):
    input_pipeline.shard_files(data_files, 2, 2)
  with pytest.raises(FileNotFoundError, match="nothing-"):
    input_pipeline.shard_files([data_files, str(tmp_path / "nothing-*")], 1, 0)


def test_a_directory_glob_skips_temporaries_hidden_files_and_the_summary(data_files):
  directory = os.path.dirname(data_files)
  shards = sorted(tf.io.gfile.glob(data_files))
  for name in (".tfbert-tmp-123-0123456789abcdef0123456789abcdef-shard",  # tfbert.runtime.atomic
               ".part-7.tfrecord.123.tmp",  # create_pretraining_data's old temporaries
               "pretraining-summary.json", ".DS_Store"):
    with open(os.path.join(directory, name), "wb") as f:
      f.write(b"not a record")
  everything = os.path.join(directory, "*")
  assert len(tf.io.gfile.glob(everything)) == len(shards) + 4  # gfile matches dotfiles.
  assert input_pipeline.shard_files([everything, data_files], 1, 0) == shards
  assert len(_ids(_dataset(everything))) == sum(RECORDS_PER_FILE)  # No parse error.
  assert input_pipeline.expand_files(everything) == shards
  # A pattern that names hidden files reads them; temporaries never.
  assert input_pipeline.expand_files(os.path.join(directory, ".DS*")) == [
      os.path.join(directory, ".DS_Store")]
  with pytest.raises(FileNotFoundError, match=r"\.tfbert-tmp-\*.*1 temporary"):
    input_pipeline.expand_files(os.path.join(directory, ".tfbert-tmp-*"))


def test_a_comma_in_a_file_list_flag_path_names_the_flag_the_piece_and_the_split(tmp_path):
  """--train_text_files='tx,c/a.txt' said only "No pretraining data file matches 'tx'"
  (sweep 12 P2)."""
  folder = tmp_path / "tx,c"
  folder.mkdir()
  (folder / "a.txt").write_text("text\n", encoding="utf-8")
  given = str(folder / "a.txt")
  first, second = given.split(",")
  assert input_pipeline.split_list_problems({"--train_text_files": [first, second]}) == [
      f"--train_text_files: {first!r}, {second!r} (from splitting {given!r} at commas) match no "
      "file; the flag is comma-separated: match a comma in a name with '?'"]
  assert input_pipeline.split_list_problems({"--input_file": [given.replace(",", "?"), "x"]}) == [
      f"--input_file: 'x' (from splitting {given.replace(',', '?') + ',x'!r} at commas) matches "
      "no file; the flag is comma-separated: match a comma in a name with '?'"]
  assert input_pipeline.split_list_problems({  # What matches, one piece, nothing: not listed.
      "--input_file": [given.replace(",", "?"), given.replace(",", "?")],
      "--eval_text_files": [first], "--input_files": None}) == []


def _read_in_graph(dataset):
  """Pulls every batch inside one tf.function, as the training loop does."""
  iterator = iter(dataset)

  @tf.function
  def pull(count):
    for _ in tf.range(count):
      next(iterator)

  pull(tf.constant(sum(RECORDS_PER_FILE)))


@pytest.mark.parametrize("shuffle,read", [(True, _ids), (False, _ids),
                                          (True, _read_in_graph)],
                         ids=["shuffled", "ordered", "in_graph"])
def test_a_data_error_while_reading_names_the_file_and_byte(data_files, shuffle, read):
  path = sorted(tf.io.gfile.glob(data_files))[2]
  with open(path, "rb") as f:
    data = bytearray(f.read())
  first_length = int.from_bytes(data[:8], "little")
  second = 16 + first_length  # Record 1 starts here; flip a byte of its data.
  data[second + 12 + 5] ^= 0x10
  with open(path, "wb") as f:
    f.write(bytes(data))
  with pytest.raises(ValueError, match=(
      rf"^{re.escape(path)}: bad TFRecord at byte {second} \(record 1\): the data's CRC .*"
      r"\(the reader: corrupted record at")):
    with data_checks.naming_data_errors(data_files):
      read(_dataset(data_files, shuffle=shuffle, seed=4))


@pytest.mark.parametrize("shuffle", [True, False])
def test_two_workers_read_disjoint_examples_that_make_up_all_data(data_files, shuffle):
  worker_ids = [_ids(_dataset(data_files, num_workers=2, worker_index=w, shuffle=shuffle,
                              seed=3)) for w in range(2)]
  assert not set(worker_ids[0]) & set(worker_ids[1])
  assert sorted(worker_ids[0] + worker_ids[1]) == list(
      range(FIRST_ID, FIRST_ID + sum(RECORDS_PER_FILE)))


def test_features_are_int32_and_float32_with_googles_shapes(data_files):
  dataset = _dataset(data_files, batch_size=5, gradient_accumulation_steps=2, repeat=True)
  # Already sharded per worker: a tf.distribute strategy must not shard it again.
  assert (dataset.options().experimental_distribute.auto_shard_policy
          == tf.data.experimental.AutoShardPolicy.OFF)
  batch = next(iter(dataset))
  shapes = {k: (v.dtype, tuple(v.shape)) for k, v in batch.items()}
  assert shapes == {
      "input_ids": (tf.int32, (5, S)), "input_mask": (tf.int32, (5, S)),
      "segment_ids": (tf.int32, (5, S)), "masked_lm_positions": (tf.int32, (5, P)),
      "masked_lm_ids": (tf.int32, (5, P)), "masked_lm_weights": (tf.float32, (5, P)),
      "next_sentence_labels": (tf.int32, (5,)), "window_mlm_weight": (tf.float32, (5,)),
      "window_examples": (tf.float32, (5,))}
  ids = batch["input_ids"][:, 1].numpy()
  np.testing.assert_array_equal(batch["next_sentence_labels"], ids % 2)
  np.testing.assert_array_equal(batch["masked_lm_weights"].numpy().sum(1), 1 + ids % P)


@pytest.mark.parametrize("shuffle", [True, False])
def test_window_totals_equal_sums_over_the_accumulation_window(data_files, shuffle):
  batch_size, steps = 3, 4
  iterator = iter(_dataset(data_files, batch_size=batch_size, gradient_accumulation_steps=steps,
                           shuffle=shuffle, seed=11, repeat=True))
  batches = _batches(iterator, 5 * steps)  # Crosses an epoch (56 examples).
  for j in range(5):
    window = batches[j * steps:(j + 1) * steps]
    total = sum(b["masked_lm_weights"].sum() for b in window)
    assert total > steps * batch_size  # Weights vary: the sum is not a count.
    for micro in window:
      np.testing.assert_array_equal(micro["window_mlm_weight"], [total] * batch_size)
      np.testing.assert_array_equal(micro["window_examples"], [steps * batch_size] * batch_size)


def test_order_is_seeded_and_reproducible(data_files):
  def order(**kwargs):
    return _ids(_dataset(data_files, **kwargs))

  assert order(seed=5, deterministic=True) == order(seed=5, deterministic=True)
  assert order(seed=5, deterministic=True) != order(seed=6, deterministic=True)
  # Unshuffled: the sorted files read record by record in turn (f0r0, f1r0, ..., f0r1, ...),
  # a file leaving the rotation when it ends (they were written in another order).
  files = [[int(r[1]) for r in _ids_in_file(f)] for f in sorted(tf.io.gfile.glob(data_files))]
  def round_robin(per_file):
    out, depth = [], max(len(f) for f in per_file)
    for i in range(depth):
      out += [f[i] for f in per_file if i < len(f)]
    return out
  file_order = round_robin(files)
  assert order(shuffle=False) == file_order != sorted(file_order)
  assert order(shuffle=False, num_workers=2, worker_index=1) == round_robin(files[1::2])
  assert sorted(order(seed=5)) == sorted(file_order)  # Same examples, any read order.


@pytest.mark.parametrize("kwargs", [dict(shuffle=True, seed=7, deterministic=True),
                                    dict(shuffle=False)], ids=["seeded_shuffle", "ordered"])
def test_restored_iterator_continues_with_exactly_the_next_batch(data_files, tmp_path, kwargs):
  def make():
    return iter(_dataset(data_files, batch_size=4, gradient_accumulation_steps=3, repeat=True,
                         **kwargs))

  iterator = make()
  _batches(iterator, 9)
  path = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "ckpt"))
  expected = _batches(iterator, 20)  # Crosses an epoch boundary (56 examples / 4).
  restored = make()
  _batches(restored, 2)  # A new iterator at some other position...
  tf.train.Checkpoint(iterator=restored).restore(path)
  _assert_same_batches(_batches(restored, 20), expected)  # ...resumes where the save was.


def test_restored_unordered_iterator_neither_loses_nor_repeats_examples(data_files, tmp_path):
  def make():
    return iter(_dataset(data_files, seed=2))  # deterministic=False, one epoch.

  iterator = make()
  seen = [int(next(iterator)["input_ids"][0, 1]) for _ in range(20)]
  path = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "ckpt"))
  restored = make()
  tf.train.Checkpoint(iterator=restored).restore(path)
  rest = [int(b["input_ids"][0, 1]) for b in restored]
  assert sorted(seen + rest) == list(range(FIRST_ID, FIRST_ID + sum(RECORDS_PER_FILE)))


def test_reads_shards_written_by_pretraining_data(shared_data, tmp_path):
  config = pretraining_data.PretrainingDataConfig(
      pretrained.minilm_vocab_file(), max_seq_length=S + 20, max_predictions_per_seq=P + 2,
      dupe_factor=3, num_shards=2)
  summary = pretraining_data.create_pretraining_data(
      [os.path.join(shared_data, "sample_text.txt")], str(tmp_path), config,
      log_stream=None, log_every_seconds=1e9)
  dataset = input_pipeline.pretraining_dataset(
      str(tmp_path / "pretraining-*.tfrecord"), 1, seq_length=S + 20,
      max_predictions=P + 2, num_workers=2, worker_index=1, repeat=False)
  batches = list(dataset)
  assert len(batches) == summary["shards"][1]["instances"]
  assert all(int(b["input_ids"][0, 0]) == 101 for b in batches)  # [CLS]


def test_mlm_only_data_without_next_sentence_labels_is_read_and_named_for_nsp(tmp_path):
  """The objective "mlm" reads records without `next_sentence_labels` (RoBERTa-style data);
  "mlm_nsp" names the file that lacks them, in one line, before any step."""
  path = tmp_path / "mlm-only.tfrecord"
  with tf.io.TFRecordWriter(str(path)) as writer:
    for example_id in range(FIRST_ID, FIRST_ID + 6):
      example = pretraining_instances.instance_to_example(_instance(example_id), S, P)
      del example.features.feature["next_sentence_labels"]
      writer.write(example.SerializeToString())
  with pytest.raises(data_checks.DataFileError) as error:
    data_checks.check_pretraining_files(str(path), S, P, 30522)
  assert str(error.value) == (f"{path}: record 0 has no feature 'next_sentence_labels', which "
                              "the objective mlm_nsp trains on: pass --objective=mlm to "
                              "pretrain the masked LM alone")
  assert data_checks.check_pretraining_files(str(path), S, P, 30522,
                                             next_sentence_labels=False).records == [6]
  batches = list(_dataset(str(path), batch_size=3, next_sentence_labels=False, shuffle=False))
  assert [sorted(b) for b in batches] == [sorted(
      ["input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
       "masked_lm_weights", "window_mlm_weight", "window_examples"])] * 2
  assert _ids(batches) == list(range(FIRST_ID, FIRST_ID + 6))


def _entries_that_cannot_serve(directory) -> None:
  """A symbolic link loop, a link to nothing, a named pipe and one readable file."""
  os.symlink("loop_b.txt", os.path.join(directory, "loop_a.txt"))
  os.symlink("loop_a.txt", os.path.join(directory, "loop_b.txt"))
  os.symlink("nowhere.txt", os.path.join(directory, "dangling.txt"))
  os.mkfifo(os.path.join(directory, "fifo.txt"))
  with open(os.path.join(directory, "good.txt"), "w") as f:
    f.write("text\n")


@pytest.mark.parametrize("name, problem", [
    # The glob drops the first two: they were "No pretraining data file matches" (sweep 8,
    # RP02) though `ls` lists them.
    ("loop_a.txt", "is a symbolic link loop (it leads back to itself): point it at a file"),
    ("dangling.txt", "is a symbolic link to nowhere.txt, which does not exist"),
    # Read before the run, then by it: a pipe failed as TensorFlow's "Illegal seek" (PS04).
    ("fifo.txt", "is a named pipe: a run reads each input more than once (its checks and "
     "records before any work, then the run itself), which a stream cannot serve; write it "
     "to a regular file first"),
])
def test_a_data_file_that_cannot_serve_is_named_for_what_it_is(tmp_path, name, problem):
  _entries_that_cannot_serve(tmp_path)
  path = str(tmp_path / name)
  with pytest.raises(ValueError) as e:
    input_pipeline.expand_files(path)
  assert str(e.value) == f"pretraining data file {path} {problem}"
  assert input_pipeline.input_problems({"--train_text_files": [str(tmp_path / "good.txt"),
                                                               path]}) == [
      f"--train_text_files {path} {problem}"]
  # Matched by a wildcard too, never skipped silently (a shard would be missing).
  with pytest.raises(ValueError, match="pretraining data file "):
    input_pipeline.expand_files(str(tmp_path / "*.txt"))
  assert f"--input_files {path} {problem}" in input_pipeline.input_problems(
      {"--input_files": str(tmp_path / "*.txt")})


def test_a_data_file_without_read_permission_is_named(tmp_path, monkeypatch):
  path = str(tmp_path / "data.txt")
  with open(path, "w") as f:
    f.write("text\n")
  assert input_pipeline.input_problems({"--input_files": [path]}) == []
  monkeypatch.setattr(os, "access", lambda *_: False)  # (Root reads a mode 000 file.)
  with pytest.raises(ValueError, match=re.escape(f"{path} cannot be read (permission denied)")):
    input_pipeline.expand_files(path)
