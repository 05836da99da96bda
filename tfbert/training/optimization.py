"""The optimization stack in one call: `create_optimizer`, and the public re-exports.

`create_optimizer` builds what the tools compile a model with:

  LossScaleOptimizer (float16 only, outermost)
    -> GradientAccumulationOptimizer (always: steps >= 1, clipping, global finite check)
      -> AdamW | Lamb | SGD (decoupled weight decay with path-based exclusions)
         with WarmupPolynomialDecay as a pure function of the applied step.

The accumulation wrapper is used even for `steps=1`: it is the path that clips the
all-reduced gradient once and skips a non-finite step on every replica (see
`tfbert.training.accumulation`).
"""

import dataclasses
import math
import numbers
import re
import types
from typing import Any, Callable, Mapping, Optional, Sequence

import keras
from absl import logging

from tfbert.runtime import validation
from tfbert.training.accumulation import (
  REDUCTIONS,
  GradientAccumulationOptimizer,
  LossScaleOptimizer,
  with_gradient_accumulation,
)
from tfbert.training.optimizers import BERT_WEIGHT_DECAY_EXCLUSIONS, AdamW, Lamb
from tfbert.training.schedules import MODES, WarmupPolynomialDecay

__all__ = ["OptimizerConfig", "create_optimizer", "with_gradient_accumulation",
           "GradientAccumulationOptimizer", "LossScaleOptimizer", "AdamW", "Lamb",
           "WarmupPolynomialDecay", "BERT_WEIGHT_DECAY_EXCLUSIONS"]

OPTIMIZERS = ("adamw", "lamb", "sgd")

# The settings only some optimizers read, by optimizer: each reads these and none of the
# others (`OPTIMIZER_SETTINGS`). SGD has no decoupled weight decay; AdamW and LAMB no momentum.
READS = {
    "adamw": ("weight_decay_rate", "exclude_from_weight_decay"),
    "lamb": ("weight_decay_rate", "exclude_from_weight_decay", "exclude_from_layer_adaptation"),
    "sgd": ("momentum",),
}
OPTIMIZER_SETTINGS = tuple(sorted({name for names in READS.values() for name in names}))


def unread_problem(optimizer: str, names: Sequence[str], prefix: str = "") -> Optional[str]:
  """The refusal of settings `names` (set by the user) that `optimizer` does not read, or None.

  Args:
    optimizer: one of `OPTIMIZERS`.
    names: settings the user set (of `OPTIMIZER_SETTINGS`; others are ignored).
    prefix: how a setting is spelled: "--" for flags, "" for `OptimizerConfig` fields.

  Returns:
    "<settings>: not read by optimizer=<o> (... it reads only ...), so it would be ignored;
    leave it out or choose optimizer=<one that reads it>", or None.
  """
  if optimizer not in READS:
    return None
  unread = [name for name in OPTIMIZER_SETTINGS
            if name in names and name not in READS[optimizer]]
  if not unread:
    return None
  readers = sorted({o for name in unread for o, reads in READS.items() if name in reads})
  them = "them" if len(unread) > 1 else "it"
  return (f"{', '.join(prefix + name for name in unread)}: not read by "
          f"{prefix}optimizer={optimizer} (of its optimizer-specific settings it reads only "
          f"{', '.join(prefix + name for name in READS[optimizer])}), so it would be "
          f"ignored; leave {them} out or choose {prefix}optimizer={' or '.join(readers)}")


_NO_VALUE = object()
# How a rule's message names a setting: (name, its value or none) -> text.
Spelling = Callable[..., str]


def field_spelling(name: str, value: Any = _NO_VALUE) -> str:
  """A setting named as the `OptimizerConfig` field: "name", or "name (value)"."""
  return name if value is _NO_VALUE else f"{name} ({value})"


def clip_norm_check(clip_norm: Optional[float], spell: Spelling = field_spelling
                    ) -> validation.Check:
  """The one rule of every config's `clip_norm`: a finite number > 0, or None (off). The
  tools' flag turns clipping off with 0 (`tfbert.runtime.cli.zero_is_none`), so the message
  names both. inf and NaN made every weight NaN after one step (sweep 34, B59)."""
  return (clip_norm is None or (validation.finite_number(clip_norm) and clip_norm > 0),
          f"{spell('clip_norm', clip_norm)} must be a finite number > 0, or off: 0 on the "
          "command line (--clip_norm=0), None in Python")


def _value_rules(c: Any, spell: Spelling) -> list[tuple[tuple[str, ...], bool, str]]:
  """The rules of `OptimizerConfig`'s values, each as (the settings it reads, whether it
  holds, its message naming them by `spell`): one list for the config's own checks (field
  names) and a tool's flags (`setting_problems`)."""
  warmup, steps = c.num_warmup_steps, c.num_train_steps

  def at_least_0(name: str, value: Any, note: str = "", above: bool = False):
    """A rule: `value` finite and >= 0 (> 0 with `above`); inf passed `>= 0` and turned
    every weight NaN."""
    bound = "> 0" if above else ">= 0"
    if isinstance(value, numbers.Real) and not math.isfinite(value):
      return ((name,), False, f"{spell(name, value)} must be a finite number {bound}{note}")
    return ((name,), value > 0 if above else value >= 0,
            f"{spell(name, value)} must be {bound}{note}")

  return [
      at_least_0("learning_rate", c.learning_rate),
      at_least_0("end_learning_rate", c.end_learning_rate),
      (("num_train_steps",), steps >= 1, f"{spell('num_train_steps', steps)} must be >= 1"),
      (("num_warmup_steps", "num_train_steps"), 0 <= warmup <= max(steps, 0),
       f"{spell('num_warmup_steps', warmup)} must be in [0, "
       f"{spell('num_train_steps', steps)}]: lower {spell('num_warmup_steps')} to at most "
       f"{max(steps, 0)}, or raise {spell('num_train_steps')}"),
      (("gradient_accumulation_steps",), c.gradient_accumulation_steps >= 1,
       f"{spell('gradient_accumulation_steps', c.gradient_accumulation_steps)} must be >= 1"),
      (("clip_norm",), *clip_norm_check(c.clip_norm, spell)),
      # One rule per setting: a message names only the setting at fault (a tool may have
      # no flag for the others, e.g. run_pretraining's momentum and power).
      at_least_0("weight_decay_rate", c.weight_decay_rate, " (0: no weight decay)"),
      at_least_0("momentum", c.momentum),
      at_least_0("power", c.power, above=True),
      at_least_0("initial_loss_scale", c.initial_loss_scale, above=True),
      (("loss_scale_growth_steps",), c.loss_scale_growth_steps >= 1,
       f"{spell('loss_scale_growth_steps', c.loss_scale_growth_steps)} must be >= 1"),
  ]


def setting_problems(values: Mapping[str, Any], spell: Spelling) -> list[str]:
  """The refusals of `OptimizerConfig`'s value rules that only `values` (settings by field
  name, e.g. a tool's flags; the others at their defaults) cause, each naming them by
  `spell` (e.g. as the tool's flags: "--num_warmup_steps (100, its default)"). A rule that
  also reads a setting not in `values` is left to the config's own checks."""
  defaults = {f.name: f.default for f in dataclasses.fields(OptimizerConfig)}
  config = types.SimpleNamespace(**(defaults | dict(values)))
  return [message for names, holds, message in _value_rules(config, spell)
          if not holds and set(names) <= set(values)]


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  """Everything that defines the optimization of a run.

  Attributes:
    optimizer: "adamw" (google-research/bert's: no bias correction, eps 1e-6), "lamb" or "sgd"
      (with `momentum`).
    learning_rate: Peak learning rate.
    num_warmup_steps, num_train_steps: Applied steps of warmup and of the whole run.
    lr_schedule: "google" (default) or "decay_after_warmup"; see `tfbert.training.schedules`.
    end_learning_rate, power: Polynomial decay parameters.
    weight_decay_rate: Decoupled weight decay (AdamW/LAMB).
    exclude_from_weight_decay: Regexes matched against variable paths.
    exclude_from_layer_adaptation: LAMB only; None means no exclusions.
    clip_norm: Global-norm clipping of the applied gradient (None: off).
    gradient_accumulation_steps: Micro-steps per applied step.
    accumulation_reduction: "mean" or "sum"; see `tfbert.training.accumulation`.
    loss_scale: Dynamic loss scaling (for mixed_float16).
    initial_loss_scale, loss_scale_growth_steps: `LossScaleOptimizer` settings.
    momentum: SGD momentum.

  A setting only other optimizers read (`READS`: weight decay and its exclusions for SGD,
  momentum for AdamW/LAMB, layer-adaptation exclusions for all but LAMB) is refused when it
  is set, i.e. differs from its field default (SGD's `weight_decay_rate` may also be 0,
  which is what SGD does): it would otherwise be ignored without a word. The tools refuse
  such a flag when it is given on the command line, even at its default.
  """
  optimizer: str = "adamw"
  learning_rate: float = 1e-4
  num_warmup_steps: int = 0
  num_train_steps: int = 1
  lr_schedule: str = "google"
  end_learning_rate: float = 0.0
  power: float = 1.0
  weight_decay_rate: float = 0.01
  exclude_from_weight_decay: Sequence[str] = BERT_WEIGHT_DECAY_EXCLUSIONS
  exclude_from_layer_adaptation: Optional[Sequence[str]] = None
  clip_norm: Optional[float] = 1.0
  gradient_accumulation_steps: int = 1
  accumulation_reduction: str = "mean"
  loss_scale: bool = False
  initial_loss_scale: float = 2.0 ** 15
  loss_scale_growth_steps: int = 2000
  momentum: float = 0.9

  def __post_init__(self):
    validation.validate(self)

  def set_settings(self) -> list[str]:
    """The optimizer-specific settings (`OPTIMIZER_SETTINGS`) set to other than their
    defaults (a `weight_decay_rate` of 0 counts as unset for SGD: no decay is what it does)."""
    defaults = {field.name: field.default for field in dataclasses.fields(self)}
    found = []
    for name in OPTIMIZER_SETTINGS:
      value, default = getattr(self, name), defaults[name]
      if isinstance(value, (list, tuple)):
        value = tuple(value)
      if value == default or (name == "weight_decay_rate" and value == 0
                              and self.optimizer == "sgd"):
        continue
      if name in ("weight_decay_rate", "momentum") and value < 0:
        continue  # (Its own range check names it, alone.)
      found.append(name)
    return found

  def checks(self) -> list[validation.Check]:
    """The rules of a buildable config (`tfbert.runtime.validation`)."""
    unread = unread_problem(self.optimizer, self.set_settings())
    return [
        (unread is None, unread),
        (self.optimizer in OPTIMIZERS,
         f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}"),
        (self.lr_schedule in MODES, f"lr_schedule must be one of {MODES}, got "
         f"{self.lr_schedule!r}"),
        (self.accumulation_reduction in REDUCTIONS, f"accumulation_reduction must be one of "
         f"{REDUCTIONS}, got {self.accumulation_reduction!r}"),
    ] + [(holds, message) for _, holds, message in _value_rules(self, field_spelling)] + [
        (problem is None, problem) for problem in _pattern_problems(self)]


def _pattern_problems(config: "OptimizerConfig") -> list[str]:
  """Each exclusion pattern that is not a regular expression, named with its field (the
  optimizer compiled it with `re`, whose bare error named neither)."""
  problems = []
  for name in ("exclude_from_weight_decay", "exclude_from_layer_adaptation"):
    for pattern in getattr(config, name) or ():
      try:
        re.compile(pattern)
      except (re.error, TypeError) as error:
        problems.append(f"{name}: {pattern!r} is not a regular expression ({error})")
  return problems


def as_optimizer_config(config: Any) -> OptimizerConfig:
  """`config` as an `OptimizerConfig`: one itself, or a mapping of its fields (as a run's
  run_config.json records them), built and checked as the config checks its fields.

  Raises:
    ValueError: a key that is no field of OptimizerConfig, naming it and the fields; a value
      the config refuses.
    TypeError: anything else, naming its type and what to pass.
  """
  if isinstance(config, OptimizerConfig):
    return config
  if isinstance(config, Mapping):
    names = [field.name for field in dataclasses.fields(OptimizerConfig)]
    unknown = [key for key in config if key not in names]
    if unknown:
      raise ValueError(f"create_optimizer: {', '.join(map(repr, unknown))} "
                       f"{'is no field' if len(unknown) == 1 else 'are no fields'} of "
                       f"tfbert.training.optimization.OptimizerConfig; its fields: "
                       f"{', '.join(names)}")
    return OptimizerConfig(**config)
  raise TypeError("create_optimizer takes a tfbert.training.optimization.OptimizerConfig (or "
                  f"a dict of its fields), got the {type(config).__name__} {config!r}")


def create_optimizer(config: OptimizerConfig | Mapping[str, Any]
                     ) -> keras.optimizers.Optimizer:
  """Builds the optimizer stack described by `config` (see module docstring): an
  `OptimizerConfig`, or a dict of its fields (`as_optimizer_config`).

  Raises:
    ValueError: a dict without `num_train_steps`: the schedule decays the learning rate to
      `end_learning_rate` over that many applied steps, 1 by default, so a Keras `fit`
      learned for one step and then went on at rate 0 without a word (sweep 28, B31).
  """
  given, config = config, as_optimizer_config(config)  # An unknown key named first.
  if isinstance(given, Mapping) and "num_train_steps" not in given:
    raise ValueError("create_optimizer: num_train_steps is not given: the learning rate "
                     "warms up, then decays to end_learning_rate over num_train_steps applied "
                     "steps (1 by default: rate 0 after the first step); pass the run's "
                     "applied steps, e.g. epochs * batches per epoch / accumulation steps")
  if config.num_train_steps == 1 and config.end_learning_rate != config.learning_rate:
    logging.warning("create_optimizer: num_train_steps is 1, so the learning rate is %g "
                    "(end_learning_rate) from the second applied step on", config.end_learning_rate)
  schedule = WarmupPolynomialDecay(config.learning_rate, config.num_warmup_steps,
                                   config.num_train_steps, config.end_learning_rate, config.power,
                                   config.lr_schedule)
  if config.optimizer == "adamw":
    base = AdamW(schedule, config.weight_decay_rate,
                 exclude_from_weight_decay=list(config.exclude_from_weight_decay))
  elif config.optimizer == "lamb":
    base = Lamb(schedule, config.weight_decay_rate,
                exclude_from_weight_decay=list(config.exclude_from_weight_decay),
                exclude_from_layer_adaptation=(
                    None if config.exclude_from_layer_adaptation is None
                    else list(config.exclude_from_layer_adaptation)))
  else:
    base = keras.optimizers.SGD(schedule, momentum=config.momentum)
  optimizer = GradientAccumulationOptimizer(base, config.gradient_accumulation_steps,
                                            config.accumulation_reduction, config.clip_norm)
  if config.loss_scale:
    optimizer = LossScaleOptimizer(optimizer, config.initial_loss_scale,
                                   config.loss_scale_growth_steps)
  return optimizer
