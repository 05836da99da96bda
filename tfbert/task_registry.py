"""The fine-tuning tasks tfbert ships, found from the model a run trained.

A tool that holds a run's `.keras` model and its `run_config.json` (the TFLite export)
reads the run's settings through the model's task: the task's config class reads the
record, and the task says which setting is S (`Task.max_seq_length`). No key is guessed.
"""

import json
from typing import Any, Mapping, Optional

import keras

from tfbert.classifier.classifier_run import ClassifierTask
from tfbert.embeddings.embedding_run import EmbeddingTask
from tfbert.squad.squad_run import SquadTask
from tfbert.tagging.tagging_run import NerTask
from tfbert.tasks.task import Task

TASKS: tuple[Task, ...] = (SquadTask(), ClassifierTask(), NerTask(), EmbeddingTask())


def task_of(model: keras.Model) -> Optional[Task]:
  """The task whose model `model` is (its `model_class`), or None (a pretrainer, an
  encoder)."""
  return next((task for task in TASKS if type(model) is task.model_class), None)


def run_seq_length(model: keras.Model, run_config: Optional[Mapping[str, Any]],
                   source: str = "run_config.json") -> Optional[int]:
  """S of the run that trained `model`, whose recorded settings are `run_config`; None when
  there is no record or `model` belongs to no task.

  Raises:
    ValueError: the record does not read as the task's configuration (named by `source`).
  """
  task = task_of(model)
  if task is None or not run_config:
    return None
  try:
    config = task.config_class.from_json(json.dumps(dict(run_config)))
  except (TypeError, ValueError) as e:
    raise ValueError(f"{source}: not a {task.config_class.__name__} ({e}); give the "
                     "sequence length explicitly") from e
  return task.max_seq_length(config)
