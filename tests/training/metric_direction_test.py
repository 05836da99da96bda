"""Tests for tfbert.training.metric_direction."""

import pytest

from tfbert.training.metric_direction import minimized


@pytest.mark.parametrize("name", ["loss", "eval_loss", "mlm_perplexity", "mse", "eval_mae",
                                  "RMSE", "error", "wer", "cer"])
def test_losses_and_errors_are_minimized(name):
  assert minimized(name)


@pytest.mark.parametrize("name", ["accuracy", "f1", "exact_match", "pearson", "spearman",
                                  "matthews_corrcoef", "ndcg@10", "mrr@10", "recall@5",
                                  "neg_mse", "neg_mean_squared_error", "negative_loss"])
def test_every_other_metric_is_maximized(name):
  assert not minimized(name)
