"""GLUE's metrics, in NumPy: accuracy, F1, Matthews correlation, Pearson, Spearman.

Definitions are those of the GLUE benchmark's scorer, which calls scikit-learn and SciPy
(and of Hugging Face's `glue_compute_metrics`); they are restated here so that tfbert
depends on neither, and `tests/classifier/glue_metrics_test.py` checks them against hand-computed
values and against scikit-learn/SciPy:

* accuracy: the fraction of predictions equal to the label.
* f1: F1 of the positive class (class id 1 for MRPC and QQP):
  2 TP / (2 TP + FP + FN); 0 when there is no positive prediction nor label (sklearn's
  `zero_division` result).
* matthews_corrcoef: the K-class Matthews correlation (Gorodkin 2004, scikit-learn's):
  (c s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)) with t, p the true and predicted class
  counts, c the correct count, s the total; the binary phi coefficient for K = 2; 0 when
  the denominator is 0 (one predicted or true class only).
* pearson: the sample correlation of predictions and labels; NaN when either is constant.
* spearman: the Pearson correlation of the ranks, ties given their average rank.

Pearson and Spearman are undefined (NaN; `null` in a run's JSON) when the targets or the
predictions are all equal: `check_correlation_defined` refuses such a dev set as a run's
`best_metric` before any work, and `compute_metrics` warns once why a correlation is NaN.

All are fractions, as scikit-learn's; `in_percent` gives them x100, as GLUE's leaderboard
shows them and as every tfbert run reports its scores (`docs/metrics.md`). Shape legend: N
examples.
"""

import math
from typing import Callable, Mapping, Optional, Sequence

import numpy as np
from absl import logging

PERCENT = 100.0  # A fraction's value in percent: the run's reporting unit.


def in_percent(metrics: dict[str, float]) -> dict[str, float]:
  """`compute_metrics`' fractions x100 (GLUE's leaderboard form; a NaN stays NaN)."""
  return {name: PERCENT * float(value) for name, value in metrics.items()}


def accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
  """Args: predictions, labels: int class ids [N]. Returns: the fraction equal."""
  predictions, labels = _pair(predictions, labels)
  return float(np.mean(predictions == labels))


def f1_score(predictions: np.ndarray, labels: np.ndarray, positive: int = 1) -> float:
  """F1 of class `positive`. Args: int class ids [N]."""
  predictions, labels = _pair(predictions, labels)
  tp = np.sum((predictions == positive) & (labels == positive))
  fp = np.sum((predictions == positive) & (labels != positive))
  fn = np.sum((predictions != positive) & (labels == positive))
  denominator = 2 * tp + fp + fn
  return float(2 * tp / denominator) if denominator else 0.0


def matthews_corrcoef(predictions: np.ndarray, labels: np.ndarray) -> float:
  """The K-class Matthews correlation coefficient. Args: int class ids [N]."""
  predictions, labels = _pair(predictions, labels)
  classes = np.union1d(predictions, labels)
  t = np.array([np.sum(labels == k) for k in classes], np.float64)       # [K] true counts
  p = np.array([np.sum(predictions == k) for k in classes], np.float64)  # [K] predicted
  c, s = float(np.sum(predictions == labels)), float(len(labels))
  denominator = np.sqrt((s * s - p @ p) * (s * s - t @ t))
  return float((c * s - t @ p) / denominator) if denominator else 0.0


def pearson(predictions: np.ndarray, labels: np.ndarray) -> float:
  """Pearson's r of two float arrays [N]; NaN if either is constant."""
  x, y = (np.asarray(a, np.float64) for a in _pair(predictions, labels))
  x, y = x - x.mean(), y - y.mean()
  denominator = np.sqrt((x @ x) * (y @ y))
  return float(x @ y / denominator) if denominator else float("nan")


def rankdata(values: np.ndarray) -> np.ndarray:
  """1-based ranks of `values` [N], ties at their average rank (SciPy's "average")."""
  values = np.asarray(values)
  order = np.argsort(values, kind="stable")
  ranks = np.empty(len(values), np.float64)
  ranks[order] = np.arange(1, len(values) + 1)
  # Each run of equal values gets the mean of the ranks it spans.
  _, group, counts = np.unique(values, return_inverse=True, return_counts=True)
  sums = np.bincount(group.reshape(-1), weights=ranks)
  return sums[group.reshape(-1)] / counts[group.reshape(-1)]


def spearman(predictions: np.ndarray, labels: np.ndarray) -> float:
  """Spearman's rho: Pearson's r of the average ranks."""
  predictions, labels = _pair(predictions, labels)
  return pearson(rankdata(predictions), rankdata(labels))


METRICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "accuracy": accuracy, "f1": f1_score, "matthews_corrcoef": matthews_corrcoef,
    "pearson": pearson, "spearman": spearman,
}


CORRELATIONS = ("pearson", "spearman")  # Undefined (NaN) on constant values.


def compute_metrics(names: Sequence[str], predictions: np.ndarray, labels: np.ndarray,
                    source: str = "") -> dict[str, float]:
  """`{name: METRICS[name](predictions, labels)}` for each name; a NaN correlation is
  explained once (`warn_undefined_correlations`).

  Args:
    names: metric names (a `Task.metrics`).
    predictions: class ids [N] (classification) or scores [N] (regression).
    labels: the same kind as `predictions`.
    source: what `labels` are (the dev file), named in the warning.

  Raises:
    ValueError: for an unknown metric name.
  """
  unknown = [name for name in names if name not in METRICS]
  if unknown:
    raise ValueError(f"unknown metrics {unknown}; known: {sorted(METRICS)}")
  scores = {name: METRICS[name](predictions, labels) for name in names}
  warn_undefined_correlations(scores, predictions, labels, source)
  return scores


def constant_value(values) -> Optional[float]:
  """The one value of `values` [N] when they are all equal (N >= 1), else None."""
  values = np.asarray(values, np.float64).reshape(-1)
  if len(values) and np.all(values == values[0]):
    return float(values[0])
  return None


def check_correlation_defined(metric: str, labels, source: str,
                              others: Sequence[str] = ()) -> None:
  """Refuses `metric` as a run's best metric when it is a correlation (`CORRELATIONS`)
  and the gold targets `labels` [N] of `source` (the dev file) are all equal: it would be
  NaN at every evaluation, and no model could be kept as the best.

  Args:
    metric: the best metric (`--best_metric`, or the task's default).
    labels: the dev set's gold targets.
    source: the dev file, named in the message.
    others: the evaluation's other scalars, offered instead.

  Raises:
    ValueError: naming the file, the targets' value and the metric.
  """
  value = constant_value(labels) if metric in CORRELATIONS else None
  if value is None:
    return
  instead = [name for name in others if name not in CORRELATIONS]
  raise ValueError(
      f"{source}: all {len(np.asarray(labels).reshape(-1))} dev targets are {value:g}, so "
      f"best_metric {metric!r} (a correlation with them) is undefined at every evaluation: "
      "give a dev file whose targets vary" + (
          f", or pass --best_metric=<one of {', '.join(instead)}>" if instead else
          " (the evaluation has no other scalar to keep the best by)"))


def undefined_correlation_reason(predictions, labels) -> str:
  """Why Pearson/Spearman of `predictions` and `labels` [N] are NaN, in words."""
  n = len(np.asarray(labels).reshape(-1))
  target = constant_value(labels)
  if target is not None:
    return (f"all {n} gold targets are {target:g} (a correlation needs targets that vary: "
            "use a dev set whose targets differ)")
  predicted = constant_value(predictions)
  if predicted is not None:
    return (f"the model predicts the same value ({predicted:.6g}) for all {n} examples (a "
            "correlation needs predictions that vary: train longer or check the model)")
  return "a prediction or target is not a finite number"


_WARNED: set = set()  # (source, reason kind) already explained: warned once per process.


def warn_undefined_correlations(scores: Mapping[str, float], predictions, labels,
                                source: str = "") -> None:
  """Logs once (per `source` and cause) why the correlations among `scores` are NaN
  (`undefined_correlation_reason`): otherwise a run reports `null` without a word."""
  undefined = [name for name in CORRELATIONS
               if name in scores and math.isnan(float(scores[name]))]
  if not undefined:
    return
  reason = undefined_correlation_reason(predictions, labels)
  key = (source, "targets" if constant_value(labels) is not None else
         "predictions" if constant_value(predictions) is not None else "values")
  if key in _WARNED:
    return
  _WARNED.add(key)
  logging.warning(f"{' and '.join(undefined)} undefined (NaN, null in the results)"
                  f"{' on ' + source if source else ''}: {reason}")


def _pair(predictions, labels) -> tuple[np.ndarray, np.ndarray]:
  predictions, labels = np.asarray(predictions), np.asarray(labels)
  if predictions.ndim != 1 or predictions.shape != labels.shape or not len(labels):
    raise ValueError(f"predictions and labels must be non-empty [N] arrays of one shape, "
                     f"got {predictions.shape} and {labels.shape}")
  return predictions, labels
