"""Tests for tfbert.inference.saving: each format round-trips through `tfbert.load` (a
sentence-transformers directory here; the other formats in tests/inference/loading_test.py
and raw_text_test.py), and a format a model has no form in is refused before writing."""

import dataclasses
import os
import pathlib

import numpy as np
import pytest

import tfbert
from tests.inference import tiny_models
from tfbert import BertClassifier
from tfbert.checkpoints import convert, pretrained
from tfbert.config import BertConfig
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.inference import exported, text_settings


def test_a_sentence_transformers_directory_round_trips_with_its_length(tmp_path):
  model = tiny_models.with_text(BertSentenceEncoder(BertConfig(**tiny_models.TINY)), 21)
  tfbert.save(model, str(tmp_path / "st"), "sentence-transformers")
  back = tfbert.load(str(tmp_path / "st"))
  assert type(back) is BertSentenceEncoder
  assert text_settings.settings_of(back).max_seq_length == 21
  np.testing.assert_allclose(back.encode(["a b c"]), model.encode(["a b c"]), atol=1e-6)


@pytest.mark.parametrize("path, fmt, message", [
    ("out", None, "format= is needed for .* \\(a .keras path is saved as keras\\)"),
    ("out", "onnx", "unknown format 'onnx'; use one of keras, hf, sentence-transformers"),
    # Sweep 19, P3: where TFLite and ONNX files come from, as tfbert.load says of them.
    ("out", "onnx", r"export \(tools/export_onnx.py writes an ONNX file from a SavedModel "
     r"export, format=\"export\"; in Python: tfbert.serving.onnx_export.export_onnx\)$"),
    ("out", "TFLite", r"\(tools/export_tflite.py writes a TFLite file from a saved \.keras "
     r"file; in Python: tfbert.serving.tflite_export.export_tflite\)$"),
    ("st", "sentence-transformers", "a BertClassifier has no sentence-transformers form"),
])
def test_a_format_the_model_has_no_form_in_is_refused_before_writing(tmp_path, path, fmt,
                                                                     message):
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  with pytest.raises(ValueError, match=message):
    tfbert.save(model, str(tmp_path / path), fmt)
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize("path, message", [
    ("", "^path is empty: name a file or directory$"),
    ("afile/m.keras", "cannot write .*afile/m.keras: .*afile is a file, not a directory"),
], ids=["empty", "parent_is_a_file"])
def test_a_path_that_cannot_be_written_is_named(tmp_path, path, message):
  (tmp_path / "afile").write_text("mine")
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  with pytest.raises(ValueError, match=message):
    tfbert.save(model, str(tmp_path / path) if path else path)
  assert (tmp_path / "afile").read_text() == "mine"


def test_hugging_face_output_into_another_models_directory_is_refused(tmp_path):
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  foreign = tmp_path / "st"
  foreign.mkdir()
  for name in ("modules.json", "tokenizer.json", "config.json"):
    (foreign / name).write_text("{}")
  with pytest.raises(ValueError, match="holds modules.json, tokenizer.json of another model"):
    tfbert.save(model, str(foreign), "hf")
  assert sorted(os.listdir(foreign)) == ["config.json", "modules.json", "tokenizer.json"]
  assert (foreign / "config.json").read_text() == "{}"
  # A directory of the user's own files is written into, the files kept.
  (tmp_path / "mine").mkdir()
  (tmp_path / "mine" / "todo.txt").write_text("keep")
  tfbert.save(model, str(tmp_path / "mine"), "hf")
  assert (tmp_path / "mine" / "todo.txt").read_text() == "keep"
  assert tfbert.load(str(tmp_path / "mine")).num_classes == 2


def test_a_google_checkpoint_never_breaks_the_one_beside_it(tmp_path):
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  other = tiny_models.with_text(BertClassifier(BertConfig(
      **{**tiny_models.TINY, "num_hidden_layers": 2}), 2), 9)
  tfbert.save(model, str(tmp_path / "ckpt" / "bert_model.ckpt"), "google")
  before = (tmp_path / "ckpt" / "bert_config.json").read_bytes()
  # One model per folder, as tfbert.save (sweep 22); the side files are checked too
  # (test_a_side_file_of_another_model_is_never_replaced_even_with_no_checkpoint_beside_it).
  with pytest.raises(ValueError, match=r"ckpt holds a Google checkpoint \(bert_model\.ckpt\.\*\): "
                                       r"a Google checkpoint written at .*other\.ckpt would make "
                                       r"it hold two models"):
    tfbert.export_google_checkpoint(other, str(tmp_path / "ckpt" / "other.ckpt"))
  assert (tmp_path / "ckpt" / "bert_config.json").read_bytes() == before
  assert not (tmp_path / "ckpt" / "other.ckpt.index").exists()
  tfbert.save(model, str(tmp_path / "ckpt" / "bert_model.ckpt"), "google")  # A rewrite.
  # Sweep 27, B179: a labelled checkpoint's labels.txt stayed beside an unlabelled rewrite,
  # and load named the new model's classes with them.
  labelled = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2,
                                                  labels=("spam", "ham")), 9)
  tfbert.save(labelled, str(tmp_path / "ckpt" / "bert_model.ckpt"), "google")
  assert tfbert.load(str(tmp_path / "ckpt" / "bert_model.ckpt")).labels == ("spam", "ham")
  tfbert.save(model, str(tmp_path / "ckpt" / "bert_model.ckpt"), "google")
  assert not (tmp_path / "ckpt" / "labels.txt").exists()
  assert tfbert.load(str(tmp_path / "ckpt" / "bert_model.ckpt")).labels is None
  with pytest.raises(ValueError, match="is a directory: a Google checkpoint is written at a "
                                       "prefix such as"):
    tfbert.save(model, str(tmp_path / "ckpt"), "google")


_OTHER_MODELS = [
    (("config.json", "model.safetensors"), r"a Hugging Face model \(config.json \+ model"),
    (("modules.json", "config.json"), r"a sentence-transformers model \(modules.json\)"),
    (("bert_config.json", "bert_model.ckpt.index"), r"a Google checkpoint \(bert_model.ckpt"),
    (("m.keras",), r"a tfbert model \(m.keras\)")]


# .keras files may share a directory (each keeps its records by its name): no keras case
# over another .keras file.
@pytest.mark.parametrize("there, what, fmt, name", [
    (there, what, fmt, name) for there, what in _OTHER_MODELS
    for fmt, name in (("google", "other.ckpt"), ("keras", "other.keras"))
    if not (fmt == "keras" and there == ("m.keras",))])
def test_a_file_format_into_another_models_directory_is_refused(tmp_path, there, what, fmt,
                                                               name):
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  for file in there:
    (tmp_path / file).write_text("{}")
  with pytest.raises(ValueError, match=f"{tmp_path} holds {what}.*: a .* written at "
                                       f".*{name} would make it hold two models.* write it "
                                       "into a folder of its own"):
    tfbert.save(model, str(tmp_path / name), fmt)
  assert sorted(os.listdir(tmp_path)) == sorted(there)


@pytest.mark.parametrize("there, what", [
    (("bert_config.json", "bert_model.ckpt.index"), r"a Google checkpoint \(bert_model.ckpt"),
    (("m.keras",), r"a tfbert model \(m.keras\)")])
def test_a_hugging_face_model_into_a_directory_of_another_kind_is_refused(tmp_path, there,
                                                                         what):
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  for file in there:
    (tmp_path / file).write_text("{}")
  with pytest.raises(ValueError, match=f"{tmp_path} holds {what}.*: a Hugging Face model "
                                       "written into it would make it hold two models"):
    tfbert.save(model, str(tmp_path), "hf")
  assert sorted(os.listdir(tmp_path)) == sorted(there)


@pytest.mark.slow  # ~5 s: a model written to and read from ram://.
def test_a_url_at_its_root_is_written_there_and_labels_keep_odd_characters(ram_root):
  labels = ("a\u2028b", "c")
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2,
                                               labels=labels), 9)
  tfbert.save(model, "ram://saving_test_root.keras")
  assert tfbert.load("ram://saving_test_root.keras").labels == labels
  assert not os.path.exists("ram:")  # Not a local folder named "ram:".
  tfbert.save(model, f"{ram_root}/export", "export", is_pair=False)
  assert tfbert.load(f"{ram_root}/export").labels == labels


@pytest.mark.slow  # 3.5 s or more in the suite's profile (tracing, a run).
def test_a_sentence_encoder_saved_as_keras_loads_back():
  """A `.keras` sentence encoder is a tfbert model too (it was refused as "not a tfbert
  model": the reader listed the model classes of tfbert.models only)."""
  import tempfile  # pylint: disable=import-outside-toplevel
  model = tiny_models.with_text(BertSentenceEncoder(BertConfig(**tiny_models.TINY)), 11)
  with tempfile.TemporaryDirectory() as directory:
    path = os.path.join(directory, "encoder", "model.keras")
    tfbert.save(model, path)
    back = tfbert.load(path)
    assert type(back) is BertSentenceEncoder
    assert text_settings.settings_of(back).max_seq_length == 11
    np.testing.assert_allclose(back.encode(["a b c"]), model.encode(["a b c"]), atol=1e-6)


@pytest.mark.parametrize("name, fmt", [("", "hf"), ("other.keras", None),
                                       ("bert_model.ckpt", "google")])
def test_a_model_saved_into_a_tools_run_directory_is_refused(tmp_path, name, fmt):
  """The run's vocab.txt (and tokenizer files) would be replaced by the saved model's, and a
  second model would sit beside the run's model.keras."""
  run = tmp_path / "run"
  run.mkdir()
  for record in (".tfbert-run.lock", "run_config.json", "vocab.txt", "model.keras"):
    (run / record).write_text("the run's")
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  with pytest.raises(ValueError, match=r"is a tfbert run directory \(it holds "
                                       r"\.tfbert-run\.lock\)"):
    tfbert.save(model, str(run / name) if name else str(run), fmt)
  assert {p.name: p.read_text() for p in run.iterdir()} == {
      n: "the run's" for n in (".tfbert-run.lock", "run_config.json", "vocab.txt", "model.keras")}
  tfbert.save(model, str(run / "hf"), "hf")  # A folder of its own inside the run is fine.


@pytest.mark.parametrize("is_pair", [True, False])
def test_a_hugging_face_directory_keeps_a_classifiers_arity(tmp_path, is_pair):
  """`config.json` records whether the classifier reads pairs (its "tfbert" key, which
  transformers keeps and ignores): loaded back, the other arity is refused (a pair
  classifier classified one sentence as '0')."""
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9,
                                is_pair=is_pair)
  tfbert.save(model, str(tmp_path / "hf"), "hf")
  back = tfbert.load(str(tmp_path / "hf"))
  assert text_settings.settings_of(back).is_pair is is_pair
  with pytest.raises(ValueError, match="reads sentence pairs" if is_pair else
                     "reads single texts"):
    back.classify("one sentence" if is_pair else ("a", "b"))
  # Saved again without a known arity, the record goes with the old config.json.
  unknown = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  tfbert.save(unknown, str(tmp_path / "hf"), "hf")
  assert text_settings.settings_of(tfbert.load(str(tmp_path / "hf"))).is_pair is None


def test_an_export_of_a_classifier_of_unknown_arity_is_refused_unless_told(tmp_path):
  """A Hugging Face directory from elsewhere says nothing of the arity (its `classify` reads
  a text or a pair as given): an export, whose classify_text takes one or the other, is
  refused before writing rather than made single-text on a guess."""
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  with pytest.raises(ValueError, match="this classifier's arity is unknown .* pass "
                                       r"is_pair=True for \(text_a, text_b\) pairs or "
                                       "is_pair=False for single texts"):
    tfbert.save(model, str(tmp_path / "export"), "export")
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize("model, fmt, message", [
    (BertSentenceEncoder, "export", "is_pair is a classifier's setting; got a "
                                    "BertSentenceEncoder: leave is_pair out"),
    (BertClassifier, "google", "is_pair: a google output records no arity .*: leave "
                               "is_pair out"),
], ids=["not_a_classifier", "google"])
def test_is_pair_where_nothing_reads_it_is_refused(tmp_path, model, fmt, message):
  args = (2,) if model is BertClassifier else ()
  model = tiny_models.with_text(model(BertConfig(**tiny_models.TINY), *args), 9)
  with pytest.raises(ValueError, match=message):
    tfbert.save(model, str(tmp_path / "out" / "bert_model.ckpt"), fmt, is_pair=True)
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize("fmt, path", [("hf", "h"), ("keras", "m.keras"),
                                       ("google", "g/bert_model.ckpt")])
def test_export_dtype_where_nothing_reads_it_is_refused(tmp_path, fmt, path):
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  with pytest.raises(ValueError, match=f"export_dtype applies to format='export' only \\(a "
                                       f"{fmt} output .*leave export_dtype='bfloat16' out"):
    tfbert.save(model, str(tmp_path / path), fmt, export_dtype="bfloat16")
  assert not os.listdir(tmp_path)


@pytest.fixture(scope="module")
def pair_classifier():
  """A tiny classifier known to read pairs: saved as keras, it records its arity."""
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  return text_settings.attach(model, dataclasses.replace(text_settings.settings_of(model),
                                                         is_pair=True))


def _tree(root):
  """{relative path: file content, or None for a directory} of everything under `root`."""
  return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
          for p in sorted(pathlib.Path(root).rglob("*"))}


@pytest.mark.parametrize("made, path, fmt, message", [
    # Old: IsADirectoryError [Errno 21], text_settings.json left in the parent (sweep 6, A39).
    ({"x.keras/": None}, "x.keras", None,
     "path .*/x.keras is an existing directory, not a file: name a file to write"),
    # Old: replaced without a word.
    ({"x.keras": "my notes"}, "x.keras", None,
     "path .*/x.keras exists and is not a .keras model .*: refusing to replace it"),
    ({"export/saved_model.pb": ""}, "export/m.keras", None,
     "path .*/export/m.keras lies inside .*/export, a SavedModel"),
    # Old: a bare NotADirectoryError [Errno 20] naming f/a.
    ({"f": "mine"}, "f/a/m.keras", None, "path .*/f/a/m.keras: its parent .*/f is a file"),
    # Old: the tokenizer files and text_settings.json moved in, then IsADirectoryError.
    ({"vocab.txt/": None}, "m.keras", None,
     "cannot write .*/m.keras: .*/vocab.txt is a directory, where this keras output writes "
     "its vocab.txt file"),
    ({"text_settings.json/": None}, "m.keras", None, "text_settings.json is a directory"),
    ({"bert_config.json/": None}, "bert_model.ckpt", "google",
     "cannot write .*/bert_model.ckpt: .*/bert_config.json is a directory, where this google "
     "output writes its bert_config.json file"),
], ids=["keras_is_a_directory", "keras_is_no_model", "inside_a_saved_model", "below_a_file",
        "vocab_is_a_directory", "record_is_a_directory", "google_config_is_a_directory"])
def test_a_target_that_cannot_be_written_is_refused_before_anything_is_written(
    tmp_path, pair_classifier, made, path, fmt, message):
  for name, content in made.items():
    target = tmp_path / name.rstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if name.endswith("/"):
      target.mkdir()
    else:
      target.write_text(content)
  before = _tree(tmp_path)
  with pytest.raises(ValueError, match=message):
    tfbert.save(pair_classifier, str(tmp_path / path), fmt)
  assert _tree(tmp_path) == before


@pytest.mark.parametrize("fmt, example", [("google", "bert_model.ckpt"),
                                          ("keras", "model.keras")])
def test_a_file_format_given_a_directory_path_is_refused_naming_a_path_inside(
    tmp_path, pair_classifier, fmt, example):
  """`save(model, "out/", "google")` wrote nothing at out/ and hidden `.index`/`.data`
  files with the side files beside it (sweep 7, A41b)."""
  with pytest.raises(ValueError, match=(
      f"path .*/out/ names a directory, where the {fmt} format writes .*: name it inside, "
      f"e.g. .*/out/{example}")):
    tfbert.save(pair_classifier, f"{tmp_path}/out/", fmt)
  assert not os.listdir(tmp_path)


def test_the_arity_record_appears_with_the_model_or_not_at_all(tmp_path, pair_classifier,
                                                               monkeypatch):
  """text_settings.json was written before the model: a save that failed after the checks
  left it, describing a model that is not there (or the old model under that name)."""
  def full_disk(model, path, *args, **kwargs):
    with open(path, "w", encoding="utf-8") as f:
      f.write("half")
    raise OSError(f"cannot write {path}: No space left on device")
  path = tmp_path / "m.keras"
  with monkeypatch.context() as patch:
    patch.setattr(convert, "save_tfbert_model", full_disk)
    with pytest.raises(OSError, match=f"^cannot write {path}: No space left on device$"):
      tfbert.save(pair_classifier, str(path))
  assert not os.listdir(tmp_path)
  tfbert.save(pair_classifier, str(path))
  before = _tree(tmp_path)
  unknown = text_settings.attach(pair_classifier, dataclasses.replace(
      text_settings.settings_of(pair_classifier), is_pair=None))
  with monkeypatch.context() as patch:
    patch.setattr(convert, "save_tfbert_model", full_disk)
    with pytest.raises(OSError, match="No space left on device"):
      tfbert.save(unknown, str(path))  # Its record would go: it stays with the old model.
  assert _tree(tmp_path) == before


def test_save_takes_a_path_like_and_refuses_bytes_and_a_tilde(tmp_path, pair_classifier,
                                                             monkeypatch):
  """A `pathlib.Path` was refused as "save needs a path to write"; `~/m.keras` was written
  to ./~/m.keras."""
  assert tfbert.save(pair_classifier, tmp_path / "a" / "m.keras") == str(
      tmp_path / "a" / "m.keras")
  with pytest.raises(TypeError, match="^path must be a str or an os.PathLike .* got bytes"):
    tfbert.save(pair_classifier, str(tmp_path / "b.keras").encode())
  monkeypatch.setenv("HOME", str(tmp_path / "home"))
  monkeypatch.chdir(tmp_path / "a")
  with pytest.raises(ValueError, match=f"^path '~/m.keras' starts with '~', which tfbert does "
                                       f"not expand .*; pass '{tmp_path}/home/m.keras'"):
    tfbert.save(pair_classifier, "~/m.keras")
  assert sorted(os.listdir(tmp_path)) == ["a"] and "~" not in os.listdir(tmp_path / "a")


@pytest.mark.parametrize("fmt, below", [("hf", ""), ("sentence-transformers", ""),
                                        ("keras", "m.keras"), ("google", "bert_model.ckpt")])
def test_a_dangling_link_is_named_as_one_with_its_target(tmp_path, pair_classifier, fmt, below):
  """`save(model, <link to a missing directory>, "hf")` said "path ... is an existing file,
  not a directory" (sweep 7, A20): the path, or the directory above it, is a link to nothing."""
  os.symlink(tmp_path / "gone", tmp_path / "link")
  path = os.path.join(tmp_path, "link", below) if below else str(tmp_path / "link")
  where = f"path {path}: {tmp_path}/link is" if below else f"path {path} is"
  with pytest.raises(ValueError) as raised:
    tfbert.save(pair_classifier, path, fmt)
  assert str(raised.value) == (f"{where} a symbolic link to {tmp_path}/gone, which does not "
                               "exist: remove the link or choose another path")
  assert os.listdir(tmp_path) == ["link"]


def test_a_name_longer_than_the_file_system_allows_is_refused_before_writing(
    tmp_path, pair_classifier):
  """A 300-character name failed as "File name too long" at the first write."""
  path = str(tmp_path / ("m" * 300 + ".keras"))
  with pytest.raises(ValueError, match=(
      r"^path .*: its name 'm{28}\.\.\.m{22}\.keras' is 306 bytes long, over the \d+ bytes a "
      "file name may have in .*: choose a shorter path$")):
    tfbert.save(pair_classifier, path)
  assert not os.listdir(tmp_path)


def test_a_keras_path_without_its_suffix_is_named_before_anything_is_written(tmp_path):
  """It named an internal staging path (`.tfbert-tmp-...-keras/saved_noext`), sweep 10 c40."""
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  path = str(tmp_path / "saved_noext")
  with pytest.raises(ValueError, match=f"^path {path} does not end in .keras, .*: pass a path "
                                       f"ending in .keras \\(e.g. {path}.keras\\)$"):
    tfbert.save(model, path, "keras")
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize("name, fmt, writes", [
    ("r01.keras", "hf", "a directory"), ("r02.KERAS/", "export", "a directory"),
    ("r03.keras", "sentence-transformers", "a directory"),
    ("r04/model.keras", "google", "a checkpoint prefix")])
def test_a_directory_or_prefix_named_as_a_keras_file_is_refused(tmp_path, name, fmt, writes):
  """Sweep 16 S3: format='hf' (export, google) wrote a directory (prefix) named like a .keras
  file without a word; the keras format refuses the converse slip."""
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  path = str(tmp_path / name) + ("/" if name.endswith("/") else "")
  with pytest.raises(ValueError) as raised:
    tfbert.save(model, path, fmt, is_pair=False if fmt == "export" else None)
  named = "directory" if writes == "a directory" else "prefix"
  assert str(raised.value) == (
      f"path {path} ends in .keras, a Keras file's name, but format={fmt!r} writes {writes}: "
      f"drop format= for a .keras file, or name the {named} without .keras")
  assert not os.listdir(tmp_path)


def test_a_keras_save_never_replaces_other_tokenizer_files_beside_it(tmp_path):
  """A user's (another model's) vocab.txt in the folder was replaced silently (c177)."""
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\nOther\n")
  with pytest.raises(ValueError, match=r"cannot write .*mine.keras: .*vocab.txt holds another "
                                       r"vocabulary .*: save into a folder of its own"):
    tfbert.save(model, str(tmp_path / "mine.keras"))
  assert sorted(os.listdir(tmp_path)) == ["vocab.txt"]
  assert (tmp_path / "vocab.txt").read_text() == "[PAD]\n[UNK]\nOther\n"
  (tmp_path / "own").mkdir()
  tfbert.save(model, str(tmp_path / "own" / "a.keras"))
  tfbert.save(model, str(tmp_path / "own" / "b.keras"))  # The same files: fine.
  longer = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 21)
  with pytest.raises(ValueError, match=r"tokenizer_config.json differs .*model_max_length 21"):
    tfbert.save(longer, str(tmp_path / "own" / "a.keras"))  # b.keras reads them too.
  os.remove(tmp_path / "own" / "b.keras")
  tfbert.save(longer, str(tmp_path / "own" / "a.keras"))  # Alone: the files are its own.
  assert text_settings.settings_of(tfbert.load(str(tmp_path / "own" / "a.keras"))
                                   ).max_seq_length == 21


@pytest.mark.parametrize("fmt, name", [("hf", "hf"), ("google", "g/bert_model.ckpt"),
                                       ("keras", "k/model.keras")])
def test_a_span_labelers_windows_survive_every_format(tmp_path, fmt, name):
  """Its max_query_length, doc_stride, answer length and v2.0 threshold: lost, the reloaded
  model answered a long context otherwise (only S survived, in tokenizer_config.json)."""
  spans = dict(max_query_length=7, doc_stride=9, max_answer_length=4,
               version_2_with_negative=True, null_score_diff_threshold=-1.5)
  model = tiny_models.with_text(tfbert.BertSpanLabeler(BertConfig(**tiny_models.TINY)), 33,
                                **spans)
  path = str(tmp_path / name)
  tfbert.save(model, path, fmt)
  back = text_settings.settings_of(tfbert.load(path))
  assert {key: getattr(back, key) for key in [*spans, "max_seq_length"]} == {
      **spans, "max_seq_length": 33}
  # Given at load, a setting still wins over the record.
  assert text_settings.settings_of(tfbert.load(path, doc_stride=5)).doc_stride == 5


def test_a_span_settings_record_is_kept_per_file_and_dropped_with_its_model(tmp_path):
  config = BertConfig(**tiny_models.TINY)
  spans = tiny_models.with_text(tfbert.BertSpanLabeler(config), 33, doc_stride=9,
                                max_query_length=5)
  tfbert.save(spans, str(tmp_path / "a.keras"))
  tfbert.save(tiny_models.with_text(tfbert.BertSpanLabeler(config), 33, doc_stride=11,
                                    max_query_length=5),
              str(tmp_path / "b.keras"))
  assert text_settings.settings_of(tfbert.load(str(tmp_path / "a.keras"))).doc_stride == 9
  assert text_settings.settings_of(tfbert.load(str(tmp_path / "b.keras"))).doc_stride == 11
  classifier = tiny_models.with_text(BertClassifier(config, 2), 33)
  tfbert.save(classifier, str(tmp_path / "a.keras"))  # a.keras no longer a span labeler.
  tfbert.save(classifier, str(tmp_path / "b.keras"))
  assert not (tmp_path / "span_settings.json").exists()
  (tmp_path / "span_settings.json").write_text('{"b.keras": {"doc_stride": 3}}')
  with pytest.raises(ValueError, match="span_settings.json: b.keras: span_settings must be an "
                                       "object of exactly max_query_length, doc_stride"):
    tfbert.save(spans, str(tmp_path / "b.keras"))


@pytest.mark.parametrize("fmt", ["keras", "hf", "google", "export"])
def test_a_model_loaded_from_an_export_is_refused_naming_what_to_save(tmp_path, fmt):
  """tfbert.save(<an ExportedModel>) said it had no vocabulary attached and to load it with
  tfbert.load, which the user had done (sweep 14, P1)."""
  loaded = object.__new__(exported.ExportedModel)  # What tfbert.load(<export>) returns.
  loaded.path = str(tmp_path / "e1")
  with pytest.raises(ValueError, match=r"e1 is a tfbert export \(ExportedModel\): it cannot be "
                                       rf"saved again as {fmt}; copy the directory itself, or "
                                       r"tfbert.save the model it was exported from"):
    tfbert.save(loaded, str(tmp_path / ("m.keras" if fmt == "keras" else "out")), fmt)
  assert not os.listdir(tmp_path)


def test_a_model_never_built_or_built_by_fill_mask_only_saves_the_weights_it_uses(tmp_path):
  """Sweep 27, B143/B98: an encoder saved before any call was written without weights (its
  reload computed with others), and a pretrainer used by `fill_mask` alone failed to save
  as hf or google in Keras' "already built" check."""
  def unbuilt(model, seq_length):  # `tiny_models.with_text` without its build.
    return text_settings.attach_text(model, pretrained.minilm_vocab_file(), True, seq_length)
  encoder = unbuilt(BertSentenceEncoder(BertConfig(**tiny_models.TINY)), 11)
  tfbert.save(encoder, str(tmp_path / "e" / "model.keras"))
  np.testing.assert_array_equal(tfbert.load(str(tmp_path / "e" / "model.keras")).encode("a b"),
                                encoder.encode("a b"))
  pretrainer = unbuilt(tfbert.BertPretrainer(BertConfig(**tiny_models.TINY)), 9)
  filled = pretrainer.fill_mask("a [MASK] b", top_k=2)
  assert not pretrainer.built
  for fmt, path in (("hf", "hf"), ("google", "g/bert_model.ckpt")):
    tfbert.save(pretrainer, str(tmp_path / path), fmt)
    assert tfbert.load(str(tmp_path / path)).fill_mask("a [MASK] b", top_k=2) == filled



@pytest.mark.parametrize("fmt", ["hf", "keras", "export"])
def test_a_model_without_text_settings_is_refused_saying_what_saving_needs(tmp_path, fmt):
  """Sweep 31, B69: tfbert.save of a model without a vocabulary said it "cannot read raw
  text" when the user asked to save it; the message now says what saving writes and needs."""
  model = BertClassifier(BertConfig(**tiny_models.TINY), 3)
  path = str(tmp_path / ("m.keras" if fmt == "keras" else "m"))
  with pytest.raises(ValueError, match=r"tfbert.save writes a model with its vocabulary and "
                                       r"casing .* this BertClassifier has none attached: call "
                                       r"tfbert.inference.text_settings.attach_text"):
    tfbert.save(model, path, fmt)
  assert not os.listdir(tmp_path)


def test_a_pair_classifier_saved_where_its_arity_is_not_recorded_says_so(tmp_path, caplog):
  """Sweep 32, B59: saved as a Google checkpoint, a pair classifier read back classified a
  single text without a word (the format records no arity). Said when saved; the formats
  that record it are quiet."""
  model = tiny_models.with_text(BertClassifier(BertConfig(**tiny_models.TINY), 2), 9)
  pair_classifier = text_settings.attach(model, dataclasses.replace(
      text_settings.settings_of(model), is_pair=True))
  caplog.set_level("WARNING", logger="absl")
  tfbert.save(pair_classifier, str(tmp_path / "h"), "hf")
  assert "does not record" not in caplog.text
  tfbert.save(pair_classifier, str(tmp_path / "g" / "bert_model.ckpt"), "google")
  assert ("this classifier reads sentence pairs, which a google output does not record "
          "(only keras, hf, export do)") in caplog.text
