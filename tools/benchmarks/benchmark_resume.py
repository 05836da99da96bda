"""Resume cost: seconds from a rerun's start to its first trained step, near and far in a run.

A pretraining run on the pydoc-corpus records (a small set, repeated) is stopped after a
few applied steps ("near": about `near_sequences` consumed). Two copies of its directory
are moved on to about `far_sequences` consumed sequences with
`tfbert.pretraining.pretraining_run.fast_forward`, without training:

* "far": the data iterator is advanced that far (reading, as training would) and
  checkpointed with the counters; a rerun restores the position.
* "far, no position": the counters alone, written as tfbert wrote checkpoints before they
  held the data position; a rerun must read past everything consumed (what
  `dataset.skip(consumed)` cost before).

Each resume is a fresh process timing `run_pretraining` from its call to its return, with
`stop_at_step` one applied step after the checkpoint: checks, model build, restore, the
first step (its tracing included) and the checkpoint at the stop. "near" and "far" run
`rounds` times, alternating (each resume moves its directory one step on); "far, no
position" runs once. Reported: the far/near ratio of the medians (the goal: <= 1.2), the
extra seconds per million consumed sequences of each way of resuming, and the bytes the
iterator state adds to a checkpoint.
"""

import dataclasses
import os
import shutil
import statistics
import time
from typing import Optional

import tensorflow as tf

from tfbert.pretraining import pretraining_run
from tfbert.runtime import validation
from tfbert.training import optimization
from tfbert_tools.benchmarks import benchmark, benchmark_data


@dataclasses.dataclass(frozen=True)
class ResumeCase(benchmark.ModelShape):
  """One resume-cost measurement; a small model by default (the data position is measured).

  Attributes (besides `benchmark.ModelShape`'s):
    near_sequences, far_sequences: consumed sequences at the two checkpoints (rounded to
      whole applied steps).
    batch_size: sequences per applied step.
    rounds: timed resumes of each of near and far.
    max_documents: corpus documents made into records (None: all; tests use a few).
  """
  hidden_size: int = 64
  num_layers: int = 2
  num_heads: int = 2
  intermediate_size: int = 256
  near_sequences: int = 10
  far_sequences: int = 10_000_000
  batch_size: int = 32
  rounds: int = 3
  max_documents: Optional[int] = None

  def __post_init__(self):
    validation.validate(self)

  def checks(self) -> list[validation.Check]:
    """The rules of a measurable case (`tfbert.runtime.validation`)."""
    return [
        (0 < self.near_sequences < self.far_sequences,
         f"need 0 < near_sequences ({self.near_sequences}) < far_sequences "
         f"({self.far_sequences})"),
        (min(self.batch_size, self.rounds) >= 1, "batch_size and rounds must be >= 1"),
    ]

  @property
  def near_steps(self) -> int:
    return max(1, round(self.near_sequences / self.batch_size))

  @property
  def far_steps(self) -> int:
    return max(self.near_steps + 1, round(self.far_sequences / self.batch_size))


def run_config(case: ResumeCase, input_files: str, model_dir: str
               ) -> pretraining_run.PretrainingRunConfig:
  """The measured run: one device, float32, AdamW; the schedule reaches past far."""
  return pretraining_run.PretrainingRunConfig(
      bert_config=case.bert_config(), input_files=[input_files], model_dir=model_dir,
      optimizer=optimization.OptimizerConfig(
          learning_rate=1e-4, num_warmup_steps=0, num_train_steps=case.far_steps + 10 ** 6),
      train_batch_size=case.batch_size, max_seq_length=case.seq_length,
      max_predictions_per_seq=case.max_predictions, save_checkpoints_steps=10 ** 9,
      log_steps=10 ** 9)


def time_resume(config: pretraining_run.PretrainingRunConfig) -> float:
  """Seconds of one resume to the next applied step, in a fresh process."""
  code = ("import dataclasses, json, sys, time; "
          "from tfbert_tools.benchmarks import benchmark_resume as b; "
          "from tfbert.pretraining import pretraining_run as p; "
          "config = p.PretrainingRunConfig.from_json(json.loads(sys.argv[1])); "
          "config = dataclasses.replace(config, stop_at_step=b.latest_step(config.model_dir) "
          "+ 1); start = time.perf_counter(); p.run_pretraining(config); "
          "print('RESULT ' + json.dumps(time.perf_counter() - start))")
  return benchmark.run_in_subprocess(code, config.to_json(), timeout=7200.0)


def latest_step(model_dir: str) -> int:
  """The applied step of the latest checkpoint in `model_dir`."""
  path = tf.train.latest_checkpoint(os.path.join(model_dir, "checkpoints"))
  return int(path.rsplit("-", 1)[1])


def checkpoint_bytes(model_dir: str) -> int:
  """Bytes of the files of the latest checkpoint in `model_dir`."""
  folder = os.path.join(model_dir, "checkpoints")
  prefix = f"ckpt-{latest_step(model_dir)}."
  return sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder)
             if name.startswith(prefix))


def measure(case: ResumeCase, workdir: str) -> dict:
  """Makes the data and the three run directories, times their resumes; see the module."""
  files = benchmark_data.make_pretraining_records(
      os.path.join(workdir, "data"), case.seq_length, case.max_predictions, dupe_factor=1,
      max_documents=case.max_documents)
  near = run_config(case, files, os.path.join(workdir, "near"))
  pretraining_run.run_pretraining(dataclasses.replace(near, stop_at_step=case.near_steps))
  far = dataclasses.replace(near, model_dir=os.path.join(workdir, "far"))
  legacy = dataclasses.replace(near, model_dir=os.path.join(workdir, "far_no_position"))
  for other in (far, legacy):
    shutil.copytree(near.model_dir, other.model_dir)
  moved = case.far_steps - case.near_steps
  start = time.perf_counter()
  pretraining_run.fast_forward(far, moved)
  forward_seconds = time.perf_counter() - start
  pretraining_run.fast_forward(legacy, moved, data_position=False)
  sizes = {"with_position": checkpoint_bytes(far.model_dir),
           "without_position": checkpoint_bytes(legacy.model_dir)}
  seconds = {"near": [], "far": []}
  for _ in range(case.rounds):
    seconds["near"].append(time_resume(near))
    seconds["far"].append(time_resume(far))
  seconds["far_no_position"] = [time_resume(legacy)]
  medians = {name: statistics.median(values) for name, values in seconds.items()}
  consumed = {"near": case.near_steps * case.batch_size,
              "far": case.far_steps * case.batch_size}
  millions = (consumed["far"] - consumed["near"]) / 1e6
  return {
      "case": dataclasses.asdict(case), "consumed": consumed, "seconds": seconds,
      "medians": medians,
      "ratio": medians["far"] / medians["near"],
      "extra_seconds_per_million": {
          name: (medians[name] - medians["near"]) / millions
          for name in ("far", "far_no_position")},
      "fast_forward_seconds": forward_seconds, "checkpoint_bytes": sizes,
      "iterator_state_bytes": sizes["with_position"] - sizes["without_position"]}


def format_result(result: dict) -> str:
  """Markdown rows for BENCHMARKS.md."""
  case, seconds, medians = result["case"], result["seconds"], result["medians"]
  rows = ["| resume after | consumed sequences | seconds to the first step (each) | median |",
          "|---|---|---|---|"]
  for name, label, position in (("near", "near", "near"), ("far", "far", "far"),
                                ("far_no_position",
                                 "far, checkpoint without the position (read past)", "far")):
    rows.append(f"| {label} | {result['consumed'][position]:,} | "
                f"{', '.join(f'{s:.2f}' for s in seconds[name])} | {medians[name]:.2f} |")
  extra = result["extra_seconds_per_million"]
  return "\n".join(rows) + (
      f"\n\nfar/near: **{result['ratio']:.3f}** (goal <= 1.2). Extra seconds per million "
      f"consumed sequences: restored position {extra['far']:.3f}, read past "
      f"{extra['far_no_position']:.2f}. The iterator state adds "
      f"{result['iterator_state_bytes'] / 2 ** 20:.2f} MiB to a checkpoint of "
      f"{result['checkpoint_bytes']['without_position'] / 2 ** 20:.2f} MiB. Model "
      f"L{case['num_layers']}/H{case['hidden_size']}/A{case['num_heads']}/"
      f"I{case['intermediate_size']}, S{case['seq_length']}, P{case['max_predictions']}, "
      f"B{case['batch_size']}; moving the far directory's "
      f"iterator took {result['fast_forward_seconds']:.0f} s.")
