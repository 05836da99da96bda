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
- `--reinit_head` starts a fresh head and bypasses all of this.

A Google checkpoint names neither its task nor its labels: only its shapes are checked
(`tfbert.tasks.fine_tuning.assign_initial_weights`).
"""

import dataclasses
import re
from typing import Optional

import keras
import numpy as np
from absl import logging

from tfbert.checkpoints import convert, google_checkpoint, google_names

# The transformers classes of fine-tuned task heads: a source with one of these heads
# starts only a model with the same one, unless the run asks for a fresh head.
TASK_HEADS = frozenset({"BertForSequenceClassification", "BertForTokenClassification",
                        "BertForQuestionAnswering"})
# What transformers names the labels of a head it was given no names for.
UNNAMED_LABEL = re.compile(r"LABEL_[0-9]+")
FRESH_HEAD = ("pass --reinit_head (reinit_head=True) to load the encoder alone and train a "
              "fresh head")


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
  """
  name: str
  architecture: Optional[str] = None
  labels: Optional[tuple[str, ...]] = None


def of_model(name: str, model: keras.Model) -> Source:
  """The `Source` a tfbert model is (its head's class and labels)."""
  labels = getattr(model, "labels", None)
  return Source(name, convert.hf_architecture(model), None if labels is None else tuple(labels))


def match_source_head(model: keras.Model, weights: Optional[dict[str, np.ndarray]],
                      source: Source, head: str, reinit_head: bool
                      ) -> Optional[dict[str, np.ndarray]]:
  """The source's weights with its head's rows in `model`'s label order (module docstring).

  Args:
    model: the built task model (`labels` when it has named classes).
    weights: Google-name weights of the source, or None (random initialization).
    source: where they come from (`Source`).
    head: the model's head attribute ("" for a model without one).
    reinit_head: the head starts fresh: nothing of the source's head is used or checked.

  Returns:
    `weights`, with the head's rows reordered when the labels say so.

  Raises:
    ValueError: naming the source, both heads or both label lists, and `--reinit_head`.
  """
  if weights is None or reinit_head or not head:
    return weights
  kind = convert.hf_architecture(model)
  if source.architecture in TASK_HEADS and kind in TASK_HEADS and source.architecture != kind:
    raise ValueError(f"{source.name} holds a {source.architecture} head and this task trains "
                     f"a {kind}: its head would be dropped without a word; {FRESH_HEAD}")
  variables = google_names.google_variable_map(model)
  head_names = google_checkpoint.component_names(model, variables, (head,)) & set(weights)
  labels = getattr(model, "labels", None)
  if not head_names or labels is None or source.labels is None:
    return weights
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
