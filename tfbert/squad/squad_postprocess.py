"""Span logits of SQuAD features -> answers per question (google-research/bert's
`write_predictions` semantics), with exact answer text from the tokens' character spans.

Per question, over all its features (windows):
* candidates are the `n_best_size` best start and end positions of each feature (ranked
  over the whole sequence, as Google does), kept when both are context tokens, the start
  token is max-context in that window, end >= start and the span has at most
  `max_answer_length` wordpieces; score = start_logit + end_logit;
* v2.0 adds the null answer scored start_logit[0] + end_logit[0] ([CLS]) of the feature
  where that sum is smallest;
* the n-best list takes candidates by score, dropping repeated texts; its probabilities
  are a softmax over the n-best scores;
* the answer text is `context[start char of the start token : end char of the end
  token]`, so Google's `get_final_text` re-alignment heuristics are not needed;
* v2.0 predicts "" when null score - best non-null score > `null_score_diff_threshold`
  and records that difference in null_odds.json (the official v2.0 script's na-prob file).

Differences from Google, in degenerate cases only: a question without any valid span gets
"" (Google: the made-up text "empty"); in v2.0, when the n-best holds only the null answer
(Google crashes), the null-score difference is +inf, written to null_odds.json as the
largest float (1.7976931348623157e+308): the official script's threshold search orders it
last as it would +inf, and every JSON parser reads it (`Infinity` is not JSON).

Shape legend: F features, S max_seq_length.
"""

import collections
import dataclasses
import math
import os
import sys
from typing import Optional, Sequence

import numpy as np

from tfbert.runtime import atomic, files, json_values, validation
from tfbert.squad.squad_data import SquadExample
from tfbert.squad.squad_features import SquadFeature


@dataclasses.dataclass(frozen=True)
class PostprocessConfig:
  """Google's `write_predictions` settings, with its defaults and names."""
  n_best_size: int = 20
  max_answer_length: int = 30
  version_2_with_negative: bool = False
  null_score_diff_threshold: float = 0.0

  def __post_init__(self):
    validation.validate(self)

  def checks(self) -> list[validation.Check]:
    """The rules of a usable config (`tfbert.runtime.validation`)."""
    # 0 is allowed here: no candidate span, so every answer is "" (tests use it); the
    # fine-tuning run refuses it (`tfbert.squad.squad_run`).
    return [
        (min(self.n_best_size, self.max_answer_length) >= 0,
         f"n_best_size ({self.n_best_size}) and max_answer_length "
         f"({self.max_answer_length}) must be >= 0"),
        (not math.isnan(self.null_score_diff_threshold), "null_score_diff_threshold is NaN"),
    ]


def ignored_threshold(version_2_with_negative: bool, null_score_diff_threshold: float,
                      prefix: str = "") -> Optional[str]:
  """The warning for a `null_score_diff_threshold` that nothing applies (given without
  `version_2_with_negative`: every question is answered), or None; `prefix` spells the
  names as the caller takes them ("--" for run_squad's flags, "" for `tfbert.load`'s
  keywords). The one rule of both."""
  if not null_score_diff_threshold or version_2_with_negative:
    return None
  return (f"{prefix}null_score_diff_threshold={null_score_diff_threshold!r} is ignored: it "
          "decides SQuAD v2.0's no-answer (\"\") predictions, and without "
          f"{prefix}version_2_with_negative every question is answered")


@dataclasses.dataclass  # Not frozen: ~20 per question, frozen init costs 2x.
class NbestEntry:
  """One n-best answer; fields in the order of nbest_predictions.json."""
  text: str
  probability: float
  start_logit: float
  end_logit: float


@dataclasses.dataclass(frozen=True)
class SquadPrediction:
  """The answer to one question.

  Attributes:
    qas_id: the question's id.
    text: the predicted answer ("" = no answer, v2.0).
    nbest: the n-best list, best first.
    null_score_diff: v2.0 only: null score - best non-null score (None in v1.1).
    start_char, end_char: where `text` lies in the context (`context[start_char:end_char]`,
      characters); None for "" (no answer). Not written to the prediction files.
  """
  qas_id: str
  text: str
  nbest: tuple[NbestEntry, ...]
  null_score_diff: Optional[float] = None
  start_char: Optional[int] = None
  end_char: Optional[int] = None


# A candidate span is a plain tuple (start_logit, end_logit, start_char, end_char), with
# start_char None for the null answer: there are up to n_best_size**2 per feature, and
# building named tuples doubled the postprocessing time of the dev set.


def postprocess_predictions(examples: Sequence[SquadExample],
                            features: Sequence[SquadFeature],
                            start_logits: np.ndarray, end_logits: np.ndarray,
                            config: PostprocessConfig = PostprocessConfig(),
                            unique_ids: Optional[np.ndarray] = None
                            ) -> list[SquadPrediction]:
  """Answers every example from its features' logits.

  Args:
    examples: the examples the features were made from (`example_index` indexes them).
    features: from `squad_features`.
    start_logits, end_logits: float [F, S], row f belongs to `features[f]`.
    config: PostprocessConfig.
    unique_ids: optional int [F], the model's `unique_ids` output; checked against the
      features' to catch logits in another order.

  Returns:
    one SquadPrediction per example, in example order.

  Raises:
    ValueError: if the logits do not match the features in shape or unique ids.
  """
  start_logits, end_logits = _checked_logits(features, start_logits, end_logits,
                                             unique_ids)
  rows_of = collections.defaultdict(list)
  for row, feature in enumerate(features):
    rows_of[feature.example_index].append(row)
  return [_predict(example, [features[r] for r in rows_of[index]],
                   start_logits[rows_of[index]], end_logits[rows_of[index]], config)
          for index, example in enumerate(examples)]


def _checked_logits(features, start_logits, end_logits, unique_ids):
  start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
  want = (len(features), len(features[0].input_ids) if features else start_logits.shape[-1])
  for name, logits in (("start_logits", start_logits), ("end_logits", end_logits)):
    if logits.shape != want:
      raise ValueError(f"{name} has shape {logits.shape}; the features need [F, S] = {want}")
  if unique_ids is not None:
    expected = np.array([f.unique_id for f in features])
    if not np.array_equal(np.asarray(unique_ids).reshape(-1), expected):
      raise ValueError("unique_ids differ from the features' unique ids: the logits are "
                       "not in feature order")
  return start_logits, end_logits


def _predict(example, features, start_logits, end_logits, config):
  """The SquadPrediction of one example from its features' logits [F_e, S]."""
  candidates = []
  for feature, start, end in zip(features, start_logits, end_logits):
    candidates.extend(_feature_candidates(feature, start, end, config))
  null = None
  if config.version_2_with_negative:
    null = _null_candidate(start_logits, end_logits)
    candidates.append(null)
  # Stable sort: ties keep feature, then start-rank, then end-rank order, as Google's.
  candidates.sort(key=lambda c: c[0] + c[1], reverse=True)
  nbest, spans = _nbest(example.context_text, candidates, null, config.n_best_size)
  if not config.version_2_with_negative:
    return SquadPrediction(example.qas_id, nbest[0].text, nbest, None, *spans[0])
  best = next((i for i, e in enumerate(nbest) if e.text), None)
  score_null = null[0] + null[1]
  # Google's expression and order of operations, so thresholds carry over exactly.
  diff = (score_null - nbest[best].start_logit - nbest[best].end_logit
          if best is not None else math.inf)
  if best is None or diff > config.null_score_diff_threshold:
    return SquadPrediction(example.qas_id, "", nbest, diff)
  return SquadPrediction(example.qas_id, nbest[best].text, nbest, diff, *spans[best])


def _feature_candidates(feature, start, end, config):
  """Valid spans among the n-best start x n-best end positions of one feature [S]."""
  starts = best_indexes(start, config.n_best_size)[:, None]
  ends = best_indexes(end, config.n_best_size)[None, :]
  in_context = feature.token_start_chars >= 0
  valid = (in_context[starts] & in_context[ends] &
           (feature.token_is_max_context[starts] == 1) & (ends >= starts) &
           (ends - starts + 1 <= config.max_answer_length))
  i, j = np.nonzero(valid)  # Row-major: Google's loop order (start outer, end inner).
  s, e = starts[i, 0], ends[0, j]
  return list(zip(start[s].tolist(), end[e].tolist(),
                  feature.token_start_chars[s].tolist(), feature.token_end_chars[e].tolist()))


def best_indexes(logits: np.ndarray, n_best_size: int) -> np.ndarray:
  """Positions of the `n_best_size` largest logits [S], ties in position order.

  Google's `_get_best_indexes` (Python's stable `sorted(..., reverse=True)`).
  """
  return np.argsort(-np.asarray(logits), kind="stable")[:n_best_size]


def _null_candidate(start_logits, end_logits):
  """The [CLS] span of the feature with the smallest null score (Google's min)."""
  if not len(start_logits):  # No feature (empty context): no [CLS] logits either.
    return (0.0, 0.0, None, None)
  scores = [float(s[0]) + float(e[0]) for s, e in zip(start_logits, end_logits)]
  row = int(np.argmin(scores))  # First minimum, as Google's strict `<`.
  return (float(start_logits[row][0]), float(end_logits[row][0]), None, None)


def _nbest(context, candidates, null, n_best_size):
  """Up to `n_best_size` distinct answers (v2.0: "" always among them) with probabilities,
  and each one's (start_char, end_char) in `context` ((None, None) for "")."""
  chosen, seen = [], set()
  for start_logit, end_logit, start_char, end_char in candidates:
    if len(chosen) >= n_best_size:
      break
    text = "" if start_char is None else context[start_char:end_char]
    if start_char is not None and text in seen:
      continue
    seen.add(text)
    span = (None, None) if start_char is None else (start_char, end_char)
    chosen.append((text, start_logit, end_logit, span))
  if null is not None and "" not in seen:
    chosen.append(("", null[0], null[1], (None, None)))
  if not chosen:  # No valid span at all (Google writes the text "empty" here).
    chosen.append(("", 0.0, 0.0, (None, None)))
  probs = _softmax([start_logit + end_logit for _, start_logit, end_logit, _ in chosen])
  return (tuple(NbestEntry(text, p, start_logit, end_logit)
                for (text, start_logit, end_logit, _), p in zip(chosen, probs)),
          [span for *_, span in chosen])


def _softmax(scores):
  """Google's `_compute_softmax`: exp(score - max) / sum, in Python floats."""
  top = max(scores)
  exps = [math.exp(s - top) for s in scores]
  total = sum(exps)
  return [x / total for x in exps]


def _json_odds(diff: float) -> float:
  """A null-score difference as JSON holds it: +-inf as the largest float of that sign."""
  return math.copysign(sys.float_info.max, diff) if math.isinf(diff) else diff


def write_predictions(predictions: Sequence[SquadPrediction],
                      output_dir: str) -> dict[str, str]:
  """Writes predictions.json, nbest_predictions.json and (v2.0) null_odds.json.

  The layouts are google-research/bert's: `{id: text}`, `{id: [{"text", "probability",
  "start_logit", "end_logit"}, ...]}`, `{id: null_score_diff}`.

  Returns:
    dict file name -> path written.
  """
  files.makedirs(output_dir)
  contents = {
      "predictions.json": {p.qas_id: p.text for p in predictions},
      "nbest_predictions.json": {p.qas_id: [dataclasses.asdict(e) for e in p.nbest]
                                 for p in predictions}}
  if any(p.null_score_diff is not None for p in predictions):
    contents["null_odds.json"] = {p.qas_id: _json_odds(p.null_score_diff) for p in predictions}
  paths = {}
  for name, content in contents.items():
    paths[name] = atomic.write_text(os.path.join(output_dir, name),
                                    json_values.dumps(content, indent=4) + "\n")
  return paths
