"""Which way a metric improves: smaller for a loss or an error, larger for anything else.

One rule for every place that compares evaluations: `best/` and early stopping
(`tfbert.training.training_loop`) and the directions a model reports to Keras callbacks
(`tfbert.models.metric_directions`). A task's metric names say their direction by how they
end (docs/adding_a_task.md).
"""

# Name endings of metrics where smaller is better: a loss, perplexity (exp of a loss), and
# errors (`mse`, `mae`, `rmse`, `error`, word and character error rates). A task metric
# named `mse` was maximized, and `best/` kept its worst evaluation (sweep 30, B70).
MINIMIZED_ENDINGS = ("loss", "perplexity", "error", "mse", "mae", "rmse", "wer", "cer")


# A negated error (scikit-learn's `neg_mean_squared_error`, a task's `neg_mse`) is maximized.
NEGATED_PREFIXES = ("neg_", "negative_")


def minimized(metric: str) -> bool:
  """Whether a smaller `metric` is better: its name ends in one of `MINIMIZED_ENDINGS` and
  does not start with one of `NEGATED_PREFIXES`."""
  name = metric.lower()
  return name.endswith(MINIMIZED_ENDINGS) and not name.startswith(NEGATED_PREFIXES)
