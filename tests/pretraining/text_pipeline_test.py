"""Tests for tfbert.pretraining.text_pipeline: packing, sharding, masks by the example's place
in the data, exact resume, and the errors a user meets first.

MiniLM's uncased vocabulary (the run's), S 16, P 3; text from CPython's pydoc topics.
"""


import re

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tfbert.checkpoints import pretrained
from tfbert.pretraining import text_pipeline
from tfbert.text import tokenization

S, P = 16, 3


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.WordPieceTokenizer(pretrained.minilm_vocab_file(), True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """3 text files of pydoc topics; their glob pattern."""
  return helpers.pydoc_text_files(tmp_path_factory.mktemp("text"), max_documents=9,
                                  num_files=3)


def dataset(patterns, tokenizer, seed=5, **kwargs):
  masking = text_pipeline.masking_for(pretrained.minilm_vocab_file(), P, seed=seed)
  return text_pipeline.text_dataset(patterns, kwargs.pop("batch_size", 4), tokenizer=tokenizer,
                                    masking=masking, seq_length=S, **kwargs)


def examples(batches):
  """[(original tokens, input_ids, masked positions)] of every example of `batches`."""
  found = []
  for batch in batches:
    for row in range(batch["input_ids"].shape[0]):
      ids = batch["input_ids"][row].numpy()
      valid = batch["masked_lm_weights"][row].numpy() > 0
      positions = batch["masked_lm_positions"][row].numpy()[valid]
      original = ids.copy()
      original[positions] = batch["masked_lm_ids"][row].numpy()[valid]
      found.append((tuple(original), tuple(ids), tuple(positions)))
  return found


def expected_sequences(tokenizer, paths, text_mode):
  """The packing rule, written plainly: per file, each document's pieces then [SEP] (runs
  of blank lines one boundary), cut into S - 2; [CLS] chunk [SEP]. Files read in turn."""
  per_file = []
  for path in paths:
    sequences = []
    with open(path, encoding="utf-8") as f:
      lines = f.read().split("\n")
    if lines[-1] == "":
      lines.pop()
    stream, after_separator = [], True
    for line, ids in zip(lines, tokenizer.tokenize(tf.constant(lines)).to_list()):
      pieces = ids + [-1] if text_mode == "lines" and ids else ids
      if text_mode == "blocks" and not line.strip():
        pieces = [-1]
      for piece in pieces:
        if piece == -1 and after_separator:
          continue
        stream.append(tokenizer.sep_id if piece == -1 else piece)
        after_separator = piece == -1
    for start in range(0, len(stream) - (S - 2) + 1, S - 2):
      sequences.append((tokenizer.cls_id, *stream[start:start + S - 2], tokenizer.sep_id))
    per_file.append(sequences)
  turns = max(len(sequences) for sequences in per_file)
  return [s[turn] for turn in range(turns) for s in per_file if turn < len(s)]


@pytest.mark.slow  # ~4 s each: a pipeline with the in-graph tokenizer is traced.
@pytest.mark.parametrize("text_mode", ["blocks", "lines"])
def test_documents_are_packed_into_full_sequences_file_by_file(tokenizer, tmp_path,
                                                               text_mode):
  first = tmp_path / "a.txt"
  first.write_text("The quick brown fox.\nIt jumped.\n\n\n\nA second document, unbelievably "
                   "short.\n \nThird.\n" * 3, encoding="utf-8")
  second = tmp_path / "b.txt"
  second.write_text("\nOne line per document here.\nAnd another one.\nLast.\n" * 4,
                    encoding="utf-8")
  paths = [str(first), str(second)]
  got = [e[0] for e in examples(dataset(paths, tokenizer, batch_size=1, shuffle=False,
                                        repeat=False, text_mode=text_mode))]
  want = expected_sequences(tokenizer, paths, text_mode)
  assert got == want and len(want) >= 6
  vocab = tokenization.load_vocab(pretrained.minilm_vocab_file())
  text = " ".join(vocab[i] for i in want[0])
  if text_mode == "blocks":  # The lines of a document run together; blank lines are one [SEP].
    assert text.startswith("[CLS] the quick brown fox . it jumped . [SEP] a second")
  else:
    assert text.startswith("[CLS] the quick brown fox . [SEP] it jumped . [SEP] a second")


def test_the_sequences_of_each_file_are_counted_as_the_packing_rule_cuts_them(tokenizer,
                                                                             corpus):
  """The count a held-out evaluation is planned by (`count_sequences`): each file's
  sequences by the plain packing rule above."""
  paths = sorted(tf.io.gfile.glob(corpus))
  counts = text_pipeline.count_sequences(paths, tokenizer, S)
  assert counts == {path: len(expected_sequences(tokenizer, [path], "blocks"))
                    for path in paths}
  assert min(counts.values()) >= 5


@pytest.fixture(scope="module")
def one_process(tokenizer, corpus):
  """Examples of the whole corpus read by one process, in order, one epoch."""
  return examples(dataset(corpus, tokenizer, shuffle=False, repeat=False))


@pytest.mark.slow  # ~6 s: three pipelines with the in-graph tokenizer.
def test_workers_read_disjoint_complete_shards_and_draw_one_process_masks(tokenizer, corpus,
                                                                          one_process):
  """Each worker packs its own files, where the sequences sit at other stream positions
  and in other batches than in the one process; the union is the one process's data, each
  sequence with the masks the one process drew for it: masks depend on the seed and the
  example's place in the data (epoch, file, chunk) alone."""
  workers = [examples(dataset(corpus, tokenizer, shuffle=False, repeat=False, num_workers=2,
                              worker_index=w)) for w in range(2)]
  assert not {e[0] for e in workers[0]} & {e[0] for e in workers[1]}
  # drop_remainder (batch 4) may drop up to 3 examples of each reader: the rest is equal,
  # masks included.
  read = set(workers[0]) | set(workers[1])
  assert len(set(one_process) - read) <= 3 * 2 and len(read - set(one_process)) <= 3
  assert len(read) > 100
  with pytest.raises(ValueError, match="worker 3 of 4 reads no file"):
    text_pipeline.check_text_files(corpus, S, num_workers=4)


@pytest.mark.slow  # ~3 s: two pipelines read into a second epoch.
def test_a_restored_iterator_reads_on_with_the_same_batches_and_masks(tokenizer, tmp_path):
  """Shuffle buffer, packing remainder and file positions are in the checkpoint; a new
  epoch brings new masks for the same sequences."""
  for index in range(2):  # ~10 sequences a file: 40 batches of 4 read several epochs.
    (tmp_path / f"part-{index}.txt").write_text(
        f"File {index} opens here.\nIts words make a few sequences.\n\n" * 8, encoding="utf-8")
  small_corpus = str(tmp_path / "part-*.txt")
  make = lambda: dataset(small_corpus, tokenizer, shuffle=True, seed=3,  # noqa: E731
                         shuffle_buffer_size=20, gradient_accumulation_steps=2)
  straight = iter(make())
  head = [next(straight) for _ in range(3)]
  path = tf.train.Checkpoint(iterator=straight).save(str(tmp_path / "position"))
  tail = [next(straight) for _ in range(40)]
  resumed = iter(make())
  tf.train.Checkpoint(iterator=resumed).restore(path)
  for want in tail:
    got = next(resumed)
    for name in want:
      np.testing.assert_array_equal(got[name].numpy(), want[name].numpy(), err_msg=name)
  epoch = {}
  for original, ids, _ in examples(head + tail):
    epoch.setdefault(original, set()).add(ids)
  assert any(len(masks) > 1 for masks in epoch.values())  # Seen twice, masked anew.


def test_bytes_that_are_not_utf8_are_named_by_file_and_line(tmp_path):
  path = tmp_path / "bad.txt"
  path.write_bytes(b"fine\nalso fine\nbad \xff byte\n")
  with pytest.raises(ValueError, match=rf"{path}:3: not UTF-8 text \(byte 0xff at column 5\)"):
    text_pipeline.check_text_files(str(path), S)
  path.write_bytes(b"too short\n")
  with pytest.raises(ValueError, match="worker 0 of 1 .* 2 words, fewer than one sequence"):
    text_pipeline.check_text_files(str(path), S)


def test_a_binary_file_is_refused_as_raw_text(tmp_path):
  """Sweep 20 S1's rule for run_pretraining's --train_text_files: a NUL byte (a TFRecord) is
  named as a file that is not text, not as bytes to save as UTF-8."""
  path = tmp_path / "data.tfrecord"
  path.write_bytes(b"words\n\x1c\x00\x00\x00 text\n")
  with pytest.raises(ValueError, match=re.escape(
      f"{path}:2: a NUL byte: {path} is not a text file")):
    text_pipeline.check_text_files(str(path), S)
