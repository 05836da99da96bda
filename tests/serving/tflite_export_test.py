"""Tests for tfbert.serving.tflite_export: .tflite files that LiteRT runs as Keras does.

Each model (odd sizes: tests/helpers.py) is converted once per module at S = 7 and run by
LiteRT's interpreter on random features, at batch sizes other than the [1, S] the
interpreter first allocates.

Why FLOAT_TOL = 2e-5: both sides compute in float32, but TFLite runs its own kernels
(XNNPACK's dense layers, LayerNorm as MEAN / SQUARED_DIFFERENCE / RSQRT, its own softmax
and tanh), which order the reductions differently: a few float32 ulps (~6e-8 relative)
each, growing over 3 layers to outputs up to ~5. Measured: at most 3.3e-6 (span logits),
2.2e-6 (sequence_output), 5e-7 (classifier logits). 2e-5 leaves ~6x room for other CPUs'
kernels, while a real bug (a weight not frozen, a missing mask, swapped segment ids) moves
outputs by > 1e-2.

Why the quantized bound, QUANT_REL = 0.1 of the largest |output|: dynamic-range
quantization rounds each weight to one of 255 levels of its channel's range (error up to
0.4% of that range) and the dense layers' activations likewise per batch, and these errors
add up over 3 layers whose large initializer_range (0.2) amplifies them. Measured: 1-4% of
the output range (classifier logits 0.023 of 1.44, span logits 0.19 of 4.6); 10% leaves
room, while another model's outputs are off by ~100%. A file left unquantized would match
within FLOAT_TOL: the lower bound, 1e-4, catches that.
"""

import json
import os
import shutil

import numpy as np
import pytest
from tensorflow.python.saved_model import save as save_lib

from tests import glue_synthetic, helpers, tool_process
from tfbert import BertClassifier, BertConfig, BertEncoder, BertSpanLabeler, task_registry
from tfbert.checkpoints import convert, pretrained
from tfbert.classifier import glue_data
from tfbert.classifier.classifier_run import ClassifierRunConfig
from tfbert.models import BertTokenClassifier
from tfbert.serving import export, tflite_export
from tfbert.squad import squad_features
from tfbert.squad.squad_run import SquadRunConfig

FLOAT_TOL = 2e-5  # See the module docstring.
QUANT_REL = 0.1
SEQ = 7
LABELS = ("red", "green", "blue")


@pytest.fixture(scope="module")
def config():
  return helpers.odd_config()


@pytest.fixture(scope="module")
def features(config):
  f = helpers.random_features(config, seed=5)  # Batch 13.
  return {name: f[name] for name in export.FEATURE_NAMES}


@pytest.fixture(scope="module")
def classifier(config):
  model = BertClassifier(config, len(LABELS), dtype="float32")
  model.build()
  return model


@pytest.fixture(scope="module")
def exports(tmp_path_factory, config, classifier):
  """{name: (Keras model, .tflite path)}: encoder, classifier (float32 and quantized), span."""
  folder = tmp_path_factory.mktemp("tflite")
  encoder = BertEncoder(config)
  encoder.build()
  span = helpers.random_span_labeler(config, seed=3)
  models = {"encoder": (encoder, {}), "classifier": (classifier, {"labels": LABELS}),
            "quantized": (classifier, {"labels": LABELS, "quantize": True}),
            "span": (span, {})}
  return {name: (model, tflite_export.export_tflite(
      model, str(folder / name / f"{name}.tflite"), seq_length=SEQ, **kwargs))
          for name, (model, kwargs) in models.items()}


def _keras(model, features):
  return {k: v.numpy() for k, v in export.served_outputs(model, features).items()}


def _rows(features, count):
  """`count` rows: the 13 given, repeated as needed."""
  return {name: np.resize(array, (count, SEQ)) for name, array in features.items()}


@pytest.mark.parametrize("name, outputs", [
    ("encoder", ["pooled_output", "sequence_output"]),
    ("classifier", ["logits", "probabilities"]),
    ("span", ["end_logits", "start_logits"]),
])
def test_float32_outputs_match_keras_at_other_batch_sizes(exports, features, name, outputs):
  model, path = exports[name]
  lite = tflite_export.TfliteModel(path)
  assert lite.output_names == tuple(outputs) and lite.seq_length == SEQ
  for batch in (13, 1, 20):  # Allocated at [1, S]; resized by the signature runner.
    rows = _rows(features, batch)
    got, want = lite(rows), _keras(model, rows)
    for output in outputs:
      assert got[output].shape == want[output].shape and got[output].dtype == np.float32
      assert helpers.max_abs_diff(got[output], want[output]) < FLOAT_TOL, (name, batch, output)
  empty = lite(_rows(features, 0))
  assert {k: v.shape for k, v in empty.items()} == {
      k: (0, *v.shape[1:]) for k, v in _keras(model, _rows(features, 1)).items()}


def test_the_file_holds_builtin_ops_only_and_the_sidecars_sit_beside_it(exports, config):
  from ai_edge_litert import interpreter as litert  # pylint: disable=import-outside-toplevel
  _, path = exports["classifier"]
  interpreter = litert.Interpreter(
      model_path=path,
      experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
  ops = {op["op_name"] for op in interpreter._get_ops_details()}  # pylint: disable=protected-access
  assert {"FULLY_CONNECTED", "GATHER", "SOFTMAX"} <= ops
  # Builtin names are upper case; Flex ops ("FlexX") and custom ops are not. No variable op
  # either: every weight is a constant in the file.
  assert all(op.isupper() for op in ops) and not ops & {"VAR_HANDLE", "READ_VARIABLE"}, ops
  folder = os.path.dirname(path)
  assert sorted(os.listdir(folder)) == ["bert_config.json", "classifier.tflite", "labels.txt"]
  assert BertConfig.from_json_file(os.path.join(folder, "bert_config.json")) == config
  with open(os.path.join(folder, "labels.txt"), encoding="utf-8") as f:
    assert f.read() == "red\ngreen\nblue\n"


def test_the_quantized_file_is_smaller_and_close_but_not_equal(exports, features):
  model, path = exports["quantized"]
  float_path = exports["classifier"][1]
  # int8 weights: 0.51 of the float32 file here (small tensors and the graph stay), ~0.26
  # for MiniLM-L6-H384.
  assert os.path.getsize(path) < 0.6 * os.path.getsize(float_path)
  got, want = tflite_export.TfliteModel(path)(features), _keras(model, features)
  for output in ("logits", "probabilities"):
    difference = helpers.max_abs_diff(got[output], want[output])
    assert 1e-4 < difference < QUANT_REL * np.max(np.abs(want[output])), (output, difference)


@pytest.mark.parametrize("change, message", [
    (dict(input_ids=lambda a: a.astype(np.float32)), "input_ids must be an integer array"),
    (dict(input_mask=lambda a: a[:, :5]), "input_mask has shape [13, 5] but input_ids has"),
    (dict(input_ids=lambda a: a[:, :5], input_mask=lambda a: a[:, :5],
          segment_ids=lambda a: a[:, :5]), "sequence length 5, the export's is 7"),
    (dict(input_ids=lambda a: np.where(np.arange(SEQ) == 3, 101, a)),
     "input_ids holds 101 at [0, 3], outside the vocabulary [0, 101)"),
    (dict(input_ids=lambda a: np.where(np.arange(SEQ) == 2, -1, a)),
     "input_ids holds -1 at [0, 2], outside the vocabulary"),
    (dict(segment_ids=lambda a: np.full_like(a, 3)), "segment_ids holds 3 at [0, 0], outside "
     "the token types [0, 3)"),
    (dict(input_mask=lambda a: a * 2), "input_mask holds 2 at"),
])
def test_the_runner_refuses_what_the_model_cannot_take(exports, features, change, message):
  lite = tflite_export.TfliteModel(exports["classifier"][1])
  bad = {name: change.get(name, lambda a: a)(array) for name, array in features.items()}
  with pytest.raises(ValueError) as error:
    lite(bad)
  assert message in str(error.value)


def test_names_the_export_does_not_read_are_refused_as_keras_predict_does(config, features):
  """Sweep 16 S2: Hugging Face's token_type_ids beside tfbert's three features was dropped
  without a word (a zero segment_ids answered for the wrong segments)."""
  for extra, named in (
      ({"token_type_ids": features["segment_ids"]},
       "token_type_ids (Hugging Face's name; tfbert's is segment_ids)"),
      ({"label_ids": features["segment_ids"]}, "label_ids")):
    with pytest.raises(ValueError) as error:
      tflite_export.check_features({**features, **extra}, config, SEQ)
    assert str(error.value) == (f"features has {named}, which the model does not read: its "
                                "features are input_ids, input_mask, segment_ids")
  assert sorted(tflite_export.check_features(features, config, SEQ)) == sorted(features)


def test_unchecked_the_file_reads_a_row_for_a_negative_id(exports, features):
  # Why `TfliteModel` checks: the converter dropped the SavedModel's asserts, and GATHER
  # takes a negative id without an error.
  lite = tflite_export.TfliteModel(exports["classifier"][1])
  bad = dict(features, input_ids=np.where(np.arange(SEQ) == 2, -1, features["input_ids"]))
  logits = lite.interpreter.get_signature_runner("serving_default")(**bad)["logits"]
  assert np.all(np.isfinite(logits))


@pytest.mark.parametrize("path, kwargs, message", [
    ("m.tflite", dict(seq_length=20), "seq_length 20 is outside [3, 19]"),
    ("m.tflite", dict(seq_length=0), "seq_length 0 is outside"),
    # Sweep 15, N3: S 1 or 2 was written, a file that no [CLS] text [SEP] fits.
    ("m.tflite", dict(seq_length=2), "seq_length 2 is outside [3, 19]: an input holds [CLS], "
     "a token and [SEP] at least"),
    ("m.onnx", dict(seq_length=7), "must be a .tflite file"),
    ("m.tflite", dict(seq_length=7, labels=("a", "b")), "2 label(s) ['a', 'b'] for a model "
     "with 3 output(s)"),
    # Sweep 17, b39: quantize="no" (truthy) wrote the int8 file without a word.
    ("m.tflite", dict(seq_length=7, quantize="no"), "quantize must be True or False, got 'no'"),
    ("m.tflite", dict(seq_length=7, quantize=0), "quantize must be True or False, got 0"),
    # Sweep 17, c03: 32.0 failed in TensorFlow's shape code ("Dimension value must be
    # integer"), naming no argument; True passed as 1.
    ("m.tflite", dict(seq_length=7.0), "seq_length must be an int, got 7.0"),
    ("m.tflite", dict(seq_length=True), "seq_length must be an int, got True"),
    ("m.tflite", dict(seq_length="7"), "seq_length must be an int, got '7'"),
])
def test_export_refuses_bad_arguments_before_writing(tmp_path, classifier, path, kwargs,
                                                     message):
  with pytest.raises(ValueError) as error:
    tflite_export.export_tflite(classifier, str(tmp_path / path), **kwargs)
  assert message in str(error.value)
  assert os.listdir(tmp_path) == []


def test_the_conversion_and_the_runner_refuse_arguments_of_another_type(tmp_path, classifier):
  with pytest.raises(ValueError, match="^quantize must be True or False, got 'yes'$"):
    tflite_export.convert(classifier, 7, quantize="yes")
  with pytest.raises(ValueError, match=r"^seq_length must be an int, got 7\.5$"):
    tflite_export.convert(classifier, 7.5)
  for threads in (True, 1.5, "2", 0):
    with pytest.raises(ValueError, match=f"^num_threads must be an int >= 1, got {threads!r}$"):
      tflite_export.TfliteModel(str(tmp_path / "m.tflite"), num_threads=threads)


def test_a_file_that_is_no_tflite_flatbuffer_is_refused_naming_it(tmp_path):
  """Sweep 18, n104: an .onnx file given to `TfliteModel` was refused for a missing
  bert_config.json beside it, and with one there LiteRT said "not a valid Flatbuffer
  buffer" naming no file."""
  (tmp_path / "bert_config.json").write_text("{}")
  for name, content in (("m.onnx", b"\x08\x07\x12\x07tfbert\x00\x00"), ("m.tflite", b"TFL3")):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(ValueError, match=rf"^{tmp_path / name}: not a TFLite file \(a TFLite "
                                         "flatbuffer holds TFL3 at bytes 4-8, this file b'"):
      tflite_export.TfliteModel(str(tmp_path / name))


def test_an_output_in_a_run_directory_is_refused_as_tfbert_save_refuses_it(tmp_path,
                                                                          classifier):
  """Sweep 17, t03: the tool wrote into a run directory, replacing the run's
  bert_config.json and adding a labels.txt; `tfbert.save` and convert_checkpoint refuse it."""
  (tmp_path / ".tfbert-run.lock").write_text("")
  target = tmp_path / "model.tflite"
  with pytest.raises(ValueError, match=f"^path {target}: {tmp_path} is a tfbert run directory "
                                       r"\(it holds \.tfbert-run\.lock\)"):
    tflite_export.export_tflite(classifier, str(target), seq_length=7, labels=LABELS)
  refused = tool_process.run_tool("export_tflite", f"--model={tmp_path / 'absent.keras'}",
                                  f"--output={target}")
  assert refused.returncode == 1 and refused.stderr.strip().splitlines() == [
      f"export_tflite: error: --output {target}: {tmp_path} is a tfbert run directory (it "
      "holds .tfbert-run.lock); writing a model there would overwrite the run's vocab.txt and "
      "put a second model beside its own: write it to another directory (e.g. a new folder "
      "inside the run)"]
  assert os.listdir(tmp_path) == [".tfbert-run.lock"]


def _tool_export(tmp_path, model, *flags):
  """export_tflite (in this process) of `model` saved as tmp_path/model.keras with a
  vocab.txt beside it, to tmp_path/lite/model.tflite: (the run, the output path)."""
  convert.save_tfbert_model(model, str(tmp_path / "model.keras"))
  (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n")
  output = tmp_path / "lite" / "model.tflite"
  return tool_process.run_tool("export_tflite", f"--model={tmp_path / 'model.keras'}",
                               f"--output={output}", *flags), output


def test_tool_refuses_task_name_for_a_model_that_is_no_classifier(tmp_path, config):
  """Sweep 17, t09: --task_name=sst-2 given with a pretrainer (or a tagger) was dropped
  without a word: its encoder (the tagger) was exported, no classifier."""
  tagger = BertTokenClassifier(config, ("O", "B-x", "I-x"))
  tagger.build()
  refused, output = _tool_export(tmp_path, tagger, "--task_name=sst-2")
  assert refused.returncode == 1 and refused.stderr.strip().splitlines() == [
      f"export_tflite: error: --task_name=sst-2 names a classifier's task, but "
      f"{tmp_path / 'model.keras'} holds a BertTokenClassifier: leave --task_name out, or "
      "pass a classifier's model.keras"]
  assert not output.parent.exists()


def test_tool_refuses_a_task_name_other_than_the_runs_before_reading_data(tmp_path, config):
  """Sweep 33, A19: an SST-2 run's model told --task_name=cola read the SST-2 dev file as
  CoLA's and said "sst/dev.tsv:1: column 1 (label) is 'label'", naming neither task."""
  model = BertClassifier(config, 2)
  model.build()
  run, sst = tmp_path / "run", tmp_path / "sst"
  sst.mkdir()
  (sst / "dev.tsv").write_text("sentence\tlabel\na fine film\t1\n")
  run.mkdir()
  (run / "run_config.json").write_text(ClassifierRunConfig(
      output_dir=str(run), task_name="sst-2", data_dir=str(sst), do_train=True).to_json())
  convert.save_tfbert_model(model, str(run / "model.keras"))
  (run / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nfine\nfilm\n")
  output = tmp_path / "lite" / "model.tflite"
  refused = tool_process.run_tool("export_tflite", f"--model={run / 'model.keras'}",
                                  f"--output={output}", "--task_name=cola",
                                  f"--eval_data_dir={sst}", "--seq_length=7")
  assert refused.returncode == 1 and refused.stderr.strip().splitlines() == [
      f"export_tflite: error: --task_name=cola, but {run / 'model.keras'} is a model of the "
      "task sst-2 (its run's run_config.json): its labels and data are sst-2's; leave "
      "--task_name out (the run's task is used), or pass a model trained on cola"]
  assert not output.parent.exists()


@pytest.mark.parametrize("task_name", ["", " "])
def test_tool_refuses_an_empty_task_name(tmp_path, task_name):
  """Sweep 17: --task_name= was read as no --task_name: the run's task was used without a
  word, though the user named one (empty)."""
  refused = tool_process.run_tool("export_tflite", f"--model={tmp_path / 'model.keras'}",
                                  f"--output={tmp_path / 'model.tflite'}",
                                  f"--task_name={task_name}")
  assert refused.returncode == 1 and refused.stderr.strip().splitlines() == [
      "export_tflite: error: --task_name is empty: name the classifier's GLUE task (or "
      "custom), or leave it out (the run's own task is used)"]
  assert not os.listdir(tmp_path)


def test_an_output_that_cannot_be_written_is_refused_before_converting(tmp_path, classifier):
  """A parent that is a file failed with a bare "File exists" after the whole conversion."""
  (tmp_path / "file").write_text("x")
  target = tmp_path / "file" / "m.tflite"
  with pytest.raises(ValueError, match=f"^path {target}: its parent {tmp_path / 'file'} is a "
                                       "file, not a directory$"):
    tflite_export.export_tflite(classifier, str(target), seq_length=7)
  (tmp_path / "d.tflite").mkdir()
  with pytest.raises(ValueError, match="is an existing directory, not a file"):
    tflite_export.export_tflite(classifier, str(tmp_path / "d.tflite"), seq_length=7)
  assert sorted(os.listdir(tmp_path)) == ["d.tflite", "file"]


@pytest.mark.parametrize("sidecar, content", [
    ("bert_config.json", '{"vocab_size": 5}'), ("labels.txt", "x\ny\nz\n"),
    ("vocab.txt", "[PAD]\n")])
def test_a_directory_holding_another_models_sidecars_is_refused_before_converting(
    tmp_path, classifier, sidecar, content):
  """They were replaced without a word (or a stale labels.txt left beside the new file)."""
  (tmp_path / sidecar).write_text(content)
  vocab = tmp_path / "mine" / "vocab.txt"
  vocab.parent.mkdir()
  vocab.write_text("[PAD]\n[UNK]\n")
  with pytest.raises(ValueError, match=rf"holds another model's {sidecar} \(one exported "
                                       "model per directory"):
    tflite_export.export_tflite(classifier, str(tmp_path / "m.tflite"), seq_length=7,
                                vocab_file=str(vocab))
  assert sorted(os.listdir(tmp_path)) == sorted(["mine", sidecar])
  assert (tmp_path / sidecar).read_text() == content


@pytest.mark.parametrize("model_files, what", [
    (("config.json", "model.safetensors"), "a Hugging Face model"),
    (("other.keras",), "a tfbert model"), (("modules.json",), "a sentence-transformers model")])
def test_a_directory_holding_another_model_is_refused_before_converting(
    tmp_path, classifier, model_files, what):
  """Sweep 26, B7: a Hugging Face directory sharing the vocabulary took the file's
  bert_config.json and labels.txt, the latter then read as that model's labels."""
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[PAD]\n[UNK]\n")
  for name in model_files:
    (tmp_path / name).write_text("{}")
  with pytest.raises(ValueError, match=rf"m.tflite: {tmp_path} holds {what} .*the file's "
                                       "bert_config.json, labels.txt and vocab.txt would go "
                                       "among that model's files"):
    tflite_export.export_tflite(classifier, str(tmp_path / "m.tflite"), seq_length=7,
                                labels=LABELS, vocab_file=str(vocab))
  assert sorted(os.listdir(tmp_path)) == sorted(["vocab.txt", *model_files])


def test_a_mixed_precision_model_is_exported_as_its_float32_copy(config, classifier, features):
  mixed = BertClassifier(config, len(LABELS), dtype="mixed_bfloat16")
  mixed.build()
  mixed.set_weights(classifier.get_weights())
  copy = tflite_export.float32_model(mixed)
  assert copy.dtype_policy.compute_dtype == "float32" and copy.num_classes == len(LABELS)
  assert helpers.max_abs_diff(_keras(copy, features)["logits"],
                              _keras(classifier, features)["logits"]) == 0
  assert tflite_export.float32_model(classifier) is classifier


# Tiny classifier on MiniLM's real uncased vocab (30,522 entries), so the tool tokenizes.
TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37, hidden_act="gelu", hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, max_position_embeddings=64, type_vocab_size=2,
            initializer_range=0.2)


@pytest.mark.slow  # ~3 s: a TFLite conversion.
def test_tool_exports_a_run_and_scores_its_dev_set(tmp_path, monkeypatch):
  run = tmp_path / "run"
  (run / "best").mkdir(parents=True)
  model = BertClassifier(BertConfig(**TINY), 2)
  model.build()
  convert.save_tfbert_model(model, str(run / "best" / "model.keras"))
  shutil.copyfile(pretrained.minilm_vocab_file(), run / "best" / "vocab.txt")
  (tmp_path / "glue").mkdir()  # Beside the run: a run never lies inside its input.
  settings = ClassifierRunConfig(output_dir=str(run), task_name="mrpc",
                                 data_dir=str(tmp_path / "glue"), do_eval=True, max_seq_length=24)
  (run / "run_config.json").write_text(settings.to_json())
  glue_synthetic.write_mrpc(tmp_path / "glue" / "dev.tsv", glue_synthetic.fruit_pairs(30, seed=2))
  output = tmp_path / "lite" / "model.tflite"
  # In this process (tests/tool_process.py), from tmp_path as its own process ran: the file,
  # its sidecars and the printed scores are the subject, not a fresh interpreter.
  monkeypatch.chdir(tmp_path)
  done = tool_process.run_tool("export_tflite", f"--model={run / 'best' / 'model.keras'}",
                               f"--output={output}", f"--eval_data_dir={tmp_path / 'glue'}",
                               "--latency_runs=3")
  assert done.returncode == 0, done.stderr[-3000:]
  lines = done.stdout.strip().splitlines()
  assert lines[0].startswith(f"wrote {output} (") and "float32, seq_length 24)" in lines[0]
  keras_scores, lite_scores = (json.loads(line) for line in lines[1:])
  assert keras_scores["model"] == "keras" and lite_scores["model"] == "tflite"
  assert lite_scores["num_examples"] == 30 and lite_scores["agreement"] == 1.0
  assert lite_scores["accuracy"] == keras_scores["accuracy"]
  assert lite_scores["max_abs_diff"] < FLOAT_TOL and lite_scores["latency_ms"] > 0
  assert sorted(os.listdir(output.parent)) == ["bert_config.json", "labels.txt", "model.tflite",
                                               "vocab.txt"]
  assert (output.parent / "labels.txt").read_text() == "0\n1\n"  # MRPC's labels.
  # The file serves the run's model: the Keras model's logits on the tool's S.
  features = {name: np.asarray(value) for name, value in helpers.random_features(
      model.config, batch=3, seq=24).items() if name in export.FEATURE_NAMES}
  want = model(features, training=False)["logits"].numpy()
  assert helpers.max_abs_diff(tflite_export.TfliteModel(str(output))(features)["logits"],
                              want) < FLOAT_TOL
  # Another task than the run's: refused by name before the export (a KeyError before;
  # then "task 'mnli' ... is not the model's"; sweep 33, A19: both tasks named).
  other = tmp_path / "lite_mnli" / "model.tflite"
  refused = tool_process.run_tool("export_tflite", f"--model={run / 'best' / 'model.keras'}",
                                  f"--output={other}", f"--eval_data_dir={tmp_path / 'glue'}",
                                  "--task_name=mnli")
  assert refused.returncode == 1
  assert refused.stderr.strip().splitlines() == [
      f"export_tflite: error: --task_name=mnli, but {run / 'best' / 'model.keras'} is a model "
      "of the task mrpc (its run's run_config.json): its labels and data are mrpc's; leave "
      "--task_name out (the run's task is used), or pass a model trained on mnli"]
  assert not other.parent.exists()
  # A dev file of another layout: refused before the export too (it was refused after
  # writing the .tflite file, the tool failing with its output in place).
  (tmp_path / "tagged.conll").write_text("Alan B-PER\n")
  refused = tool_process.run_tool("export_tflite", f"--model={run / 'best' / 'model.keras'}",
                                  f"--output={other}", f"--eval_file={tmp_path / 'tagged.conll'}")
  assert refused.returncode == 1 and "tagged.conll:1: 1 column" in refused.stderr
  assert not other.parent.exists()


def test_tool_given_a_google_checkpoint_says_how_to_make_the_keras_file(tmp_path):
  # Sweep 6, L03: "tfbert model file not found: .../bert_model.ckpt" (it is there).
  (tmp_path / "bert_model.ckpt.index").write_bytes(b"")  # Its kind is told by its files.
  prefix, output = tmp_path / "bert_model.ckpt", tmp_path / "lite" / "model.tflite"
  refused = tool_process.run_tool("export_tflite", f"--model={prefix}", f"--output={output}")
  assert refused.returncode == 1
  assert refused.stderr.strip().splitlines() == [
      f"export_tflite: error: --model {prefix} is a Google checkpoint, not a tfbert .keras "
      "model file: make one with python tools/convert_checkpoint.py --input_format=google "
      f"--input={prefix} --output_format=tfbert --output=<new>.keras"]
  assert not output.parent.exists()


def test_tool_exports_a_squad_run_at_its_window_length(tmp_path, monkeypatch):
  """A SQuAD run keeps its S under `features` in run_config.json; the tool must read it
  there, not fall back to 128 (beyond this model's 64 positions: refused) or export a
  length the run never used."""
  run = tmp_path / "run"
  run.mkdir()
  model = BertSpanLabeler(BertConfig(**TINY))
  model.build()
  convert.save_tfbert_model(model, str(run / "model.keras"))
  shutil.copyfile(pretrained.minilm_vocab_file(), run / "vocab.txt")  # As a run holds it.
  settings = SquadRunConfig(output_dir=str(run), do_predict=True, predict_file="dev.json",
                            features=squad_features.FeatureConfig(max_seq_length=40,
                                                                  doc_stride=16,
                                                                  max_query_length=8))
  (run / "run_config.json").write_text(settings.to_json())
  assert task_registry.run_seq_length(
      model, tflite_export.run_config_of(str(run / "model.keras"))) == 40
  output = tmp_path / "lite" / "model.tflite"
  monkeypatch.chdir(tmp_path)
  done = tool_process.run_tool("export_tflite", f"--model={run / 'model.keras'}",
                               f"--output={output}")
  assert done.returncode == 0, done.stderr[-3000:]
  assert "float32, seq_length 40)" in done.stdout.splitlines()[0]
  assert tflite_export.TfliteModel(str(output)).seq_length == 40


def test_the_file_has_the_id_signature_alone_with_a_dynamic_batch(exports):
  _, path = exports["span"]
  lite = tflite_export.TfliteModel(path)
  assert lite.interpreter.get_signature_list() == {"serving_default": {
      "inputs": ["input_ids", "input_mask", "segment_ids"],
      "outputs": ["end_logits", "start_logits"]}}
  details = lite.interpreter.get_input_details()
  assert all(list(d["shape_signature"]) == [-1, SEQ] and d["dtype"] == np.int32 for d in details)


@pytest.mark.slow
def test_tool_without_seq_length_takes_at_most_the_models_positions(tmp_path, classifier):
  """A model of 19 positions with no run record was refused for "seq_length 128 is outside
  [1, 19]", a value the user never gave (sweep 7, L01); a given one out of range names
  --seq_length and the model's limit."""
  refused, output = _tool_export(tmp_path, classifier, "--seq_length=20")
  assert refused.returncode == 1 and refused.stderr.strip().splitlines() == [
      "export_tflite: error: --seq_length 20 is outside [3, 19]: an input holds [CLS], a "
      "token and [SEP] at least, and the model has 19 positions (max_position_embeddings); "
      "give --seq_length in that range"]
  assert not output.parent.exists()
  done = tool_process.run_tool("export_tflite", f"--model={tmp_path / 'model.keras'}",
                               f"--output={output}")
  assert done.returncode == 0, done.stderr[-3000:]
  assert done.stdout.splitlines()[0] == (
      f"--seq_length not given and neither a run nor a tokenizer_config.json beside "
      f"{tmp_path / 'model.keras'} records one: using 19, the default 128 capped at "
      "the model's max_position_embeddings")
  assert tflite_export.TfliteModel(str(output)).seq_length == 19
  # Sweep 18, t01: the S `tfbert.save` records (tokenizer_config.json's model_max_length,
  # which `tfbert.load` reads) was passed over for 19, "no run records one".
  (tmp_path / "tokenizer_config.json").write_text('{"model_max_length": 13}')
  done = tool_process.run_tool("export_tflite", f"--model={tmp_path / 'model.keras'}",
                               f"--output={output}")
  assert done.returncode == 0, done.stderr[-3000:]
  assert "seq_length 13)" in done.stdout.splitlines()[0]
  assert tflite_export.TfliteModel(str(output)).seq_length == 13
  assert tflite_export.default_seq_length(BertEncoder(BertConfig(**TINY))) == 64
  assert tflite_export.default_seq_length(
      BertEncoder(BertConfig(**{**TINY, "max_position_embeddings": 512}))) == 128


def test_tool_refuses_a_model_without_a_vocab_to_put_beside_the_file(tmp_path, classifier):
  """Sweep 15, N8: a .keras file with no vocab.txt beside it was exported with none beside
  the .tflite file, no word (the README promises one; clients tokenize with it): refused
  naming --vocab_file, as convert_checkpoint does; a --vocab_file that is not there was
  dropped as silently."""
  convert.save_tfbert_model(classifier, str(tmp_path / "model.keras"))
  output = tmp_path / "lite" / "model.tflite"
  refused = tool_process.run_tool("export_tflite", f"--model={tmp_path / 'model.keras'}",
                                  f"--output={output}")
  assert refused.returncode == 1 and refused.stderr.strip().splitlines() == [
      f"export_tflite: error: there is no vocab.txt beside {tmp_path / 'model.keras'} to write "
      f"beside {output} (clients tokenize with it: the file takes ids): pass --vocab_file, "
      "the vocabulary the model was trained with"]
  refused = tool_process.run_tool("export_tflite", f"--model={tmp_path / 'model.keras'}",
                                  f"--output={output}", f"--vocab_file={tmp_path / 'nope.txt'}")
  assert refused.returncode == 1 and refused.stderr.strip().splitlines() == [
      f"export_tflite: error: --vocab_file not found: {tmp_path / 'nope.txt'}"]
  assert sorted(os.listdir(tmp_path)) == ["model.keras"]


def test_scoring_is_for_classifiers_and_names_what_is_missing(config, classifier):
  """A tagger was told it needed a classifier's task and vocab: now that it is no classifier."""
  tagger = BertTokenClassifier(config, ("O", "B-x", "I-x"))
  given = ["--eval_file"]
  assert tflite_export.scoring_problem(tagger, "n/model.keras", given, None, "v.txt") == (
      "--eval_file scores classifiers only (on their task's dev set); n/model.keras is a "
      "BertTokenClassifier: leave out --eval_file")
  task = glue_data.get_task("sst-2")
  assert "give --task_name" in tflite_export.scoring_problem(classifier, "m", given, None, "v")
  assert "give --vocab_file" in tflite_export.scoring_problem(classifier, "m", given, task, None)
  assert tflite_export.scoring_problem(classifier, "m", given, task, "v") is None
  # Sweep 27, B77: a pair classifier scored on SST-2's single texts (and the reverse).
  assert tflite_export.scoring_problem(classifier, "m", given, task, "v", is_pair=True) == (
      "m is a classifier of (text_a, text_b) pairs (as recorded beside it), but the task "
      "sst-2 holds single texts: give --task_name of the classifier's own task (or leave it "
      "out for its run's)")
  assert "holds (text_a, text_b) pairs" in tflite_export.scoring_problem(
      classifier, "m", given, glue_data.get_task("mrpc"), "v", is_pair=False)
  assert tflite_export.scoring_problem(classifier, "m", given, task, "v", is_pair=False) is None



@pytest.mark.parametrize("built_by", ["build", "call", "nothing"])
def test_a_conversion_traces_the_model_once_and_its_save_succeeds(features, built_by,
                                                                   monkeypatch, tmp_path):
  """The converter saves its module as a SavedModel (and, the save failing, freezes the
  concrete function instead, without a word). The module's `tf.function` was traced again
  inside that save, and the model saved with all its objects (about half of a tiny
  conversion's CPU); the model brought Keras' default `serving_default`, traced with float32
  ids, which a model built by a call refuses: its save failed, and its file had no
  `serving_default` for the runner. A model not built yet was built inside the trace:
  traced twice, its file without the signature too. Now the model is traced once and saved
  once, however it was built."""
  model = BertClassifier(helpers.odd_config(num_hidden_layers=1), len(LABELS), dtype="float32")
  if built_by == "build":
    model.build()
  elif built_by == "call":
    model(features)
  traced, saves, failed = [], [], []
  served, save = export.served_outputs, save_lib.save

  def counted(model, features):
    traced.append(model)
    return served(model, features)

  def counted_save(*args, **kwargs):
    saves.append(args[1])
    try:
      return save(*args, **kwargs)
    except Exception as e:  # The converter catches it: record it.
      failed.append(e)
      raise

  monkeypatch.setattr(export, "served_outputs", counted)
  monkeypatch.setattr(save_lib, "save", counted_save)
  path = tflite_export.export_tflite(model, str(tmp_path / "m.tflite"), seq_length=SEQ)
  assert traced == [model] and len(saves) == 1 and not failed
  lite = tflite_export.TfliteModel(path)
  assert helpers.max_abs_diff(lite(features)["logits"],
                              _keras(model, features)["logits"]) < FLOAT_TOL
