"""Exports and checkpoints on a `tf.io.gfile` filesystem: TensorFlow's in-memory `ram://`.

Every writer of `tfbert.serving` and `tfbert.checkpoints` takes a URL (`gs://...`) where it
takes a local path; `ram://` stands in for a bucket. It lives in this process only, so the
tests call the library in-process; each uses its own root (`_root`). What is written there
is read back from there and compared with the source: a pure copy (weights through a
checkpoint) bit for bit, a served graph within the float32 tolerance of the export tests.
Inputs come from `ram://` too: a vocab, a Hugging Face directory, a Google checkpoint, a
`.keras` file. ONNX Runtime and LiteRT read local files only: the library hands them the
URL's bytes (and the ONNX file is also run from a local copy).
"""

import uuid

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tfbert import BertClassifier, BertEncoder
from tfbert.checkpoints import convert, google_checkpoint, huggingface, model_paths
from tfbert.runtime import atomic, files
from tfbert.serving import export, serving_dtype

TOL = 1e-5  # Graph against eager float32 (tests/serving/export_test.py says why).
SEQ = 7
LABELS = ("red", "green", "blue")


def _root() -> str:
  """A fresh `ram://` directory for one test."""
  return f"ram://tfbert-test-{uuid.uuid4().hex}"


def _vocab(tmp_path, config) -> str:
  """A local WordPiece vocab of `config.vocab_size` entries (fast to build a tokenizer of)."""
  words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  words += [f"w{i}" for i in range(config.vocab_size - len(words))]
  path = tmp_path / "vocab.txt"
  path.write_text("".join(f"{word}\n" for word in words))
  return str(path)


def _features(config, seed=0):
  f = helpers.random_features(config, seed)
  return {name: f[name] for name in export.FEATURE_NAMES}


def _served(saved_model_dir: str, features) -> dict[str, np.ndarray]:
  serve = tf.saved_model.load(saved_model_dir).signatures[export.SERVING_SIGNATURE]
  return {k: v.numpy() for k, v in serve(**{k: tf.constant(v) for k, v in
                                             features.items()}).items()}


def _no_temporaries(directory: str) -> None:
  assert not [n for n in files.listdir(directory) if n.startswith(".")], directory


@pytest.mark.slow
def test_a_saved_model_export_and_its_ids_are_written_replaced_and_served_from_ram(tmp_path):
  config = helpers.odd_config(num_hidden_layers=1)  # The files are the point, not the depth.
  keras.utils.set_random_seed(3)
  encoder = BertEncoder(config)
  encoder.build()
  root = _root()
  export_dir = f"{root}/models/encoder"
  files.makedirs(export_dir)  # An old export to replace: the new one takes its place whole.
  with files.open_file(f"{export_dir}/stale.txt", "w") as f:
    f.write("from an older export")
  # An export of this model tfbert wrote: only those are replaced.
  atomic.write_marker(export_dir, atomic.OutputRecord(export.EXPORT_KIND, "BertEncoder"))
  vocab = f"{root}/inputs/vocab.txt"  # The vocab is read from ram:// too.
  files.makedirs(f"{root}/inputs")
  files.copy(_vocab(tmp_path, config), vocab)
  assert export.export_encoder_saved_model(encoder, export_dir, vocab_file=vocab,
                                           seq_length=SEQ) == export_dir
  assert sorted(files.listdir(f"{root}/models")) == ["encoder"]  # No staging left over.
  assert not files.exists(f"{export_dir}/stale.txt")
  assert files.isfile(f"{export_dir}/assets/vocab.txt")
  assert files.read_bytes(f"{export_dir}/assets/vocab.txt") == (tmp_path / "vocab.txt").read_bytes()
  assert serving_dtype.read_record(export_dir)["compute_dtype"] == "float32"
  assert serving_dtype.read_record(f"{export_dir}/{export.ID_DIR}")["compute_dtype"] == "float32"
  assert export.TEXT_OPS >= export.non_core_ops(export_dir)
  assert not export.non_core_ops(f"{export_dir}/{export.ID_DIR}")
  features = _features(config)
  want = encoder(features, training=False)
  got = _served(export_dir, features)
  ids = _served(f"{export_dir}/{export.ID_DIR}", features)
  for name in export.OUTPUT_NAMES:
    assert helpers.max_abs_diff(got[name], want[name]) < TOL, name
    np.testing.assert_array_equal(ids[name], got[name])  # One graph, two SavedModels.
  texts = tf.saved_model.load(export_dir).signatures[export.TEXT_SIGNATURE](
      text=tf.constant(["w1 w2 w3", "w4"]))
  assert texts["input_mask"].numpy().sum(axis=1).tolist() == [5, 3]


@pytest.mark.slow
def test_an_ids_export_onnx_and_tflite_files_are_written_to_ram_and_run_from_there(tmp_path):
  pytest.importorskip("tf2onnx")
  pytest.importorskip("onnxruntime")
  from tfbert.serving import onnx_export, tflite_export  # pylint: disable=import-outside-toplevel
  config = helpers.odd_config(num_hidden_layers=1)  # The files are the point, not the depth.
  keras.utils.set_random_seed(4)
  model = BertClassifier(config, len(LABELS), labels=LABELS)
  model.build()
  root = _root()
  export_dir = export.export_ids_saved_model(model, f"{root}/ids")
  assert files.read_text(f"{export_dir}/{model_paths.LABELS_FILE}").split() == list(LABELS)
  features = _features(config, seed=1)
  want = export.served_outputs(model, {k: tf.constant(v) for k, v in features.items()})
  got = _served(export_dir, features)
  for name in ("logits", "probabilities"):
    assert helpers.max_abs_diff(got[name], want[name]) < TOL, name

  onnx_file = onnx_export.export_onnx(export_dir, f"{root}/onnx/model.onnx")
  _no_temporaries(f"{root}/onnx")
  local = str(tmp_path / "model.onnx")
  files.copy(onnx_file, local)  # ONNX Runtime on the copied-back file, and on the URL itself.
  for session in (onnx_export.onnx_session(local), onnx_export.onnx_session(onnx_file)):
    assert onnx_export.onnx_labels(session) == list(LABELS)
    outputs = dict(zip(["logits", "probabilities"],
                       session.run(["logits", "probabilities"], features)))
    for name, value in outputs.items():
      assert helpers.max_abs_diff(value, want[name]) < TOL, name

  pytest.importorskip("ai_edge_litert")
  vocab = f"{root}/vocab.txt"
  files.copy(_vocab(tmp_path, config), vocab)
  tflite_file = tflite_export.export_tflite(model, f"{root}/lite/model.tflite", seq_length=SEQ,
                                            labels=LABELS, vocab_file=vocab)
  assert sorted(files.listdir(f"{root}/lite")) == ["bert_config.json", "labels.txt",
                                                   "model.tflite", "vocab.txt"]
  assert files.read_bytes(f"{root}/lite/vocab.txt") == files.read_bytes(vocab)
  lite = tflite_export.TfliteModel(tflite_file, config=config)
  for name, value in lite(features).items():
    assert helpers.max_abs_diff(value, want[name]) < 2e-5, name  # tflite_export_test's bound.


def test_google_and_hugging_face_checkpoints_round_trip_through_ram_bit_for_bit(tmp_path):
  config = helpers.odd_config()
  keras.utils.set_random_seed(5)
  model = BertClassifier(config, len(LABELS), labels=LABELS)
  model.build()
  weights = google_checkpoint.google_weights(model)
  vocab = _vocab(tmp_path, config)
  root = _root()

  prefix = f"{root}/google/bert_model.ckpt"
  google_checkpoint.export_google_checkpoint(model, prefix, vocab_file=vocab, do_lower_case=True)
  _no_temporaries(f"{root}/google")
  assert files.read_bytes(f"{root}/google/vocab.txt") == (tmp_path / "vocab.txt").read_bytes()
  back = google_checkpoint.read_google_checkpoint(prefix)
  assert sorted(back) == sorted(weights)
  for name, value in weights.items():
    np.testing.assert_array_equal(back[name], value, err_msg=name)

  hf_dir = f"{root}/hf"
  huggingface.save_hf_checkpoint(config, weights, hf_dir, vocab_file=vocab, do_lower_case=True,
                                 task=model.hf_task(LABELS))
  _no_temporaries(hf_dir)
  assert sorted(files.listdir(hf_dir)) == sorted(["config.json", "model.safetensors",
                                                  *huggingface.TOKENIZER_FILES])
  hf_config, back, _ = huggingface.load_hf_checkpoint(hf_dir)  # Reading inputs from ram://.
  assert hf_config.vocab_size == config.vocab_size
  for name, value in weights.items():
    np.testing.assert_array_equal(back[name], value, err_msg=name)
  assert huggingface.read_hf_task(hf_dir).labels == LABELS


def test_convert_reads_and_writes_every_format_on_ram_bit_for_bit(tmp_path):
  config = helpers.odd_config()
  keras.utils.set_random_seed(6)
  model = BertClassifier(config, len(LABELS), labels=LABELS)
  model.build()
  weights = google_checkpoint.google_weights(model)
  root = _root()
  convert.write_model(model, "hf", f"{root}/hf", vocab_file=_vocab(tmp_path, config),
                      do_lower_case=True, labels=LABELS)
  # hf (ram) -> tfbert (ram) -> google (ram) -> tfbert (local): the weights never change.
  convert.convert_checkpoint("hf", f"{root}/hf", "tfbert", f"{root}/keras/model.keras")
  _no_temporaries(f"{root}/keras")
  assert sorted(files.listdir(f"{root}/keras")) == sorted(["model.keras",
                                                           *huggingface.TOKENIZER_FILES])
  convert.convert_checkpoint("tfbert", f"{root}/keras/model.keras", "google",
                             f"{root}/google/bert_model.ckpt")
  local = str(tmp_path / "out" / "model.keras")
  convert.convert_checkpoint("google", f"{root}/google/bert_model.ckpt", "tfbert", local)
  for path in (f"{root}/keras/model.keras", local):
    back = convert.read_tfbert_model(path)
    assert isinstance(back, BertClassifier), path
    got = google_checkpoint.google_weights(back)
    assert sorted(got) == sorted(weights)
    for name, value in weights.items():
      np.testing.assert_array_equal(got[name], value, err_msg=f"{path}: {name}")
  with pytest.raises(FileNotFoundError, match="not found"):
    convert.read_tfbert_model(f"{root}/missing.keras")
