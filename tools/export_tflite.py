"""Exports a tfbert .keras model as a TFLite file (needs the extra `tfbert[tflite]` to score).

  bash bootstrap.sh python tools/export_tflite.py --model=runs/mrpc/model.keras \
      --output=runs/mrpc/tflite/model.tflite [--quantize] \
      [--eval_data_dir=glue/MRPC]

With --eval_data_dir (or --eval_file) the classifier's dev set is then scored by the Keras
model and by the .tflite file (LiteRT), one JSON line each: the task's metrics, the
median single-example latency, the file size and the agreement of the decisions.
See tfbert/serving/tflite_export.py for what the file holds.
"""

import tfbert_tools  # noqa: F401  (first: a Ctrl-C while TensorFlow imports is one line)

# isort: split

import json
import logging

import numpy as np
import tensorflow as tf
from absl import flags
from absl import logging as absl_logging

from tfbert.checkpoints import convert, model_paths
from tfbert.classifier import classifier_export, classifier_features, glue_data
from tfbert.classifier.classifier_run import ClassifierRunConfig
from tfbert.inference import loading
from tfbert.models import BertClassifier
from tfbert.runtime import cli, files, json_values, paths, run_directory
from tfbert.serving import export, tflite_export
from tfbert.text import casing
from tfbert.text.tokenization import WordPieceTokenizer
from tfbert_flags import common_flags
from tfbert_flags import export_tflite_flags as f


def main(argv):
  del argv
  # The converter logs each of its steps (a temporary SavedModel, its checkpoint shards,
  # its fingerprint) at INFO through absl and TensorFlow; the tool prints what it wrote.
  absl_logging.set_verbosity(absl_logging.WARNING)
  logging.getLogger("tensorflow").setLevel(logging.WARNING)
  if f.TASK_NAME.value is not None and not f.TASK_NAME.value.strip():  # Was read as unset.
    raise ValueError("--task_name is empty: name the classifier's GLUE task (or custom), or "
                     "leave it out (the run's own task is used)")
  paths.check_apart({"--model": f.MODEL.value}, {"--output": f.OUTPUT.value})
  # Before the model is read.
  paths.check_file_output("--output", f.OUTPUT.value, tflite_export.SUFFIX)
  # Its sidecars (bert_config.json, labels.txt, vocab.txt) would replace a run's own.
  run_directory.check_not_a_run("--output", f.OUTPUT.value, files.parent(f.OUTPUT.value))
  model = convert.read_tfbert_model(f.MODEL.value, "--model")  # Another kind: how to convert.
  _check_task_flag(model)
  vocab_file = _vocab_file()
  run = tflite_export.run_config_of(f.MODEL.value) or {}
  seq_length = _seq_length(model)
  task = _task(run) if isinstance(model, BertClassifier) else None
  scoring = bool(f.EVAL_DATA_DIR.value or f.EVAL_FILE.value)
  if scoring:  # Before the export: a bad request fails before minutes of work.
    problem = tflite_export.scoring_problem(
        model, f.MODEL.value, [name for name, flag in (("--eval_data_dir", f.EVAL_DATA_DIR),
                                                       ("--eval_file", f.EVAL_FILE))
                               if flag.value], task, vocab_file,
        loading.recorded_settings(model, "tfbert", f.MODEL.value).get("is_pair"))
    if problem:
      raise ValueError(problem)
    classifier_export.check_scorable(model, task)
    do_lower_case = casing.resolve_do_lower_case(
        f.DO_LOWER_CASE.value, casing.checkpoint_casing(f.MODEL.value, vocab_file),
        allow_mismatch=f.ALLOW_CASING_MISMATCH.value)
    devs = [(dev, glue_data.read_examples(task, dev, "dev").examples)  # Their errors too.
            for dev in glue_data.task_files(task, f.EVAL_DATA_DIR.value, "dev",
                                            f.EVAL_FILE.value)]
  path = tflite_export.export_tflite(
      model, f.OUTPUT.value, seq_length=seq_length, quantize=f.QUANTIZE.value,
      labels=task.labels if task else None, vocab_file=vocab_file)
  kind = "dynamic-range int8" if f.QUANTIZE.value else "float32"
  print(f"wrote {path} ({files.size(path)} bytes, {kind}, seq_length {seq_length})",
        flush=True)
  if scoring:
    for line in _score(model, path, task, vocab_file, do_lower_case, seq_length, devs):
      print(json_values.dumps(line, sort_keys=True), flush=True)


def _check_task_flag(model) -> None:
  """Refuses --task_name for a model that is no classifier: it was dropped without a word,
  and the user believed a classifier was exported."""
  if f.TASK_NAME.value is None or isinstance(model, BertClassifier):
    return
  raise ValueError(f"--task_name={f.TASK_NAME.value} names a classifier's task, but "
                   f"{f.MODEL.value} holds a {type(model).__name__}: leave --task_name out, "
                   "or pass a classifier's model.keras")


def _seq_length(model) -> int:
  """--seq_length (checked against the model), else the one `tfbert.load` reads (the run's,
  else `tokenizer_config.json`'s, as `tfbert.save` and convert_checkpoint record it), else
  `tflite_export.default_seq_length` with a line saying so."""
  if f.SEQ_LENGTH.value is not None:
    tflite_export.check_seq_length(model, f.SEQ_LENGTH.value, "--seq_length")
    return f.SEQ_LENGTH.value
  recorded = loading.recorded_settings(model, "tfbert", f.MODEL.value).get("max_seq_length")
  if recorded:
    return min(recorded, model.config.max_position_embeddings)
  seq_length = tflite_export.default_seq_length(model)
  print(f"--seq_length not given and neither a run nor a tokenizer_config.json beside "
        f"{f.MODEL.value} records one: using {seq_length}, the default "
        f"{tflite_export.DEFAULT_SEQ_LENGTH} capped at the model's max_position_embeddings",
        flush=True)
  return seq_length


def _vocab_file() -> str:
  """--vocab_file (it must be there), else the vocab.txt beside --model (a linked file:
  beside its target), as convert_checkpoint finds it; none refused: the README promises
  vocab.txt beside the .tflite file, and clients tokenize with it (the file takes ids)."""
  beside = convert.source_vocab_file("tfbert", f.MODEL.value)
  if f.VOCAB_FILE.value:
    files.check_found(f.VOCAB_FILE.value, "--vocab_file")
  elif beside is None:
    raise ValueError(f"there is no vocab.txt beside {f.MODEL.value} to write beside "
                     f"{f.OUTPUT.value} (clients tokenize with it: the file takes ids): pass "
                     "--vocab_file, the vocabulary the model was trained with")
  vocab_file = f.VOCAB_FILE.value or beside
  record = convert.read_text_record(model_paths.real_file(f.MODEL.value))
  if record is not None:  # As convert_checkpoint and `tfbert.load` check it.
    convert.check_recorded_vocab(f.MODEL.value, record, vocab_file, bool(f.VOCAB_FILE.value),
                                 term="--vocab_file=", beside=beside)
  return vocab_file


def _task(run) -> glue_data.Task:
  """The classifier's task: the run's (a custom one with its format), else --task_name.

  Raises:
    ValueError: --task_name names another task than the run's (its dev file was read with
      the other task's layout: "sst/dev.tsv:1: column 1 (label) is 'label'" for an SST-2
      run told --task_name=cola, which named neither task; sweep 33, A19).
  """
  name, recorded = f.TASK_NAME.value, run.get("task_name")
  if recorded and name is not None and name.strip().lower() != recorded.lower():
    raise ValueError(f"--task_name={name}, but {f.MODEL.value} is a model of the task "
                     f"{recorded} (its run's run_config.json): its labels and data are "
                     f"{recorded}'s; leave --task_name out (the run's task is used), or pass "
                     f"a model trained on {name}")
  if recorded:
    return ClassifierRunConfig.from_json(json.dumps(run)).task()
  return glue_data.get_task(name) if name else None


def _score(model, path, task, vocab_file, do_lower_case, seq_length, devs):
  """One result dict for the Keras model, then one for the .tflite file, per dev file
  (`devs`: (path, examples), read before the export)."""
  tokenizer = WordPieceTokenizer(vocab_file, do_lower_case)
  lite = tflite_export.TfliteModel(path, num_threads=f.NUM_THREADS.value)
  keras_model = tflite_export.float32_model(model)
  keras_batch = tf.function(lambda features: export.served_outputs(keras_model, features))
  for dev, examples in devs:
    features = classifier_features.examples_to_features(examples, tokenizer, seq_length,
                                                        task.is_pair)
    labels = classifier_features.label_array(examples, task)
    results = {}
    for name, predict_batch in (("keras", keras_batch), ("tflite", lite)):
      metrics, values = classifier_export.score_classifier(predict_batch, features, labels, task,
                                                       f.EVAL_BATCH_SIZE.value)
      result = {"model": name, "dev_file": dev, **metrics}
      if f.LATENCY_RUNS.value:
        result["latency_ms"] = tflite_export.median_latency_ms(predict_batch, features,
                                                               f.LATENCY_RUNS.value)
      results[name] = values
      if name == "tflite":
        reference = results["keras"]
        result.update(path=path, bytes=files.size(path), quantized=f.QUANTIZE.value,
                      max_abs_diff=float(np.max(np.abs(values - reference))))
        if not task.is_regression:  # The fraction of examples given Keras' class.
          result["agreement"] = float(np.mean(np.argmax(values, 1) == np.argmax(reference, 1)))
      yield result


def run():
  """Entry point of `python tools/export_tflite.py` and of `tfbert-export-tflite`."""
  flags.mark_flags_as_required(["model", "output"])
  common_flags.show_in_help(f)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
