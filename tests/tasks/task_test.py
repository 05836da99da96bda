"""Tests for tfbert.tasks.task: what a task gets without overriding a hook."""

import dataclasses

import pytest

from tfbert.tasks.task import Outputs, Task


@dataclasses.dataclass(frozen=True)
class _Config:
  max_seq_length: int = 37
  do_train: bool = False


class _Bare(Task):
  head = "some_head"


def test_defaults_read_the_config_and_pass_weights_through():
  task, config = _Bare(), _Config()
  assert task.max_seq_length(config) == 37
  assert task.labels(config, {"train": []}) is None
  assert not task.head_is_trained(config) and task.head_is_trained(_Config(do_train=True))
  weights = {"bert/x": 1}
  assert task.adapt_initial_weights(None, weights, "src") is weights
  assert task.outputs(None) == Outputs()
  # Nothing known of the evaluation: `best_metric` is checked at the first one, and no
  # files are recorded with the best value.
  assert task.evaluation_metrics(config, {"dev": []}) is None
  assert task.eval_files(config, {"dev": []}) == []


@pytest.mark.parametrize("hook, args", [("default_best_metric", (_Config(),)),
                                        ("evaluate", (None,)), ("export", (None,))])
def test_a_hook_the_task_lacks_names_the_task(hook, args):
  with pytest.raises(NotImplementedError, match="_Bare"):
    getattr(_Bare(), hook)(*args)


def test_outputs_do_not_share_their_lists():
  first, second = Outputs(), Outputs()
  first.written.append("a")
  first.result["eval"] = {}
  assert second.written == [] and second.result == {}
