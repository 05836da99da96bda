"""A fine-tuning task: the hooks that differ between tasks.

A task says how its data is read and checked, how its model is built, what it trains on,
how it scores itself during training, what it writes after training, and how its model is
exported. `tfbert.tasks.runner.run_task` owns everything else, once for every task: the
checks before any work, the run directory, casing and vocabulary, the initial weights, the
training loop (strategy, accumulation, precision, checkpoints, exact resume, SIGTERM,
evaluation during training, the best model, early stopping), `train_results.json`,
`eval_results.json`, `model.keras`, the export and the list of what was written.

The hooks, in the order the runner calls them:

    default_best_metric(config)             the metric `best/` keeps with eval_every_steps
    read_inputs(config)                      every input file, read and checked (nothing
                                             built or written yet); any value
    evaluation_metrics(config, inputs)       with eval_every_steps: the names `evaluate`
                                             will return (`best_metric` is checked against
                                             them before any write), or None
    labels(config, inputs)                   the model's label names, or None
    train_files(config, inputs)              the files training reads (their identity is
                                             recorded: a resume on other data is refused)
    eval_files(config, inputs)               with eval_every_steps: the files `evaluate`
                                             scores (their identity is recorded with the
                                             best value: a resume on others starts it over)
    max_seq_length(config)                   S, checked against the model's positions
    build_model(config, bert_config, labels) the task model, not built (the runner builds it
                                             in the strategy's scope)
    adapt_initial_weights(model, weights, source)   fill what a source may lack
    head_is_trained(config)                  False warns when a fresh head will predict
    train_data(context)                      `TrainingData`: (inputs, labels) arrays
    evaluate(context)                        scalars of one evaluation during training
    outputs(context)                         `Outputs` after training: evaluation and
                                             prediction files (only the chief writes)
    export(context)                          the SavedModel at `config.export_dir`

`docs/adding_a_task.md` walks through a new task; tests/tasks/runner_test.py adds one in
the test file itself.
"""

import dataclasses
from typing import Any, ClassVar, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from tfbert.checkpoints import convert
from tfbert.config import BertConfig
from tfbert.text.tokenization import WordPieceTokenizer


@dataclasses.dataclass
class RunContext:
  """What a task's hooks see once the run directory is claimed.

  Attributes:
    config: the run's configuration (a `FineTuningConfig` subclass).
    strategy: the run's strategy.
    tokenizer: the run's WordPiece tokenizer (its vocabulary is the run's `vocab.txt`).
    model: the task model, built and initialized in `strategy`'s scope.
    inputs: what `Task.read_inputs` returned.
    work_dir: this process's directory (`output_dir`, or another worker's own).
    chief: whether this process writes the run's outputs.
    cache: the task's own values kept between hooks (features made once).
  """
  config: Any
  strategy: tf.distribute.Strategy
  tokenizer: WordPieceTokenizer
  model: keras.Model
  inputs: Any
  work_dir: str
  chief: bool
  cache: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class TrainingData:
  """What a task trains on.

  Attributes:
    examples: (inputs, labels): arrays of `num_examples` rows by name, as the model's
      `train_step` reads them.
    num_examples: N, the rows of one epoch.
    description: what the rows are, for the log ("3668 examples", "912 windows of 400
      sentences").
  """
  examples: tuple[dict[str, np.ndarray], Any]
  num_examples: int
  description: str


@dataclasses.dataclass
class Outputs:
  """What a task produced after training.

  Attributes:
    result: entries of the run's result ("eval", "predictions", "scores", ...).
    written: paths (or names in `output_dir`) of the files the chief wrote.
    eval_results: the scores the runner writes as `eval_results.json` (None: none).
  """
  result: dict[str, Any] = dataclasses.field(default_factory=dict)
  written: list[str] = dataclasses.field(default_factory=list)
  eval_results: Optional[dict[str, Any]] = None


class Task:
  """The hooks of one fine-tuning task (see the module docstring); subclass and override.

  Attributes:
    head: the model attribute holding the task head, which a source checkpoint may lack.
    model_class: the class of the task's model (what `build_model` returns).
    config_class: the task's `FineTuningConfig` subclass (its `from_json` reads the run's
      `run_config.json`).
    uses_pooler: whether the model's outputs read the pooler; a task whose model does not
      starts from a source without one (the pooler keeps its fresh values).
    generic_task_names: task names (lower case) that say nothing of what the labels mean (a
      classifier's "custom"): a source whose run recorded one, or a run of one, is matched
      by its labels alone (`tfbert.tasks.source_heads.match_source_head`).
  """
  head: ClassVar[str] = ""
  uses_pooler: ClassVar[bool] = True
  generic_task_names: ClassVar[frozenset] = frozenset()
  model_class: ClassVar[Optional[type]] = None
  config_class: ClassVar[Optional[type]] = None

  def default_best_metric(self, config) -> str:
    """The metric of `evaluate` that `best/` keeps when `best_metric` is not given."""
    raise NotImplementedError(f"{type(self).__name__} does not evaluate during training")

  def evaluation_metrics(self, config, inputs) -> Optional[Sequence[str]]:
    """The scalar names `evaluate` will return for `config` and `inputs` (what `read_inputs`
    returned: the names may depend on the data, e.g. SQuAD v2.0's HasAns_* only with
    answerable questions). The runner checks `best_metric` against them before anything is
    built or written; None (this default): only the first evaluation, after a step has
    trained, finds a name it does not return.

    Raises:
      ValueError: the evaluation cannot run on `inputs` (naming the file and why).
    """
    del config, inputs
    return None

  def read_inputs(self, config) -> Any:
    """Reads and checks every input file the run will use; nothing is built or written.

    Raises:
      FileNotFoundError, ValueError: naming the file (and line or field) at fault.
    """
    raise NotImplementedError

  def labels(self, config, inputs) -> Optional[Sequence[str]]:
    """The model's label names (None for a task without named labels)."""
    del config, inputs
    return None

  def train_files(self, config, inputs) -> Sequence[str]:
    """The files a training run reads its examples from (recorded in the run directory's
    `data.json`, so a resume on other data is refused): `config.train_file`, or none."""
    del inputs
    return [config.train_file] if config.do_train and getattr(config, "train_file", None) else []

  def eval_files(self, config, inputs) -> Sequence[str]:
    """The files `evaluate` scores (none by default). They are recorded by name, size and
    sha256 with the best value (`fine_tuning.train`'s `eval_files`): a resume on other ones
    starts the best value and the patience count over instead of comparing scores of two
    different evaluations."""
    del config, inputs
    return []

  def segments(self, config) -> int:
    """How many segment ids (token types) the task's inputs use: 1, or 2 for text pairs
    (checked against the model's type_vocab_size before any work)."""
    del config
    return 1

  def max_seq_length(self, config) -> int:
    """S: the length of the model's inputs (checked against max_position_embeddings)."""
    return config.max_seq_length

  def build_model(self, config, bert_config: BertConfig,
                  labels: Optional[Sequence[str]]) -> keras.Model:
    """The task model (the runner builds it in the strategy's scope)."""
    raise NotImplementedError

  def adapt_initial_weights(self, model: keras.Model, weights: Optional[dict[str, np.ndarray]],
                            source: str) -> Optional[dict[str, np.ndarray]]:
    """The Google-name weights to load into `model`: `weights` as they are, or, for a task
    whose model reads no pooler (`uses_pooler` False), with the model's fresh pooler where
    the source has none (transformers' question-answering and token-classification
    directories)."""
    if weights is None or self.uses_pooler:
      return weights
    return convert.with_fresh_pooler(model, weights, source,
                                     f"unused by {type(self).__name__}")

  def head_is_trained(self, config) -> bool:
    """Whether the head will be trained (a fresh head that only predicts gets a warning)."""
    return config.do_train

  def train_data(self, context: RunContext) -> TrainingData:
    """The training examples (`context.inputs`' train split)."""
    raise NotImplementedError

  def evaluate(self, context: RunContext) -> dict[str, float]:
    """Scalars of one evaluation during training (every worker calls it; none writes)."""
    raise NotImplementedError(f"{type(self).__name__} does not evaluate during training")

  def outputs(self, context: RunContext) -> Outputs:
    """Evaluation and prediction after training, as the config asks; only the chief
    (`context.chief`) writes files."""
    del context
    return Outputs()

  def export(self, context: RunContext) -> None:
    """Writes the SavedModel for `context.config.export_dir` (the chief only)."""
    raise NotImplementedError(f"{type(self).__name__} has no export")
