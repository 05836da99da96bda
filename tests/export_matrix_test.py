"""Every task model x every export path: from a run directory, loaded back, the same
outputs and labels.

One tiny run per task model (a three-label classifier, a regression, a tagger, a SQuAD span
labeler), trained for one step by the task's own runner, is exported every way a user can:
the run's own SavedModel (`export/` and its `ids/`), a Hugging Face directory and a Google
checkpoint (`convert.convert_checkpoint` from the run's `model.keras`, what
`tools/convert_checkpoint.py` runs), ONNX (`onnx_export.export_onnx` of the run's export,
what `tools/export_onnx.py` runs) and TFLite (`tflite_export.export_tflite` at the run's S
read through its task, what `tools/export_tflite.py` runs). Each is read back by the
matching reader and must serve the run's `model.keras` outputs and carry its label names.
A tagger has no Google form (google-research/bert has no such head): that export is refused.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests import conll_synthetic, helpers
from tfbert import task_registry
from tfbert.checkpoints import convert, model_paths, pretrained
from tfbert.classifier import classifier_run, glue_data
from tfbert.config import BertConfig
from tfbert.models import BertClassifier
from tfbert.serving import export, onnx_export, tflite_export
from tfbert.squad import squad_features, squad_postprocess, squad_run
from tfbert.tagging import tagging_run
from tfbert_tools.demos.squad_synthetic import synthetic_squad

# Tiny, odd-sized, on the MiniLM wheel's uncased vocab (30,522 entries). One layer: what
# differs between the kinds and paths here is the head, its labels and the runtime; the
# encoder's per-layer weight names are mapped by the same code for every kind, proven bit
# for bit over 3 layers by tests/filesystem_exports_test.py's conversions.
TINY = dict(vocab_size=30522, hidden_size=24, num_hidden_layers=1, num_attention_heads=3,
            intermediate_size=37, hidden_act="gelu", max_position_embeddings=64,
            type_vocab_size=2, initializer_range=0.1)
SEQ = 19  # The classifiers' and the tagger's S; SQuAD's window is SQUAD_SEQ.
SQUAD_SEQ = 27
VERDICTS = ("bad", "ok", "great")
# What each kind's read-back must name: its label names in id order, or None.
KINDS = ("classifier", "regression", "tagger", "squad")
# Same weights, the same float32 graph of Keras ops on both sides: only the order of
# floating-point sums may differ (a loaded model rebuilds its layers): <= a few ulps of
# outputs of magnitude ~1-10.
SAME_MODEL = 1e-5
# Another runtime's float32 kernels (ONNX Runtime, LiteRT) on the frozen serving graph:
# measured <= 3.3e-6 on MiniLM-L6-H384 (tfbert.serving.onnx_export); this model is smaller.
OTHER_RUNTIME = 1e-5


def _write_lines(path, lines):
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return str(path)


def _train(kind: str, root) -> str:
  """The run directory of one applied step of `kind`'s task, exported (~10-15 s)."""
  config_file = str(root / "bert_config.json")
  BertConfig(**TINY).to_json_file(config_file)
  run = root / kind
  common = dict(vocab_file=pretrained.minilm_vocab_file(), bert_config_file=config_file,
                train_batch_size=4, learning_rate=1e-3, num_train_epochs=1.0, max_train_steps=1,
                seed=7, verbose=0, do_train=True, output_dir=str(run),
                export_dir=str(run / "export"))
  if kind == "classifier":
    reviews = [f'{i},"Nice, {i} times",{VERDICTS[i % 3]}' for i in range(12)]
    classifier_run.run_classifier(classifier_run.ClassifierRunConfig(
        task_name="custom", custom=glue_data.CustomFormat(
            text_a_column=1, label_column=2, has_header=True, delimiter=",", labels=VERDICTS),
        train_file=_write_lines(root / "train.csv", ["id,review,verdict"] + reviews),
        max_seq_length=SEQ, **common))
  elif kind == "regression":
    header = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\t"
              "sentence2\tscore")
    scores = [f"{i}\tg\tf\t2012\t{i:04d}\tnone\tnone\tA man plays {i}.\tA man sings "
              f"{i % 3}.\t{i % 6 * 0.8:.3f}" for i in range(12)]
    classifier_run.run_classifier(classifier_run.ClassifierRunConfig(
        task_name="sts-b", train_file=_write_lines(root / "train.tsv", [header] + scores),
        max_seq_length=SEQ, **common))
  elif kind == "tagger":
    tagging_run.run_ner(tagging_run.NerRunConfig(
        train_file=conll_synthetic.write(root / "train.conll", conll_synthetic.sentences(8, 3)),
        max_seq_length=SEQ, doc_stride=5, **common))
  else:
    with open(root / "train.json", "w", encoding="utf-8") as f:
      json.dump(synthetic_squad(6, seed=1), f)
    squad_run.run_squad(squad_run.SquadRunConfig(
        train_file=str(root / "train.json"),
        features=squad_features.FeatureConfig(max_seq_length=SQUAD_SEQ, doc_stride=12,
                                              max_query_length=8),
        postprocess=squad_postprocess.PostprocessConfig(n_best_size=5, max_answer_length=6),
        **common))
  return run


def _expected_labels(kind: str) -> list[str] | None:
  if kind == "classifier":
    return list(VERDICTS)
  if kind == "tagger":  # "O", then B-X, I-X for each entity type X in sorted order.
    entity_types = sorted({tag[2:] for sentence in conll_synthetic.sentences(8, 3)
                           for _, tag in sentence} - {""})
    return ["O"] + [f"{prefix}-{name}" for name in entity_types for prefix in "BI"]
  return None


def _features(seq: int) -> dict[str, np.ndarray]:
  """int32 features [3, seq]: random ids, a pair's segments, one padded row."""
  rng = np.random.default_rng(seq)
  ids = rng.integers(1000, 30000, size=(3, seq)).astype(np.int32)
  mask = np.ones((3, seq), np.int32)
  mask[1, seq - 6:] = 0
  segments = np.zeros((3, seq), np.int32)
  segments[:, seq // 2:] = 1
  return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def _served(model, features) -> dict[str, np.ndarray]:
  tensors = {name: tf.constant(value) for name, value in features.items()}
  return {name: np.asarray(value) for name, value in model.served_outputs(tensors).items()}


def _labels_file(folder) -> list[str] | None:
  path = os.path.join(folder, model_paths.LABELS_FILE)
  if not os.path.isfile(path):
    return None
  with open(path, encoding="utf-8") as f:
    return f.read().splitlines()


def _close(got, want, tolerance, where):
  assert sorted(got) == sorted(want), (where, sorted(got), sorted(want))
  for name in want:
    assert helpers.max_abs_diff(got[name], want[name]) < tolerance, (where, name)


@pytest.mark.slow  # ~30 s: one run, five exports read back.
@pytest.mark.parametrize("kind", KINDS)
def test_every_export_path_of_a_run_loads_back_with_its_outputs_and_labels(kind, tmp_path):
  run = _train(kind, tmp_path)
  labels = _expected_labels(kind)
  model = convert.read_tfbert_model(str(run / "model.keras"))
  # The task model carries its label names (a classifier's too, since it keeps them).
  assert getattr(model, "labels", None) == (None if labels is None else tuple(labels))
  with open(run / "run_config.json", encoding="utf-8") as f:
    seq = task_registry.run_seq_length(model, json.load(f))  # S read through the task.
  assert seq == (SQUAD_SEQ if kind == "squad" else SEQ)
  features = _features(seq)
  want = _served(model, features)

  # The run's SavedModel: labels.txt beside it and in ids/, whose signature serves the model.
  export_dir = run / "export"
  assert _labels_file(export_dir) == labels and _labels_file(export_dir / "ids") == labels
  served = tf.saved_model.load(str(export_dir / "ids")).signatures[export.SERVING_SIGNATURE]
  _close({k: v.numpy() for k, v in served(**{k: tf.constant(v) for k, v in features.items()})
          .items()}, want, SAME_MODEL, "ids")

  # A Hugging Face directory reads back as the same model class with the same labels.
  convert.convert_checkpoint("tfbert", str(run / "model.keras"), "hf", str(tmp_path / "hf"))
  back = convert.read_model("hf", str(tmp_path / "hf"))
  assert type(back) is type(model)
  assert getattr(back, "labels", None) == getattr(model, "labels", None)
  _close(_served(back, features), want, SAME_MODEL, "hf")

  # A Google checkpoint, where google-research/bert has the head (its processors hold the
  # class names in code): tfbert writes them to labels.txt beside it and reads them back.
  prefix = str(tmp_path / "google" / "bert_model.ckpt")
  if kind == "tagger":
    with pytest.raises(ValueError, match="no BertTokenClassifier head"):
      convert.convert_checkpoint("tfbert", str(run / "model.keras"), "google", prefix)
    assert not os.path.exists(f"{prefix}.index")
  else:
    convert.convert_checkpoint("tfbert", str(run / "model.keras"), "google", prefix)
    back = convert.read_model("google", prefix)
    assert type(back) is type(model)
    assert getattr(back, "labels", None) == getattr(model, "labels", None)
    _close(_served(back, features), want, SAME_MODEL, "google")

  # ONNX of the run's export carries the labels in its metadata.
  path = onnx_export.export_onnx(str(export_dir), str(tmp_path / "m.onnx"))
  session = onnx_export.onnx_session(path)
  names = [output.name for output in session.get_outputs()]
  _close(dict(zip(names, session.run(names, features))), want, OTHER_RUNTIME, "onnx")
  assert onnx_export.onnx_labels(session) == labels

  # TFLite at the run's S, labels from the model (what tools/export_tflite.py passes).
  path = tflite_export.export_tflite(model, str(tmp_path / "lite" / "model.tflite"),
                                     seq_length=seq)
  lite = tflite_export.TfliteModel(path)
  got = lite(features)
  assert lite.seq_length == seq and got and set(got) <= set(want), sorted(got)
  _close(got, {name: want[name] for name in got}, OTHER_RUNTIME, "tflite")
  assert _labels_file(tmp_path / "lite") == labels


def test_a_classifiers_labels_are_checked_when_built_and_kept_when_saved(tmp_path):
  config = helpers.odd_config()
  with pytest.raises(ValueError,
                     match=r"a regression \(num_classes=1, one score\) takes no labels"):
    BertClassifier(config, 1, labels=["score"])
  with pytest.raises(ValueError, match="one distinct name per output"):
    BertClassifier(config, 3, labels=["a", "a", "b"])
  model = BertClassifier(config, 3, labels=VERDICTS)
  model.build()
  model.save(str(tmp_path / "m.keras"))
  assert convert.read_tfbert_model(str(tmp_path / "m.keras")).labels == VERDICTS
