"""tfbert.runtime.files: one set of path functions for local paths and `tf.io.gfile` URLs."""

import gzip
import json
import os
import pathlib
import types

import pytest

from tfbert.runtime import files


@pytest.fixture(params=["local", "ram"])
def root(request, tmp_path):
  """The same tests on a local directory and on a `ram://` one."""
  if request.param == "local":
    return str(tmp_path)
  return request.getfixturevalue("ram_root")


def test_text_bytes_sizes_and_listing_are_the_same_on_both(root):
  files.makedirs(f"{root}/sub/deeper")
  with files.open_file(f"{root}/sub/a.txt", "w") as f:
    f.write("héllo\n")  # 7 bytes in UTF-8.
  with files.open_file(f"{root}/sub/b.bin", "wb") as f:
    f.write(b"\x00\x01")
  assert files.read_text(f"{root}/sub/a.txt") == "héllo\n"
  assert files.read_bytes(f"{root}/sub/b.bin") == b"\x00\x01"
  assert files.size(f"{root}/sub/a.txt") == 7
  assert sorted(files.listdir(f"{root}/sub")) == ["a.txt", "b.bin", "deeper"]
  assert files.glob(f"{root}/sub/*.txt") == [f"{root}/sub/a.txt"]
  assert files.isfile(f"{root}/sub/a.txt") and not files.isfile(f"{root}/sub/deeper")
  assert files.isdir(f"{root}/sub/deeper") and not files.isdir(f"{root}/sub/a.txt")


def test_text_drops_a_byte_order_mark_reads_any_line_end_and_names_bad_bytes(root):
  with files.open_file(f"{root}/bom.tsv", "wb") as f:
    f.write(b"\xef\xbb\xbfa\tb\r\nx\ty\rz\n")
  assert files.read_text(f"{root}/bom.tsv") == "a\tb\nx\ty\nz\n"
  with files.open_file(f"{root}/latin1.tsv", "wb") as f:
    f.write(b"a\tb\ncaf\xe9\tok\n")
  with pytest.raises(ValueError, match=r"latin1.tsv:2: not UTF-8 text \(byte 0xe9 at column "
                                       r"4\); save the file as UTF-8"):
    files.read_text(f"{root}/latin1.tsv")
  # Windows' "Unicode": it said "line 1: not UTF-8 text (byte 0xff at column 1)".
  with files.open_file(f"{root}/utf16.tsv", "wb") as f:
    f.write("a\tb\n".encode("utf-16"))
  with pytest.raises(ValueError, match=r"utf16.tsv: UTF-16 text \(it starts with a UTF-16 "
                                       r"byte-order mark"):
    files.read_text(f"{root}/utf16.tsv")
  # gzip: it said "not UTF-8 text (byte 0x8b at column 2); save the file as UTF-8".
  with files.open_file(f"{root}/train.tsv.gz", "wb") as f:
    f.write(gzip.compress(b"a\tb\n"))
  with pytest.raises(ValueError, match=r"train.tsv.gz is gzip-compressed: decompress it \(gunzip "
                                       r".*train.tsv.gz\), then pass .*train.tsv$"):
    files.read_text(f"{root}/train.tsv.gz")
  assert files.gzip_message("a b") == ("a b is gzip-compressed: decompress it (gunzip -c 'a b' "
                                       "> 'a b.txt'), then pass that file")


def test_rename_copy_and_remove_are_the_same_on_both(root):
  with files.open_file(f"{root}/a.txt", "w") as f:
    f.write("new")
  with files.open_file(f"{root}/b.txt", "w") as f:
    f.write("old")
  files.rename(f"{root}/a.txt", f"{root}/b.txt")
  assert files.read_text(f"{root}/b.txt") == "new" and not files.exists(f"{root}/a.txt")
  files.copy(f"{root}/b.txt", f"{root}/c.txt")
  assert files.read_text(f"{root}/c.txt") == "new"
  files.remove(f"{root}/c.txt")
  files.makedirs(f"{root}/d/e")
  files.rmtree(f"{root}/d")
  assert sorted(files.listdir(root)) == ["b.txt"]


def test_a_missing_url_file_raises_file_not_found_naming_it(ram_root):
  missing = f"{ram_root}/nope.txt"
  for call in (files.read_text, files.size, files.remove, files.listdir):
    with pytest.raises(FileNotFoundError) as error:
      call(missing)
    assert error.value.filename == missing, call


def test_copy_crosses_filesystems(ram_root, tmp_path):
  local = tmp_path / "vocab.txt"
  local.write_text("[PAD]\n")
  files.copy(str(local), f"{ram_root}/vocab.txt")
  files.copy(f"{ram_root}/vocab.txt", str(tmp_path / "back.txt"))
  assert (tmp_path / "back.txt").read_text() == "[PAD]\n"


def test_absolute_keeps_urls_and_inside_compares_whole_names(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert files.absolute("ram://run/export/") == "ram://run/export"
  assert files.absolute("gs://bucket") == "gs://bucket"
  assert files.absolute("run") == str(tmp_path / "run")
  assert files.parent("gs://bucket/run/flags.txt") == "gs://bucket/run"
  assert files.inside("gs://b/run/export", "gs://b/run/")
  assert files.inside("gs://b/run", "gs://b/run")
  assert not files.inside("gs://b/run2", "gs://b/run")  # A prefix of the name is not a parent.
  assert files.is_url("s3://x") and not files.is_url(str(tmp_path))


def test_a_directory_moves_with_its_contents(root):
  files.makedirs(f"{root}/stage/variables")
  atomic_files = {"saved_model.pb": "graph", "variables/variables.index": "index"}
  for name, text in atomic_files.items():
    with files.open_file(f"{root}/stage/{name}", "w") as f:
      f.write(text)
  files.rename(f"{root}/stage", f"{root}/export", overwrite=False)
  assert not files.exists(f"{root}/stage")
  for name, text in atomic_files.items():
    assert files.read_text(f"{root}/export/{name}") == text
  assert sorted(files.listdir(f"{root}/export")) == ["saved_model.pb", "variables"]


def test_writing_over_a_file_replaces_it(root):
  # TensorFlow's ram:// appends to a file opened for writing again, and to a copy's
  # target; files removes the old file first.
  for write in ("w", "copy"):
    with files.open_file(f"{root}/a.txt", "w") as f:
      f.write("0123456789\n")
    if write == "w":
      with files.open_file(f"{root}/a.txt", "w") as f:
        f.write("ab\n")
    else:
      with files.open_file(f"{root}/b.txt", "w") as f:
        f.write("ab\n")
      files.copy(f"{root}/b.txt", f"{root}/a.txt")
    assert files.read_text(f"{root}/a.txt") == "ab\n", write


def test_a_prefix_of_a_file_name_is_neither_file_nor_directory(root):
  # TensorFlow's ram:// calls `ckpt-2` (and `ckpt`) a directory once `ckpt-2.index` exists.
  files.makedirs(f"{root}/checkpoints")
  with files.open_file(f"{root}/checkpoints/ckpt-2.index", "w") as f:
    f.write("x")
  for prefix in ("ckpt-2", "ckpt"):
    path = f"{root}/checkpoints/{prefix}"
    assert not files.exists(path) and not files.isdir(path) and not files.isfile(path)
  assert files.isdir(f"{root}/checkpoints") and files.isfile(f"{root}/checkpoints/ckpt-2.index")


def test_read_lines_splits_at_line_ends_only(tmp_path):
  path = tmp_path / "labels.txt"
  path.write_bytes("a\u2028b\r\nc\x85d\x0ce\rf\n".encode("utf-8"))
  assert files.read_lines(str(path)) == ["a\u2028b", "c\x85d\x0ce", "f"]


def test_the_parent_of_a_url_at_its_root_keeps_the_scheme():
  assert files.parent("ram://x.keras") == "ram://"
  assert files.parent("gs://bucket/run/model.keras") == "gs://bucket/run"


class _BytesPath:
  """An os.PathLike whose path is bytes (os.fspath returns them)."""

  def __fspath__(self):
    return b"/tmp/model.keras"


def test_a_path_argument_is_a_str_or_path_like_and_nothing_else(tmp_path):
  """`tfbert.load(pathlib.Path(...))` failed with "unsupported operand type(s) for +:
  'PosixPath' and 'str'", and bytes with "can't concat str to bytes" (sweep 6, A06/A07)."""
  assert files.as_path(tmp_path / "m.keras", "path") == str(tmp_path / "m.keras")
  assert files.as_path("ram://x/m.keras", "path") == "ram://x/m.keras"
  for value, shown in ((b"/tmp/m.keras", r"bytes b'/tmp/m.keras' \(decode bytes to a str\)"),
                       (7, "int 7"), (_BytesPath(), "_BytesPath .*decode bytes")):
    with pytest.raises(TypeError, match="^vocab_file must be a str or an os.PathLike such as "
                                        f"pathlib.Path, got {shown}"):
      files.as_path(value, "vocab_file")
  with pytest.raises(ValueError, match="^path is empty: name a file or directory$"):
    files.as_path("", "path")


def test_a_leading_tilde_naming_a_home_is_refused_never_expanded(tmp_path, monkeypatch):
  """As open(), pathlib and tf.io.gfile, tfbert takes `~` literally; where it would name a
  home directory the caller surely meant, it is refused, naming that directory."""
  monkeypatch.setenv("HOME", str(tmp_path / "home"))
  assert files.home_expansion("~/m.keras") == str(tmp_path / "home" / "m.keras")
  assert files.home_expansion("~") == str(tmp_path / "home")
  for literal in ("./~/m.keras", "a~/m.keras", "~no-such-user-here/m", "gs://b/~/m"):
    assert files.home_expansion(literal) is None
    assert files.as_path(literal, "path") == literal
  with pytest.raises(ValueError, match=(
      f"^path '~/S01/m.keras' starts with '~', which tfbert does not expand .*: it would name "
      f"a directory '~' below {os.getcwd()}; pass '{tmp_path}/home/S01/m.keras' "
      r"\(os.path.expanduser\), or './~/S01/m.keras' for a directory named '~'$")):
    files.as_path(pathlib.Path("~/S01/m.keras"), "path")


def test_a_missing_file_is_named_with_its_role_and_a_link_to_nothing_as_one(tmp_path):
  """Issue 47: the one wording of every reader (task, SQuAD, CoNLL, embedding data files,
  vocabularies, safetensors): `ls` lists a link to nothing, so "not found" would puzzle."""
  os.symlink("gone.tsv", tmp_path / "link.tsv")
  assert files.missing_file_message(str(tmp_path / "link.tsv"), "task file") == (
      f"task file {tmp_path}/link.tsv is a symbolic link to gone.tsv, which does not exist")
  assert files.missing_file_message(str(tmp_path / "no.tsv"), "task file") == (
      f"task file not found: {tmp_path}/no.tsv")
  for name in ("link.tsv", "no.tsv"):
    with pytest.raises(FileNotFoundError, match=f"^task file (not found: )?{tmp_path}/{name}"):
      files.check_found(str(tmp_path / name), "task file")
  (tmp_path / "here.tsv").write_text("x")
  files.check_found(str(tmp_path / "here.tsv"), "task file")


def _squad_scores(path, role):
  """squad_evaluation reading `path` as its predictions or null odds file."""
  from tfbert.squad import squad_evaluation  # pylint: disable=import-outside-toplevel
  directory = os.path.dirname(path)
  dataset = os.path.join(directory, "dataset.json")
  pathlib.Path(dataset).write_text(json.dumps({"version": "1.1", "data": [{
      "title": "T", "paragraphs": [{"context": "Paris is in France.", "qas": [{
          "id": "a", "question": "Where?",
          "answers": [{"text": "France", "answer_start": 12}]}]}]}]}))
  if role == "predictions":
    return squad_evaluation.evaluate_files(dataset, [path])
  predictions = os.path.join(directory, "predictions.json")
  pathlib.Path(predictions).write_text('{"a": "France"}')
  return squad_evaluation.evaluate_files(dataset, [predictions], na_prob_file=path)


def _with_file(name, read):
  """`read` of the path of a file `name` beside the input, which is there (not read beyond
  a TFLite file's identifier, `tflite_export.TFLITE_IDENTIFIER`)."""
  def reader(path):
    other = os.path.join(os.path.dirname(path), name)
    pathlib.Path(other).write_bytes(b"\0\0\0\0TFL3 not read")
    return read(other)
  return reader


def _sources(**flags):
  """`fine_tuning.check_sources` of a config with the initialization `flags` only."""
  from tfbert.tasks import fine_tuning  # pylint: disable=import-outside-toplevel
  config = types.SimpleNamespace(OUTPUT_PATHS=(), init_hf_dir=None, init_tfbert=None,
                                 init_checkpoint=None)
  return fine_tuning.check_sources(types.SimpleNamespace(**{**vars(config), **flags}))


def _readers():
  """{module: its reader of an input file, given that file's path}."""
  # pylint: disable=import-outside-toplevel
  from tfbert import config
  from tfbert.checkpoints import convert, google_checkpoint, model_paths
  from tfbert.embeddings import sentence_transformers
  from tfbert.inference import loading, text_settings
  from tfbert.pretraining import pretraining_data
  from tfbert.serving import tflite_export
  model = types.SimpleNamespace(config=types.SimpleNamespace(max_position_embeddings=64))
  return {
      "config": config.BertConfig.from_json_file,
      "convert": convert.read_tfbert_model,
      "convert --input": lambda path: convert.check_source("tfbert", path, "--input", {}),
      "convert beside": _with_file("ckpt.index", lambda index: convert.check_source(
          "google", index.removesuffix(".index"), "--input", {}, needs_config=True)),
      "text_settings": lambda path: text_settings.attach(
          model, text_settings.TextSettings(path, True, 9)),
      "pretraining_data": lambda path: pretraining_data.expand_input_files([path]),
      "tflite_export": tflite_export.TfliteModel,
      "tflite_export beside": _with_file("m.tflite", tflite_export.TfliteModel),
      "sentence_transformers": lambda path: sentence_transformers.read_config(
          os.path.dirname(path)),
      "squad_evaluation": lambda path: _squad_scores(path, "predictions"),
      "squad_evaluation odds": lambda path: _squad_scores(path, "null odds"),
      "fine_tuning --init_hf_dir": lambda path: _sources(init_hf_dir=path),
      "fine_tuning --init_tfbert": lambda path: _sources(init_tfbert=path),
      "loading vocab": lambda path: loading._vocab_beside(  # pylint: disable=protected-access
          "tfbert", os.path.join(os.path.dirname(path), "m.keras")),
      "google_checkpoint": lambda path: google_checkpoint.check_prefix(
          path.removesuffix(".index"), "--init_checkpoint"),
      "model_paths": model_paths.locate,
  }


_LINK = "{path} is a symbolic link to {target}, which does not exist"


_CASES = [
    # module (its reader: `_readers`), the input's file name, the messages for a symbolic
    # link to nothing and for no file ({path}: the input's path; {dir}: its directory).
    ("config", "bert_config.json", "config file " + _LINK, "config file not found: {path}"),
    ("convert", "m.keras", "tfbert model file " + _LINK,
     "tfbert model file not found: {path}"),
    ("convert --input", "m.keras", "--input " + _LINK + "; --input takes a tfbert",
     "--input {path}: no such file; --input takes a tfbert"),
    ("convert beside", "bert_config.json",
     "--input {dir}/ckpt: bert_config.json " + _LINK + ": pass --bert_config_file",
     "--input {dir}/ckpt: no bert_config.json beside the checkpoint ({path}): pass "
     "--bert_config_file"),
    ("text_settings", "vocab.txt", "vocabulary " + _LINK, "vocabulary not found: {path}"),
    ("pretraining_data", "corpus.txt", "Input file " + _LINK,
     "Input file not found: {path}"),
    ("tflite_export", "m.tflite", "TFLite file " + _LINK, "TFLite file not found: {path}"),
    ("tflite_export beside", "bert_config.json", "config file " + _LINK,
     "config file not found: {path}"),
    ("sentence_transformers", "modules.json", "sentence-transformers file " + _LINK
     + " (a sentence-transformers directory has modules.json",
     "{path}: not found (a sentence-transformers directory has modules.json"),
    ("squad_evaluation", "predictions.json", "predictions file " + _LINK,
     "predictions file not found: {path}"),
    ("squad_evaluation odds", "null_odds.json", "null odds file " + _LINK,
     "null odds file not found: {path}"),
    ("fine_tuning --init_hf_dir", "hf", "--init_hf_dir " + _LINK,
     "--init_hf_dir {path}: no such directory"),
    ("fine_tuning --init_tfbert", "m.keras", "--init_tfbert " + _LINK,
     "--init_tfbert {path}: no such file"),
    ("loading vocab", "vocab.txt", "{dir}/m.keras: vocabulary " + _LINK + ": pass vocab_file=",
     "{dir}/m.keras: no vocab.txt beside the model (in {dir}): pass vocab_file="),
    ("google_checkpoint", "ckpt.index",
     "--init_checkpoint no checkpoint at '{dir}/ckpt': its index file " + _LINK,
     "--init_checkpoint no checkpoint at '{dir}/ckpt' ({path} does not exist)"),
    ("model_paths", "m.keras", "model path " + _LINK, "no such file or directory: {path}"),
]


@pytest.mark.parametrize("module, name, link, missing", _CASES,
                         ids=[case[0] for case in _CASES])
def test_each_reader_names_a_link_to_nothing_as_one(tmp_path, module, name, link, missing):
  """Issue 47: a symbolic link to nothing given as an input is named with its target, not
  as "not found" (`ls` lists it) nor as Python's bare "[Errno 2]"; a missing file keeps
  each reader's wording."""
  read = _readers()[module]
  path = str(tmp_path / name)
  os.symlink(str(tmp_path / "gone"), path)
  values = {"path": path, "dir": str(tmp_path), "target": str(tmp_path / "gone")}
  with pytest.raises(FileNotFoundError) as raised:
    read(path)
  assert link.format(**values) in str(raised.value)
  os.remove(path)
  with pytest.raises(FileNotFoundError) as raised:
    read(path)
  assert missing.format(**values) in str(raised.value)


def _optional_readers():
  """{module: its reader of an optional record, given the record's path}: what it returns
  when the record is absent, or None where its absence makes the reader write (not run)."""
  # pylint: disable=import-outside-toplevel,protected-access
  from tfbert.alignment import alignment_run
  from tfbert.checkpoints import convert
  from tfbert.inference import loading
  from tfbert.models import BertClassifier
  from tfbert.serving import onnx_export, serving_dtype
  from tfbert.text import casing
  classifier = BertClassifier.__new__(BertClassifier)  # Only its type is looked at.
  beside = lambda name: lambda path: os.path.join(os.path.dirname(path), name)  # noqa: E731
  keras_file, prefix = beside("m.keras"), beside("ckpt")
  return {
      "casing": lambda path: casing.checkpoint_casing(os.path.dirname(path)),
      "casing vocab": lambda path: casing.checkpoint_casing(keras_file(path)),
      "serving_dtype": lambda path: serving_dtype.read_record(os.path.dirname(path)),
      "onnx_export": lambda path: onnx_export._labels(os.path.dirname(path)),
      "loading run": lambda path: loading._run_settings(None, keras_file(path)),
      "loading text settings": lambda path: loading._saved_settings(keras_file(path)),
      "loading tokenizer": lambda path: loading._recorded_max_length(os.path.dirname(path)),
      "loading labels": lambda path: convert.google_labels(classifier, prefix(path)),
      "alignment_run": lambda path: alignment_run.write_initial_checkpoint(
          None, os.path.dirname(os.path.dirname(path))),
  }


_OPTIONAL_CASES = [
    # module (its reader: `_optional_readers`), the record's file name, its role in the
    # message, and what the reader gives without the record (_WRITES: not run here).
    ("casing", "tokenizer_config.json", "casing record", []),
    ("casing vocab", "vocab.txt", "vocabulary", []),
    ("serving_dtype", "serving.json", "serving record", None),
    ("onnx_export", "labels.txt", "labels file", None),
    ("loading run", "run_config.json", "run config", {}),
    ("loading text settings", "text_settings.json", "text settings record", {}),
    ("loading tokenizer", "tokenizer_config.json", "tokenizer config", None),
    ("loading labels", "labels.txt", "labels file", "model"),
    ("alignment_run", "init/bert_model.ckpt.index", "initial checkpoint index", "_WRITES"),
]


@pytest.mark.parametrize("module, name, what, absent", _OPTIONAL_CASES,
                         ids=[case[0] for case in _OPTIONAL_CASES])
def test_each_optional_record_that_is_a_link_to_nothing_is_refused(tmp_path, module, name,
                                                                   what, absent):
  """Issue 47: a record read when it is there (casing, labels, serving dtype, a run's
  settings) that is a symbolic link to nothing is named, not taken for an absent record (a
  result made without it); one that is not there is still optional."""
  read = _optional_readers()[module]
  path = tmp_path / name
  path.parent.mkdir(parents=True, exist_ok=True)
  os.symlink(str(tmp_path / "gone"), path)
  with pytest.raises(FileNotFoundError) as raised:
    read(str(path))
  assert f"{what} {path} is a symbolic link to {tmp_path}/gone, which does not exist" in str(
      raised.value)
  if absent == "_WRITES":
    return
  os.remove(path)
  got = read(str(path))
  assert got == absent or (absent == "model" and got is not None)
