"""Each task model's raw-text call, through the code of its export's raw-text signature.

One implementation: a call builds (once per model) the task's export module
(`EmbeddingExport`, `ClassifierExport`, `TaggerExport`, `SquadExport`, `FillMaskExport`)
reading the model's live variables (`frozen=False`) and calls the very `tf.function` a
SavedModel saves as its raw-text signature; the outputs become Python values through the
converters below, which `tfbert.inference.exported` applies to a loaded SavedModel's
signature outputs too. So a model answers in Python what its export answers
(`tests/inference/raw_text_test.py` holds them equal), and a model trained further answers
with its new weights.

* sentence encoder: `encode(texts)` -> float32 [N, H] (sentence-transformers' `encode`);
  `cosine_similarity(a, b)`.
* classifier: `classify(texts or (text_a, text_b) pairs)` -> {"label", "score",
  "probabilities": {label: p}} per text; regression: {"score"}.
* tagger: `tag(texts)` -> per text its entities {"entity_group", "word", "start", "end"}
  (character offsets, `text[start:end] == word`), words and chunking as the export's
  `tag_text` (transformers' token-classification pipeline with simple aggregation, without
  a score).
* span labeler: `answer(questions, contexts)` -> {"answer", "score", "start", "end"} (+
  "null_score_diff" in v2.0) per question: the windows, n-best and no-answer rule of
  `tools/run_squad.py` (`tfbert.squad.squad_features`, `squad_postprocess`) on the logits
  of the export's id signature; `score` is the answer's start + end logit.
* pretrainer: `fill_mask(texts, top_k)` -> per text, per `[MASK]`, the top-k tokens
  {"token", "token_str", "score"} of the MLM head.

Importing this module registers it with the model classes (`tfbert.text.text_calls`).
Inputs are batched (`batch_size`) with a Keras progress bar when there is more than one
batch (`verbose`). `features_of_texts` packs raw text into model features for Keras'
`predict`/`fit` (`tfbert.text.text_calls`).

Shape legend: N texts, H hidden width, S sequence, C classes.
"""

import dataclasses
import math
import re
import sys
from typing import Any, Callable, Iterator, Optional, Sequence, Union

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from tfbert.classifier import classifier_export, classifier_features
from tfbert.embeddings import embedding_export, embedding_metrics
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.encoder import BertEncoder
from tfbert.inference import text_settings
from tfbert.models import BertClassifier, BertPretrainer, BertSpanLabeler, BertTokenClassifier
from tfbert.pretraining import pretraining_export
from tfbert.runtime import validation
from tfbert.serving import export
from tfbert.squad import squad_data, squad_export, squad_features, squad_postprocess
from tfbert.tagging import tagging_export
from tfbert.text import inputs, text_calls, text_normalization, tokenization

MASK = pretraining_export.MASK  # The literal mask token of `fill_mask`.
Texts = Union[str, Sequence[str]]


def _decoded(item: Any, what: str, index: int) -> Any:
  if isinstance(item, bytes):
    try:
      return item.decode("utf-8")
    except UnicodeDecodeError as e:
      raise ValueError(f"{what}[{index}] is not UTF-8 text ({e.reason} at byte {e.start})") from e
  return item


def _sequence(texts: Any, what: str) -> list:
  """`texts` as a list, if it is a sequence of texts at all: a list, a tuple, a NumPy array
  or a tensor, or a 1-D array-like (`text_calls.array_like`: a pandas Series or Index).

  Raises:
    TypeError: naming `what` and what it is (an array-like of another rank by its shape).
  """
  if isinstance(texts, tf.Tensor):
    texts = texts.numpy()
  if isinstance(texts, np.ndarray):
    return texts.tolist()
  if isinstance(texts, (list, tuple)):
    return list(texts)
  array = text_calls.array_like(texts)
  if array is not None and array.ndim == 1:
    return array.tolist()
  shape = (f" of shape {array.shape} (pass one column: a 1-D sequence)"
           if array is not None else "")
  raise TypeError(f"{what} must be a str or a list of str (or of (text_a, text_b) pairs), got "
                  f"a {type(texts).__name__}{shape}")


def _unicode(text: str, what: str) -> str:
  """`text`, refused unless it is valid Unicode: a lone surrogate (half of a UTF-16 pair,
  as a bad decode or a JSON escape leaves) has no UTF-8, so TensorFlow cannot take it."""
  try:
    text.encode("utf-8")
  except UnicodeEncodeError as e:
    raise ValueError(
        f"{what} is not valid Unicode: character {e.start}, {text[e.start]!r}, is a lone "
        f"surrogate (in {text[max(0, e.start - 20):e.start + 20]!r}); remove or replace it, "
        "e.g. text.encode('utf-8', 'replace').decode('utf-8')") from None
  return text


def text_list(texts: Texts, what: str = "texts", element: str = "") -> tuple[list[str], bool]:
  """(the texts as a list of str, whether one str was given); `element` follows the index
  in the messages (a pair's "[0]": "texts[3][0]").

  Raises:
    TypeError: naming every item that is not a text (`text_calls.refuse_items`: the first
      ten and how many more), and the undecodable ones with them; ValueError: naming every
      item of bytes that are not UTF-8, or of a str that is not valid Unicode (naming the
      character), when all are texts.
  """
  if isinstance(texts, str):
    return [_unicode(texts, what)], True
  items, problems = _checked_items(_sequence(texts, what), what, element)
  text_calls.refuse_items([error for _, error in problems], what)
  return items, False


def _checked_items(sequence: list, what: str, element: str
                   ) -> tuple[list, list[tuple[int, Exception]]]:
  """(the items, decoded; (index, error) of each that is not a text): the index kept as a
  number, so that problems are ordered by it, never by their messages' wording."""
  items, problems = [], []
  for i, item in enumerate(sequence):
    name = f"{what}[{i}]{element}"
    try:
      item = _decoded(item, what, i)
      if not isinstance(item, str):
        raise TypeError(f"{name} is a {type(item).__name__}, not a str")
      _unicode(item, name)
    except (TypeError, ValueError) as error:
      problems.append((i, error))
    items.append(item)
  return items, problems


def text_pairs(texts, what: str = "texts") -> tuple[list[str], Optional[list[str]], bool]:
  """(first texts, second texts or None, whether one text or pair was given): strings, or
  (text_a, text_b) pairs (a tuple of two strings is one pair). Every item that is not one
  is named (`text_calls.refuse_items`), not the first only."""
  if isinstance(texts, tuple) and len(texts) == 2 and all(isinstance(t, str) for t in texts):
    return [_unicode(texts[0], f"{what}[0]")], [_unicode(texts[1], f"{what}[1]")], True
  if isinstance(texts, str):
    return [_unicode(texts, what)], None, True
  items = _sequence(texts, what)
  if not items or not isinstance(items[0], (list, tuple)):
    singles, _ = text_list(items, what)
    return singles, None, False
  text_calls.refuse_items(
      [TypeError(f"{what}[{i}]: expected a str or a (text_a, text_b) pair, got {pair!r}")
       for i, pair in enumerate(items)
       if not (isinstance(pair, (list, tuple)) and len(pair) == 2)], what)
  problems = []  # (index, side, error): "texts[3][0]" before "texts[3][1]" before "texts[4][0]".
  columns = []
  for side in (0, 1):
    column, found = _checked_items([p[side] for p in items], what, f"[{side}]")
    columns.append(column)
    problems.extend((i, side, error) for i, error in found)
  problems.sort(key=lambda problem: problem[:2])
  text_calls.refuse_items([error for _, _, error in problems], what)
  return columns[0], columns[1], False


def classifier_texts(texts, is_pair: Optional[bool], what: str = "texts",
                     whose: str = "this classifier"
                     ) -> tuple[list[str], Optional[list[str]], bool]:
  """`text_pairs` of a classifier's input, checked against its arity `is_pair` (None:
  unknown, whatever is given is read); no texts at all suit either arity.

  Raises:
    ValueError: single texts for a pair classifier, pairs for a single-text one.
  """
  first, second, one = text_pairs(texts, what)
  if is_pair is None or (not first and not one):
    return first, ([] if is_pair and second is None else second), one
  if is_pair and second is None:
    got = "one text" if one else "single texts"
    raise ValueError(f"{whose} reads sentence pairs: pass {what} as a (text_a, text_b) pair "
                     f"or a list of such pairs, got {got}")
  if not is_pair and second is not None:
    got = ("a tuple of two str, which is one (text_a, text_b) pair" if one
           else "(text_a, text_b) pairs")
    raise ValueError(f"{whose} reads single texts: pass {what} as a str or a list of str, "
                     f"got {got}")
  return first, second, one


def record_arity(model: keras.Model, x, what: str = "x") -> None:
  """A classifier of unknown arity (`TextSettings.is_pair` None) that `fit` trains on raw
  text `x` reads what it was trained on from then on: single texts, or (text_a, text_b)
  pairs (a model trained on single texts once took pairs in `predict` without a word, and
  exported needing `is_pair=`). Any other model, or a known arity: nothing changes."""
  if not isinstance(model, BertClassifier):
    return
  settings = text_settings.settings_of(model)
  first, second, _ = text_pairs(x, what)
  if settings.is_pair is not None or not first:
    return
  text_settings.attach(model, dataclasses.replace(settings, is_pair=second is not None))
  logging.info("%s trained on %s: it reads them from now on (is_pair=%s)",
               type(model).__name__, "(text_a, text_b) pairs" if second is not None
               else "single texts", second is not None)


def batches(count: int, batch_size: int, verbose: Any = "auto") -> Iterator[slice]:
  """Slices of `batch_size` over `count` items, with a Keras progress bar over more than
  one batch (`verbose` 0 or False: none)."""
  batch_size = validation.plain_int("batch_size", batch_size)
  bar = None
  if verbose not in (0, False) and count > batch_size:
    bar = keras.utils.Progbar(count, unit_name="text")
  for start in range(0, count, batch_size):
    yield slice(start, min(count, start + batch_size))
    if bar is not None:
      bar.update(min(count, start + batch_size))


def tokenizer_of(model: keras.Model) -> tokenization.WordPieceTokenizer:
  """The model's `WordPieceTokenizer` (its attached vocabulary and casing), made once."""
  settings = text_settings.settings_of(model)
  return text_settings.cached(model, "tokenizer", lambda: tokenization.WordPieceTokenizer(
      settings.vocab_file, settings.do_lower_case))


def _check_model(model: keras.Model, kind: type, call: str) -> None:
  if not isinstance(model, kind):
    raise TypeError(f"{call} is a {kind.__name__}'s; got a {type(model).__name__}")


# --- sentence encoder ---------------------------------------------------------------------


def encode(model: BertSentenceEncoder, texts: Texts, batch_size: int = 32,
           normalize: bool = False, verbose: Any = "auto") -> np.ndarray:
  """float32 [N, H] embeddings (one text: [H]), through the `embed_text` signature's code.

  Args:
    model: a `BertSentenceEncoder` with text settings (`tfbert.load`).
    texts: a str or strs.
    batch_size: texts per call.
    normalize: L2-normalize the embeddings (a model that normalizes already returns unit
      vectors either way: sentence-transformers' `normalize_embeddings`).
    verbose: a progress bar over more than one batch unless 0.
  """
  _check_model(model, BertSentenceEncoder, "encode")
  normalize = validation.plain_bool("normalize", normalize)
  items, one = text_list(texts)
  call = _embed_text_function(model)
  rows = [call(tf.constant(items[s]))["embeddings"].numpy() for s in
          batches(len(items), batch_size, verbose)]
  return stacked_embeddings(rows, model.config.hidden_size, normalize, one)


def stacked_embeddings(rows: Sequence[np.ndarray], width: int, normalize: bool,
                       one: bool) -> np.ndarray:
  """The `embed_text` outputs of each batch as float32 [N, H] (H = `width` when N is 0),
  L2-normalized when asked; one text: its row [H]."""
  embeddings = (np.concatenate(rows) if rows else
                np.zeros((0, width), np.float32)).astype(np.float32)
  if normalize:
    embeddings = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True),
                                         1e-12)
  return embeddings[0] if one else embeddings


def _embed_text_function(model: BertSentenceEncoder) -> Callable:
  settings = text_settings.settings_of(model)
  return text_settings.cached(model, "embed_text", lambda: embedding_export.EmbeddingExport(
      model, settings.vocab_file, settings.do_lower_case, settings.max_seq_length,
      frozen=False)).embed_text


cosine_similarity = embedding_metrics.cosine_similarity


# --- classifier ---------------------------------------------------------------------------


def label_names(model_or_labels, num_classes: int) -> list[str]:
  """The class names: the model's labels, else transformers' `LABEL_<i>`."""
  labels = getattr(model_or_labels, "labels", model_or_labels)
  return list(labels) if labels is not None else [f"LABEL_{i}" for i in range(num_classes)]


def classifications(outputs: dict[str, Any], labels: Optional[Sequence[str]]
                    ) -> list[dict[str, Any]]:
  """`classify_text`'s outputs [B, ...] as one dict per row: {"label", "score" (its
  probability), "probabilities": {label: p}}, or {"score"} for regression."""
  if "probabilities" not in outputs:  # Regression: `score` [B].
    return [{"score": float(s)} for s in np.asarray(outputs["score"])]
  probabilities = np.asarray(outputs["probabilities"])
  names = label_names(labels, probabilities.shape[1])
  rows = []
  for row in probabilities:
    best = int(np.argmax(row))
    rows.append({"label": names[best], "score": float(row[best]),
                 "probabilities": dict(zip(names, row.astype(float).tolist()))})
  return rows


def classify(model: BertClassifier, texts, batch_size: int = 32,
             verbose: Any = "auto") -> Union[dict, list[dict]]:
  """Class names with probabilities (regression: scores), through `classify_text`'s code.

  Args:
    model: a `BertClassifier` with text settings.
    texts: a str, strs, a (text_a, text_b) pair or pairs: as the model reads, when its
      settings know (`TextSettings.is_pair`).
    batch_size: texts per call.
    verbose: a progress bar over more than one batch unless 0.

  Returns:
    One dict per text (see `classifications`); one text or pair: its dict.
  """
  _check_model(model, BertClassifier, "classify")
  first, second, one = classifier_texts(texts, text_settings.settings_of(model).is_pair)
  call = _classify_text_function(model, second is not None)
  rows = []
  for s in batches(len(first), batch_size, verbose):
    args = [tf.constant(first[s])] + ([tf.constant(second[s])] if second is not None else [])
    rows.extend(classifications({k: v.numpy() for k, v in call(*args).items()},
                                model.labels))
  return rows[0] if one else rows


def _classify_text_function(model: BertClassifier, is_pair: bool) -> Callable:
  settings = text_settings.settings_of(model)
  return text_settings.cached(model, ("classify_text", is_pair),
                              lambda: classifier_export.ClassifierExport(
                                  model, settings.vocab_file, settings.do_lower_case,
                                  settings.max_seq_length, model.labels, is_pair,
                                  frozen=False)).classify_text


# --- tagger -------------------------------------------------------------------------------


def entities(texts: Sequence[str], outputs: dict[str, Any]) -> list[list[dict[str, Any]]]:
  """`tag_text`'s outputs as each text's entities: {"entity_group", "word", "start", "end"}
  (characters: `text[start:end]` is the word)."""
  result = []
  for i, text in enumerate(texts):
    count = int(outputs["num_entities"][i])
    kinds = [k.decode("utf-8") if isinstance(k, bytes) else str(k)
             for k in np.asarray(outputs["entity_types"][i])[:count]]
    starts = np.asarray(outputs["entity_starts"][i])[:count].tolist()
    ends = np.asarray(outputs["entity_ends"][i])[:count].tolist()
    result.append([{"entity_group": kind, "word": text[start:end], "start": start,
                    "end": end} for kind, start, end in zip(kinds, starts, ends)])
  return result


def tag(model: BertTokenClassifier, texts: Texts, batch_size: int = 32,
        verbose: Any = "auto") -> Union[list[dict], list[list[dict]]]:
  """Each text's entities (see `entities`), through `tag_text`'s code: words are BERT's
  (whitespace and punctuation), each tagged by its first wordpiece; a text beyond S - 2
  wordpieces is tagged on its first S - 2 (split long texts, e.g. by sentence)."""
  _check_model(model, BertTokenClassifier, "tag")
  items, one = text_list(texts)
  settings = text_settings.settings_of(model)
  call = text_settings.cached(model, "tag_text", lambda: tagging_export.TaggerExport(
      model, settings.vocab_file, settings.do_lower_case, settings.max_seq_length,
      frozen=False)).tag_text
  rows = []
  for s in batches(len(items), batch_size, verbose):
    outputs = {k: v.numpy() for k, v in call(tf.constant(items[s])).items()}
    rows.extend(entities(items[s], outputs))
  return rows[0] if one else rows


# --- span labeler -------------------------------------------------------------------------


def answer(model: BertSpanLabeler, questions, contexts=None, batch_size: int = 32,
           verbose: Any = "auto") -> Union[dict, list[dict]]:
  """Answers to questions about contexts, as `tools/run_squad.py` answers its predict file.

  Every context is cut into windows of S (`doc_stride` apart; `squad_features`), each
  window scored by the export's id signature (`serving_default`'s code), and the answer
  chosen over the windows as the tool does (`squad_postprocess`: n-best 20, at most
  `max_answer_length` wordpieces, v2.0's null-score rule with the attached threshold).

  Args:
    model: a `BertSpanLabeler` with text settings.
    questions: a question, or questions; or (question, context) pairs (`contexts` None).
    contexts: one context per question.
    batch_size: windows per call.
    verbose: a progress bar over more than one batch unless 0.

  Returns:
    Per question {"answer", "score" (start + end logit; None for ""), "start", "end"
    (characters in its context; None for "")}, and "null_score_diff" in v2.0; one question:
    its dict.
  """
  _check_model(model, BertSpanLabeler, "answer")
  questions, contexts, one = questions_and_contexts(questions, contexts)
  settings = text_settings.settings_of(model)
  examples = [squad_data.SquadExample(str(i), q, c, ()) for i, (q, c) in
              enumerate(zip(questions, contexts))]
  features = squad_features.convert_examples_to_features(
      examples, tokenizer_of(model), squad_features.FeatureConfig(
          settings.max_seq_length, settings.doc_stride, settings.max_query_length),
      log_every=0).features
  call = _span_logits_function(model)
  start_logits, end_logits = [], []
  for s in batches(len(features), batch_size, verbose):
    outputs = call(*[tf.constant(np.stack([getattr(f, name) for f in features[s]]))
                     for name in export.FEATURE_NAMES])
    start_logits.append(outputs["start_logits"].numpy())
    end_logits.append(outputs["end_logits"].numpy())
  width = settings.max_seq_length
  predictions = squad_postprocess.postprocess_predictions(
      examples, features,
      np.concatenate(start_logits) if start_logits else np.zeros((0, width), np.float32),
      np.concatenate(end_logits) if end_logits else np.zeros((0, width), np.float32),
      squad_postprocess.PostprocessConfig(
          max_answer_length=settings.max_answer_length,
          version_2_with_negative=settings.version_2_with_negative,
          null_score_diff_threshold=settings.null_score_diff_threshold))
  rows = [answer_row(p, settings.version_2_with_negative) for p in predictions]
  return rows[0] if one else rows


def questions_and_contexts(questions, contexts=None) -> tuple[list[str], list[str], bool]:
  """(questions, their contexts, whether one question was given) of `answer`'s arguments:
  questions and contexts, or (question, context) pairs.

  Raises:
    TypeError: no contexts; ValueError: not as many contexts as questions, or a blank
      question (`text_normalization.is_blank`), each named by its index.
  """
  paired = contexts is None
  if paired:
    questions, contexts, one = text_pairs(questions, "questions")
    if contexts is None:
      raise TypeError("answer needs contexts: answer(questions, contexts) or "
                      "answer([(question, context), ...])")
  else:
    questions, one = text_list(questions, "questions")
    contexts, _ = text_list(contexts, "contexts")
  if len(questions) != len(contexts):
    raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts")
  # A blank question was answered with a span and a score, where the SQuAD reader skips it
  # (sweep 33, A63). (A blank context is answered "": nothing to answer from.)
  blank = []
  for i, question in enumerate(questions):
    if text_normalization.is_blank(question):
      name = "the question" if one else f"questions[{i}]{'[0]' if paired else ''}"
      blank.append(ValueError(f"{name} is blank ({question!r}, no wordpiece): there is "
                              "nothing to ask; give a question, or leave the item out "
                              "(run_squad.py skips a blank question)"))
  text_calls.refuse_items(blank, "questions")
  return questions, contexts, one


def answer_row(prediction: squad_postprocess.SquadPrediction, v2: bool) -> dict[str, Any]:
  """One answer as `answer` returns it (and `tfbert.inference.exported`'s `answer`).

  Args:
    prediction: a question's postprocessed prediction (`squad_postprocess`).
    v2: whether the model answers SQuAD 2.0 (may say "no answer").

  Returns:
    {"answer": text ("" for no answer), "score": its start + end logit (None for no
    answer), "start", "end": its character span in the context}, and with `v2`
    "null_score_diff" (the no-answer score minus the best answer's).
  """
  chosen = next((e for e in prediction.nbest if e.text == prediction.text), None)
  score = (float(chosen.start_logit + chosen.end_logit)
           if prediction.text and chosen is not None else None)
  row = {"answer": prediction.text, "score": score, "start": prediction.start_char,
         "end": prediction.end_char}
  if v2:
    row["null_score_diff"] = prediction.null_score_diff
  return row


def _span_module(model: BertSpanLabeler) -> squad_export.SquadExport:
  settings = text_settings.settings_of(model)
  return text_settings.cached(model, "answer_question", lambda: squad_export.SquadExport(
      model, settings.vocab_file, settings.do_lower_case, settings.max_seq_length,
      settings.max_query_length, settings.max_answer_length,
      settings.version_2_with_negative, settings.null_score_diff_threshold, frozen=False))


def _span_logits_function(model: BertSpanLabeler) -> Callable:
  return _span_module(model).id_functions["serving_default"]


# --- pretrainer ---------------------------------------------------------------------------


def fill_mask(model: BertPretrainer, texts: Texts, top_k: int = 5, batch_size: int = 32,
              verbose: Any = "auto") -> list:
  """The MLM head's top-k tokens for every `[MASK]` of every text, through the `fill_mask`
  signature's code (`tfbert.pretraining.pretraining_export`).

  `[MASK]` is the literal mask token (as typed, whatever the casing): the text around it
  is tokenized and the mask id put between, so "Paris is the [MASK] of France." asks for
  one wordpiece.

  Returns:
    Per text, per mask (in order), `top_k` dicts {"token" (id), "token_str", "score" (the
    softmax probability)}, best first; one text: its list of masks (`filled_masks`).

  Raises:
    ValueError: naming the text without a `[MASK]`, or whose mask lies beyond S - 2
      wordpieces; a `top_k` outside [1, V].
  """
  _check_model(model, BertPretrainer, "fill_mask")
  settings = text_settings.settings_of(model)
  call = text_settings.cached(model, "fill_mask", lambda: pretraining_export.FillMaskExport(
      model, settings.vocab_file, settings.do_lower_case, settings.max_seq_length,
      frozen=False)).fill_mask
  return fill_masks(call, texts, top_k, batch_size, verbose)


def fill_masks(call: Callable, texts: Texts, top_k: int, batch_size: int,
               verbose: Any) -> list:
  """`fill_mask` of the texts through `call`, a `fill_mask` signature (the model's, or a
  loaded export's): batches of texts in, `filled_masks` out."""
  items, one = text_list(texts)
  top_k = validation.plain_int("top_k", top_k)
  text_calls.refuse_items([ValueError(f"texts[{index}] has no {MASK}: {text[:80]!r}")
                           for index, text in enumerate(items) if MASK not in text], "texts")
  results = []
  for s in batches(len(items), batch_size, verbose):
    try:
      outputs = call(text=tf.constant(items[s], tf.string), top_k=tf.constant(top_k, tf.int32))
    except tf.errors.InvalidArgumentError as error:  # The signature's checks, named.
      raise ValueError(_fill_mask_problem(error, s.start)) from None
    results.extend(filled_masks({name: value.numpy() for name, value in outputs.items()}))
  return results[0] if one else results


def _fill_mask_problem(error: tf.errors.InvalidArgumentError, start: int) -> str:
  """The `fill_mask` signature's check that failed, naming the text by its index in the
  caller's texts (the batch starts at `start`)."""
  found = re.search(r"fill_mask: (?:text\[(\d+)\] (has a \[MASK\] beyond [^\]]*? wordpieces|"
                    r"has no \[MASK\])|(top_k is -?\d+, outside \[1, \d+\]))", error.message)
  if found is None:
    return error.message
  if found.group(3):
    return found.group(3)
  return f"texts[{start + int(found.group(1))}] {found.group(2)}"


def filled_masks(outputs: dict[str, Any]) -> list[list[list[dict[str, Any]]]]:
  """`fill_mask`'s outputs as, per text, per mask, the top-k dicts {"token" (id),
  "token_str", "score"}, best first."""
  rows = []
  for i, count in enumerate(np.asarray(outputs["num_masks"]).tolist()):
    rows.append([[{"token": int(t), "token_str": w.decode("utf-8") if isinstance(w, bytes)
                   else str(w), "score": float(p)}
                  for t, w, p in zip(outputs["token_ids"][i, m], outputs["tokens"][i, m],
                                     outputs["scores"][i, m])] for m in range(count)])
  return rows


# --- features for Keras ---------------------------------------------------------------------


def features_of_texts(model: keras.Model, x, what: str = "x") -> dict[str, np.ndarray]:
  """int32 [N, S] model features of raw text `x` (named `what` in errors), packed as the
  model's raw-text signature packs it: a classifier's texts or pairs, as its `is_pair` says
  when known (`classifier_features.pack_text`); a span labeler's (question, context) pairs
  in one window (`squad_export.pack_question_context`); any other model's texts as
  `[CLS] text [SEP]`, cut to S. No texts: [0, S]."""
  settings = text_settings.settings_of(model)
  tokenizer = tokenizer_of(model)
  length = settings.max_seq_length
  if isinstance(model, BertSpanLabeler):
    questions, contexts, _ = text_pairs(x, what)
    if contexts is None:
      if not questions:
        contexts = []
      else:
        raise TypeError(f"a BertSpanLabeler reads (question, context) pairs: pass {what} as "
                        "such pairs")
    features = squad_export.pack_question_context(
        tokenizer, tf.constant(questions, tf.string), tf.constant(contexts, tf.string),
        length, settings.max_query_length)[0]
  elif isinstance(model, BertClassifier):
    first, second, _ = classifier_texts(x, settings.is_pair, what)
    features = classifier_features.pack_text(
        tokenizer, tf.constant(first, tf.string),
        None if second is None else tf.constant(second, tf.string), length)
  elif isinstance(model, (BertTokenClassifier, BertSentenceEncoder, BertPretrainer,
                          BertEncoder)):
    items, _ = text_list(x, what)
    features = inputs.pack_inputs([tokenizer.tokenize(tf.constant(items, tf.string))], length,
                                  tokenizer.cls_id, tokenizer.sep_id)
  else:
    raise TypeError(f"no raw-text packing for a {type(model).__name__}")
  return {name: features[name].numpy() for name in export.FEATURE_NAMES}


def _label_list(labels, what: str) -> list:
  """`labels` as a list of scalars (a tensor, an array [N] or [N, 1], a sequence)."""
  if isinstance(labels, tf.Tensor):
    labels = labels.numpy()
  if isinstance(labels, (str, bytes)) or (
      not isinstance(labels, (list, tuple)) and np.ndim(labels) == 0):
    raise TypeError(f"{what} must be a sequence of labels, one per text, got "
                    f"{type(labels).__name__} {labels!r}")
  values = []
  for i, label in enumerate(labels):
    if isinstance(label, np.ndarray) and label.size == 1:
      label = label.reshape(()).item()
    elif isinstance(label, np.generic):
      label = label.item()
    if isinstance(label, bytes):
      label = _decoded(label, what, i)
    values.append(label)
  return values


def class_ids(model: BertClassifier, labels, what: str = "labels") -> np.ndarray:
  """Training labels of a classifier by name (or as ids / regression scores): int32 [N]
  class ids, or float32 [N, 1] scores for regression.

  A number is a class id, unless the model's label names look like integers ("0", "1", as a
  GLUE TSV read by pandas gives them back as ints): then it is read as the name of its value,
  and refused, naming both readings, where it names another class than its position, or no
  name at all (never taken by position without a word).

  Raises:
    ValueError: naming (`what[i]`) a label that is not one of the model's (a name, a class
      id in [0, C)), one that is ambiguous as above, or, for regression, not a finite real
      number.
    TypeError: `labels` that are not a sequence.
  """
  values = _label_list(labels, what)
  if model.num_classes == 1:
    for i, label in enumerate(values):
      if (isinstance(label, bool) or not isinstance(label, (int, float))
          or not math.isfinite(label)):
        raise ValueError(f"{what}[{i}] {label!r} is not a finite real number: this classifier "
                         "is a regression (one output) and trains on scores")
    return np.asarray(values, np.float32).reshape(-1, 1)
  names = label_names(model, model.num_classes)
  index = {name: i for i, name in enumerate(names)}
  # Names that read as integers: an int label could be one of them or a position.
  by_value = {}
  for i, name in enumerate(names):
    if re.fullmatch(r"[+-]?[0-9]+", name.strip()):
      by_value.setdefault(int(name), i)
  ids = []
  for i, label in enumerate(values):
    if isinstance(label, bool) and model.labels is not None:
      if str(label) in index:  # Labels named "True" and "False".
        ids.append(index[str(label)])
        continue
      # Names that read as integers ("0", "1") read it as its value, below; any other
      # names took it as a class id, True trained as the second name (sweep 28, B106).
      if not by_value:
        raise ValueError(f"{what}[{i}] {label!r} is a bool, and the model's labels are "
                         f"{names}: pass each label as its name, or its class id as an int")
    if isinstance(label, str):
      if label not in index:
        raise ValueError(f"{what}[{i}] {label!r} is not one of the model's labels {names}")
      ids.append(index[label])
      continue
    integral = (isinstance(label, (int, float)) and math.isfinite(label)
                and int(label) == label)
    position = int(label) if integral and 0 <= int(label) < len(names) else None
    named = by_value.get(int(label)) if integral else None
    if by_value and (named is not None or position is not None):
      if named is not None and position in (None, named):
        ids.append(named)
        continue
      as_name = (f"is label {names[named]!r} (class id {named})" if named is not None
                 else "names no label")
      raise ValueError(
          f"{what}[{i}] {label!r} is ambiguous: the model's labels {names} look like integers; "
          f"read as a name it {as_name}, read as a class id it is label {names[position]!r}: "
          "pass the labels as their "
          f"names, strings (e.g. [str(x) for x in {what}], or df.label.astype(str)), or map "
          "class ids to names first")
    if position is None:
      raise ValueError(f"{what}[{i}] {label!r} is neither one of the model's labels {names} "
                       f"nor a class id in [0, {len(names)})")
    ids.append(position)
  return np.asarray(ids, np.int32)


text_calls.register(sys.modules[__name__])
