"""Tests for tfbert.classifier.classifier_export: raw text in, label probabilities out, in a fresh
process.

Two exports, a pair classifier (3 labels, MNLI's) and a single-text regressor, both with
odd sizes and the real 30,522-entry uncased vocab, are served by ONE fresh Python process
that imports only `tensorflow` and `tensorflow_text`. What it prints is compared with the in-process
Keras model run on features packed by Model Garden's `convert_single_example` (the Python
reference), so the in-graph tokenization and packing are checked too.

Why 1e-5: as in tests/serving/export_test.py, graph and eager float32 may order reductions
differently, a few ulps per op through 3 layers (~1e-6 on O(1) outputs); a real bug (a
wrong segment, a missing [SEP], a weight not loaded) moves the logits by > 1e-2.
"""

import os
import types

import keras
import numpy as np
import pytest

from tests import helpers, tiny_exports
from tests.classifier_reference import PAIRS, google_features
from tfbert import BertClassifier, BertEncoder
from tfbert.checkpoints import pretrained
from tfbert.classifier import classifier_export
from tfbert.serving import export
from tfbert.text import tokenization

TOL = 1e-5  # See the module docstring.
SEQ = tiny_exports.PAIR_SEQ  # The shared pair classifier's S (15); the regressor's too.
MNLI = tiny_exports.MNLI

# Runs in the fresh process: argv = inputs .npz, outputs .npz, export dirs.
SERVE_SCRIPT = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  Registers the tokenizer's ops.

inputs_path, outputs_path, *export_dirs = sys.argv[1:]
given = np.load(inputs_path)
out, report = {}, {"signatures": {}, "tfbert_imported": "tfbert" in sys.modules}

def specs(structure):
  return {k: [v.dtype.name, v.shape.as_list()] for k, v in structure.items()}

for i, export_dir in enumerate(export_dirs):
  loaded = tf.saved_model.load(export_dir)
  for name, fn in loaded.signatures.items():
    specs_in = fn.structured_input_signature[1]
    if any(k not in given for k in specs_in):  # Other id signatures: serving_validation_test.
      continue
    args = {k: tf.constant(given[k], dtype=v.dtype) for k, v in specs_in.items()}
    for key, value in fn(**args).items():
      value = value.numpy()
      out[f"{i}/{name}/{key}"] = value.astype("S") if value.dtype == object else value
    report["signatures"][f"{i}/{name}"] = {"inputs": specs(fn.structured_input_signature[1]),
                                          "outputs": specs(fn.structured_outputs)}
np.savez(outputs_path, **out)
report["tfbert_imported"] = "tfbert" in sys.modules
print(json.dumps(report))
"""


def _classifier(num_classes, seed):
  keras.utils.set_random_seed(seed)
  # Dropout > 0: a signature run with training=True would fail to save its dropout seed.
  model = BertClassifier(helpers.odd_config(vocab_size=30522, hidden_dropout_prob=0.1),
                         num_classes)
  model.build()
  return model


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_pair_classifier_export):
  """Exports a regressor beside the shared pair classifier's export (tests/tiny_exports.py:
  the same construction, seed 1) and serves every signature of both in one fresh process."""
  root = tmp_path_factory.mktemp("classifier_export")
  vocab = pretrained.minilm_vocab_file()
  models = {"pair": tiny_pair_classifier_export.model, "regression": _classifier(1, 2)}
  dirs = [tiny_pair_classifier_export.export_dir,
          classifier_export.export_classifier_saved_model(
              models["regression"], str(root / "regression"), vocab, True, SEQ, None, False)]
  features = helpers.random_features(models["pair"].config, seq=SEQ)
  features = {n: features[n] for n in export.FEATURE_NAMES}
  outputs, report = helpers.serve_in_fresh_process(
      SERVE_SCRIPT, root, {"text_a": np.array([p[0] for p in PAIRS]),
                           "text_b": np.array([p[1] for p in PAIRS]), **features}, *dirs)
  reference = tokenization.reference_tokenizer(vocab, True)
  packed = {single: google_features(reference, PAIRS, SEQ, single=single)
            for single in (False, True)}
  return types.SimpleNamespace(models=models, dirs=dict(zip(models, dirs)), outputs=outputs,
                               features=features, packed=packed, report=report)


def _logits(model, features):
  return model(features, training=False)["logits"].numpy()


@pytest.mark.slow  # Shares the ~40 s `served` fixture (two exports, one fresh process).
def test_pair_text_signature_gives_the_keras_probabilities_of_googles_packing(served):
  want = _logits(served.models["pair"], served.packed[False])           # [B, 3]
  got = served.outputs
  assert helpers.max_abs_diff(got["0/classify_text/logits"], want) < TOL
  probabilities = got["0/classify_text/probabilities"]
  assert probabilities.dtype == np.float32 and probabilities.shape == (len(PAIRS), 3)
  softmax = np.exp(want - want.max(1, keepdims=True))
  assert helpers.max_abs_diff(probabilities, softmax / softmax.sum(1, keepdims=True)) < TOL
  assert [x.decode() for x in got["0/classify_text/label"]] == [MNLI[i] for i in
                                                                 want.argmax(axis=1)]
  assert len(set(want.argmax(axis=1))) > 1  # The labels are not all the same.
  assert not served.report["tfbert_imported"]


@pytest.mark.slow  # Shares the ~40 s `served` fixture.
def test_single_text_regression_signature_scores_text_a_alone(served):
  score = _logits(served.models["regression"], served.packed[True])[:, 0]
  assert helpers.max_abs_diff(served.outputs["1/classify_text/score"], score) < TOL
  # PAIRS[3] and PAIRS[4] share text_a: so do their scores; other texts score otherwise.
  got = served.outputs["1/classify_text/score"]
  assert got[3] == got[4] and np.ptp(got) > 1e-3


@pytest.mark.slow  # Shares the ~40 s `served` fixture.
def test_feature_signature_serves_the_keras_logits(served):
  for i, kind in enumerate(("pair", "regression")):
    want = _logits(served.models[kind], served.features)
    name = "score" if kind == "regression" else "logits"
    got = served.outputs[f"{i}/serving_default/{name}"]
    assert got.dtype == np.float32
    assert helpers.max_abs_diff(got, want[:, 0] if kind == "regression" else want) < TOL


@pytest.mark.slow  # Shares the ~40 s `served` fixture.
def test_signatures_take_one_or_two_strings_and_name_their_outputs(served):
  texts = {"text_a": ["string", [None]], "text_b": ["string", [None]]}
  probabilities = {"logits": ["float32", [None, 3]], "probabilities": ["float32", [None, 3]]}
  signatures = served.report["signatures"]
  assert signatures["0/classify_text"] == {
      "inputs": texts, "outputs": {**probabilities, "label": ["string", [None]]}}
  assert signatures["0/serving_default"] == {
      "inputs": {n: ["int32", [None, None]] for n in export.FEATURE_NAMES},
      "outputs": probabilities}
  assert signatures["1/classify_text"] == {"inputs": {"text_a": ["string", [None]]},
                                           "outputs": {"score": ["float32", [None]]}}
  assert signatures["1/serving_default"]["outputs"] == {"score": ["float32", [None]]}


@pytest.mark.slow  # Shares the ~40 s `served` fixture.
def test_export_directory_is_self_describing(served):
  pair = served.dirs["pair"]
  with open(os.path.join(pair, classifier_export.LABELS_FILE), encoding="utf-8") as f:
    assert f.read().splitlines() == list(MNLI)
  assert not os.path.exists(os.path.join(served.dirs["regression"],
                                         classifier_export.LABELS_FILE))
  assert os.path.exists(os.path.join(pair, export.CONFIG_FILE))
  with open(os.path.join(pair, "assets", "vocab.txt"), "rb") as f, \
      open(pretrained.minilm_vocab_file(), "rb") as g:
    assert f.read() == g.read()


def test_rejects_other_models_wrong_labels_and_too_long_inputs(tmp_path):
  vocab = pretrained.minilm_vocab_file()
  with pytest.raises(TypeError, match="BertEncoder"):
    classifier_export.export_classifier_saved_model(
        BertEncoder(helpers.odd_config()), str(tmp_path / "x"), vocab, True, 8, MNLI, True)
  model = BertClassifier(helpers.odd_config(), 3)  # max_position_embeddings 19.
  with pytest.raises(ValueError, match="max_position_embeddings 19"):
    classifier_export.export_classifier_saved_model(model, str(tmp_path / "x"), vocab, True,
                                                    20, MNLI, True)
  with pytest.raises(ValueError, match="2 label"):
    classifier_export.export_classifier_saved_model(model, str(tmp_path / "x"), vocab, True,
                                                    8, ("0", "1"), True)
  # A classifier of 3 classes built without names (in Python): the fix is named, not a
  # regression it is not (sweep 6).
  with pytest.raises(ValueError, match=r"has 3 classes and no label names.*labels=\[\.\.\.\]"):
    classifier_export.export_classifier_saved_model(model, str(tmp_path / "x"), vocab, True,
                                                    8, None, True)
  assert not os.listdir(tmp_path)
