"""`tfbert.load`: any model directory or file a user holds -> a task model that reads text.

What `path` may be (local, or any `tf.io.gfile` URL: `gs://`, `ram://`), tried in order:

* a directory with `saved_model.pb`: a tfbert export -> `ExportedModel`
  (`tfbert.inference.exported`);
* a `.keras` file, or a run directory with `model.keras`: tfbert -> the saved class;
* a directory with `modules.json`: sentence-transformers -> `BertSentenceEncoder`;
* a directory with `config.json` + `model.safetensors`: Hugging Face -> the class its
  `architectures` names, labels from `id2label`;
* a directory with `bert_config.json` + one checkpoint, or a checkpoint prefix: Google TF1
  -> the class of its heads; a `run_pretraining` run directory: its export's Google
  checkpoint (`export/google/bert_model.ckpt`).

The model comes back with its text settings attached (`tfbert.inference.text_settings`):
the vocabulary beside it (or `vocab_file`), its casing from the records beside it and the
vocabulary (`tfbert.text.casing`; `do_lower_case` must agree), and S from what trained or
describes it (a run's `run_config.json`; `sentence_bert_config.json`; Hugging Face's
`tokenizer_config.json` `model_max_length`), else 128 (384 for a span labeler), never past
`max_position_embeddings`. A span labeler of a SQuAD run keeps its run's windows, answer
length and v2.0 threshold, and one `tfbert.save` wrote keeps those it recorded (a Hugging
Face `config.json`'s "tfbert" key, `span_settings.json` beside a `.keras` file or Google
prefix). A classifier knows whether it reads text pairs (`is_pair`) from its
run's task (`task_name`, a custom task's `text_b_column`) or the record `tfbert.save` writes
beside a `.keras` file (by its name) or into a Hugging Face `config.json`; a Google
checkpoint or a Hugging Face directory from elsewhere does not tell (unknown: its `classify`
reads texts or pairs as given, and an export of it needs `is_pair=`).

`task=` starts another task on the source's encoder (the head fresh): "classifier" (with
`labels`), "regression", "tagger" (with `labels`), "span_labeler", "sentence_encoder". A
source that already is that task keeps its head, and labels given must be its own, by name;
`reinit_head=True` starts a fresh head of that task (of `labels`, else its own) on its
encoder all the same (logged), as the tools' `--reinit_head` does.

A path that is none of these gets one line naming what was looked for.
"""

import difflib
import json
import os
from typing import Any, Optional, Sequence, Union

import keras
import numpy as np
from absl import logging

from tfbert import task_registry
from tfbert.checkpoints import convert, google_checkpoint, huggingface
from tfbert.checkpoints.model_paths import locate
from tfbert.classifier.classifier_run import ClassifierRunConfig
from tfbert.embeddings import sentence_transformers
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.encoder import BertEncoder
from tfbert.inference import exported, saving, text_settings
from tfbert.models import BertClassifier, BertSpanLabeler, BertTokenClassifier, check_label_names
from tfbert.runtime import files, json_values, validation
from tfbert.serving import export
from tfbert.squad import squad_postprocess
from tfbert.squad.squad_run import SquadRunConfig
from tfbert.text import casing, text_calls

TASKS = ("classifier", "regression", "tagger", "span_labeler", "sentence_encoder")
_TASK_CLASSES = {"classifier": BertClassifier, "regression": BertClassifier,
                 "tagger": BertTokenClassifier, "span_labeler": BertSpanLabeler,
                 "sentence_encoder": BertSentenceEncoder}


def load(path: str, *, task: Optional[str] = None, labels: Optional[Sequence[str]] = None,
         max_seq_length: Optional[int] = None, do_lower_case: Optional[bool] = None,
         vocab_file: Optional[str] = None, allow_casing_mismatch: bool = False,
         reinit_head: bool = False,
         **span_settings: Any) -> Union[keras.Model, exported.ExportedModel]:
  """The model at `path` with its vocabulary, casing and S attached (module docstring).

  Args:
    path: a model directory or file, local or a URL: a str or an `os.PathLike`
      (`pathlib.Path`). A leading `~` is not expanded (as `open` does not): one naming a
      home directory is refused (`tfbert.runtime.files.as_path`).
    task: start this task on the source's encoder (`TASKS`), or None: the source's own.
    labels: the class names (tags) of a new classifier (tagger) head, or the source's own:
      a list, a tuple or a 1-D array (`label_names`).
    max_seq_length: S (default: recorded, else 128; a span labeler 384).
    do_lower_case: the casing, True or False (default: the records'; must agree with
      them); a str such as "true" is refused (`tfbert.runtime.validation.plain_bool`).
    vocab_file: the vocabulary (default: `vocab.txt` beside the model); a path as `path`.
    allow_casing_mismatch: let a given `do_lower_case` win over records that contradict it
      (logged), as the tools' `--allow_casing_mismatch` does.
    reinit_head: a fresh head on the source's encoder even when the source already is the
      task (`task`, else its own), of `labels` (else its own), as the tools'
      `--reinit_head` does (logged).
    **span_settings: a span labeler's `max_query_length`, `doc_stride`,
      `max_answer_length`, `version_2_with_negative`, `null_score_diff_threshold`
      (default: its SQuAD run's, else google-research/bert's).

  Returns:
    A tfbert model (`BertClassifier`, `BertTokenClassifier`, `BertSpanLabeler`,
    `BertSentenceEncoder`, `BertPretrainer`, `BertEncoder`) with text settings, or for an
    export an `ExportedModel`.

  Raises:
    FileNotFoundError, ValueError: naming the path and what is missing or wrong.
    tfbert.text.casing.CasingMismatchError: a `do_lower_case` the records contradict (or
      records that contradict each other), saying which keyword argument fixes it.
    TypeError: a path that is neither a str nor an `os.PathLike` (bytes), naming it.
  """
  path = files.as_path(path, "path")
  if vocab_file is not None:
    vocab_file = files.as_path(vocab_file, "vocab_file")
  do_lower_case = validation.plain_bool("do_lower_case", do_lower_case, optional=True)
  allow_casing_mismatch = validation.plain_bool("allow_casing_mismatch", allow_casing_mismatch)
  reinit_head = validation.plain_bool("reinit_head", reinit_head)
  labels = label_names(labels)
  _check_keywords(span_settings)
  given_settings = dict(span_settings)
  if max_seq_length is not None:
    given_settings["max_seq_length"] = max_seq_length
  problems = text_settings.type_problems(given_settings)
  if problems:  # Before the path is read; the same rules as the records'.
    raise ValueError("; ".join(problems))
  kind, source = locate(path)
  if kind == "export":
    _check_not_id_half(path)
    given = {name: value for name, value in dict(
        task=task, labels=labels, max_seq_length=max_seq_length, do_lower_case=do_lower_case,
        vocab_file=vocab_file, allow_casing_mismatch=allow_casing_mismatch or None,
        reinit_head=reinit_head or None, **span_settings).items() if value is not None}
    if given:
      # Its span windows too (sweep 32, B56: doc_stride was refused for none of the named).
      raise ValueError(f"{path}: an export is fixed when written (its S, vocabulary, casing, "
                       "labels and a span labeler's window settings, recorded in "
                       f"answer_question.json); load it without {', '.join(given)}, or load "
                       "the run's model.keras to choose them")
    return exported.ExportedModel(path)
  model, recorded = _read(kind, source)
  is_pair = recorded.pop("is_pair", None)
  if reinit_head and task is None:
    task = _own_task(model, source)
  if task is not None:
    source_model = model
    model = with_task(model, task, labels, source, reinit_head=reinit_head)
    if model is not source_model and isinstance(model, BertSentenceEncoder):
      # Its pooling has no weights: nothing is random (sweep 33, B159 warned it was).
      logging.info("%s: read as a sentence encoder (its pooling has no weights to train)",
                   source)
    elif model is not source_model:  # A fresh head: the source's task is not its own.
      is_pair = None
      # Its predictions are those of random weights until trained (sweep 31, B73: a fresh
      # tagger "found" four people in four words without a word), as the tools warn.
      logging.warning(f"{source}: the {task} head is fresh (random weights, not in the "
                      f"source): train it (fit) before its predictions mean anything")
  elif labels is not None:
    model = _with_labels(model, labels, source)
  spans = isinstance(model, BertSpanLabeler)
  if span_settings and not spans:
    raise ValueError(f"{', '.join(sorted(span_settings))}: a span labeler's settings, and "
                     f"{source} holds a {type(model).__name__}")
  vocab = vocab_file or _vocab_beside(kind, source)
  record = convert.read_text_record(source) if kind == "tfbert" else None
  if record is not None:
    convert.check_recorded_vocab(source, record, vocab, given=vocab_file is not None,
                                 beside=convert.source_vocab_file("tfbert", source))
  lower = _casing(do_lower_case, source, vocab, allow_casing_mismatch, record)
  limit = model.config.max_position_embeddings
  default = (text_settings.DEFAULT_SQUAD_MAX_SEQ_LENGTH if spans
             else text_settings.DEFAULT_MAX_SEQ_LENGTH)
  recorded_length = recorded.pop("max_seq_length", None)
  length = (max_seq_length if max_seq_length is not None
            else min(recorded_length or default, limit))
  recorded = {**recorded, **span_settings} if spans else {}
  query = recorded.get("max_query_length")
  if spans and query is not None and "max_query_length" not in span_settings and (
      length <= query + 3):  # A record for another S (given here, or a model's unfit one).
    logging.warning("%s: its recorded max_query_length %d leaves no context in a window of "
                    "max_seq_length %d: using a fitting one (pass max_query_length= to "
                    "choose)", source, query, length)
    del recorded["max_query_length"]
  if spans and "max_query_length" not in recorded:
    recorded["max_query_length"] = text_settings.fitting_query_length(length)
  settings = text_settings.TextSettings(vocab, lower, length, **recorded, is_pair=is_pair)
  if "null_score_diff_threshold" in span_settings:  # Given, as run_squad's flag.
    ignored = squad_postprocess.ignored_threshold(settings.version_2_with_negative,
                                                  settings.null_score_diff_threshold)
    if ignored:
      logging.warning("%s: %s", source, ignored)
  return text_settings.attach(model, settings)


# A span labeler's text settings beyond S (`text_settings.TextSettings`).
SPAN_SETTINGS = saving.SPAN_SETTINGS
# Every keyword `load` takes.
KEYWORDS = ("task", "labels", "max_seq_length", "do_lower_case", "vocab_file",
            "allow_casing_mismatch", "reinit_head", *SPAN_SETTINGS)
# Keywords of other calls that a `load` caller may pass it, with where each is read.
_OTHER_CALLS_KEYWORDS = {
    "is_pair": "a classifier's arity, which load reads from its records, a run's task or "
               "tfbert.save's record; where they do not tell, give it to "
               "tfbert.save(model, path, \"export\", is_pair=...)",
    "export_dtype": "a setting of tfbert.save(model, path, \"export\", export_dtype=...)",
}


def _check_keywords(given: dict[str, Any]) -> None:
  """Refuses keywords `load` does not take (`**span_settings` collects them), naming each
  with its close match among `KEYWORDS`, or the call that takes it.

  Raises:
    TypeError: naming the keywords, and every one `load` takes.
  """
  unknown = sorted(set(given) - set(SPAN_SETTINGS))
  if not unknown:
    return
  notes = []
  for name in unknown:
    close = difflib.get_close_matches(name, KEYWORDS, n=1)
    if name in _OTHER_CALLS_KEYWORDS:
      notes.append(f"{name} is {_OTHER_CALLS_KEYWORDS[name]}")
    elif close:
      notes.append(f"{name}: did you mean {close[0]}?")
  which = "arguments" if len(unknown) > 1 else "argument"
  why = f": {'; '.join(notes)}" if notes else ""
  raise TypeError(f"load() got unexpected keyword {which} {', '.join(unknown)}{why}; load "
                  f"takes {', '.join(KEYWORDS)} (the last {len(SPAN_SETTINGS)} a span "
                  "labeler's)")


def _check_not_id_half(path: str) -> None:
  """Refuses the `ids/` folder of a tfbert export (`export.ID_DIR`: token ids in, no
  raw-text signature), naming the export above it that reads text.

  Raises:
    ValueError: `path` is `<export>/ids`, naming `<export>`.
  """
  folder = path.rstrip("/\\")
  parent = os.path.dirname(folder) or files.parent(folder)
  if os.path.basename(folder) != export.ID_DIR or not files.exists(
      os.path.join(parent, "saved_model.pb")):
    return
  raise ValueError(f"{path} is the id-only half of the tfbert export {parent} (token ids in, "
                   f"no raw-text signature): load {parent} for text, or run {path} with "
                   "tf.saved_model.load for ids")


def _own_task(model: keras.Model, source: str) -> str:
  """The `TASKS` name of `model`'s own head, for `reinit_head=True` without `task=`.

  Raises:
    ValueError: a model without a task head (an encoder, a pretrainer), naming `task=`.
  """
  if isinstance(model, BertClassifier):
    return "regression" if model.num_classes == 1 else "classifier"
  for name, kind in _TASK_CLASSES.items():
    if type(model) is kind:
      return name
  raise ValueError(f"{source}: reinit_head=True starts a fresh task head, and it holds a "
                   f"{type(model).__name__} (no task head): pass task= as well (one of "
                   f"{', '.join(TASKS)})")


def _read(kind: str, source: str) -> tuple[keras.Model, dict[str, Any]]:
  """(the model, the text settings its records give: `recorded_settings`)."""
  if kind == "sentence-transformers":
    model, config = sentence_transformers.load_sentence_encoder(source)
    return model, {"max_seq_length": config.max_seq_length}
  model = (convert.read_tfbert_model(source) if kind == "tfbert"
           else convert.read_model(kind, source))
  return model, recorded_settings(model, kind, source)


def recorded_settings(model: keras.Model, kind: str, source: str) -> dict[str, Any]:
  """The text settings the records of `source` (of `kind`, as `locate` names it; `model`
  read from it) give, as `load` reads them: S (`max_seq_length`: its run's, else
  `tokenizer_config.json`'s `model_max_length`), a classifier's `is_pair` (its run's task,
  else what `tfbert.save` recorded) and a span labeler's `SPAN_SETTINGS` (its SQuAD run's,
  else what `tfbert.save` recorded); each only when recorded. Also for convert_checkpoint,
  which writes them with its output, and export_tflite's S."""
  settings = _run_settings(model, source) if kind == "tfbert" else {}
  if kind == "tfbert" and isinstance(model, BertClassifier) and "is_pair" not in settings:
    settings.update(_saved_settings(source))
  if kind == "hf" and isinstance(model, BertClassifier):  # `tfbert.save`'s arity record.
    is_pair = huggingface.read_hf_task(source).is_pair
    settings.update({} if is_pair is None else {"is_pair": is_pair})
  if isinstance(model, BertSpanLabeler) and "doc_stride" not in settings:
    settings.update(_saved_span_settings(kind, source))
  if "max_seq_length" not in settings:
    directory = source if kind == "hf" else files.parent(source)
    length = _recorded_max_length(directory)
    if length:
      settings["max_seq_length"] = length
  return settings


def _read_json(path: str) -> Any:
  """The JSON value of `path`; a bad file, or a key given twice, named."""
  return json_values.read(path)


def _run_settings(model: keras.Model, keras_file: str) -> dict[str, Any]:
  """S (and a SQuAD run's span settings, a classifier run's `is_pair`) from the
  `run_config.json` of the run that wrote `keras_file` (`<run>/model.keras` or
  `<run>/best/model.keras`)."""
  for directory in casing.checkpoint_directories(keras_file):
    record = os.path.join(directory, casing.RUN_CONFIG)
    files.check_not_dangling(record, "run config")
    if not files.isfile(record):
      continue
    values = _read_json(record)
    settings = {"max_seq_length": task_registry.run_seq_length(model, values, record)}
    if isinstance(model, BertClassifier):  # Its task's arity (read by `run_seq_length`).
      settings["is_pair"] = ClassifierRunConfig.from_json(json.dumps(values)).task().is_pair
    if isinstance(model, BertSpanLabeler):
      config = SquadRunConfig.from_json(json.dumps(values))
      settings.update(max_query_length=config.features.max_query_length,
                      doc_stride=config.features.doc_stride,
                      max_answer_length=config.postprocess.max_answer_length,
                      version_2_with_negative=config.postprocess.version_2_with_negative,
                      null_score_diff_threshold=config.postprocess.null_score_diff_threshold)
    return settings
  return {}


def _saved_settings(keras_file: str) -> dict[str, Any]:
  """A classifier's `is_pair`, as `tfbert.save` records it beside its `.keras` file: the
  record's entry of this file's name (`convert.read_arities`); none: unknown."""
  path = os.path.join(files.parent(keras_file), convert.TEXT_SETTINGS_FILE)
  files.check_not_dangling(path, "text settings record")
  if not files.isfile(path):
    return {}
  is_pair = convert.read_arities(path).get(os.path.basename(keras_file))
  return {} if is_pair is None else {"is_pair": is_pair}


def _saved_span_settings(kind: str, source: str) -> dict[str, Any]:
  """A span labeler's `SPAN_SETTINGS` as `tfbert.save` records them: a Hugging Face
  `config.json`'s "tfbert" key, or the `span_settings.json` entry of a `.keras` file's
  (Google prefix's) name; none recorded: {}."""
  if kind == "hf":
    where = f"{os.path.join(source, 'config.json')}: {huggingface.TFBERT_KEY}"
    return _checked_spans(huggingface.read_hf_task(source).span_settings or {}, where)
  if kind not in ("tfbert", "google"):
    return {}
  path = os.path.join(files.parent(source), convert.SPAN_SETTINGS_FILE)
  files.check_not_dangling(path, "span settings record")
  if not files.isfile(path):
    return {}
  name = os.path.basename(source)
  return _checked_spans(dict(convert.read_span_records(path).get(name, {})),
                        f"{path}: {name}")


def _checked_spans(spans: dict[str, Any], where: str) -> dict[str, Any]:
  """`spans`, a record's span settings, when each has its type (`text_settings.type_problems`).

  Raises:
    ValueError: naming `where` (the record) and each setting of the wrong type.
  """
  problems = text_settings.type_problems(spans)
  if problems:
    raise ValueError(f"{where}: {'; '.join(problems)}: correct it, or write it again with "
                     "tfbert.save")
  return spans


def _recorded_max_length(directory: str) -> Optional[int]:
  """`tokenizer_config.json`'s `model_max_length` in `directory` (what `tfbert.save` and
  Hugging Face record), when a real length (transformers writes 1e30 for "none"); in a
  sentence-transformers directory its `sentence_bert_config.json`'s `max_seq_length`
  first, as `load` reads it there (MiniLM's 256 against its tokenizer's 512: read as a
  Hugging Face directory, convert_checkpoint kept 512; sweep 29, B55)."""
  sentence = os.path.join(directory, sentence_transformers.SENTENCE_CONFIG_FILE)
  if files.isfile(sentence):
    value = _read_json(sentence)
    value = value.get("max_seq_length") if isinstance(value, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
      return value
  path = os.path.join(directory, huggingface.TOKENIZER_FILES[1])
  files.check_not_dangling(path, "tokenizer config")
  if not files.isfile(path):
    return None
  value = _read_json(path)
  value = value.get("model_max_length") if isinstance(value, dict) else None
  return int(value) if isinstance(value, (int, float)) and 0 < value < 1e6 else None


def _vocab_beside(kind: str, source: str) -> str:
  directory = source if kind in ("hf", "sentence-transformers") else files.parent(source)
  if kind == "sentence-transformers":
    directory = sentence_transformers.read_config(source).transformer_dir
  vocab = os.path.join(directory, casing.VOCAB)
  if files.dangling_link(vocab) is not None:  # Not "no vocab.txt beside the model".
    raise FileNotFoundError(f"{source}: {files.missing_file_message(vocab, 'vocabulary')}: "
                            "pass vocab_file=")
  if not files.isfile(vocab):
    raise FileNotFoundError(f"{source}: no {casing.VOCAB} beside the model (in {directory}): "
                            "pass vocab_file=")
  return vocab


def _with_labels(model: keras.Model, labels: Sequence[str], source: str,
                 reinit_hint: bool = True) -> keras.Model:
  """`model` when `labels` are its own, by name and in order; a classifier without names
  (a Google checkpoint's) takes them when they are as many as its classes.

  Args:
    reinit_hint: name `reinit_head=True` in the refusal (False for a `labels.txt` record,
      which that keyword does not change).

  Raises:
    ValueError: labels that are not the model's, naming `reinit_head=True` (a fresh head
      with them) when `reinit_hint`.
  """
  labels = tuple(labels)  # A str was refused by the callers (`load`, `with_task`).
  ours = getattr(model, "labels", None)
  fresh = ("; for a fresh head with these labels on its encoder, pass reinit_head=True"
           if reinit_hint and len(labels) > 1 else "")
  if ours is None and isinstance(model, BertClassifier) and model.num_classes > 1:
    if len(labels) != model.num_classes:
      raise ValueError(f"{source}: {len(labels)} labels {list(labels)} for a classifier of "
                       f"{model.num_classes} classes{fresh}")
    named = BertClassifier(model.config, model.num_classes, model.dropout_rate, labels=labels)
    named.build()
    named.set_weights(model.get_weights())
    return google_checkpoint.carry_source(model, named)
  if ours is None:
    raise ValueError(f"{source}: labels {list(labels)} for a {type(model).__name__}, which "
                     "has none; to train a fresh head with these, pass task= as well")
  if labels != tuple(ours):
    kind = type(model).__name__
    raise ValueError(f"{source}: labels {list(labels)} are not the model's ({list(ours)}): "
                     f"it is a {kind} already, so its head is kept and labels= must be its "
                     f"own, in order, or left out{fresh}")
  return model


def _casing(do_lower_case: Optional[bool], source: str, vocab: str,
            allow_mismatch: bool, record: Optional[dict[str, Any]] = None) -> bool:
  """`casing.resolve_do_lower_case` for `load`: a mismatch names the keyword arguments that
  fix it (`do_lower_case=False`, `allow_casing_mismatch=True`), not the tools' flags, which
  an API caller has no way to pass. A `.keras` file's own record (`record`, its vocabulary
  checked) decides in place of the vocabulary's content, which it was saved with."""
  evidence = casing.checkpoint_casing(source, vocab)
  if record is not None:
    content = casing.vocab_casing(vocab)
    evidence = [casing.Casing(record["do_lower_case"],
                              f"{source} (its tfbert record do_lower_case: "
                              f"{str(record['do_lower_case']).lower()})")] + [
                                  e for e in evidence if e != content]
  return casing.resolve_do_lower_case(do_lower_case, evidence,
                                      allow_mismatch=allow_mismatch,
                                      terms=casing.keywords("tfbert.load"))


def label_names(labels: Any) -> Optional[tuple]:
  """`labels=` as a tuple of names (None kept): a list, a tuple, or a 1-D array of them (a
  NumPy array, a pandas Series), each NumPy scalar as its Python value.

  Raises:
    TypeError: a str (one name is no sequence of them), or anything else that is not an
      ordered sequence (a set, a dict, an array of another rank), naming it; a name that
      is not a str (`tfbert.models.check_label_names`).
    ValueError: an empty name, or one holding a line break (`check_label_names`).
  """
  if labels is None:
    return None
  if isinstance(labels, (str, bytes)):
    raise TypeError(f"labels= must be a sequence of names, not the str {labels!r}")
  array = text_calls.array_like(labels)
  if isinstance(labels, np.ndarray) or array is not None:
    array = np.asarray(labels)
    if array.ndim != 1:
      raise TypeError(f"labels= must be a 1-D sequence of names, got an array of shape "
                      f"{array.shape}")
    return _unique(check_label_names(array.tolist()))
  if not isinstance(labels, (list, tuple)):
    raise TypeError(f"labels= must be a list, a tuple or a 1-D array of names (in class-id "
                    f"order), got a {type(labels).__name__}")
  return _unique(check_label_names(
      label.item() if isinstance(label, np.generic) else label for label in labels))


def _unique(names: tuple) -> tuple:
  """`names`, each once.

  Raises:
    ValueError: naming the labels given more than once.
  """
  twice = sorted({repr(n) for i, n in enumerate(names) if n in names[:i]})
  if twice:
    raise ValueError(f"labels= names {', '.join(twice)} more than once ({list(names)}): each "
                     "class needs a name of its own")
  return names


def with_task(model: keras.Model, task: str, labels: Optional[Sequence[str]],
              source: str = "the model", reinit_head: bool = False) -> keras.Model:
  """`model` as `task` (`TASKS`): itself when it is that task already (its labels checked
  against `labels` by name) and not `reinit_head`, else a new task model holding its
  encoder's weights and a fresh head (of `labels`; with `reinit_head` and none given, the
  model's own).

  Raises:
    ValueError: an unknown task; a classifier or tagger without labels, or with one (a
      classifier needs 2 or more; one score is task="regression"); labels that are not the
      model's own (naming `reinit_head=True`).
  """
  if task not in _TASK_CLASSES:
    raise ValueError(f"unknown task {task!r}; use one of {', '.join(TASKS)}")
  kind = _TASK_CLASSES[task]
  same = type(model) is kind and (task != "regression") == (getattr(model, "num_classes", 2) > 1)
  labels = label_names(labels)
  if labels is not None and task not in ("classifier", "tagger"):
    raise ValueError(f"labels= names a classifier's or tagger's outputs; task={task!r} has "
                     "none")
  if task == "classifier" and labels is not None and len(labels) == 1:
    raise ValueError(f"task='classifier' on {source}: labels={list(labels)} names 1 class; "
                     "a classifier needs at least 2 label names (for one score, "
                     "task='regression' without labels=)")
  if reinit_head and task == "sentence_encoder":
    raise ValueError(f"reinit_head=True on {source}: a sentence encoder's head is its "
                     "pooling, which has no weights to start fresh; load it without "
                     "reinit_head (its pooling mode is the source's)")
  if same and not reinit_head:
    return model if labels is None else _with_labels(model, labels, source)
  if same and labels is None:
    labels = getattr(model, "labels", None)
  if task in ("classifier", "tagger") and (labels is None or not len(labels)):
    raise ValueError(f"task={task!r} on {source} needs labels= (the class names, by id)")
  config = model.config
  if task == "classifier":
    new = BertClassifier(config, len(labels), labels=labels)
  elif task == "regression":
    new = BertClassifier(config, 1)
  elif task == "tagger":
    new = BertTokenClassifier(config, labels)
  elif task == "span_labeler":
    new = BertSpanLabeler(config)
  else:
    new = BertSentenceEncoder(config)
  new.build()
  encoder = model if isinstance(model, BertEncoder) else model.encoder
  new.encoder.set_weights(encoder.get_weights())
  if reinit_head:
    logging.warning("reinit_head: %s: a fresh %s head%s on its encoder; its own head (of "
                    "its %s) is not used", source, task,
                    f" (labels {list(labels)})" if labels is not None else "",
                    type(model).__name__)
  return google_checkpoint.carry_source(model, new)

