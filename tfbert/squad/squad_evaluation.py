"""SQuAD v1.1 / v2.0 scores from the reference evaluation, reported like the official scripts.

The metric is not reimplemented: Model Garden's copies of the official scripts
(`official.nlp.tools.squad_evaluate_v1_1` / `squad_evaluate_v2_0`) compute it. This module
reads and checks the files, picks the version and reports the official output:

* v1.1 (the dataset's "version" is "1.1", "v1.1" or absent; `squad_data.squad_version`):
  `{"exact_match", "f1"}` in percent. Model Garden returns fractions, the F1 under
  `final_f1`; both are multiplied by 100. Unanswered questions score 0 (logged), predictions
  for unknown ids are ignored with a warning (as in v2.0). A question marked `is_impossible`
  has no gold answer to score against (the script fails on it), so a "1.1" file that holds
  one is refused, naming it: its "version" should say "v2.0".
* v2.0 ("v2.0" or "2.0"): the official script's keys `exact`, `f1`, `total`, `HasAns_*`,
  `NoAns_*` (already in percent), plus `best_exact`, `best_exact_thresh`, `best_f1`,
  `best_f1_thresh` when null odds (`--na-prob-file` of the official script) are given;
  Model Garden names those `final_*` and always computes them, so they are renamed and
  kept only with null odds. Every question needs a prediction: the official script fails
  on a missing one, and Model Garden would silently score over fewer questions.
"""

import math
from typing import Any, Optional, Sequence

from absl import logging
from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0

from tfbert.runtime import files
from tfbert.squad import squad_data

USAGE = "usage: evaluate_squad.py DATASET_FILE PREDICTIONS_FILE [PREDICTIONS_FILE ...]"
V2_KEYS = ("exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
           "NoAns_exact", "NoAns_f1", "NoAns_total")
# Model Garden name -> official evaluate-v2.0.py name, for runs with null odds.
V2_BEST_KEYS = {"final_exact": "best_exact", "final_exact_thresh": "best_exact_thresh",
                "final_f1": "best_f1", "final_f1_thresh": "best_f1_thresh"}


def evaluate_files(dataset_file: str, predictions_files: Sequence[str],
                   na_prob_file: Optional[str] = None) -> list[dict[str, Any]]:
  """Scores each predictions file against one dataset (read once).

  Args:
    dataset_file: SQuAD JSON (optionally gzip-compressed).
    predictions_files: `{id: answer text}` JSON files.
    na_prob_file: v2.0 only: `{id: null odds}` (e.g. our null_odds.json); needs a single
      predictions file.

  Returns:
    one dict per predictions file, as `evaluate` returns.

  Raises:
    FileNotFoundError, ValueError: naming the file that is missing or malformed.
  """
  if na_prob_file and len(predictions_files) != 1:
    raise ValueError("null odds (na_prob_file) go with exactly one predictions file, "
                     f"got {len(predictions_files)}")
  dataset = squad_data.load_json(dataset_file)
  kind = _per_question_kind(dataset)
  if kind is not None:  # The arguments swapped, or the wrong output of a run given.
    raise ValueError(f"{dataset_file}: {kind} ({{question id: ...}}, no \"data\"), not a "
                     f"SQuAD dataset: the dataset comes first, then the predictions ({USAGE})")
  parsed = squad_data.parse_squad(dataset, dataset_file, is_training=False)
  if not parsed.has_answers:  # A file to predict only (`squad_data`): nothing to score.
    raise ValueError(f"{dataset_file}: no question has answers, so there is nothing to score "
                     "predictions against: give the dataset file with its answers")
  check_scorable(parsed)
  na_probs = (_load_mapping(na_prob_file, "null odds file", (int, float), "a number")
              if na_prob_file else None)
  if na_prob_file and not parsed.is_v2:  # The flag named, not `evaluate`'s argument.
    written = dataset.get("version")
    raise ValueError(
        f"--na_prob_file={na_prob_file}: null odds are for SQuAD v2.0, but {dataset_file} is "
        f"SQuAD v1.1 (its \"version\" is {'absent' if written is None else repr(written)}): "
        "drop --na_prob_file to score a v1.1 set")
  return [evaluate(dataset, _load_mapping(path, "predictions file", str, "an answer string"),
                   parsed.version, na_probs, path, na_prob_file or "null odds")
          for path in predictions_files]


def _per_question_kind(value: Any) -> Optional[str]:
  """What a JSON value keyed by question id is (a run's predictions.json,
  nbest_predictions.json or null_odds.json), or None when it is not one of those."""
  if not isinstance(value, dict) or not value or "data" in value:
    return None
  values = list(value.values())
  if all(isinstance(v, str) for v in values):
    return "a predictions file"
  if all(isinstance(v, list) and all(isinstance(e, dict) and "text" in e for e in v)
         for v in values):
    return "an n-best predictions file"
  if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
    return "a null odds file"
  return None


def check_scorable(dataset: squad_data.SquadDataset) -> None:
  """Raises ValueError when a SQuAD 1.1 `dataset` has an unanswerable (2.0) question."""
  if dataset.unanswerable and not dataset.is_v2:
    raise ValueError(f"{dataset.path}: {dataset.unanswerable}: true, a SQuAD 2.0 question, "
                     "but the file's \"version\" is 1.1 (or absent) and SQuAD 1.1 scoring "
                     "needs an answer to every question; set \"version\": \"v2.0\" to "
                     "score it as SQuAD 2.0")


def evaluate(dataset: dict[str, Any], predictions: dict[str, str],
             version: Optional[str] = None, na_probs: Optional[dict[str, float]] = None,
             predictions_source: str = "predictions",
             na_probs_source: str = "null odds") -> dict[str, Any]:
  """Official scores of `predictions` on a parsed SQuAD JSON `dataset`.

  Args:
    dataset: the whole dataset JSON (with "data").
    predictions: question id -> answer text ("" = no answer in v2.0).
    version: as a file writes it ("1.1", "v2.0", ...); default: the dataset's "version".
    na_probs: v2.0 only, optional: question id -> null odds.
    predictions_source: name used in error messages (the predictions file).
    na_probs_source: the same for `na_probs` (the null odds file).

  Returns:
    v1.1: {"exact_match": float, "f1": float}; v2.0: the official keys (module doc).
  """
  if not isinstance(predictions, dict):
    raise ValueError(f"{predictions_source}: expected a dict {{question id: answer text}}, "
                     f"got {type(predictions).__name__}")
  for qid, answer in predictions.items():
    if not isinstance(answer, str):  # The scripts' AttributeError '.lower' (sweep 31, B66).
      raise ValueError(f"{predictions_source}: the answer of question {qid!r} is "
                       f"{type(answer).__name__} {answer!r}: an answer is its text, a str "
                       "(\"\" for no answer in SQuAD v2.0)")
  version = squad_data.squad_version(version or dataset.get("version"))
  ids = [qa["id"] for article in dataset["data"] for paragraph in article["paragraphs"]
         for qa in paragraph["qas"]]
  known = set(ids)
  extra = [qid for qid in predictions if qid not in known]
  if extra:  # v2.0's script: a KeyError (sweep 30, A36); v1.1's: ignored unsaid (sweep 33, A2).
    logging.warning("%s: %d answer(s) for ids not in the dataset (e.g. %s), ignored",
                    predictions_source, len(extra), extra[:3])
  if version != "2.0":
    if na_probs is not None:
      raise ValueError("null odds are for SQuAD v2.0; the dataset is v" + version)
    scores = squad_evaluate_v1_1.evaluate(dataset["data"], predictions)
    return {"exact_match": 100.0 * scores["exact_match"], "f1": 100.0 * scores["final_f1"]}
  _check_covered(ids, predictions, predictions_source, "prediction")
  if extra:
    predictions = {qid: predictions[qid] for qid in ids}
  if na_probs is not None:
    _check_covered(ids, na_probs, na_probs_source, "null odds")
    na_probs = {qid: float(na_probs[qid]) for qid in ids}  # Extra ids break the script.
  scores = squad_evaluate_v2_0.evaluate(dataset["data"], predictions, na_probs)
  result = {key: scores[key] for key in V2_KEYS if key in scores}
  if na_probs is not None:
    result.update({ours: scores[theirs] for theirs, ours in V2_BEST_KEYS.items()})
    lowest = min(na_probs.values(), default=math.inf)
    for key in ("best_exact_thresh", "best_f1_thresh"):
      # The official search starts from "every question ''" and calls that threshold 0.0,
      # right for probabilities; null odds below 0 are answered at 0.0, so there the
      # largest float below every null odds, which gives that start, is reported (eval
      # results said 0.0, which scored F1 5.88 where the best was 23.53; sweep 30, A49).
      if result[key] == 0.0 and 0.0 not in na_probs.values() and lowest < 0.0:
        result[key] = math.nextafter(lowest, -math.inf)
  return result


def _check_covered(ids, mapping, source, what):
  missing = [qid for qid in ids if qid not in mapping]
  if missing:
    raise ValueError(f"{source}: {len(missing)} of {len(ids)} questions have no {what} "
                     f"(e.g. {missing[:3]}); SQuAD v2.0 scoring needs every question")


def _load_mapping(path: str, role: str, kind: Any, what: str) -> dict[str, Any]:
  """A JSON object {str: kind} from `path`, with errors naming the file."""
  try:
    mapping = squad_data.load_json(path)
  except FileNotFoundError:
    raise FileNotFoundError(files.missing_file_message(path, role)) from None
  if not isinstance(mapping, dict):
    raise ValueError(f"{path}: expected a JSON object {{question id: {what}}}, got "
                     f"{type(mapping).__name__}")
  if isinstance(mapping.get("data"), list):
    raise ValueError(f"{path}: a SQuAD dataset (it has \"data\"), not a {role} {{question "
                     f"id: {what}}}: the dataset comes first, then the predictions ({USAGE})")
  found = _per_question_kind(mapping)
  expected, name = _ROLE_FILES.get(role, (None, None))
  if kind is not str and mapping and all(isinstance(v, str) and _is_number(v)
                                     for v in mapping.values()):
    # Numbers written as strings read as a predictions file (sweep 30, A37).
    key, value = next(iter(mapping.items()))
    raise ValueError(f"{path}: its values are strings holding numbers (e.g. {key!r}: "
                     f"{value!r}): write the {role}'s values as JSON numbers, unquoted")
  if found is not None and expected is not None and found != expected:
    # E.g. nbest_predictions.json given as the predictions (sweep 19 P1).
    raise ValueError(f"{path}: {found}, not {expected} {{question id: {what}}}: "
                     f"pass the run's {name}")
  for key, value in mapping.items():
    bad = not isinstance(value, kind) or isinstance(value, bool)
    if bad or (isinstance(value, float) and math.isnan(value)):
      raise ValueError(f"{path}: value of {key!r} should be {what}, got "
                       f"{_describe(value)}")
  return mapping


def _is_number(text: str) -> bool:
  try:
    float(text)
  except ValueError:
    return False
  return True


# `_load_mapping` role -> (what `_per_question_kind` calls such a file, a run's file name).
_ROLE_FILES = {"predictions file": ("a predictions file", "predictions.json"),
               "null odds file": ("a null odds file", "null_odds.json")}


def _describe(value: Any) -> str:
  """A short, whole description of a JSON value for a message (never cut mid-value)."""
  if isinstance(value, list):
    return f"a JSON array of {len(value)} item(s)"
  if isinstance(value, dict):
    return f"a JSON object of {len(value)} key(s)"
  text = repr(value)
  return text if len(text) <= 60 else f"{text[:57]}..."
