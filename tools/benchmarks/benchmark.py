"""Training-step throughput against TF Model Garden, measured as ratios in the same run.

A `StepCase` is one training step of tfbert or of its peer
(`tfbert_tools.benchmarks.benchmark_peer`): a `tf.function` (optionally XLA-compiled), called
on a fixed synthetic batch and synchronized each step by reading its loss; after `warmup_steps`
steps, `windows` windows of `steps_per_window` steps are timed and examples/s is the median
over the windows. tfbert's step is the model's own `train_step` with the optimizer stack of a
real run (`tfbert.training.optimization.create_optimizer`: AdamW, weight decay 0.01,
global-norm clipping 1.0); Model Garden's is its task `train_step`. Both get the same batch
(same seed). Every case runs in its own process (`run_step_case_in_subprocess`), so that its
peak RSS belongs to it alone; `compare_with_peer` alternates them (tfbert, peer, tfbert, peer,
...), so that a load that drifts during the run hits both, and reports each pair's ratio and
their median. `benchmark_peer.run_interleaved` times both in one process instead, window by
window. Gradient-accumulation overhead is `tfbert_tools.benchmarks.benchmark_accumulation`.

Cases import what a real run imports (tensorflow_text comes with the fine-tuning
modules), and so does the peer (Model Garden imports it too).

Shape legend: B batch, S sequence, P masked positions.
"""

import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from tfbert.config import BertConfig
from tfbert.models import BertPretrainer, BertSpanLabeler
from tfbert.runtime import validation
from tfbert.squad import squad_run
from tfbert.tasks import fine_tuning
from tfbert.training import optimization
from tfbert_tools.benchmarks import benchmark_mfu

IMPLEMENTATIONS = ("tfbert", "model_garden")
# The module whose `run_step_case` runs a StepCase of each implementation.
STEP_RUNNERS = {"tfbert": "tfbert_tools.benchmarks.benchmark",
                "model_garden": "tfbert_tools.benchmarks.benchmark_peer"}
# Schedule length of the timed optimizers (long enough not to reach its end).
TOTAL_STEPS = 10000


@dataclasses.dataclass(frozen=True)
class ModelShape:
  """The model and input shape a benchmark case trains (a small BERT by default).

  Attributes:
    vocab_size, hidden_size, num_layers, num_heads, intermediate_size: the model (V/H/L/A/I).
    seq_length, max_predictions: input shape (S, P; P only matters for pretraining).
  """
  vocab_size: int = 30522
  hidden_size: int = 256
  num_layers: int = 4
  num_heads: int = 4
  intermediate_size: int = 1024
  seq_length: int = 128
  max_predictions: int = 20

  def bert_config(self) -> BertConfig:
    """tfbert's config of the model (dropout 0.1 and tanh-gelu: the peer's settings)."""
    return BertConfig(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                      num_hidden_layers=self.num_layers, num_attention_heads=self.num_heads,
                      intermediate_size=self.intermediate_size, type_vocab_size=2,
                      max_position_embeddings=max(512, self.seq_length))

  def shape_checks(self, masked_lm: bool,
                   describe: Optional[Callable[[str, Any], str]] = None
                   ) -> list[validation.Check]:
    """The rules of a trainable shape (`tfbert.runtime.validation`), each naming its fields
    with their values: `describe(field, value)` spells one (default "field (value)"; the
    tool names its flags). `masked_lm`: also P's rule (only pretraining reads P)."""
    describe = describe or (lambda name, value: f"{name} ({value})")
    def named(name):
      return describe(name, getattr(self, name))
    checks = [(self.hidden_size % self.num_heads == 0,
               f"{named('num_heads')} must divide {named('hidden_size')}")]
    if masked_lm:
      checks.append((0 < self.max_predictions < self.seq_length,
                     f"{named('max_predictions')} must be below {named('seq_length')}"))
    return checks


@dataclasses.dataclass(frozen=True)
class StepCase(ModelShape):
  """One training-step throughput measurement (tfbert or its Model Garden peer).

  Attributes (besides `ModelShape`'s):
    task: "pretraining" (MLM + NSP heads) or "squad" (span labeler).
    implementation: "tfbert" or "model_garden".
    batch_size: B, examples per step.
    dtype_policy: "float32" or "mixed_bfloat16".
    jit_compile: compile the step with XLA.
    warmup_steps: unmeasured steps first (the first one traces and compiles).
    windows, steps_per_window: timed windows, and steps in each.
    seed: seed of the synthetic batch (the same for tfbert and the peer).
  """
  task: str = "pretraining"
  implementation: str = "tfbert"
  batch_size: int = 32
  dtype_policy: str = "float32"
  jit_compile: bool = False
  warmup_steps: int = 2
  windows: int = 5
  steps_per_window: int = 2
  seed: int = 0

  def __post_init__(self):
    validation.validate(self)

  def checks(self) -> list[validation.Check]:
    """The rules of a measurable case (`tfbert.runtime.validation`)."""
    return [
        (self.task in benchmark_mfu.TASKS, f"task must be one of {benchmark_mfu.TASKS}"),
        (self.implementation in IMPLEMENTATIONS,
         f"implementation must be one of {IMPLEMENTATIONS}"),
        (self.dtype_policy in benchmark_mfu.MATMUL_DTYPES,
         f"dtype_policy must be one of {tuple(benchmark_mfu.MATMUL_DTYPES)}"),
        *self.shape_checks(masked_lm=self.task == "pretraining"),
        (min(self.warmup_steps, self.windows, self.steps_per_window, self.batch_size) >= 1,
         f"warmup_steps ({self.warmup_steps}), windows ({self.windows}), steps_per_window "
         f"({self.steps_per_window}) and batch_size ({self.batch_size}) must be >= 1"),
    ]

  def flops_per_example(self) -> int:
    """Analytic training FLOPs of one example (`benchmark_mfu`)."""
    return benchmark_mfu.training_flops_per_example(
        self.task, hidden_size=self.hidden_size, num_layers=self.num_layers,
        intermediate_size=self.intermediate_size, vocab_size=self.vocab_size,
        seq_length=self.seq_length, max_predictions=self.max_predictions)


# The issue's default configs: a small BERT for pretraining; MiniLM-L6-H384's shape for SQuAD.
DEFAULT_CASES = {
    "pretraining": StepCase(task="pretraining"),
    "squad": StepCase(task="squad", hidden_size=384, num_layers=6, num_heads=12,
                      intermediate_size=1536, seq_length=384),
}


def pretraining_arrays(b: int, s: int, p: int, vocab_size: int,
                       seed: int) -> dict[str, np.ndarray]:
  """Random pretraining features with google-research/bert's names, from `seed`."""
  rng = np.random.default_rng(seed)
  return {
      "input_ids": rng.integers(0, vocab_size, (b, s)).astype(np.int32),         # [B, S]
      "input_mask": np.ones((b, s), np.int32),
      "segment_ids": (np.arange(s)[None] >= s // 2).astype(np.int32).repeat(b, 0),
      "masked_lm_positions": rng.integers(1, s, (b, p)).astype(np.int32),       # [B, P]
      "masked_lm_ids": rng.integers(0, vocab_size, (b, p)).astype(np.int32),
      "masked_lm_weights": np.ones((b, p), np.float32),
      "next_sentence_labels": rng.integers(0, 2, b).astype(np.int32),           # [B]
  }


def synthetic_step_batch(case: StepCase) -> dict[str, np.ndarray]:
  """The batch a StepCase trains on, from `case.seed`.

  Returns:
    Pretraining: `pretraining_arrays`. SQuAD: int32 `input_ids`, `input_mask`, `segment_ids`
    [B, S] (the same arrays as for pretraining) and `start_positions` <= `end_positions` [B].
  """
  b, s = case.batch_size, case.seq_length
  arrays = pretraining_arrays(b, s, case.max_predictions, case.vocab_size, case.seed)
  if case.task == "pretraining":
    return arrays
  spans = np.sort(np.random.default_rng(case.seed + 1).integers(0, s, (b, 2)), axis=1)
  return {**{name: arrays[name] for name in squad_run.INPUT_NAMES},
          "start_positions": spans[:, 0].astype(np.int32),
          "end_positions": spans[:, 1].astype(np.int32)}


def time_steps(step: Callable[[], float], case: StepCase) -> dict:
  """Times `step`, one synchronized training step returning its loss, as `case` says.

  Returns:
    dict with `examples_per_second` (median over the windows), `window_examples_per_second`,
    `first_loss` (the loss at the initial weights) and `last_loss`, what the last step
    returned (Model Garden: that step's loss; tfbert: Keras' loss metric, the mean since
    the first step).

  Raises:
    FloatingPointError: on a non-finite loss.
  """
  first_loss = loss = step()  # Traces (and compiles) the step.
  for _ in range(case.warmup_steps - 1):
    loss = step()
  rates = []
  for _ in range(case.windows):
    rate, loss = window_rate(step, case)
    rates.append(rate)
  if not (np.isfinite(first_loss) and np.isfinite(loss)):
    raise FloatingPointError(f"non-finite loss (first {first_loss}, last {loss}) in {case}")
  return {"examples_per_second": statistics.median(rates), "window_examples_per_second": rates,
          "first_loss": first_loss, "last_loss": loss}


def window_rate(step: Callable[[], float], case: StepCase) -> tuple[float, float]:
  """(examples/s, last loss) of one timed window of `case.steps_per_window` steps."""
  start = time.perf_counter()
  for _ in range(case.steps_per_window):
    loss = step()
  return case.steps_per_window * case.batch_size / (time.perf_counter() - start), loss


def alternating_rounds(sides: Sequence[str], window: Callable[[str], float],
                       rounds: int) -> list[list[tuple[str, float]]]:
  """`window(side)` (examples/s of one timed window) for every side, round by round.

  The order is swapped every round (`sides`, reversed, `sides`, ...), so that a slowdown of
  the machine that lasts a window or more hits both sides of a round.

  Returns:
    Per round, [(side, examples/s)] in the round's order.
  """
  return [[(side, window(side)) for side in sides[::1 if index % 2 == 0 else -1]]
          for index in range(rounds)]


def peak_rss_mib() -> float:
  """Peak resident set size of this process so far, in MiB."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def step_batch_tensors(case: StepCase) -> dict[str, tf.Tensor]:
  """`synthetic_step_batch(case)` as constant Tensors, the input of either step."""
  return {name: tf.constant(value) for name, value in synthetic_step_batch(case).items()}


def tfbert_step(case: StepCase, batch: dict[str, tf.Tensor]) -> Callable[[], float]:
  """tfbert's training step for `case` on `batch`, synchronized by reading the loss.

  Pretraining: `BertPretrainer` compiled with `create_optimizer` (AdamW, clipping 1.0) and
  its own `train_step`. SQuAD: `BertSpanLabeler` with the fine-tuning recipe's optimizer
  stack (`FineTuningConfig.optimizer_config`) and its own `train_step` (the mean of the
  start and end sparse cross-entropies) on (features, labels). Either `train_step` is
  wrapped in `tf.function(jit_compile=case.jit_compile)`.
  """
  config = case.bert_config()
  if case.task == "pretraining":
    model, data = BertPretrainer(config), batch
    model.build()
    model.compile(optimizer=optimization.create_optimizer(optimization.OptimizerConfig(
        optimizer="adamw", learning_rate=1e-4, num_warmup_steps=0, num_train_steps=TOTAL_STEPS)))
  else:
    model = BertSpanLabeler(config)
    model.build()
    run = fine_tuning.FineTuningConfig(output_dir="unused", learning_rate=1e-4)  # Not written.
    model.compile(
        optimizer=optimization.create_optimizer(run.optimizer_config(TOTAL_STEPS)),
        jit_compile=False)
    data = ({name: batch[name] for name in squad_run.INPUT_NAMES},
            {"start_logits": batch["start_positions"], "end_logits": batch["end_positions"]})
  train_step = tf.function(model.train_step, jit_compile=case.jit_compile)
  return lambda: float(train_step(data)["loss"])


def measure_step_case(case: StepCase,
                      make_step: Callable[[StepCase, dict], Callable[[], float]]) -> dict:
  """Builds `make_step(case, batch)` on the synthetic batch and times it (`time_steps`).

  Returns:
    dict with the case, the `time_steps` results, `peak_rss_mib` of this process,
    `flops_per_example` and `wall_seconds`.
  """
  start = time.perf_counter()
  timing = time_steps(make_step(case, step_batch_tensors(case)), case)
  return {"case": dataclasses.asdict(case), **timing,
          "peak_rss_mib": peak_rss_mib(),
          "flops_per_example": case.flops_per_example(),
          "wall_seconds": time.perf_counter() - start}


def run_step_case(case: StepCase) -> dict:
  """Runs a tfbert `case` in this process; see `measure_step_case`."""
  if case.implementation != "tfbert":
    raise ValueError("tfbert_tools.benchmarks.benchmark runs tfbert cases, not "
                     f"{case.implementation!r}")
  keras.utils.set_random_seed(case.seed)
  keras.mixed_precision.set_global_policy(case.dtype_policy)
  return measure_step_case(case, tfbert_step)


def run_in_subprocess(code: str, argument: dict, timeout: float,
                      env: Optional[dict] = None) -> dict:
  """Runs `code` (which prints "RESULT <json>") in a fresh Python, with `env` added to the
  environment; returns that JSON."""
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  env = dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
  result = subprocess.run([sys.executable, "-c", code, json.dumps(argument)],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=root)
  lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
  if result.returncode != 0 or not lines:
    raise RuntimeError(f"benchmark case {argument} failed:\n{result.stderr[-3000:]}")
  return json.loads(lines[-1][len("RESULT "):])


def run_step_case_in_subprocess(case: StepCase, timeout: float = 3600.0) -> dict:
  """Runs `case` in a fresh process with its implementation's `run_step_case`."""
  code = (f"import json, sys; import {STEP_RUNNERS[case.implementation]} as runner; "
          "from tfbert_tools.benchmarks import benchmark; "
          "case = benchmark.StepCase(**json.loads(sys.argv[1])); "
          "print('RESULT ' + json.dumps(runner.run_step_case(case)))")
  return run_in_subprocess(code, dataclasses.asdict(case), timeout)


def run_interleaved_in_subprocess(case: StepCase, timeout: float = 3600.0) -> dict:
  """`benchmark_peer.run_interleaved(case)` in a fresh process: both steps, window by window."""
  code = ("import json, sys; from tfbert_tools.benchmarks import benchmark, benchmark_peer; "
          "case = benchmark.StepCase(**json.loads(sys.argv[1])); "
          "print('RESULT ' + json.dumps(benchmark_peer.run_interleaved(case)))")
  return run_in_subprocess(code, dataclasses.asdict(case), timeout)


def alternate(first, second, repeats: int, runner, numerator: int) -> dict:
  """Runs first, second, first, second, ... (`repeats` pairs) and compares each pair.

  Alternation puts a load that drifts during the run on both sides of every pair.

  Args:
    first, second: the two cases, run in this order in every pair.
    repeats: pairs, >= 1.
    runner: case -> result dict with `examples_per_second` and `peak_rss_mib`.
    numerator: which of the pair (0: first, 1: second) is divided by the other.

  Returns:
    dict with `runs` (in run order), `pairs` [(first, second)], `ratios` and `rss_ratios`
    (examples/s and peak RSS per pair) and their medians `median_ratio`, `median_rss_ratio`.
  """
  if repeats < 1:
    raise ValueError(f"repeats must be >= 1, got {repeats}")
  runs = [runner(case) for _ in range(repeats) for case in (first, second)]
  pairs = list(zip(runs[0::2], runs[1::2]))
  def ratio(pair, key):
    return pair[numerator][key] / pair[1 - numerator][key]
  ratios = [ratio(pair, "examples_per_second") for pair in pairs]
  rss_ratios = [ratio(pair, "peak_rss_mib") for pair in pairs]
  return {"runs": runs, "pairs": pairs, "ratios": ratios,
          "median_ratio": statistics.median(ratios), "rss_ratios": rss_ratios,
          "median_rss_ratio": statistics.median(rss_ratios)}


def compare_with_peer(case: StepCase, repeats: int,
                      runner=run_step_case_in_subprocess) -> dict:
  """tfbert and the Model Garden peer on `case`, alternated `repeats` times.

  Returns:
    `alternate`'s dict: `runs` in run order (tfbert, peer, tfbert, peer, ...), `ratios`
    (tfbert / peer examples/s of each pair), `median_ratio`, `rss_ratios` and
    `median_rss_ratio` (tfbert / peer peak RSS).
  """
  ours, peer = (dataclasses.replace(case, implementation=name) for name in IMPLEMENTATIONS)
  return alternate(ours, peer, repeats, runner, numerator=0)
