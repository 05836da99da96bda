"""The alignment harness: the same training under several set-ups gives the same loss curve.

The training is pretraining (`task="pretraining"`) or fine-tuning: SQuAD (`"squad"`) or a
GLUE-format classifier (`"classifier"`), each through its tool's run function, so that the
harness proves what the tools do.

Every variant starts from the same initial checkpoint (written once, Google format), with
dropout off and deterministic, unshuffled data (`PretrainingRunConfig.deterministic`), logs
the loss of every applied step (`log_steps=1`) and exports its final weights. Each variant
is then compared with the reference (the first one), step by step:

  deviation_t = |loss_t - reference_t|,  relative_t = deviation_t / |reference_t|

and passes when every `relative_t` is within the tolerance of the pair's kind (the looser of
the two): float32 equivalences must agree to float32 rounding; reduced precision gets room
for its rounding (`DEFAULT_TOLERANCES`, measured in ALIGNMENT.md).

Variant axes (`Variant`): execution (eager / graph / XLA), replicas (logical devices under
`MirroredStrategy`), worker processes (`MultiWorkerMirroredStrategy`), gradient accumulation
(the same global batch in k micro-batches), precision (float32 / mixed_bfloat16 /
mixed_float16 with loss scaling), continuity (stopped after a step and resumed in a fresh
run), and the loss normalization (`"micro_batch"`: each micro-batch normalized by its own
masked-token count, the common port bug, which the harness is expected to catch).

Variants run in this process one after another (one process configured with enough logical
CPU devices), except multi-worker ones, which run as worker processes
(`python -m tfbert.alignment.alignment_worker`).
"""

import dataclasses
import math
import re
import sys
from typing import Optional, Sequence

import numpy as np

from tfbert.config import BertConfig
from tfbert.pretraining import input_pipeline
from tfbert.runtime import files, json_values, validation
from tfbert.training import optimization

EXECUTIONS = ("eager", "graph", "xla")
TASKS = ("pretraining", "squad", "classifier")
# Relative per-step loss tolerance by kind; a pair uses the looser of its two kinds.
# float32: reorderings of float32 sums (replicas, accumulation, XLA fusion) move a loss by
# ~1e-7 relative per step (measured <= 9.3e-7 over 1000 steps, ALIGNMENT.md); 1e-5 leaves
# 10x room and still catches a wrong loss normalization (7e-4 within 8 steps).
# Reduced precision against float32 (ALIGNMENT.md, 300 steps of the small BERT): measured
# 1.3e-4 for mixed_bfloat16 and 2.7e-3 for mixed_float16, both growing with the steps; the
# defaults leave about 4x room over such runs.
DEFAULT_TOLERANCES = {"float32": 1e-5, "mixed_bfloat16": 5e-4, "mixed_float16": 1e-2}
PRESETS = {
    "graph": {}, "eager": {"execution": "eager"}, "xla": {"execution": "xla"},
    "mirrored": {"replicas": 2}, "workers": {"workers": 2},
    "bfloat16": {"dtype": "mixed_bfloat16"}, "float16": {"dtype": "mixed_float16"},
    "micro_batch_normalization": {"loss_normalization": "micro_batch"},
}


@dataclasses.dataclass(frozen=True)
class Variant:
  """One training set-up; everything else is the `AlignmentConfig`'s.

  Attributes:
    name: unique; names its run directory.
    execution: "eager", "graph" (`tf.function`) or "xla" (`jit_compile`).
    replicas: local logical devices (`MirroredStrategy` when > 1).
    workers: processes (`MultiWorkerMirroredStrategy` when > 1, one device each).
    gradient_accumulation_steps: micro-batches per applied step (same global batch).
    dtype: "float32", "mixed_bfloat16" or "mixed_float16" (with dynamic loss scaling).
    resume_at: stop after this applied step, then resume from the checkpoint.
    loss_normalization: "window" (exact) or "micro_batch" (known to differ).
  """
  name: str
  execution: str = "graph"
  replicas: int = 1
  workers: int = 1
  gradient_accumulation_steps: int = 1
  dtype: str = "float32"
  resume_at: Optional[int] = None
  loss_normalization: str = "window"

  def __post_init__(self):
    validation.validate(self)

  def checks(self) -> list[validation.Check]:
    """The rules of a runnable variant (`tfbert.runtime.validation`)."""
    return [(ok, f"variant {self.name!r}: {message}") for ok, message in [
        # It names a directory under the workdir: "a/" shared "a"'s and resumed its finished
        # run; "../x" lay outside the workdir (sweep 30, B80, B82).
        (re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*", self.name) is not None,
         "a name is letters, digits and _ . + - (it names the variant's run directory), "
         "starting with a letter, a digit or _"),
        (self.execution in EXECUTIONS,
         f"execution must be one of {EXECUTIONS}, got {self.execution!r}"),
        (self.dtype in DEFAULT_TOLERANCES,
         f"dtype must be one of {tuple(DEFAULT_TOLERANCES)}, got {self.dtype!r}"),
        (self.loss_normalization in ("window", "micro_batch"),
         f"loss_normalization must be 'window' or 'micro_batch', got "
         f"{self.loss_normalization!r}"),
        *[(getattr(self, field) >= 1, f"{field} must be >= 1, got {getattr(self, field)}")
          for field in ("replicas", "workers", "gradient_accumulation_steps")],
        (self.resume_at is None or self.resume_at >= 1,
         f"resume_at (the step it stops after, then resumes) must be >= 1, got "
         f"{self.resume_at}"),
        (self.replicas == 1 or self.workers == 1, "use replicas or workers, not both"),
    ]]

  @property
  def kind(self) -> str:
    """The tolerance kind: the precision."""
    return self.dtype


def parse_tolerances(items: Sequence[str]) -> dict[str, float]:
  """`--tolerances` (`kind=value` items) as {kind: relative tolerance}.

  Raises:
    ValueError: naming the item that is not `kind=value` with a known kind and a
      non-negative number, or a kind given more than once.
  """
  tolerances = {}
  for item in items:
    kind, sep, value = item.partition("=")
    if kind in tolerances:  # The last one won without a word (sweep 34, A53).
      repeated = [i for i in items if i.partition("=")[0] == kind]
      raise ValueError(f"--tolerances gives the kind {kind} more than once "
                       f"({', '.join(repeated)}): give each kind once")
    try:
      number = float(value)
    except ValueError:
      number = math.nan
    if not sep or kind not in DEFAULT_TOLERANCES or not number >= 0:
      raise ValueError(f"--tolerances item {item!r} is not kind=value with a kind among "
                       f"{', '.join(DEFAULT_TOLERANCES)} and a number >= 0 (e.g. "
                       "float32=2e-5)")
    tolerances[kind] = number
  return tolerances


def parse_variant(spec: str) -> Variant:
  """A `Variant` from a preset name or `name:field=value;...`.

  Presets: graph, eager, xla, mirrored, workers, bfloat16, float16,
  micro_batch_normalization, accumulateK (k micro-batches), resumeN (stop after step N).

  Raises:
    ValueError: naming the spec and what is wrong.
  """
  name, _, fields = spec.partition(":")
  values = {}
  if fields:
    types = {f.name: f.type for f in dataclasses.fields(Variant)}
    for item in fields.split(";"):
      key, sep, value = item.partition("=")
      if not sep or key not in types or key == "name":
        raise ValueError(f"variant {spec!r}: {item!r} is not field=value with a field of "
                         f"{sorted(k for k in types if k != 'name')}")
      if key in ("replicas", "workers", "gradient_accumulation_steps", "resume_at"):
        if not value.isdigit():
          raise ValueError(f"variant {spec!r}: {key} must be a whole number, got {value!r}")
        value = int(value)
      values[key] = value
  elif name in PRESETS:
    values = dict(PRESETS[name])
  elif re.fullmatch(r"accumulate\d+", name):
    values = {"gradient_accumulation_steps": int(name[len("accumulate"):])}
  elif re.fullmatch(r"resume\d+", name):
    values = {"resume_at": int(name[len("resume"):])}
  else:
    raise ValueError(f"unknown variant {spec!r}: use a preset ({', '.join(PRESETS)}, "
                     "accumulateK, resumeN) or name:field=value;...")
  return Variant(name=name, **values)


def _splits(variant: Variant) -> int:
  """The parts a variant splits each step's batch into (never 0: a bad count is the
  variant's own error)."""
  return max(variant.gradient_accumulation_steps * variant.replicas * variant.workers, 1)


# `AlignmentConfig.optimizer`'s default: the pretraining comparison's SGD (fine-tuning needs
# AdamW, so a fine-tuning config must pass its own).
DEFAULT_OPTIMIZER = optimization.OptimizerConfig(
    optimizer="sgd", learning_rate=1e-3, momentum=0.9, clip_norm=None)


@dataclasses.dataclass(frozen=True)
class AlignmentConfig:
  """The training every variant shares.

  Attributes:
    bert_config: the model; dropout is switched off for alignment.
    input_files: pretraining TFRecord globs (`create_pretraining_data`).
    steps: applied steps of every variant.
    train_batch_size: global sequences per applied step.
    optimizer: optimizer, schedule and clipping; each variant runs it with num_train_steps
      = `steps` and its own gradient_accumulation_steps.
    variants: the first is the reference.
    tolerances: relative per-step loss tolerance by kind (`DEFAULT_TOLERANCES` by default).
    compare_weights: also compare the final weights.
    task: what is trained (`TASKS`). Fine-tuning trains AdamW (google-research/bert's
      fine-tuning optimizer) with `optimizer`'s learning rate, weight decay, clipping and
      warmup (as a proportion of `steps`); its variants run graph execution with the window
      loss normalization.
    train_file: the fine-tuning data (SQuAD JSON; a GLUE-format TSV of `task_name`).
    task_name: the classifier's GLUE task (`tfbert.classifier.glue_data`).
  """
  bert_config: BertConfig
  input_files: Sequence[str]
  variants: Sequence[Variant]
  steps: int = 20
  train_batch_size: int = 32
  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  optimizer: optimization.OptimizerConfig = DEFAULT_OPTIMIZER
  seed: int = 12345
  tolerances: Optional[dict] = None
  compare_weights: bool = True
  task: str = "pretraining"
  train_file: Optional[str] = None
  task_name: str = "mrpc"

  def __post_init__(self):
    validation.validate(self)

  @property
  def fine_tuning(self) -> bool:
    return self.task != "pretraining"

  def checks(self) -> list[validation.Check]:
    """The rules of a runnable comparison (`tfbert.runtime.validation`)."""
    unknown = sorted(set(self.tolerances or {}) - set(DEFAULT_TOLERANCES))
    names = [v.name for v in self.variants]
    return [
        (not unknown,
         f"tolerance kinds must be among {tuple(DEFAULT_TOLERANCES)}, got {unknown}"),
        (len(names) >= 2, "alignment needs at least two variants"),
        (len(set(names)) == len(names), f"variant names must be unique, got {names}"),
        (self.optimizer.num_warmup_steps <= self.steps,
         f"optimizer.num_warmup_steps ({self.optimizer.num_warmup_steps}) exceeds steps "
         f"({self.steps})"),
        (self.task in TASKS, f"task must be one of {TASKS}, got {self.task!r}"),
        # Every variant reads the data again: no pipe; a broken link named as one.
        *[(False, problem) for problem in input_pipeline.input_problems(
            {"--input_files": self.input_files})],
        (not self.fine_tuning or self.train_file,
         f"task {self.task!r} needs a train_file"),
        (not self.fine_tuning or self.optimizer.num_warmup_steps == 0,
         f"fine-tuning ({self.task}) alignment runs without warmup: num_warmup_steps must be "
         f"0, got {self.optimizer.num_warmup_steps}"),
        (not self.fine_tuning or self.optimizer.optimizer == "adamw",
         f"fine-tuning ({self.task}) trains AdamW: "
         + ("optimizer is left at its default, the pretraining comparison's SGD: pass "
            "optimizer=OptimizerConfig(optimizer='adamw', ...)"
            if self.optimizer == DEFAULT_OPTIMIZER else
            f"optimizer.optimizer must be 'adamw', got {self.optimizer.optimizer!r}")),
    ] + [check for v in self.variants for check in [
        # Bounds that come from another setting are stated as the relation, with both
        # values: a range printed from them can be empty ("[1, 0]").
        (self.train_batch_size % _splits(v) == 0,
         f"variant {v.name!r} splits each step into gradient_accumulation_steps x replicas "
         f"x workers = {v.gradient_accumulation_steps} x {v.replicas} x {v.workers} = "
         f"{_splits(v)} parts, which must divide train_batch_size ({self.train_batch_size})"),
        (v.resume_at is None or v.resume_at < 1 or v.resume_at < self.steps,
         f"variant {v.name!r} stops after step {v.resume_at} to resume, which must be "
         f"below steps ({self.steps}): raise steps above {v.resume_at} or resume earlier"),
        (not self.fine_tuning or (v.execution == "graph" and v.loss_normalization == "window"),
         f"variant {v.name!r}: fine-tuning ({self.task}) runs graph execution with the window "
         "normalization only"),
    ]]

  def tolerance(self, a: Variant, b: Variant) -> float:
    table = {**DEFAULT_TOLERANCES, **(self.tolerances or {})}
    return max(table[a.kind], table[b.kind])

  @property
  def replicas_needed(self) -> int:
    return max(v.replicas for v in self.variants)


@dataclasses.dataclass(frozen=True)
class PairReport:
  """A variant against the reference."""
  variant: str
  reference: str
  tolerance: float
  max_abs_deviation: float
  max_rel_deviation: float
  first_step_over: Optional[int]
  weights_max_abs_deviation: Optional[float] = None
  weights_max_rel_deviation: Optional[float] = None
  weights_worst_tensor: Optional[str] = None

  @property
  def passed(self) -> bool:
    weights_ok = (self.weights_max_rel_deviation is None or
                  self.weights_max_rel_deviation <= self.tolerance)
    return self.first_step_over is None and weights_ok


def compare_curves(reference: Sequence[float], other: Sequence[float], tolerance: float
                   ) -> tuple[float, float, Optional[int]]:
  """(max |a-b|, max |a-b|/|ref|, first 1-based step over `tolerance`, or None).

  Curves of different lengths, or a non-finite loss, fail at the first such step.

  Raises:
    ValueError: an empty curve.
  """
  ref, oth = np.asarray(reference, np.float64), np.asarray(other, np.float64)
  if not len(ref) or not len(oth):  # Nothing compared passed as agreement (sweep 30, B84).
    raise ValueError(f"a loss curve is empty ({len(ref)} and {len(oth)} steps): nothing to "
                     "compare")
  n = min(len(ref), len(oth))
  deviation = np.abs(ref[:n] - oth[:n])
  relative = deviation / np.maximum(np.abs(ref[:n]), 1e-30)
  bad = ~np.isfinite(relative) | (relative > tolerance)
  if len(ref) != len(oth):
    bad = np.append(bad, True)
  first = int(np.argmax(bad)) + 1 if bad.any() else None
  def finite(x):
    return float(np.max(np.where(np.isfinite(x), x, np.inf))) if n else math.inf
  return finite(deviation), finite(relative), first


def loss_invariant_weights(task: str, num_hidden_layers: int, names) -> list[str]:
  """The weights of `names` on which the task's loss does not depend (ALIGNMENT.md).

  Their gradient is zero up to float32 rounding, so what training leaves in them is that
  rounding (Adam scales it up to ~lr * 1e-3 a step), different in any two reduction orders,
  while the trained model is the same:

  - every layer's attention key bias: it adds q_i . b to all of query i's scores, and the
    softmax over keys is unchanged by a constant;
  - SQuAD's span head bias and the last layer's output LayerNorm beta: each adds the same
    amount to every position's start (end) logit, and the softmax over positions cancels it.

  Args:
    task: `TASKS`.
    num_hidden_layers: the encoder's layers.
    names: Google names of the compared weights.

  Returns:
    The sorted names among `names`.
  """
  patterns = [r"bert/encoder/layer_\d+/attention/self/key/bias"]
  if task == "squad":
    patterns += [r"cls/squad/output_bias",
                 rf"bert/encoder/layer_{num_hidden_layers - 1}/output/LayerNorm/beta"]
  return sorted(n for n in names if any(re.fullmatch(p, n) for p in patterns))


def compare_weights(reference: dict, other: dict, ignore=()) -> tuple[float, float, str]:
  """(max |a-b|, max over tensors of max |a-b| / max |a|, the tensor where that is largest).

  Each tensor is measured against its own scale: against the whole model's largest weight
  (a LayerNorm gamma of ~1), a bias of ~1e-6 could change sign and still look within 1e-5
  (sweep 32, B62). `ignore` names tensors left out of both measures (present in both all
  the same): the ones the loss does not depend on (`loss_invariant_weights`), which are
  float32 rounding relative to their own scale.

  Raises:
    ValueError: when the two hold different tensor names or shapes, or none.
  """
  if set(reference) != set(other):
    raise ValueError(f"the weights differ in names: {sorted(set(reference) ^ set(other))}")
  # NumPy broadcast (3,) against (1,) and found them equal (sweep 30, B83).
  shapes = {k: (np.shape(reference[k]), np.shape(other[k])) for k in sorted(reference)
            if np.shape(reference[k]) != np.shape(other[k])}
  if shapes:
    raise ValueError(f"the weights differ in shapes: {shapes}")
  if not set(reference) - set(ignore):
    raise ValueError("no weights to compare")
  deviation, worst, worst_name = 0.0, -1.0, ""
  for name in sorted(set(reference) - set(ignore)):
    ref = np.asarray(reference[name], np.float64)
    diff = float(np.max(np.abs(ref - np.asarray(other[name], np.float64)), initial=0.0))
    scale = float(np.max(np.abs(ref), initial=0.0))
    relative = diff / max(scale, 1e-30) if diff == diff else math.inf  # NaN: no agreement.
    deviation = max(deviation, diff) if diff == diff else math.inf
    if relative > worst:
      worst, worst_name = relative, name
  return deviation, worst, worst_name


def report_json(config: AlignmentConfig, curves: dict, pairs: Sequence[PairReport],
                weights_not_compared: Sequence[str] = ()) -> dict:
  """The JSON report: per-step losses per variant, one entry per compared pair and the final
  weights left out of the comparison (`loss_invariant_weights`)."""
  return {
      "task": config.task,
      "steps": config.steps,
      "reference": config.variants[0].name,
      "variants": {v.name: dataclasses.asdict(v) for v in config.variants},
      "losses": {name: list(map(float, losses)) for name, losses in curves.items()},
      "pairs": [{**dataclasses.asdict(p), "passed": p.passed} for p in pairs],
      "passed": all(p.passed for p in pairs),
      "weights_not_compared": list(weights_not_compared),
  }


def format_table(pairs: Sequence[PairReport]) -> str:
  """A plain-text table of the pairs: the curves' and the final weights' largest relative
  deviation (`-` when weights were not compared), and the tensor of a weights failure."""
  rows = [f"{'variant':<28} {'max rel dev':>12} {'weights':>10} {'tolerance':>10} "
          f"{'first step over':>16}  result"]
  for p in pairs:
    weights = ("-" if p.weights_max_rel_deviation is None
               else f"{p.weights_max_rel_deviation:.3e}")
    result = "ok" if p.passed else "DIFFERS"
    if p.weights_max_rel_deviation is not None and not (
        p.weights_max_rel_deviation <= p.tolerance):
      result += f" (final weights: {p.weights_worst_tensor})"
    rows.append(f"{p.variant:<28} {p.max_rel_deviation:>12.3e} {weights:>10} "
                f"{p.tolerance:>10.1e} {str(p.first_step_over or '-'):>16}  {result}")
  return "\n".join(rows)


def write_report(path: str, report: dict) -> None:
  files.makedirs(files.parent(path))
  with files.open_file(path, "w") as f:
    f.write(json_values.dumps(report, indent=1))
    f.write("\n")


def python_command(*args: str) -> list[str]:
  """How to run `tfbert.alignment.alignment_worker` with this interpreter."""
  return [sys.executable, "-m", "tfbert.alignment.alignment_worker", *args]
