"""Tests for tfbert.training.optimization: the factory, and the stack inside Keras
`compile`/`fit`."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import training_loop
from tfbert.training import optimization
from tfbert.training.accumulation import GradientAccumulationOptimizer, LossScaleOptimizer
from tfbert.training.optimizers import AdamW, Lamb


@pytest.mark.parametrize("name, cls", [("adamw", AdamW), ("lamb", Lamb),
                                       ("sgd", keras.optimizers.SGD)])
def test_factory_builds_the_documented_stack(name, cls):
  config = optimization.OptimizerConfig(optimizer=name, learning_rate=1e-3, num_warmup_steps=10,
                                        num_train_steps=100, gradient_accumulation_steps=4,
                                        clip_norm=1.0, loss_scale=True, initial_loss_scale=128.0)
  optimizer = optimization.create_optimizer(config)
  assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
  assert isinstance(optimizer, LossScaleOptimizer) and optimizer.initial_scale == 128.0
  accumulator = optimizer.inner_optimizer
  assert isinstance(accumulator, GradientAccumulationOptimizer)
  assert (accumulator.steps, accumulator.clip_norm) == (4, 1.0)
  assert type(accumulator.inner_optimizer) is cls
  schedule = accumulator.inner_optimizer._learning_rate
  assert isinstance(schedule, optimization.WarmupPolynomialDecay)
  # Google's schedule: step 5 is half-way through warmup.
  assert float(schedule(5)) == pytest.approx(5e-4)


def test_without_loss_scaling_the_accumulator_is_outermost_even_for_one_step():
  optimizer = optimization.create_optimizer(optimization.OptimizerConfig())
  assert type(optimizer) is GradientAccumulationOptimizer and optimizer.steps == 1


def test_lamb_layer_adaptation_exclusions_do_not_default_to_decay_exclusions():
  lamb = optimization.create_optimizer(
      optimization.OptimizerConfig(optimizer="lamb")).inner_optimizer
  layer = keras.layers.LayerNormalization(name="layer_norm")
  layer.build((None, 4))
  assert not lamb.uses_weight_decay(layer.gamma)
  assert lamb.uses_layer_adaptation(layer.gamma)


def test_unknown_optimizer_is_named():
  with pytest.raises(ValueError, match="OptimizerConfig: optimizer must be one of"):
    optimization.OptimizerConfig(optimizer="adam")


def test_every_problem_of_an_optimizer_config_is_named_at_once():
  with pytest.raises(ValueError) as e:
    optimization.OptimizerConfig(lr_schedule="cosine", num_warmup_steps=11,
                                 num_train_steps=10, gradient_accumulation_steps=0,
                                 clip_norm=0.0)
  assert str(e.value) == (
      "OptimizerConfig: lr_schedule must be one of ('google', 'decay_after_warmup'), got "
      "'cosine'; num_warmup_steps (11) must be in [0, num_train_steps (10)]: lower "
      "num_warmup_steps to at most 10, or raise num_train_steps; "
      "gradient_accumulation_steps (0) must be >= 1; clip_norm (0.0) must be a finite "
      "number > 0, or off: 0 on the command line (--clip_norm=0), None in Python")


@pytest.mark.parametrize("setting, value, message", [
    ("weight_decay_rate", -0.5, "weight_decay_rate (-0.5) must be >= 0 (0: no weight decay)"),
    ("momentum", -0.1, "momentum (-0.1) must be >= 0"),
    ("power", 0.0, "power (0.0) must be > 0"),
    ("end_learning_rate", -1.0, "end_learning_rate (-1.0) must be >= 0"),
    ("num_train_steps", 0, "num_train_steps (0) must be >= 1"),
    ("loss_scale_growth_steps", 0, "loss_scale_growth_steps (0) must be >= 1"),
    ("clip_norm", -1.0, "clip_norm (-1.0) must be a finite number > 0, or off: 0 on the "
     "command line (--clip_norm=0), None in Python"),
    # Sweep 34, B59: inf (and NaN) passed `> 0` and made every weight NaN after one step.
    ("clip_norm", math.inf, "clip_norm (inf) must be a finite number > 0, or off: 0 on the "
     "command line (--clip_norm=0), None in Python"),
    ("clip_norm", math.nan, "clip_norm (nan) must be a finite number > 0, or off: 0 on the "
     "command line (--clip_norm=0), None in Python"),
])
def test_a_bad_setting_is_named_alone_with_its_value_and_range(setting, value, message):
  # A tool may have no flag for the other settings (run_pretraining: no momentum, power).
  with pytest.raises(ValueError) as e:
    optimization.OptimizerConfig(**{setting: value})
  assert str(e.value) == f"OptimizerConfig: {message}"


@pytest.mark.parametrize("setting, value, message", [
    ("learning_rate", math.inf, "learning_rate (inf) must be a finite number >= 0"),
    ("learning_rate", math.nan, "learning_rate (nan) must be a finite number >= 0"),
    ("weight_decay_rate", math.inf,
     "weight_decay_rate (inf) must be a finite number >= 0 (0: no weight decay)"),
    ("initial_loss_scale", math.inf, "initial_loss_scale (inf) must be a finite number > 0"),
    ("exclude_from_weight_decay", ["LayerNorm", "(bias"],
     "exclude_from_weight_decay: '(bias' is not a regular expression (missing ), "
     "unterminated subpattern at position 0)"),
])
def test_an_infinite_rate_or_a_broken_pattern_is_refused_by_the_config(setting, value, message):
  """Sweep 26: learning_rate=inf passed `>= 0` and fit turned every weight NaN without a
  word; a broken exclusion pattern failed later in `re`, naming neither field nor pattern."""
  with pytest.raises(ValueError) as e:
    optimization.OptimizerConfig(num_train_steps=10, **{setting: value})
  assert str(e.value) == f"OptimizerConfig: {message}"


def _mlp():
  model = keras.Sequential([keras.layers.Input((5,)), keras.layers.Dense(7, activation="tanh"),
                            keras.layers.Dense(3)])
  model.set_weights([np.random.default_rng(i).standard_normal(w.shape).astype(np.float32) * 0.5
                     for i, w in enumerate(model.get_weights())])
  return model


def test_works_in_keras_fit_under_mirrored_strategy_and_equals_the_big_batch():
  rng = np.random.default_rng(0)
  x = rng.standard_normal((24, 5)).astype(np.float32)
  y = rng.standard_normal((24, 3)).astype(np.float32)
  strategy = training_loop.mirrored_strategy()
  with strategy.scope():
    model = _mlp()
    model.compile(optimizer=optimization.with_gradient_accumulation(
        keras.optimizers.SGD(0.1, momentum=0.9), 3), loss="mse")
  # 3 micro-batches of 4 (2 per replica) per window; 6 micro-batches = 2 applied steps.
  model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
  reference = _mlp()
  sgd = keras.optimizers.SGD(0.1, momentum=0.9)
  for start in (0, 12):
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(tf.square(reference(x[start:start + 12]) - y[start:start + 12]))
    sgd.apply(tape.gradient(loss, reference.trainable_variables), reference.trainable_variables)
  assert int(model.optimizer.iterations.numpy()) == 2
  assert training_loop.max_weight_diff(model, reference) < 1e-5  # float32 reordering only


@pytest.mark.parametrize("settings, named", [
    (dict(optimizer="sgd", weight_decay_rate=0.05), "weight_decay_rate: not read by "
     "optimizer=sgd (of its optimizer-specific settings it reads only momentum), so "),
    (dict(optimizer="lamb", momentum=0.5), "momentum: not read by optimizer=lamb (of its "
     "optimizer-specific settings it reads only weight_decay_rate, "
     "exclude_from_weight_decay, exclude_from_layer_adaptation"),
    (dict(optimizer="adamw", exclude_from_layer_adaptation=["bias"]),
     "exclude_from_layer_adaptation: not read by optimizer=adamw"),
    (dict(optimizer="sgd", exclude_from_weight_decay=("bias",)),
     "or choose optimizer=adamw or lamb"),
])
def test_a_setting_the_optimizer_does_not_read_is_refused(settings, named):
  """Sweep 9 PT10/AL02/AL04: SGD trained without the weight decay it was given, LAMB without
  the momentum, without a word."""
  with pytest.raises(ValueError, match="OptimizerConfig: ") as e:
    optimization.OptimizerConfig(**settings)
  assert named in str(e.value)


@pytest.mark.parametrize("settings", [
    dict(optimizer="sgd"), dict(optimizer="sgd", weight_decay_rate=0.0, momentum=0.5),
    dict(optimizer="sgd",
         exclude_from_weight_decay=list(optimization.BERT_WEIGHT_DECAY_EXCLUSIONS)),
    dict(optimizer="lamb", weight_decay_rate=0.1, exclude_from_layer_adaptation=["bias"]),
    dict(optimizer="adamw", momentum=0.9)])
def test_defaults_of_settings_the_optimizer_does_not_read_are_accepted(settings):
  optimization.create_optimizer(optimization.OptimizerConfig(**settings))


def test_a_tools_optimizer_flags_are_refused_by_their_flag_names_with_their_defaults():
  """Sweep 16 P1: run_pretraining --num_train_steps=3 was refused for the default
  --num_warmup_steps=100 as "OptimizerConfig: num_warmup_steps (100) must be in [0,
  num_train_steps (3)]": a field, no flag, no word of the default. A tool's flags are
  checked by the config's rules, each named as its flag (`setting_problems`)."""
  flag_names = {"num_warmup_steps": "num_warmup_steps", "num_train_steps": "steps",
                "learning_rate": "learning_rate"}
  given = {"num_train_steps", "learning_rate"}
  no_value = object()

  def spell(name, value=no_value):
    if name not in flag_names:
      return name
    flag = f"--{flag_names[name]}"
    if value is no_value:
      return flag
    return f"{flag} ({value}{'' if name in given else ', its default'})"

  assert optimization.setting_problems(
      {"num_warmup_steps": 100, "num_train_steps": 3, "learning_rate": -1.0}, spell) == [
          "--learning_rate (-1.0) must be >= 0",
          "--num_warmup_steps (100, its default) must be in [0, --steps (3)]: lower "
          "--num_warmup_steps to at most 3, or raise --steps"]
  # A rule reading a setting the tool has no flag for is the config's own to refuse.
  assert optimization.setting_problems({"num_warmup_steps": 100}, spell) == []


def test_create_optimizer_takes_a_dict_of_the_config_fields_and_names_an_unknown_one():
  """Sweep 23 P2 (q144): create_optimizer({"learning_rate": 1e-4}) failed on "'dict' object has
  no attribute 'learning_rate'"."""
  optimizer = optimization.create_optimizer({"learning_rate": 2e-4, "optimizer": "sgd",
                                             "num_train_steps": 10})
  assert isinstance(optimizer.inner_optimizer, keras.optimizers.SGD)
  # Sweep 28, B31: without num_train_steps (1 by default) fit learned one step, then went
  # on at learning rate 0 without a word.
  with pytest.raises(ValueError, match=r"^create_optimizer: num_train_steps is not given: "
                                       r"the learning rate warms up, then decays"):
    optimization.create_optimizer({"learning_rate": 2e-4})
  with pytest.raises(ValueError, match=r"^create_optimizer: 'lr' is no field of tfbert\.training"
                     r"\.optimization\.OptimizerConfig; its fields: optimizer, learning_rate, "):
    optimization.create_optimizer({"lr": 1e-4})
  with pytest.raises(TypeError, match=r"^create_optimizer takes a tfbert\.training\.optimization"
                     r"\.OptimizerConfig \(or a dict of its fields\), got the float 0\.0001$"):
    optimization.create_optimizer(1e-4)
