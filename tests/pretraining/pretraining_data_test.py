"""Tests for tfbert.pretraining.pretraining_data: google-research/bert's pretraining data, exactly.

The instance structure is checked against tf-models-official's copy of Google's
`create_instances_from_document` (same seed, same draws), the masks against Google's rules
and the 80/10/10 split statistically on CPython's pydoc topics; every token is re-found in
the corpus as the reference `FullTokenizer` tokenizes it.
"""

import collections
import functools
import io
import os
import random
import re
import subprocess
import types

import pytest
import tensorflow as tf

from tests import faults, helpers, tool_process
from tfbert.checkpoints import pretrained
from tfbert.pretraining import pretraining_data, pretraining_instances
from tfbert.text import tokenization

ROOT = helpers.ROOT
SAMPLE_TEXT = "sample_text.txt"
# Google's features: name -> (proto kind, length); S = 61, P = 9 below.
S, P = 61, 9
GOOGLE_FEATURES = {
    "input_ids": ("int64_list", S), "input_mask": ("int64_list", S),
    "segment_ids": ("int64_list", S), "masked_lm_positions": ("int64_list", P),
    "masked_lm_ids": ("int64_list", P), "masked_lm_weights": ("float_list", P),
    "next_sentence_labels": ("int64_list", 1)}
CLS, SEP, MASK = 101, 102, 103  # In the uncased vocab.

Instance = collections.namedtuple(
    "Instance", "features original length positions labels random_next")


@functools.lru_cache(maxsize=None)
def _vocab_tokens():
  return tokenization.load_vocab(pretrained.minilm_vocab_file())


def _config(**overrides):
  values = dict(vocab_file=pretrained.minilm_vocab_file(), max_seq_length=S,
                max_predictions_per_seq=P, dupe_factor=2, random_seed=13)
  return pretraining_data.PretrainingDataConfig(**{**values, **overrides})


def _create(inputs, output_dir, **overrides):
  """Runs the library function quietly; returns (summary, shard paths)."""
  summary = pretraining_data.create_pretraining_data(
      inputs, str(output_dir), _config(**overrides), log_stream=io.StringIO())
  return summary, [os.path.join(output_dir, s["file"]) for s in summary["shards"]]


def _records(path):
  return list(tf.data.TFRecordDataset(path).as_numpy_iterator())


def _decode(record):
  """Instance with the original tokens restored from masked_lm_positions / _ids."""
  example = tf.train.Example.FromString(record)
  features = {name: (f.WhichOneof("kind"), list(getattr(f, f.WhichOneof("kind")).value))
              for name, f in example.features.feature.items()}
  values = {name: v for name, (_, v) in features.items()}
  k = int(sum(values["masked_lm_weights"]))
  length = sum(values["input_mask"])
  original = values["input_ids"][:length]
  for position, label in zip(values["masked_lm_positions"][:k], values["masked_lm_ids"][:k]):
    original[position] = label
  return Instance(features, original, length, values["masked_lm_positions"][:k],
                  values["masked_lm_ids"][:k], values["next_sentence_labels"] == [1])


def _segments(instance):
  """(tokens_a, tokens_b) of the original [CLS] a [SEP] b [SEP]."""
  segment_ids = instance.features["segment_ids"][1][:instance.length]
  first_b = segment_ids.index(1)
  return instance.original[1:first_b - 1], instance.original[first_b:-1]


def _reference_documents(path):
  """Each document's tokens as " id id ... " (reference FullTokenizer, Google's format)."""
  reference = tokenization.reference_tokenizer(pretrained.minilm_vocab_file(), True)
  documents = [[]]
  with open(path, encoding="utf-8") as f:
    for line in f:
      if not line.strip():
        documents.append([])
      documents[-1] += reference.convert_tokens_to_ids(reference.tokenize(line))
  return [" " + " ".join(map(str, d)) + " " for d in documents if d]


def _found_in_order(documents, first, second=None):
  """True if `first` (then `second`, later in the same document) occurs in a document."""
  a = " " + " ".join(map(str, first)) + " "
  for document in documents:
    start = document.find(a)
    while start >= 0:
      if second is None or document.find(
          " " + " ".join(map(str, second)) + " ", start + len(a) - 1) >= 0:
        return True
      start = document.find(a, start + 1)
  return False


def _num_to_predict(length, config):
  return min(config.max_predictions_per_seq, max(1, int(round(length * config.masked_lm_prob))))


def _word_groups(original):
  """Google's whole-word groups: a "##" piece joins the previous non-special piece."""
  tokens, groups = _vocab_tokens(), []
  for i, token_id in enumerate(original):
    if token_id in (CLS, SEP):
      continue
    if groups and tokens[token_id].startswith("##"):
      groups[-1].append(i)
    else:
      groups.append([i])
  return groups


def test_features_have_googles_names_dtypes_and_shapes(shared_data, tmp_path):
  _, paths = _create([os.path.join(shared_data, SAMPLE_TEXT)], tmp_path)
  records = _records(paths[0])
  assert len(records) > 30
  for record in records:
    features = _decode(record).features
    assert {n: (kind, len(v)) for n, (kind, v) in features.items()} == GOOGLE_FEATURES


def test_every_instance_keeps_googles_invariants_and_original_tokens(shared_data, tmp_path):
  path = os.path.join(shared_data, SAMPLE_TEXT)
  config = _config()
  _, paths = _create([path], tmp_path)
  documents = _reference_documents(path)
  for instance in map(_decode, _records(paths[0])):
    values = {name: v for name, (_, v) in instance.features.items()}
    n, k = instance.length, len(instance.positions)
    assert values["input_mask"] == [1] * n + [0] * (S - n)
    tokens_a, tokens_b = _segments(instance)
    assert tokens_a and tokens_b and len(tokens_a) + len(tokens_b) <= S - 3
    assert instance.original == [CLS, *tokens_a, SEP, *tokens_b, SEP]
    assert values["segment_ids"] == [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1) + [
        0] * (S - n)
    assert k == _num_to_predict(n, config)
    assert values["masked_lm_weights"] == [1.0] * k + [0.0] * (P - k)
    assert values["masked_lm_positions"][k:] == values["masked_lm_ids"][k:] == [0] * (P - k)
    assert instance.positions == sorted(set(instance.positions))
    assert all(instance.original[p] not in (CLS, SEP) for p in instance.positions)
    # The restored tokens are the corpus' own (re-tokenized with the reference tokenizer):
    # a and b each occur in a document; a true next sentence follows a in its document.
    if instance.random_next:
      assert _found_in_order(documents, tokens_a) and _found_in_order(documents, tokens_b)
    else:
      assert _found_in_order(documents, tokens_a, tokens_b)


def test_instances_match_model_garden_copy_of_googles_algorithm(shared_data):
  # tf-models-official's create_instances_from_document is google-research/bert's verbatim
  # and consumes the same random draws; its masking picks other positions from the same
  # shuffle (it pops from the end), so everything but the chosen positions must agree.
  # Imported here: the module defines absl flags at import.
  # pylint: disable-next=import-outside-toplevel
  from official.nlp.data import create_pretraining_data as model_garden
  path = os.path.join(shared_data, SAMPLE_TEXT)
  config = _config(dupe_factor=3, short_seq_prob=0.3, random_seed=7)
  tokenizer = tokenization.WordPieceTokenizer(config.vocab_file, True)
  ours = pretraining_instances.create_training_instances(
      pretraining_data.read_documents([path], tokenizer), config,
      pretraining_data.vocab_info(config.vocab_file), random.Random(7))
  reference = tokenization.reference_tokenizer(config.vocab_file, True)
  theirs = model_garden.create_training_instances(
      [path], reference, model_garden.get_processor_text_fn(False, True), S, 3, 0.3, 0.15, P,
      random.Random(7))
  assert len(ours) == len(theirs) > 50
  for mine, google in zip(ours, theirs):
    original = list(mine.input_ids)
    for position, label in zip(mine.masked_lm_positions, mine.masked_lm_ids):
      original[position] = label
    google_tokens = list(google.tokens)
    for position, label in zip(google.masked_lm_positions, google.masked_lm_labels):
      google_tokens[position] = label
    assert original == reference.convert_tokens_to_ids(google_tokens)
    assert mine.segment_ids == google.segment_ids
    assert mine.is_random_next == google.is_random_next
    assert len(mine.masked_lm_ids) == len(google.masked_lm_labels)


def test_whole_word_masking_masks_all_pieces_of_a_word_together(tmp_path):
  corpus = pretraining_data.pydoc_corpus(str(tmp_path / "corpus.txt"), max_documents=12)
  config = _config(do_whole_word_mask=True)
  _, paths = _create([corpus], tmp_path / "out", do_whole_word_mask=True)
  multi_piece_words_masked = 0
  for instance in map(_decode, _records(paths[0])):
    masked = set(instance.positions)
    assert masked and len(masked) <= _num_to_predict(instance.length, config)
    assert not masked & {0, instance.length - 1}
    for group in _word_groups(instance.original):
      assert len(masked & set(group)) in (0, len(group)), (group, sorted(masked))
      multi_piece_words_masked += len(group) > 1 and group[0] in masked
  assert multi_piece_words_masked > 50


@pytest.mark.slow  # ~3.3 s: the whole pydoc corpus masked.
def test_masking_is_80_mask_10_keep_10_random_on_the_pydoc_corpus(tmp_path):
  corpus = pretraining_data.pydoc_corpus(str(tmp_path / "corpus.txt"))
  config = _config(max_seq_length=128, max_predictions_per_seq=20)
  summary, paths = _create([corpus], tmp_path / "out", max_seq_length=128,
                           max_predictions_per_seq=20)
  counts, random_ids = collections.Counter(), set()
  for instance in map(_decode, _records(paths[0])):
    assert len(instance.positions) == _num_to_predict(instance.length, config)
    for position, label in zip(instance.positions, instance.labels):
      shown = instance.features["input_ids"][1][position]
      kind = "mask" if shown == MASK else "keep" if shown == label else "random"
      counts[kind] += 1
      if kind == "random":
        random_ids.add(shown)
  total = sum(counts.values())
  assert total == summary["num_masked_lm_predictions"] > 30000
  # A random replacement equals the original with chance 1/30522: counted as "keep".
  for kind, p in (("mask", 0.8), ("keep", 0.1), ("random", 0.1)):
    assert abs(counts[kind] / total - p) < 5 * (p * (1 - p) / total) ** 0.5, counts
  assert len(random_ids) > 0.8 * counts["random"]  # Spread over the vocab.


def test_same_seed_gives_identical_shards_and_another_seed_differs(shared_data, tmp_path):
  path = os.path.join(shared_data, SAMPLE_TEXT)
  shards = [_create([path], tmp_path / name, random_seed=seed, num_shards=2)[1]
            for name, seed in (("a", 5), ("b", 5), ("c", 6))]
  read = lambda paths: [open(p, "rb").read() for p in paths]  # noqa: E731
  assert read(shards[0]) == read(shards[1])
  assert read(shards[0]) != read(shards[2])


@pytest.mark.parametrize("assignment", pretraining_data.SHARD_ASSIGNMENTS)
def test_shards_hold_every_instance_once_in_the_documented_order(shared_data, tmp_path,
                                                                assignment):
  path = os.path.join(shared_data, SAMPLE_TEXT)
  _, single = _create([path], tmp_path / "one")
  everything = _records(single[0])
  summary, paths = _create([path], tmp_path / "three", num_shards=3,
                           shard_assignment=assignment)
  shards = [_records(p) for p in paths]
  assert [s["instances"] for s in summary["shards"]] == [len(s) for s in shards]
  assert sum(map(len, shards)) == summary["num_instances"] == len(everything)
  if assignment == "round_robin":  # google-research/bert's writer.
    assert shards == [everything[i::3] for i in range(3)]
  else:
    assert [r for shard in shards for r in shard] == everything


def test_errors_name_the_missing_or_bad_input(shared_data, tmp_path):
  sample = os.path.join(shared_data, SAMPLE_TEXT)
  with pytest.raises(FileNotFoundError, match="no_such_vocab.txt"):
    pretraining_data.create_pretraining_data(
        [sample], str(tmp_path), _config(vocab_file=str(tmp_path / "no_such_vocab.txt")))
  with pytest.raises(FileNotFoundError, match="missing.txt"):
    _create([sample, str(tmp_path / "missing.txt")], tmp_path / "out")
  with pytest.raises(FileNotFoundError, match=r"nothing\*.txt"):
    _create([str(tmp_path / "nothing*.txt")], tmp_path / "out")
  with pytest.raises(FileNotFoundError, match="a_directory"):
    os.makedirs(tmp_path / "a_directory")
    _create([str(tmp_path / "a_directory")], tmp_path / "out")
  blank = tmp_path / "blank.txt"
  blank.write_text("\n \n\u200b\n\t\n", encoding="utf-8")  # A zero-width space: no token.
  with pytest.raises(ValueError, match="Empty corpus.*blank.txt"):
    _create([str(blank)], tmp_path / "out")
  with pytest.raises(ValueError, match="cannot fill 1000 shards"):
    _create([sample], tmp_path / "out", num_shards=1000)
  with pytest.raises(ValueError, match="max_seq_length must be >= 5"):
    _config(max_seq_length=4)
  assert not list((tmp_path / "out").glob("*"))  # Nothing was written.


def test_a_failed_run_leaves_no_output_directory_and_a_file_is_refused_first(shared_data,
                                                                            tmp_path):
  """An empty corpus, too few instances for the shards, an output directory that is a file
  or below one: an error, and no directory made."""
  sample = os.path.join(shared_data, SAMPLE_TEXT)
  blank = tmp_path / "blank.txt"
  blank.write_text("\n\n", encoding="utf-8")
  with pytest.raises(ValueError, match="Empty corpus"):
    _create([str(blank)], tmp_path / "out")
  with pytest.raises(ValueError, match="cannot fill 1000 shards"):
    _create([sample], tmp_path / "out" / "deeper", num_shards=1000)
  assert not (tmp_path / "out").exists()
  (tmp_path / "afile").write_text("x")
  for output_dir, message in [
      ("afile", "--output_dir .*/afile is an existing file, not a directory"),
      ("afile/out", "--output_dir .*/afile/out: its parent .*/afile is a file")]:
    # Before any work: even the missing vocabulary is not reached.
    with pytest.raises(ValueError, match=message):
      pretraining_data.create_pretraining_data(
          [sample], str(tmp_path / output_dir), _config(vocab_file=str(tmp_path / "none")))
  assert sorted(os.listdir(tmp_path)) == ["afile", "blank.txt"]


def test_stale_shards_of_another_shard_count_are_refused(shared_data, tmp_path):
  sample = os.path.join(shared_data, SAMPLE_TEXT)
  _create([sample], tmp_path, num_shards=2)
  with pytest.raises(FileExistsError, match="pretraining-00000-of-00002"):
    _create([sample], tmp_path, num_shards=3)
  _create([sample], tmp_path, num_shards=2, random_seed=1)  # Same names: a rerun.


def test_a_failure_mid_way_leaves_no_shard_under_a_final_name(shared_data, tmp_path,
                                                              monkeypatch):
  sample = os.path.join(shared_data, SAMPLE_TEXT)
  real, calls = pretraining_instances.instance_to_example, []

  def failing_after_ten(*args):
    calls.append(1)
    if len(calls) > 10:
      raise RuntimeError("disk full (simulated)")
    return real(*args)

  monkeypatch.setattr(pretraining_instances, "instance_to_example", failing_after_ten)
  with pytest.raises(RuntimeError, match="simulated"):
    _create([sample], tmp_path, num_shards=2)
  assert os.listdir(tmp_path) == []  # No shard, no temporary file, no summary.
  monkeypatch.undo()
  faults.fail_renames_to(monkeypatch, "00001-of-00002.tfrecord",
                         OSError("rename failed (simulated)"))
  with pytest.raises(OSError, match="simulated"):
    _create([sample], tmp_path, num_shards=2)
  assert os.listdir(tmp_path) == []  # The first shard, already renamed, is gone too.


# Writes a small data set on a full disk (`tests.faults.limited_disk`): every write past the
# limit fails, including the flush in the cleanup's close(). argv: corpus, output directory.
_FULL_DISK_SCRIPT = """
import io, sys
from tfbert.checkpoints import pretrained
from tfbert.pretraining import pretraining_data
config = pretraining_data.PretrainingDataConfig(
    pretrained.minilm_vocab_file(), max_seq_length=61, max_predictions_per_seq=9,
    dupe_factor=2, num_shards=2)
try:
  pretraining_data.create_pretraining_data([sys.argv[1]], sys.argv[2], config,
                                           log_stream=io.StringIO())
except Exception as error:  # pylint: disable=broad-except
  print(type(error).__name__ + ":", error)
"""


@pytest.mark.slow
def test_a_full_disk_leaves_no_temporary_and_no_shard(tmp_path):
  corpus = pretraining_data.pydoc_corpus(str(tmp_path / "corpus.txt"), max_documents=12)
  with faults.limited_disk(tmp_path, 48 * 1024) as disk:
    output = os.path.join(disk.path, "out")
    result = disk.run(_FULL_DISK_SCRIPT, corpus, output)
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(r"OSError: Cannot write pretraining shard .*/out/pretraining-0000[01]-"
                     r"of-00002.tfrecord: .*(File too large|No space)", result.stdout), (
                         disk.kind, result.stdout + result.stderr[-2000:])
    assert not os.path.exists(output)  # No temporary, no shard, no summary: the directory
    # the run created is gone too.


def test_temporaries_of_killed_runs_are_removed_by_the_next_run(shared_data, tmp_path):
  dead = subprocess.Popen(["true"])
  dead.wait()
  alive = subprocess.Popen(["sleep", "60"])
  try:
    stale = [f".tfbert-tmp-{dead.pid}-0123456789abcdef0123456789abcdef-shard",
             f".pretraining-00000-of-00001.tfrecord.{dead.pid}.tmp"]  # The old style.
    running = [f".tfbert-tmp-{alive.pid}-0123456789abcdef0123456789abcdef-shard",
               f".pretraining-00000-of-00001.tfrecord.{alive.pid}.tmp"]
    tmp_path.mkdir(exist_ok=True)
    for name in stale + running:
      (tmp_path / name).write_bytes(b"partial shard")
    log = io.StringIO()
    pretraining_data.create_pretraining_data(
        [os.path.join(shared_data, SAMPLE_TEXT)], str(tmp_path), _config(), log_stream=log)
    assert sorted(os.listdir(tmp_path)) == sorted(running + [
        "pretraining-00000-of-00001.tfrecord", "pretraining-summary.json"])
    assert "removed 2 temporary file(s) of killed runs" in log.getvalue()
  finally:
    alive.kill()
    alive.wait()


def test_lines_with_invalid_utf8_are_dropped_as_google_does_and_counted(shared_data,
                                                                       tmp_path):
  sample = open(os.path.join(shared_data, SAMPLE_TEXT), "rb").read()
  lines = sample.split(b"\n")
  for i in (2, 5, 9):
    lines[i] = lines[i][:10] + b"\xff\xfe" + lines[i][10:]
  damaged = tmp_path / "damaged.txt"
  damaged.write_bytes(b"\n".join(lines))
  log = io.StringIO()
  summary = pretraining_data.create_pretraining_data(
      [os.path.join(shared_data, SAMPLE_TEXT), str(damaged)], str(tmp_path / "out"),
      _config(), log_stream=log)
  assert summary["invalid_utf8_lines"] == {str(damaged): 3}
  assert f"warning: {damaged}: 3 line(s) with invalid UTF-8 bytes" in log.getvalue()
  copy = tmp_path / "copy.txt"  # The same file twice would be read once.
  copy.write_bytes(sample)
  clean_log = io.StringIO()
  clean = pretraining_data.create_pretraining_data(
      [os.path.join(shared_data, SAMPLE_TEXT), str(copy)], str(tmp_path / "clean"),
      _config(), log_stream=clean_log)
  assert clean["invalid_utf8_lines"] == {} and "warning" not in clean_log.getvalue()
  # The bytes are dropped, as Google's decode("utf-8", "ignore"): the same data.
  shard = "pretraining-00000-of-00001.tfrecord"
  assert (tmp_path / "out" / shard).read_bytes() == (tmp_path / "clean" / shard).read_bytes()


def test_a_gzip_compressed_corpus_is_refused_not_read_as_damaged_lines(shared_data, tmp_path):
  """A .gz corpus was read as lines of invalid UTF-8, dropped as Google drops them and
  counted: nearly nothing made from it, with a warning that spoke of bytes (sweep 13, P3's
  rule in the pretraining reader): named as compressed, with what to do, before any shard."""
  import gzip  # pylint: disable=import-outside-toplevel
  corpus = tmp_path / "corpus.txt.gz"
  corpus.write_bytes(gzip.compress(open(os.path.join(shared_data, SAMPLE_TEXT), "rb").read()))
  with pytest.raises(ValueError, match=re.escape(
      f"{corpus} is gzip-compressed: decompress it (gunzip {corpus}), then pass "
      f"{str(corpus)[:-3]}")):
    pretraining_data.create_pretraining_data([str(corpus)], str(tmp_path / "out"), _config(),
                                             log_stream=io.StringIO())
  assert not (tmp_path / "out").exists()


def test_a_vocab_that_does_not_fit_the_text_warns_with_its_unk_rate(tmp_path):
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("The Quick Brown Fox Jumps Over The Lazy Dog.\nIt Was Not Amused.\n\n"
                    "Another Document Begins Here.\nAnd Ends Here.\n", encoding="utf-8")
  # The uncased vocab without lower-casing: capitalized words are [UNK].
  log = io.StringIO()
  summary = pretraining_data.create_pretraining_data(
      [str(corpus)], str(tmp_path / "wrong"), _config(do_lower_case=False), log_stream=log)
  assert summary["unk_rate"] > 0.5 and summary["num_unk_tokens"] > 10
  assert re.search(r"warning: \d+\.\d% of the corpus' WordPieces are \[UNK\] \(over 2%\)",
                   log.getvalue())
  log = io.StringIO()
  summary = pretraining_data.create_pretraining_data(
      [str(corpus)], str(tmp_path / "right"), _config(), log_stream=log)
  assert summary["unk_rate"] == summary["num_unk_tokens"] == 0
  assert "warning" not in log.getvalue() and "[UNK] 0.00% of WordPieces" in log.getvalue()


def test_progress_lines_report_documents_and_instances(shared_data, tmp_path):
  log = io.StringIO()
  summary = pretraining_data.create_pretraining_data(
      [os.path.join(shared_data, SAMPLE_TEXT)], str(tmp_path), _config(),
      log_every_seconds=0.0, log_stream=log)
  text = log.getvalue()
  assert "documents so far" in text and "pass 2/2, document 3/3" in text
  assert f"wrote {summary['num_instances']} instances from 3 documents" in text
  assert summary["num_documents"] == 3 and summary["config"]["max_seq_length"] == S


def test_pydoc_corpus_is_one_sentence_per_line_with_blank_lines_between_topics(tmp_path):
  from pydoc_data.topics import topics  # pylint: disable=import-outside-toplevel
  path = pretraining_data.pydoc_corpus(str(tmp_path / "corpus.txt"), max_documents=7)
  documents = open(path, encoding="utf-8").read().rstrip("\n").split("\n\n")
  assert len(documents) == 7
  assert all(line.strip() and "*****" not in line
             for d in documents for line in d.split("\n"))
  assert documents[0].startswith(topics[sorted(topics)[0]].split("\n")[0].strip())
  full = pretraining_data.pydoc_corpus(str(tmp_path / "all.txt"))
  assert open(full, encoding="utf-8").read().count("\n\n") == len(topics) - 1


@pytest.mark.slow
def test_tool_writes_shards_from_the_default_pydoc_corpus(tmp_path):
  """The tool in this process (tests/tool_process.py): its flags, output and status as a
  command line gives them."""
  result = tool_process.run_tool("create_pretraining_data", f"--output_dir={tmp_path}",
                                 "--num_shards=2", "--dupe_factor=1", "--max_seq_length=64")
  assert result.returncode == 0, result.stderr[-2000:]
  assert "create_pretraining_data: wrote" in result.stderr
  assert sorted(os.listdir(tmp_path)) == [
      "pretraining-00000-of-00002.tfrecord", "pretraining-00001-of-00002.tfrecord",
      "pretraining-summary.json", "pydoc_corpus.txt"]
  assert "instances" in result.stdout


def test_a_corpus_of_one_sentence_documents_is_warned_of_naming_the_counts(tmp_path):
  """Rule: documents of one sentence make only "random next" pairs (Google's algorithm); a
  corpus mostly of them (a blank line after every sentence) is named with the counts and
  the layout to use, which passed with the counts in the summary alone."""
  sentences = [f"the cat number {i} sat on the mat and looked at the dog." for i in range(6)]
  single = tmp_path / "single.txt"
  single.write_text("\n\n".join(sentences) + "\n", encoding="utf-8")
  log = io.StringIO()
  summary = pretraining_data.create_pretraining_data(
      [str(single)], str(tmp_path / "out"), _config(dupe_factor=1), log_stream=log)
  count = summary["num_instances"]
  assert summary["num_random_next"] == count and summary["num_documents"] == 6
  assert (f"warning: 6 of 6 documents of {single} have one sentence, so {count} of {count} "
          "instances are next-sentence pairs drawn at random (\"random next\")") in log.getvalue()
  assert "a blank line only between documents" in log.getvalue()
  paired = tmp_path / "paired.txt"
  paired.write_text("\n".join(sentences[:3]) + "\n\n" + "\n".join(sentences[3:]) + "\n",
                    encoding="utf-8")
  log = io.StringIO()
  pretraining_data.create_pretraining_data(
      [str(paired)], str(tmp_path / "out2"), _config(dupe_factor=1), log_stream=log)
  assert "have one sentence" not in log.getvalue()


def test_a_corpus_of_one_document_is_warned_of_naming_the_file_and_the_count():
  """Sweep 18, S2: with one document every "random next" B is drawn from A's own document
  (Google's algorithm), so some random-next labels are wrong; this passed with no word.
  Toy ids: 5 sentences of 12 ids."""
  vocab = pretraining_instances.VocabInfo(size=40, cls_id=2, sep_id=3, mask_id=4,
                                          subword_ids=frozenset())
  config = _config(max_seq_length=32, max_predictions_per_seq=2, dupe_factor=4)

  def warning(documents):
    instances = pretraining_instances.create_training_instances(documents, config, vocab,
                                                                random.Random(3))
    return pretraining_data.pairs_warning(["one.txt"], documents, instances, config), instances

  text, instances = warning([[list(range(10, 22)) for _ in range(5)]])
  random_next = sum(i.is_random_next for i in instances)
  assert random_next
  assert text.startswith(
      f"warning: one.txt holds 1 document (no blank line between documents), so the "
      f"{random_next} of {len(instances)} instances that are next-sentence pairs drawn at "
      "random (\"random next\") take their B from that same document")
  assert text.endswith("Separate the documents with blank lines, or pretrain with --objective=mlm")
  assert warning([[list(range(10, 22)) for _ in range(5)] for _ in range(2)])[0] is None
  # Sweep 29, A82: with no random-next instance it said "the 0 of 3 ... some are ... labelled
  # random": every label is "is next" instead. Three sentences at dupe_factor 1: a window.
  config = _config(max_seq_length=32, max_predictions_per_seq=2, dupe_factor=1)
  documents = [[list(range(10, 16)) for _ in range(3)]]
  for seed in range(20):
    instances = pretraining_instances.create_training_instances(documents, config, vocab,
                                                                random.Random(seed))
    if not any(i.is_random_next for i in instances):
      break
  assert instances and not any(i.is_random_next for i in instances)
  assert pretraining_data.pairs_warning(["one.txt"], documents, instances, config) == (
      f"warning: one.txt holds 1 document (no blank line between documents), and none of its "
      f"{len(instances)} instances is a next-sentence pair drawn at random (\"random next\"): "
      "every next-sentence label is \"is next\", so that objective learns nothing. Separate "
      "the documents with blank lines, or pretrain with --objective=mlm")


def test_a_max_seq_length_most_sentences_fill_alone_is_warned_of_with_the_counts():
  """Sweep 15, S3 (the one-sentence rule above, for another cause): at --max_seq_length 8
  every sentence of sample_text.txt filled a pair alone, so all 31 pairs were random next
  and 9% of the tokens reached the records, with no word. Toy ids: 4 documents of 5
  sentences of 12 ids."""
  vocab = pretraining_instances.VocabInfo(size=40, cls_id=2, sep_id=3, mask_id=4,
                                          subword_ids=frozenset())
  documents = [[list(range(10, 22)) for _ in range(5)] for _ in range(4)]

  def warning(max_seq_length):
    config = _config(max_seq_length=max_seq_length, max_predictions_per_seq=2, dupe_factor=1)
    instances = pretraining_instances.create_training_instances(documents, config, vocab,
                                                                random.Random(3))
    return pretraining_data.pairs_warning(["c.txt"], documents, instances, config), instances

  text, instances = warning(8)
  assert len(instances) == 20 and all(i.is_random_next for i in instances)
  assert text == (
      "warning: --max_seq_length 8 leaves 5 tokens per sentence pair ([CLS] and two [SEP] "
      "take 3) and 20 of 20 sentences of c.txt fill that alone: 20 of 20 instances are "
      "next-sentence pairs drawn at random (\"random next\"): give a larger "
      "--max_seq_length (Google's is 128)")
  assert warning(128)[0] is None


def test_the_kept_tokens_warning_is_given_whatever_else_is_warned_of():
  """Sweep 23, S2: a paragraph (or document) per line kept 1.4-3% of the tokens, and the
  only warning was the single-document (or single-sentence) one, whose --objective=mlm does
  not help: `pairs_warning` returned before the kept-tokens test. Now a warning of its own,
  which says to split lines far longer than the window into sentences. Toy ids."""
  vocab = pretraining_instances.VocabInfo(size=400, cls_id=2, sep_id=3, mask_id=4,
                                          subword_ids=frozenset())

  def warnings(documents, max_seq_length):
    config = _config(max_seq_length=max_seq_length, max_predictions_per_seq=2, dupe_factor=1)
    instances = pretraining_instances.create_training_instances(documents, config, vocab,
                                                                random.Random(3))
    return [f(["p.txt"], documents, instances, config)
            for f in (pretraining_data.pairs_warning, pretraining_data.kept_tokens_warning)]

  pairs, kept = warnings([[list(range(10, 310))]], 32)  # One line of 300 ids.
  assert pairs.startswith("warning: p.txt holds 1 document")
  assert kept == (
      "warning: the instances hold 15 of the 300 tokens of p.txt (5%, over 1 pass(es)), the "
      "rest truncated away: --max_seq_length 32 leaves 29 tokens per sentence pair ([CLS] "
      "and two [SEP] take 3) and 1 of 1 lines are longer than that, 1 of them over 100 "
      "WordPieces (the longest 300): a paragraph or document per line? The input is one "
      "sentence per line (google-research/bert's format), a blank line between documents: "
      "split the text into sentences (or give a larger --max_seq_length)")
  # Sentences merely longer than a small window: a larger --max_seq_length.
  pairs, kept = warnings([[list(range(10, 22)) for _ in range(5)] for _ in range(4)], 8)
  assert pairs and kept.endswith(
      "and 20 of 20 lines are longer than that: give a larger --max_seq_length (Google's is 128)")
  assert warnings([[list(range(10, 22)) for _ in range(5)] for _ in range(4)], 128)[1] is None


# A tokenizer never asked for tokens (the file is refused before): its [UNK] id alone.
_NO_TOKENS = types.SimpleNamespace(unk_id=100)


def test_a_file_that_is_not_text_is_refused_as_a_corpus(tmp_path):
  """Sweep 20 S1: a TFRecord given as --input_file became 634 instances of binary fragments,
  with only a "lines with invalid UTF-8 dropped" warning. A NUL byte, or invalid UTF-8 in
  most lines, is no text corpus: named, with the format --input_file takes."""
  record = tmp_path / "pretraining-00000-of-00001.tfrecord"
  record.write_bytes(b"a sentence\n\x1c\x00\x00\x00\x00\x00\x00\x00\xa3\x8b\nmore\n")
  with pytest.raises(ValueError, match=re.escape(
      f"{record}:2: a NUL byte: {record} is not a text file (a binary file such as a TFRecord, "
      f"or UTF-16 text); {pretraining_data.CORPUS_FORMAT}")):
    pretraining_data.read_documents([str(record)], _NO_TOKENS)
  noise = tmp_path / "noise.bin"
  noise.write_bytes(b"text\n\xff\xfe a\n\x8b b\n\xa3\xa4\n")
  with pytest.raises(ValueError, match=re.escape(
      f"{noise}: 3 of its 4 lines are not UTF-8: it is not a text corpus")):
    pretraining_data.read_documents([str(noise)], _NO_TOKENS)
