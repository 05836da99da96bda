"""Tests for tfbert.classifier.glue_metrics: hand-computed values, then scikit-learn and SciPy as
peers.

The hand computations are written out in the comments; the expected values are exact
fractions, compared to 1e-12 (float64 round-off of a handful of operations is ~1e-16).
scikit-learn and SciPy are what GLUE's own scorer and Hugging Face call; they come with
tf-models-official (requirements.lock) and are used only here, as independent peers.
"""

import logging

import numpy as np
import pytest
import scipy.stats
import sklearn.metrics

from tfbert.classifier import glue_metrics

EXACT = 1e-12
# Seven binary predictions: right at 0, 1, 3, 4, 5; TP = {0, 3, 5}, TN = {1, 4}, FP = {2},
# FN = {6}.
PREDICTIONS = np.array([1, 0, 1, 1, 0, 1, 0])
LABELS = np.array([1, 0, 0, 1, 0, 1, 1])


def test_accuracy_by_hand():
  assert glue_metrics.accuracy(PREDICTIONS, LABELS) == pytest.approx(5 / 7, abs=EXACT)


def test_f1_of_the_positive_class_by_hand():
  # 2 TP / (2 TP + FP + FN) = 6 / 8.
  assert glue_metrics.f1_score(PREDICTIONS, LABELS) == pytest.approx(0.75, abs=EXACT)
  # Class 0 as the positive one: TP = 2, FP = 1 (index 6), FN = 1 (index 2): 4 / 6.
  assert glue_metrics.f1_score(PREDICTIONS, LABELS, positive=0) == pytest.approx(
      4 / 6, abs=EXACT)


def test_binary_matthews_correlation_by_hand():
  # (TP TN - FP FN) / sqrt((TP + FP)(TP + FN)(TN + FP)(TN + FN)) = (6 - 1) / sqrt(4 4 3 3).
  assert glue_metrics.matthews_corrcoef(PREDICTIONS, LABELS) == pytest.approx(
      5 / 12, abs=EXACT)


def test_three_class_matthews_correlation_by_hand():
  labels, predictions = np.array([0, 0, 1, 1, 2, 2]), np.array([0, 1, 1, 1, 2, 0])
  # t = (2, 2, 2), p = (2, 3, 1), c = 4, s = 6: (4 6 - 12) / sqrt((36 - 14)(36 - 12)).
  assert glue_metrics.matthews_corrcoef(predictions, labels) == pytest.approx(
      12 / np.sqrt(22 * 24), abs=EXACT)


def test_pearson_by_hand():
  # dx = (-1.5, -.5, .5, 1.5), dy = (-3, -1, 0, 4): 11 / sqrt(5 26).
  assert glue_metrics.pearson([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(
      11 / np.sqrt(130), abs=EXACT)


def test_ties_share_their_average_rank():
  np.testing.assert_array_equal(glue_metrics.rankdata([5, 1, 7, 1, 1]), [4, 2, 5, 2, 2])


def test_spearman_with_ties_by_hand():
  # Ranks (1, 2.5, 2.5, 4, 5) and (1, 3, 2, 5, 4); centred: (-2, -.5, -.5, 1, 2) and
  # (-2, 0, -1, 2, 1): 8.5 / sqrt(9.5 10).
  assert glue_metrics.spearman([10, 20, 20, 30, 40], [1, 3, 2, 5, 4]) == pytest.approx(
      8.5 / np.sqrt(95), abs=EXACT)


def test_degenerate_inputs_follow_scikit_learn_and_scipy():
  ones, mixed = np.ones(4, int), np.array([0, 1, 0, 1])
  assert glue_metrics.matthews_corrcoef(ones, mixed) == 0.0  # One predicted class.
  assert glue_metrics.f1_score(np.zeros(4, int), np.zeros(4, int)) == 0.0  # No positives.
  assert np.isnan(glue_metrics.pearson([2.0, 2.0, 2.0], [1.0, 2.0, 3.0]))  # Constant.
  with pytest.raises(ValueError, match="non-empty"):
    glue_metrics.accuracy([], [])
  with pytest.raises(ValueError, match="one shape"):
    glue_metrics.accuracy([1, 0], [1, 0, 1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_classification_metrics_equal_scikit_learn(seed):
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, 2, 101)
  predictions = np.where(rng.random(101) < 0.7, labels, 1 - labels)
  assert glue_metrics.accuracy(predictions, labels) == pytest.approx(
      sklearn.metrics.accuracy_score(labels, predictions), abs=EXACT)
  assert glue_metrics.f1_score(predictions, labels) == pytest.approx(
      sklearn.metrics.f1_score(labels, predictions), abs=EXACT)
  assert glue_metrics.matthews_corrcoef(predictions, labels) == pytest.approx(
      sklearn.metrics.matthews_corrcoef(labels, predictions), abs=EXACT)
  three = rng.integers(0, 3, 101)
  guess = np.where(rng.random(101) < 0.5, three, rng.integers(0, 3, 101))
  assert glue_metrics.matthews_corrcoef(guess, three) == pytest.approx(
      sklearn.metrics.matthews_corrcoef(three, guess), abs=EXACT)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_correlations_equal_scipy_also_with_ties(seed):
  rng = np.random.default_rng(seed)
  labels = np.round(rng.uniform(0, 5, 97) * 5) / 5  # STS-B-like scores, many ties.
  predictions = labels + rng.normal(0, 1, 97)
  predictions[:10] = 2.0  # Ties in the predictions too.
  assert glue_metrics.pearson(predictions, labels) == pytest.approx(
      scipy.stats.pearsonr(predictions, labels)[0], abs=EXACT)
  assert glue_metrics.spearman(predictions, labels) == pytest.approx(
      scipy.stats.spearmanr(predictions, labels)[0], abs=EXACT)
  np.testing.assert_array_equal(glue_metrics.rankdata(labels), scipy.stats.rankdata(labels))


def test_compute_metrics_runs_the_named_metrics():
  got = glue_metrics.compute_metrics(("accuracy", "f1"), PREDICTIONS, LABELS)
  assert got == {"accuracy": pytest.approx(5 / 7), "f1": pytest.approx(0.75)}
  with pytest.raises(ValueError, match=r"unknown metrics \['mcc'\]"):
    glue_metrics.compute_metrics(("mcc",), PREDICTIONS, LABELS)


def test_an_undefined_correlation_is_explained_once(caplog, monkeypatch):
  """Constant dev targets made `pearson: null` with no word why: the NaN is explained once
  (per file and cause), naming the cause: constant targets, or constant predictions."""
  monkeypatch.setattr(glue_metrics, "_WARNED", set())
  with caplog.at_level(logging.WARNING, logger="absl"):
    for _ in range(2):
      scores = glue_metrics.compute_metrics(["pearson", "spearman"], np.array([0.1, 0.5, 0.3]),
                                            np.array([2.0, 2.0, 2.0]), "dev.tsv")
    glue_metrics.compute_metrics(["pearson"], np.array([1.5, 1.5, 1.5]),
                                 np.array([1.0, 2.0, 3.0]), "dev.tsv")
  assert np.isnan(scores["pearson"]) and np.isnan(scores["spearman"])
  assert caplog.text.count("all 3 gold targets are 2") == 1
  assert ("pearson and spearman undefined (NaN, null in the results) on dev.tsv: all 3 gold "
          "targets are 2") in caplog.text
  assert "the model predicts the same value (1.5) for all 3 examples" in caplog.text
  caplog.clear()
  with caplog.at_level(logging.WARNING, logger="absl"):
    glue_metrics.compute_metrics(["pearson"], np.array([0.1, 0.5]), np.array([1.0, 2.0]))
  assert not caplog.text


def test_a_correlation_best_metric_on_constant_targets_is_refused():
  with pytest.raises(ValueError, match=r"^dev.tsv: all 3 dev targets are 2, so best_metric "
                     r"'pearson' .* undefined at every evaluation: give a dev file whose "
                     r"targets vary, or pass --best_metric=<one of loss>$"):
    glue_metrics.check_correlation_defined("pearson", [2.0, 2.0, 2.0], "dev.tsv",
                                           ["pearson", "spearman", "loss"])
  with pytest.raises(ValueError, match=r"targets vary \(the evaluation has no other scalar to "
                                       r"keep the best by\)$"):
    glue_metrics.check_correlation_defined("spearman", [1.0], "dev.tsv", ["spearman"])
  glue_metrics.check_correlation_defined("loss", [2.0, 2.0], "dev.tsv")  # Not a correlation.
  glue_metrics.check_correlation_defined("spearman", [2.0, 1.0], "dev.tsv")  # Targets vary.
