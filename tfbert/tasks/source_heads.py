"""A run's source head, checked against its model: labels matched by name, never by position.

A fine-tuning run starts from a source (a Google checkpoint, a Hugging Face directory, a
tfbert `.keras` file) whose head may have been trained for another task or other labels.
Loading such a head by shape alone trains from a permuted or meaningless head without a
word. The rules (`match_source_head`):

- A source whose head is another task's (a sequence classifier starting SQuAD, a
  question-answering directory starting a tagger) is refused: the head would be dropped.
- Labels are matched by name: the same names in another order reorder the head's rows
  (said in the log); other names, or another number of them, are refused naming both lists.
- Unnamed source labels (transformers' `LABEL_<i>`, what it writes when given no names)
  say nothing about which class a row is: they are taken in order, as a log line says.
- A classifier source whose run recorded another task (its run_config.json's
  `task_name`; not a generic one, a classifier's "custom") than the run's is refused:
  SST-2's '0','1' are not MRPC's '0','1', though the names match.
- `--reinit_head` starts a fresh head and bypasses all of this.

A Google checkpoint names neither its task nor its labels: only its shapes are checked
(`tfbert.tasks.fine_tuning.assign_initial_weights`).
"""

import dataclasses
import json
import os
import re
from typing import Optional

import keras
import numpy as np
from absl import logging

from tfbert.checkpoints import convert, google_checkpoint, google_names
from tfbert.runtime import files
from tfbert.text import casing

# The transformers classes of fine-tuned task heads: a source with one of these heads
# starts only a model with the same one, unless the run asks for a fresh head.
TASK_HEADS = frozenset({"BertForSequenceClassification", "BertForTokenClassification",
                        "BertForQuestionAnswering"})
# What transformers names the labels of a head it was given no names for.
UNNAMED_LABEL = re.compile(r"LABEL_[0-9]+")
FRESH_HEAD = ("pass --reinit_head (reinit_head=True) to load the encoder alone and train a "
              "fresh head (it needs --do_train: a fresh head predicts at random)")


@dataclasses.dataclass(frozen=True)
class Source:
  """Where a run's initial weights come from, and what its head says about itself.

  Attributes:
    name: the path (or "random initialization"), for messages.
    architecture: the transformers class of its head (a Hugging Face `config.json`'s
      `architectures`, a tfbert model's `hf_task()`), or None (a Google checkpoint says
      nothing about its task).
    labels: its head's label names in row order (`id2label`, a tfbert model's `labels`), or
      None when it names none.
    task: the classification task its run recorded (`task_name` of the run_config.json
      beside a tfbert model file), or None.
  """
  name: str
  architecture: Optional[str] = None
  labels: Optional[tuple[str, ...]] = None
  task: Optional[str] = None


def of_model(name: str, model: keras.Model) -> Source:
  """The `Source` a tfbert model is (its head's class and labels, its run's task)."""
  labels = getattr(model, "labels", None)
  return Source(name, convert.hf_architecture(model), None if labels is None else tuple(labels),
                recorded_task(name))


def recorded_task(model_file: str) -> Optional[str]:
  """The `task_name` the run of `model_file` recorded: the run_config.json beside it, or
  one folder up for a run's `best/model.keras`; None without one (a model file alone)."""
  for run_dir in casing.checkpoint_directories(model_file):
    path = os.path.join(run_dir, casing.RUN_CONFIG)
    if files.isfile(path):
      try:
        values = json.loads(files.read_text(path))
      except (OSError, ValueError):
        return None  # Unreadable: the labels are still checked by name.
      task = values.get("task_name") if isinstance(values, dict) else None
      return task if isinstance(task, str) else None
  return None


def match_source_head(model: keras.Model, weights: Optional[dict[str, np.ndarray]],
                      source: Source, head: str, reinit_head: bool,
                      task_name: Optional[str] = None,
                      generic_task_names: frozenset = frozenset()
                      ) -> Optional[dict[str, np.ndarray]]:
  """The source's weights with its head's rows in `model`'s label order (module docstring).

  Args:
    model: the built task model (`labels` when it has named classes).
    weights: Google-name weights of the source, or None (random initialization).
    source: where they come from (`Source`).
    head: the model's head attribute ("" for a model without one).
    reinit_head: the head starts fresh: nothing of the source's head is used or checked.
    task_name: the classification task trained (a run_classifier `--task_name`), or None.
    generic_task_names: task names that say nothing of what labels mean (lower case: a
      classifier's "custom", `Task.generic_task_names`): not compared.

  Returns:
    `weights`, with the head's rows reordered when the labels say so.

  Raises:
    ValueError: naming the source, both heads or both label lists, and `--reinit_head`.
  """
  if weights is None or reinit_head or not head:
    return weights
  kind = convert.hf_architecture(model)
  if source.architecture in TASK_HEADS and kind in TASK_HEADS and source.architecture != kind:
    raise ValueError(f"{source.name} holds a {source.architecture} head and this task's model "
                     f"is a {kind}: its head would be dropped without a word; {FRESH_HEAD}")
  variables = google_names.google_variable_map(model)
  head_names = google_checkpoint.component_names(model, variables, (head,)) & set(weights)
  labels = getattr(model, "labels", None)
  if not head_names or labels is None or source.labels is None:
    return weights
  named = [t.lower() for t in (source.task, task_name)
           if t and t.lower() not in generic_task_names]
  if len(named) == 2 and named[0] != named[1]:  # Label names shared by chance (sweep 19 S2).
    raise ValueError(f"{source.name} holds a {source.task} head (its run's task_name) and "
                     f"this run's task is {task_name}: its labels {list(source.labels)} are "
                     f"{source.task}'s, not {task_name}'s, whatever their names; {FRESH_HEAD}")
  labels, theirs = tuple(labels), tuple(source.labels)
  if theirs == labels:
    return weights
  if len(theirs) == len(labels) and all(UNNAMED_LABEL.fullmatch(name) for name in theirs):
    logging.info("%s names no labels (%s): its head's rows are taken as %s, in that order",
                 source.name, ", ".join(theirs), list(labels))
    return weights
  if sorted(theirs) != sorted(labels) or len(set(labels)) != len(labels):
    raise ValueError(f"{source.name}: its head's labels {list(theirs)} are not this task's "
                     f"{list(labels)} (matched by name, never by position); {FRESH_HEAD}, "
                     "or give data with the source's labels")
  rows = [theirs.index(name) for name in labels]
  logging.warning("%s lists its head's labels in another order (%s) than this task (%s): "
                  "its rows are reordered to match by name", source.name, list(theirs),
                  list(labels))
  return {name: (np.asarray(value)[rows] if name in head_names else value)
          for name, value in weights.items()}
