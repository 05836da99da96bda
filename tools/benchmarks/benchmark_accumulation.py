"""Gradient-accumulation overhead: k micro-steps of b examples against one step of k*b.

Both sides train tfbert's `BertPretrainer` on synthetic data with the optimizer stack of a
real run (`tfbert.training.optimization.create_optimizer`: AdamW, the accumulation wrapper with k
steps), through one of two loops:

* `fit`: Keras' `model.fit`, one call per micro-step;
* `pretraining_run`: the tools' loop (`tfbert.training.training_loop.graph_micro_steps`), an
  applied step's micro-steps one `tf.function` call each.

examples/s counts applied steps (one applied step = k micro-steps = k*b examples) between
the ends of consecutive applied steps. Two ways to compare the sides:

* `accumulation_overhead`: alternating processes (big batch, accumulated, big batch, ...),
  each with its own peak RSS; the ratio is per pair.
* `run_interleaved`: both models in one process, timed window by window, the order swapped
  every round, so that a slowdown of the VM that lasts a window hits both sides of a round.

Shape legend: b micro-batch, k accumulation steps, S sequence, P masked positions.
"""

import dataclasses
import statistics
import time

import keras
import numpy as np
import tensorflow as tf

from tfbert.models import BertPretrainer
from tfbert.runtime import validation
from tfbert.training import optimization, training_loop
from tfbert_tools.benchmarks import benchmark, benchmark_report

PRETRAINING_LOOPS = ("fit", "pretraining_run")
# The two sides of a comparison: one step of k*b, and k micro-steps of b.
SIDES = ("big_batch", "accumulated")


@dataclasses.dataclass(frozen=True)
class PretrainingCase(benchmark.ModelShape):
  """One pretraining throughput measurement.

  Attributes (besides `benchmark.ModelShape`'s):
    micro_batch_size: sequences per micro-step (b).
    gradient_accumulation_steps: micro-steps per applied step (k); examples per applied step = k*b.
    applied_steps: measured applied steps (after `warmup_steps` applied steps); with
      `run_interleaved`, applied steps per window.
    dtype_policy: "float32" or "mixed_bfloat16".
    loop: one of `PRETRAINING_LOOPS`.
  """
  micro_batch_size: int = 32
  gradient_accumulation_steps: int = 1
  applied_steps: int = 8
  warmup_steps: int = 2
  dtype_policy: str = "float32"
  loop: str = "fit"

  def __post_init__(self):
    validation.validate(self)

  def checks(self) -> list[validation.Check]:
    """The rules of a measurable case (`tfbert.runtime.validation`)."""
    return [(self.loop in PRETRAINING_LOOPS,
             f"loop must be one of {PRETRAINING_LOOPS}, got {self.loop!r}"),
            (self.warmup_steps >= 1, f"warmup_steps ({self.warmup_steps}) must be >= 1: the "
             "first applied step traces, and each rate is measured from a warm step's end"),
            *self.shape_checks(masked_lm=True)]


def synthetic_batch(case: PretrainingCase, seed: int = 0) -> dict[str, np.ndarray]:
  """One micro-batch of random pretraining features with google-research/bert's names."""
  return benchmark.pretraining_arrays(case.micro_batch_size, case.seq_length,
                                      case.max_predictions, case.vocab_size, seed)


def big_and_accumulated(
    case: PretrainingCase, gradient_accumulation_steps: int
) -> tuple[PretrainingCase, PretrainingCase]:
  """(one step of k*b, k micro-steps of b) for `case`'s b and k = `gradient_accumulation_steps`."""
  big = dataclasses.replace(
      case, micro_batch_size=case.micro_batch_size * gradient_accumulation_steps,
      gradient_accumulation_steps=1)
  return big, dataclasses.replace(case, gradient_accumulation_steps=gradient_accumulation_steps)


class _StepTimer(keras.callbacks.Callback):
  def __init__(self):
    super().__init__()
    self.times = []

  def on_train_batch_end(self, batch, logs=None):
    self.times.append(time.perf_counter())


class _Trainer:
  """`case`'s model, compiled for accumulation, and its loop; `train(n)` times n steps."""

  def __init__(self, case: PretrainingCase):
    self.case = case
    self.model = BertPretrainer(case.bert_config())
    self.model.compile(optimizer=optimization.create_optimizer(optimization.OptimizerConfig(
        optimizer="adamw", learning_rate=1e-4, num_warmup_steps=0,
        num_train_steps=benchmark.TOTAL_STEPS,
        gradient_accumulation_steps=case.gradient_accumulation_steps,
        accumulation_reduction="sum")))
    self.dataset = tf.data.Dataset.from_tensors(synthetic_batch(case)).repeat()
    self._iterator, self._micro_steps = None, None  # The pretraining_run loop's, once built.

  @property
  def applied_steps(self) -> int:
    """Applied (optimizer) steps so far."""
    return int(self.model.optimizer.iterations.numpy())

  def train(self, applied_steps: int) -> list[float]:
    """Trains `applied_steps` applied steps; returns the end time of each."""
    if self.case.loop == "fit":
      return self._fit(applied_steps)
    return self._pretraining_run_loop(applied_steps)

  def _fit(self, applied_steps: int) -> list[float]:
    k, timer = self.case.gradient_accumulation_steps, _StepTimer()
    self.model.fit(self.dataset, steps_per_epoch=applied_steps * k, epochs=1, verbose=0,
                   callbacks=[timer])
    return timer.times[k - 1::k]

  def _pretraining_run_loop(self, applied_steps: int) -> list[float]:
    """`tfbert.pretraining.pretraining_run`'s loop: one call runs an applied step's k micro-steps.

    `graph_micro_steps` runs them, one `tf.function` call each; reading the optimizer's step
    count after each applied step synchronizes.
    """
    if self._micro_steps is None:
      self.model.build()  # Variables are created before the first step is traced.
      self.model.optimizer.build(self.model.trainable_variables)
      self._iterator = iter(self.dataset)
      self._micro_steps = training_loop.graph_micro_steps(
          tf.distribute.get_strategy(), tf.function(self.model.train_step))
    count, ends = tf.constant(self.case.gradient_accumulation_steps), []
    for _ in range(applied_steps):
      self._micro_steps(self._iterator, count)
      _ = self.applied_steps  # Reading the step count synchronizes.
      ends.append(time.perf_counter())
    return ends

  def rate(self, ends: list[float]) -> float:
    """examples/s between the first and the last of `ends` (>= 2 applied-step ends)."""
    case = self.case
    return ((len(ends) - 1) * case.gradient_accumulation_steps * case.micro_batch_size
            / (ends[-1] - ends[0]))


def run_pretraining_case(case: PretrainingCase) -> dict:
  """Trains `case` in this process; returns examples/s, peak RSS and the case.

  examples/s is the median over the applied steps after the warm-up ones.
  """
  keras.mixed_precision.set_global_policy(case.dtype_policy)
  start = time.perf_counter()
  trainer = _Trainer(case)
  ends = trainer.train(case.warmup_steps + case.applied_steps)[case.warmup_steps - 1:]
  rates = [trainer.rate([a, b]) for a, b in zip(ends, ends[1:])]
  return {"case": dataclasses.asdict(case), "examples_per_second": statistics.median(rates),
          "peak_rss_mib": benchmark.peak_rss_mib(),
          "wall_seconds": time.perf_counter() - start, "applied_steps": trainer.applied_steps}


def run_case_in_subprocess(case: PretrainingCase, timeout: float = 1800.0) -> dict:
  """Runs `run_pretraining_case` in a fresh process (own peak RSS); returns its result."""
  code = ("import json, sys; from tfbert_tools.benchmarks import benchmark_accumulation as b; "
          "case = b.PretrainingCase(**json.loads(sys.argv[1])); "
          "print('RESULT ' + json.dumps(b.run_pretraining_case(case)))")
  return benchmark.run_in_subprocess(code, dataclasses.asdict(case), timeout)


def accumulation_overhead(case: PretrainingCase, gradient_accumulation_steps: int,
                          runner=run_case_in_subprocess, repeats: int = 1) -> dict:
  """k micro-steps of b against one step of k*b, same model, alternated `repeats` times.

  Runs big batch, accumulated, big batch, accumulated, ... (`benchmark.alternate`; one
  pair on this 2-core VM ranged 0.77-1.03, docs/benchmark_history.md).

  Returns:
    `benchmark.alternate`'s dict (ratios accumulated / big batch), plus `big_batch` and
    `accumulated` (the first pair's results), `throughput_ratio` (= `median_ratio`) and
    `peak_rss_ratio` (= `median_rss_ratio`).
  """
  big, small = big_and_accumulated(case, gradient_accumulation_steps)
  result = benchmark.alternate(big, small, repeats, runner, numerator=1)
  return {**result, "big_batch": result["pairs"][0][0], "accumulated": result["pairs"][0][1],
          "throughput_ratio": result["median_ratio"],
          "peak_rss_ratio": result["median_rss_ratio"]}


def run_interleaved(case: PretrainingCase, gradient_accumulation_steps: int, rounds: int) -> dict:
  """Big batch and accumulated in this one process, timed window by window.

  Both models are built and warmed up (`case.warmup_steps` applied steps each). Then each
  of `rounds` rounds trains one window of `case.applied_steps` applied steps on each side,
  the order swapped every round; a window's examples/s spans its applied steps after the
  first (which, with `fit`, also carries the call's set-up).

  Returns:
    dict with `case` (b and k), `runs` per round in the round's order (`side`, one of
    `SIDES`, its `case` and `examples_per_second`), `ratios` (accumulated / big batch per
    round), `median_ratio`, `applied_steps` by side and `peak_rss_mib` of the process
    (both models).
  """
  if rounds < 1 or case.applied_steps < 2:
    raise ValueError(f"need rounds >= 1 and applied_steps >= 2 per window, got {rounds} "
                     f"and {case.applied_steps}")
  keras.mixed_precision.set_global_policy(case.dtype_policy)
  trainers = dict(zip(SIDES, map(_Trainer, big_and_accumulated(case, gradient_accumulation_steps))))
  for trainer in trainers.values():
    trainer.train(case.warmup_steps)
  rounds_rates = benchmark.alternating_rounds(
      SIDES, lambda side: trainers[side].rate(trainers[side].train(case.applied_steps)), rounds)
  runs = [{"side": side, "case": dataclasses.asdict(trainers[side].case),
           "examples_per_second": rate} for pairs in rounds_rates for side, rate in pairs]
  ratios = [dict(pairs)["accumulated"] / dict(pairs)["big_batch"] for pairs in rounds_rates]
  return {"case": dataclasses.asdict(trainers["accumulated"].case), "runs": runs,
          "ratios": ratios, "median_ratio": statistics.median(ratios),
          "applied_steps": {side: t.applied_steps for side, t in trainers.items()},
          "peak_rss_mib": benchmark.peak_rss_mib()}


def run_interleaved_in_subprocess(case: PretrainingCase, gradient_accumulation_steps: int,
                                  rounds: int, timeout: float = 3600.0) -> dict:
  """`run_interleaved` in a fresh process (its own peak RSS)."""
  code = ("import json, sys; from tfbert_tools.benchmarks import benchmark_accumulation as b; "
          "a = json.loads(sys.argv[1]); "
          "print('RESULT ' + json.dumps(b.run_interleaved(b.PretrainingCase(**a['case']), "
          "a['gradient_accumulation_steps'], a['rounds'])))")
  argument = {"case": dataclasses.asdict(case),
              "gradient_accumulation_steps": gradient_accumulation_steps, "rounds": rounds}
  return benchmark.run_in_subprocess(code, argument, timeout)


def format_accumulation(result: dict) -> str:
  """`accumulation_overhead`'s runs as a Markdown table, and the median ratios."""
  rows = ["| pair | run | micro-batch x k | examples/s | peak RSS (MiB) |", "|---|---|---|---|---|"]
  for index, pair in enumerate(result["pairs"], start=1):
    for name, r in zip(SIDES, pair):
      c = r["case"]
      rows.append(f"| {index} | {name} | {c['micro_batch_size']} x "
                  f"{c['gradient_accumulation_steps']} | {r['examples_per_second']:.1f} | "
                  f"{r['peak_rss_mib']:.0f} |")
  rows.append("\n" + benchmark_report.ratio_summary(
      "throughput ratio (accumulated / big batch) per pair", result["ratios"],
      result["throughput_ratio"]) + f"; peak RSS ratio (median): {result['peak_rss_ratio']:.3f}")
  return "\n".join(rows)


def format_interleaved(result: dict) -> str:
  """`run_interleaved`'s rounds as a Markdown table, and the median ratio."""
  case = result["case"]
  b, k = case["micro_batch_size"], case["gradient_accumulation_steps"]
  rows = [f"loop {case['loop']}, {case['dtype_policy']}; both in one process, "
          f"{case['applied_steps']} applied steps per window", "",
          f"| round | first | big batch {b * k} x 1 examples/s | accumulated {b} x {k} "
          "examples/s | ratio |", "|---|---|---|---|---|"]
  runs = result["runs"]
  for index, pair in enumerate(zip(runs[0::2], runs[1::2])):
    rate = {run["side"]: run["examples_per_second"] for run in pair}
    rows.append(f"| {index + 1} | {pair[0]['side']} | {rate['big_batch']:.1f} | "
                f"{rate['accumulated']:.1f} | {result['ratios'][index]:.3f} |")
  rows.append("\n" + benchmark_report.ratio_summary(
      "throughput ratio (accumulated / big batch) per round", result["ratios"],
      result["median_ratio"]) + f". Peak RSS of the process (both models): "
      f"{result['peak_rss_mib']:.0f} MiB")
  return "\n".join(rows)
