"""What SQuAD and classifier fine-tuning share: configuration, initialization, the `fit` loop.

`FineTuningConfig` holds the fields (and checks) every fine-tuning run has; `start_run`
sets up devices, seed, precision policy and strategy; `initial_weights` and
`assign_initial_weights` read and load a Google checkpoint, a Hugging Face directory or a
tfbert `.keras` file; `compile_and_fit` trains with the `tfbert.training.optimization` stack.

`fit_steps` runs Keras `fit` for a number of *applied* steps of `k` micro-batches each on an
endless dataset from `epoch_shuffled`, whose order is a pure function of the seed and the
epoch. That makes k micro-batches of b examples see exactly the examples of one batch of
k*b, so accumulation is an exact replacement for the big batch (tests/training/fine_tuning_test.py
and the k=1 vs k=4 tests of squad_run_test.py and classifier_run_test.py).

Why not `shuffle(reshuffle_each_iteration=True).repeat()`: every new iterator over such a
dataset draws a new order, and Keras' `fit`, when the model was built in a distribution
strategy's scope, makes one iterator to build the model from a first batch before making the
one it trains on. The training order then depended on the batch size, so a 4 x 8 run
trained on other examples in other windows than the 32 run it was compared with.
"""

import dataclasses
import json
import math
import os
import shutil
import time
from typing import Any, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from tfbert.checkpoints import convert, google_checkpoint, huggingface
from tfbert.config import BertConfig
from tfbert.pretraining.pretraining_run import DTYPES
from tfbert.runtime import atomic, run_directory, validation
from tfbert.training import distribution, optimization


@dataclasses.dataclass(frozen=True, kw_only=True)
class FineTuningConfig:
  """The fields every fine-tuning run shares (flags/fine_tuning_flags.py documents each)."""
  output_dir: str
  do_train: bool = False
  vocab_file: Optional[str] = None
  do_lower_case: bool = True
  bert_config_file: Optional[str] = None
  init_checkpoint: Optional[str] = None
  init_hf_dir: Optional[str] = None
  init_tfbert: Optional[str] = None
  train_batch_size: int = 32
  learning_rate: float = 5e-5
  num_train_epochs: float = 3.0
  max_train_steps: Optional[int] = None
  warmup_proportion: float = 0.1
  weight_decay_rate: float = 0.01
  clip_norm: Optional[float] = 1.0
  gradient_accumulation_steps: int = 1
  dtype: str = "float32"
  distribution_strategy: str = "one_device"
  num_cpu_devices: int = 1
  seed: int = 12345
  log_steps: int = 10
  verbose: int = 1
  export_dir: Optional[str] = None
  allow_config_change: bool = False

  def __post_init__(self):
    validation.validate(self)

  def checks(self, num_replicas: int = 1) -> list[validation.Check]:
    """What every fine-tuning run needs (`tfbert.runtime.validation`); tasks add theirs.

    `num_replicas` is 1 at construction; `start_run` checks again with its strategy's.
    """
    return [
        (self.dtype in DTYPES, f"dtype must be one of {DTYPES}, got {self.dtype!r}"),
        (0.0 <= self.warmup_proportion <= 1.0, "warmup_proportion must be in [0, 1]"),
        (sum(map(bool, (self.init_checkpoint, self.init_hf_dir, self.init_tfbert))) <= 1,
         "give at most one of init_checkpoint, init_hf_dir, init_tfbert"),
        validation.batch_splits(self.train_batch_size, self.gradient_accumulation_steps,
                                num_replicas),
        (self.log_steps >= 1, "log_steps must be >= 1"),
        (self.distribution_strategy != "multi_worker", "Keras fit does not run under multi_worker "
         "(keras-team/keras#20585); use one_device or mirrored"),
    ]

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

  def optimizer_config(self, num_train_steps: int) -> optimization.OptimizerConfig:
    """AdamW, linear warmup then linear decay to 0, clipping, mean accumulation."""
    return optimization.OptimizerConfig(
        optimizer="adamw", learning_rate=self.learning_rate,
        num_warmup_steps=int(num_train_steps * self.warmup_proportion),
        num_train_steps=num_train_steps,
        lr_schedule="decay_after_warmup", weight_decay_rate=self.weight_decay_rate,
        clip_norm=self.clip_norm, gradient_accumulation_steps=self.gradient_accumulation_steps,
        accumulation_reduction="mean", loss_scale=self.dtype == "mixed_float16")


def start_run(config: FineTuningConfig) -> tf.distribute.Strategy:
  """Sets devices, seed and precision policy; checks `config` against the replicas; returns
  the strategy.

  Nothing is written: the output directory is claimed later (`claim_run_directory`), once
  the model and its inputs have been checked.
  """
  distribution.configure_cpu_devices(config.num_cpu_devices)
  keras.utils.set_random_seed(config.seed)
  keras.mixed_precision.set_global_policy(config.dtype)
  strategy = distribution.create_strategy(config.distribution_strategy, config.num_cpu_devices)
  validation.validate(config, num_replicas=strategy.num_replicas_in_sync)
  return strategy


# Fields a rerun into the same output directory may change: what to do with the trained
# model this time and how to report it, and where the directory is (moved or copied), not
# what is trained.
RERUN_MAY_CHANGE = frozenset({
    "do_eval", "do_predict", "eval_file", "predict_file", "predict_articles",
    "eval_batch_size", "predict_batch_size", "postprocess", "export_dir", "verbose",
    "log_steps", "skip_malformed_rows", "output_dir", "allow_config_change"})
VOCAB_FILE = "vocab.txt"


def claim_run_directory(model: keras.Model, config: FineTuningConfig, vocab_file: str,
                        flagfile: Optional[str] = None) -> run_directory.RunLock:
  """Locks `output_dir` for this run and records the run there (`tfbert.runtime.run_directory`).

  A training run records `bert_config.json`, `run_config.json` and the vocabulary
  (`vocab.txt`; the casing is `run_config.json`'s `do_lower_case`), so that the directory's
  `model.keras` can be reused with `--init_tfbert` alone. A rerun must match the recorded
  model and schedule (`RERUN_MAY_CHANGE` aside) unless `allow_config_change`. A run that
  does not train (evaluate or predict with a trained model) must match the recorded model
  only, and keeps the training run's records. A training run also records the tool's
  resolved flags (`flagfile`) as `flags.txt`, which `--flagfile=` replays.

  Returns:
    The held lock; release it when the run ends.

  Raises:
    tfbert.runtime.run_directory.RunDirectoryError: another run holds the directory, or it
      records another model or schedule (every difference listed).
  """
  values = json.loads(config.to_json())
  records = [run_directory.RunRecord("bert_config.json", model.config.to_dict())]
  if config.do_train or not os.path.exists(os.path.join(config.output_dir, "run_config.json")):
    records.append(run_directory.RunRecord("run_config.json", values, RERUN_MAY_CHANGE))
  lock = run_directory.claim(config.output_dir, records,
                             allow_changes=config.allow_config_change)
  try:
    run_directory.write_records(config.output_dir, records,
                                flagfile if len(records) > 1 else None)
    target = os.path.join(config.output_dir, VOCAB_FILE)
    if os.path.abspath(vocab_file) != os.path.abspath(target):
      atomic.write_with(target, lambda path: shutil.copyfile(vocab_file, path))
  except BaseException:
    lock.release()
    raise
  return lock


def written_paths(output_dir: str, written: Sequence[str]) -> list[str]:
  """Paths of a run's outputs: names relative to `output_dir` joined to it, paths kept."""
  return [p if os.path.isabs(p) or os.path.dirname(p) else os.path.join(output_dir, p)
          for p in written]


def initial_weights(config: FineTuningConfig
                    ) -> tuple[BertConfig, Optional[dict[str, np.ndarray]], str]:
  """(model config, Google-name weights or None, source) of the chosen initialization.

  `bert_config_file`, when given, is the model's config; otherwise it comes from the source
  (`bert_config.json` beside a Google checkpoint, the Hugging Face `config.json`, the
  `.keras` model's config). Without a source the model starts from random weights.
  """
  def given_config(default_file=None):
    path = config.bert_config_file or default_file
    if not path:
      raise ValueError("bert_config_file is needed without init_checkpoint/init_hf_dir/"
                       "init_tfbert")
    return BertConfig.from_json_file(path)

  if config.init_checkpoint:
    prefix = config.init_checkpoint
    weights = google_checkpoint.read_google_checkpoint(prefix)
    return given_config(os.path.join(os.path.dirname(prefix), "bert_config.json")), weights, prefix
  if config.init_hf_dir:
    hf_config, weights, _ = huggingface.load_hf_checkpoint(config.init_hf_dir)
    bert_config = given_config() if config.bert_config_file else hf_config
    return bert_config, weights, config.init_hf_dir
  if config.init_tfbert:
    source = convert.read_tfbert_model(config.init_tfbert)  # Errors name the file.
    bert_config = given_config() if config.bert_config_file else source.config
    return bert_config, google_checkpoint.google_weights(source), config.init_tfbert
  return given_config(), None, "random initialization"


def assign_initial_weights(model: keras.Model, weights: Optional[dict[str, np.ndarray]],
                           source: str, head: str, head_is_trained: bool) -> None:
  """Loads `weights` into `model` (fresh `head` allowed); prints what was loaded.

  Args:
    model: A built model.
    weights: Google-name weights from `initial_weights`, or None for random weights.
    source: Where they come from (for messages).
    head: The attribute name of the task head, which may be missing from the source.
    head_is_trained: False warns when the source has no head (predicting with a fresh one).
  """
  if weights is None:
    logging.info("starting from random weights (no init_checkpoint/init_hf_dir/init_tfbert)")
    return
  report = google_checkpoint.assign_google_weights(model, weights, source, allow_unused=True,
                                                   allow_missing=(head,))
  logging.info(report.summary())
  if report.missing and not head_is_trained:
    logging.warning("predicting with an untrained %s: the source has none", head)


def check_vocab_fits(model: keras.Model, vocab_size: int) -> None:
  """Raises ValueError when the vocab has more entries than the model's embedding table."""
  if vocab_size > model.config.vocab_size:
    raise ValueError(f"the vocab has {vocab_size} entries, the model only "
                     f"{model.config.vocab_size} (vocab_size)")


def save_without_optimizer(model: keras.Model, path: str) -> None:
  """Saves `model` as a `.keras` file without optimizer state (AdamW's slots triple it).

  The file appears under `path` only when complete (`convert.save_tfbert_model`).
  """
  plain = type(model).from_config(model.get_config())
  plain.build()
  plain.set_weights(model.get_weights())
  convert.save_tfbert_model(plain, path)


def resolve_vocab_file(config: FineTuningConfig) -> str:
  """`vocab_file`, else the `vocab.txt` beside the initial checkpoint.

  That is: in the `init_hf_dir` directory, beside the `init_checkpoint` prefix, or beside
  the `init_tfbert` `.keras` file (where a fine-tuning run and `convert` put it).

  Raises:
    ValueError: when neither exists.
  """
  if config.vocab_file:
    return config.vocab_file
  places = [config.init_hf_dir] if config.init_hf_dir else []
  places += [os.path.dirname(os.path.abspath(path))
             for path in (config.init_checkpoint, config.init_tfbert) if path]
  for place in places:
    if os.path.exists(os.path.join(place, "vocab.txt")):
      return os.path.join(place, "vocab.txt")
  looked = f": no vocab.txt in {', '.join(places)}" if places else ""
  raise ValueError(f"vocab_file is needed (no vocab.txt beside the initial checkpoint{looked})")


def epoch_shuffled(dataset: tf.data.Dataset, size: int, seed: int) -> tf.data.Dataset:
  """`dataset` repeated forever, each epoch a permutation fixed by (`seed`, epoch).

  Every iterator over the result yields the same sequence, whatever was created or consumed
  before it (unlike a stateful shuffle). An epoch is held in memory as one batch, as a full
  shuffle buffer would hold it.

  Args:
    dataset: A finite dataset of `size` elements (any structure of tensors).
    size: Its number of elements (> 0).
    seed: The shuffling seed.

  Returns:
    An endless tf.data.Dataset with the elements of `dataset`.
  """
  if size < 1:
    raise ValueError(f"cannot shuffle an empty dataset (size {size})")
  whole = dataset.batch(size).take(1).cache()  # One element: every example.

  def epoch(index):
    def permute(*batch):
      count = tf.shape(tf.nest.flatten(batch)[0])[0]
      keys = tf.random.stateless_uniform([count], seed=tf.stack(
          [tf.constant(seed, tf.int64), index]))
      order = tf.argsort(keys)
      permuted = tf.nest.map_structure(lambda t: tf.gather(t, order), batch)
      return permuted if len(batch) > 1 else permuted[0]
    return whole.map(permute).unbatch()

  return tf.data.Dataset.counter().flat_map(epoch)


class TrainingMonitor(keras.callbacks.Callback):
  """Stops after `steps` applied steps, fails fast on a non-finite loss, times the run.

  Args:
    steps: applied (optimizer) steps to run.
    batch_size: examples per applied step.
    check_finite: raise FloatingPointError on a non-finite loss (off for mixed_float16,
      whose loss scaling skips overflowing steps by design).
  """

  def __init__(self, steps: int, batch_size: int, check_finite: bool = True):
    super().__init__()
    self.steps, self.batch_size, self.check_finite = steps, batch_size, check_finite
    self.micro_steps, self.first_step_end, self.end, self.last_logs = 0, None, None, {}

  def on_train_batch_end(self, batch, logs=None):
    self.micro_steps += 1
    self.last_logs = dict(logs or {})
    loss = self.last_logs.get("loss")
    if self.check_finite and loss is not None and not math.isfinite(loss):
      raise FloatingPointError(f"non-finite loss ({loss}) at micro-step {self.micro_steps} "
                               f"(applied step {self._applied() + 1} of {self.steps})")
    applied = self._applied()
    if applied >= 1 and self.first_step_end is None:
      self.first_step_end = (time.perf_counter(), applied)
    if applied >= self.steps:
      self.end = (time.perf_counter(), applied)
      self.model.stop_training = True

  def _applied(self) -> int:
    return int(self.model.optimizer.iterations.numpy())

  def summary(self) -> dict[str, float]:
    """Last logs, applied steps and examples/s after the first (tracing) step."""
    result = {k: float(v) for k, v in self.last_logs.items()}
    result["steps"] = self._applied()
    if hasattr(self.model.optimizer, "dynamic_scale"):
      result["loss_scale"] = float(self.model.optimizer.dynamic_scale.numpy())
    if self.first_step_end and self.end and self.end[1] > self.first_step_end[1]:
      seconds = self.end[0] - self.first_step_end[0]
      result["examples_per_second"] = (
          (self.end[1] - self.first_step_end[1]) * self.batch_size / seconds)
    logging.info("trained %s", " ".join(f"{k}={v:.4g}" for k, v in result.items()))
    return result


# Windows a mixed_float16 run may skip (gradients overflowed; the loss scale halves each
# time, so 60 consecutive skips take 2**15 below 2**-44) on top of its applied steps.
MAX_SKIPPED_WINDOWS = 60


def keras_epochs(steps: int, gradient_accumulation_steps: int, num_examples: int,
                 batch_size: int) -> tuple[int, int]:
  """(Keras epochs, micro-steps per Keras epoch) for `steps` applied steps.

  About one pass over the data each, whole windows each, and split evenly: Keras reports
  the last epoch's running mean as the run's loss, so a last epoch of one step (343 steps
  as 3 x 114 + 1) would report one batch's loss. The data iterator, and so the data
  order, carries across Keras epochs.
  """
  k = gradient_accumulation_steps
  micro_steps = steps * k
  per_pass = max(k, num_examples // (batch_size // k) // k * k)
  epochs = math.ceil(micro_steps / per_pass)
  per_epoch = math.ceil(micro_steps / epochs / k) * k
  return epochs, per_epoch


def fit_steps(model: keras.Model, dataset: tf.data.Dataset, *, steps: int,
              gradient_accumulation_steps: int, num_examples: int, batch_size: int,
              verbose: int = 1,
              callbacks: Sequence[keras.callbacks.Callback] = ()) -> dict[str, float]:
  """Runs the compiled `model` for `steps` applied steps; returns `TrainingMonitor.summary`.

  Args:
    model: A model compiled with a `tfbert.training.optimization` stack.
    dataset: Endless micro-batches of `batch_size // gradient_accumulation_steps` examples.
    steps: Applied (optimizer) steps.
    gradient_accumulation_steps: Micro-batches per applied step (k).
    num_examples: Examples per epoch (for Keras' epoch length and progress bar).
    batch_size: Examples per applied step (all micro-batches and replicas).
    verbose: Keras' progress bar setting.
    callbacks: More callbacks (TensorBoard, ...).

  With loss scaling (mixed_float16) overflowing windows are skipped by design: the loss
  is not checked for finiteness, and Keras gets epochs for `MAX_SKIPPED_WINDOWS` more
  windows (the monitor still stops at `steps` applied steps).
  """
  k = gradient_accumulation_steps
  loss_scaling = isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
  epochs, per_epoch = keras_epochs(steps, k, num_examples, batch_size)
  if loss_scaling:
    epochs += math.ceil(MAX_SKIPPED_WINDOWS * k / per_epoch)
  monitor = TrainingMonitor(steps, batch_size, check_finite=not loss_scaling)
  model.fit(dataset, epochs=epochs, steps_per_epoch=per_epoch, shuffle=False,
            verbose=verbose, callbacks=[monitor, *callbacks])
  return monitor.summary()


def compile_and_fit(model: keras.Model, strategy: tf.distribute.Strategy,
                    dataset: tf.data.Dataset, config: FineTuningConfig, *, steps: int,
                    total_steps: int, num_examples: int, loss: dict[str, Any],
                    loss_weights: Optional[dict[str, float]] = None) -> dict[str, float]:
  """Compiles `model` with `config`'s optimizer stack and trains it for `steps` steps.

  Args:
    model: The model, built in `strategy`'s scope.
    strategy: The run's strategy.
    dataset: Endless micro-batches (`epoch_shuffled`, then batched).
    config: The run configuration.
    steps: Applied steps to run now.
    total_steps: Applied steps of the whole schedule (warmup and decay).
    num_examples: Examples per epoch.
    loss: Keras losses by output name.
    loss_weights: Their weights (default 1).

  Returns:
    `TrainingMonitor.summary()`.
  """
  with strategy.scope():
    model.compile(optimizer=optimization.create_optimizer(config.optimizer_config(total_steps)),
                  loss=loss, loss_weights=loss_weights, jit_compile=False)
  return fit_steps(
      model, dataset, steps=steps, gradient_accumulation_steps=config.gradient_accumulation_steps,
      num_examples=num_examples, batch_size=config.train_batch_size, verbose=config.verbose,
      callbacks=[keras.callbacks.TensorBoard(  # update_freq counts micro-steps (batches).
          os.path.join(config.output_dir, "train"),
          update_freq=config.log_steps * config.gradient_accumulation_steps)])
