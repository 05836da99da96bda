"""Keras 3 optimizers for BERT: google-research/bert's AdamW, and LAMB.

Both do decoupled weight decay *inside* `update_step`, not through Keras's `weight_decay`
argument, for two reasons:

* Keras applies its weight decay in `apply`, outside `update_step`. A gradient-accumulation
  wrapper that calls `optimizer.update_step(grad, var, lr)` per variable (inside
  `strategy.extended.update`, in cross-replica context) would silently skip it. Here
  `update_step` is the whole update: it uses `self.iterations` (applied steps) for its step
  count, and does no `merge_call` or cross-replica communication.
* Weight-decay exclusions are regexes matched with `re.search` against the variable *path*
  below the model's own name, the first component all of the optimizer's variables share
  (`encoder/layer_0/attention_layer_norm/gamma` of `bert_pretrainer/encoder/...`: a model
  named `unbiased` is decayed as any other). Keras's
  `exclude_from_weight_decay(var_names=...)` matches `variable.name`; for a Keras variable
  that is the leaf name (`gamma`, `bias`), so `LayerNorm|layer_norm` match nothing. (Its TF
  backend happens to pass the underlying `tf.Variable`, whose name is the full path, so the
  outcome depends on the backend; see tests/training/optimizers_test.py.)

Decoupled weight decay is not L2 regularization: adding `wd * |w|^2` to the loss would let
Adam's `m` and `v` rescale the decay per coordinate (google-research/bert `optimization.py`;
Loshchilov & Hutter, "Decoupled Weight Decay Regularization", 2019).

Gradients may be dense tensors or `tf.IndexedSlices` (embedding lookups); slices are
densified, as google-research/bert's dense `m`/`v` update does implicitly.
"""

import re
from typing import Iterable, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from tfbert.runtime import validation

# google-research/bert run_pretraining.py / optimization.py `exclude_from_weight_decay`.
# tfbert names its layer norms `*layer_norm` (TF1 checkpoints: `LayerNorm`); biases include
# `mlm_head/output_bias` and `nsp_head/output_bias`.
BERT_WEIGHT_DECAY_EXCLUSIONS = ("LayerNorm", "layer_norm", "bias")


def variable_path(variable) -> str:
  """The variable's path (`keras.Variable.path`), or its `tf.Variable` name without `:0`."""
  path = getattr(variable, "path", None)
  if path is None:
    path = re.sub(r":\d+$", "", variable.name)
  return path


def model_prefix(variables: Sequence) -> str:
  """"<name>/" when every one of two or more `variables` lies under that first path
  component (their model's name, which the user chose), else ""."""
  paths = [variable_path(v) for v in variables]
  firsts = {path.split("/", 1)[0] for path in paths}
  if len(paths) < 2 or len(firsts) != 1 or not all("/" in path for path in paths):
    return ""
  return f"{firsts.pop()}/"


def matches_any(patterns: Sequence[str], variable, prefix: str = "") -> bool:
  """Whether any regex in `patterns` is found (`re.search`) in the variable's path, less
  `prefix` (`model_prefix`: the model's name). A model named `unbiased_model` had every
  variable excluded from weight decay by "bias" (sweep 30, B14)."""
  path = variable_path(variable)
  if prefix and path.startswith(prefix):
    path = path[len(prefix):]
  return any(re.search(p, path) is not None for p in patterns)


# Spellings of other codebases whose tfbert spelling, also in the list, matches instead:
# google-research/bert's own list has both (its TF1 checkpoints say `LayerNorm`).
_SPELLED_OTHERWISE = {"LayerNorm": "layer_norm"}


def unmatched_patterns(patterns: Sequence[str], variables: Sequence,
                       prefix: str = "") -> list[str]:
  """The patterns of `patterns` found in none of `variables`' paths (below `prefix`), less
  a `_SPELLED_OTHERWISE` spelling whose tfbert spelling is in `patterns` too."""
  return [p for p in patterns
          if _SPELLED_OTHERWISE.get(p) not in patterns
          and not any(matches_any([p], v, prefix) for v in variables)]


def warn_unmatched(name: str, patterns: Sequence[str], variables: Sequence,
                   prefix: str = "") -> list[str]:
  """Logs a warning naming each of `patterns` that excludes nothing (`unmatched_patterns`):
  Hugging Face's `LayerNorm.weight` or google-research/bert's `LayerNorm` alone left every
  tfbert layer norm (`.../layer_norm/gamma`) decayed without a word (sweep 31, B33).
  Returns those patterns."""
  unmatched = unmatched_patterns(patterns, variables, prefix)
  if unmatched and variables:
    example = variable_path(variables[0])[len(prefix):]
    logging.warning(
        f"{name}: pattern(s) {unmatched} match none of the model's {len(variables)} "
        f"variable paths, so they exclude nothing (tfbert's paths look like {example!r}; "
        "layer norms are '.../layer_norm/gamma' and '.../layer_norm/beta', where "
        "google-research/bert and Hugging Face say 'LayerNorm')")
  return unmatched


def decayed_variables(optimizer_or_patterns, variables: Iterable) -> list:
  """The variables that receive weight decay.

  Args:
    optimizer_or_patterns: An `AdamW`/`Lamb` (uses its rate and exclusions), or a sequence
      of exclusion regexes (then every variable whose path matches none is decayed).
    variables: Iterable of Keras (or tf) variables.

  Returns:
    The decayed variables, in input order.
  """
  variables = list(variables)
  prefix = model_prefix(variables)
  if isinstance(optimizer_or_patterns, _DecoupledWeightDecayOptimizer):
    return [v for v in variables if optimizer_or_patterns.uses_weight_decay(v, prefix)]
  patterns = _patterns("patterns", optimizer_or_patterns)
  return [v for v in variables if not matches_any(patterns, v, prefix)]


def _patterns(name: str, patterns: Optional[Sequence[str]]) -> tuple:
  """Validates a list of regexes; None means no patterns."""
  if patterns is None:
    return ()
  if isinstance(patterns, str):  # A bare string would be iterated character by character.
    raise TypeError(f"{name} must be a list of regex strings, not the string {patterns!r}")
  for p in patterns:
    try:
      re.compile(p)  # Fail at construction, not at the first update.
    except (re.error, TypeError) as error:  # A bare re.error named neither (sweep 29, B63).
      raise ValueError(f"{name}: {p!r} is not a regular expression ({error})") from None
  return tuple(patterns)


def _dense(gradient, variable) -> tf.Tensor:
  """The gradient as a dense tensor of the variable's dtype; sums duplicate slice indices."""
  if isinstance(gradient, tf.IndexedSlices):
    gradient = tf.convert_to_tensor(gradient)
  return tf.cast(gradient, variable.dtype)


@tf.function(jit_compile=True, autograph=False)
def _google_adamw_step(var, m, v, grad, scale, lr, decay, beta_1, beta_2, epsilon):
  """google-research/bert `AdamWeightDecayOptimizer`'s update of one variable, fused.

  `decay`, `beta_1`, `beta_2`, `epsilon` are Python floats (compile-time constants; 1 - beta
  is formed in float64 and rounded once, as Google's Python constants are).

  Returns:
    (new variable, new m, new v).
  """
  g = grad * scale
  next_m = beta_1 * m + (1.0 - beta_1) * g
  next_v = beta_2 * v + (1.0 - beta_2) * tf.square(g)
  update = next_m / (tf.sqrt(next_v) + epsilon)
  if decay:
    update += decay * var
  return var - lr * update, next_m, next_v


class _DecoupledWeightDecayOptimizer(keras.optimizers.Optimizer):
  """Shared state of `AdamW` and `Lamb`: Adam moments, weight-decay rate and exclusions.

  Args:
    learning_rate: float or `LearningRateSchedule` (evaluated at `iterations`).
    weight_decay_rate: Decoupled weight decay, added to the update as `rate * var`.
    beta_1: Decay of the first-moment estimate, in [0, 1).
    beta_2: Decay of the second-moment estimate, in [0, 1).
    epsilon: Added to `sqrt(v)`; google-research/bert uses 1e-6.
    exclude_from_weight_decay: Regexes searched in variable paths; None excludes nothing.
    slot_names: Names of the (m, v) optimizer variables.
    **kwargs: Forwarded to `keras.optimizers.Optimizer` (clipnorm, name, ...). Keras's own
      `weight_decay` is refused, since it would decay outside `update_step`.
  """

  def __init__(self, learning_rate, weight_decay_rate, beta_1, beta_2, epsilon,
               exclude_from_weight_decay, slot_names, **kwargs):
    if kwargs.pop("weight_decay", None) is not None:
      raise ValueError(f"{type(self).__name__} does its own decoupled weight decay; pass "
                       "weight_decay_rate, not Keras's weight_decay")
    if validation.is_int(learning_rate) or isinstance(learning_rate, np.floating):
      # NumPy's integers and floats too (sweep 29, B61): Keras takes only a Python float.
      learning_rate = float(learning_rate)
    super().__init__(learning_rate=learning_rate, weight_decay=None, **kwargs)
    if weight_decay_rate < 0 or not 0 <= beta_1 < 1 or not 0 <= beta_2 < 1 or epsilon < 0:
      raise ValueError(f"Need weight_decay_rate >= 0, 0 <= beta_1, beta_2 < 1 and epsilon "
                       f">= 0; got {weight_decay_rate}, {beta_1}, {beta_2}, {epsilon}")
    self.weight_decay_rate = float(weight_decay_rate)
    self.beta_1 = float(beta_1)
    self.beta_2 = float(beta_2)
    self.epsilon = float(epsilon)
    self._decay_exclusions = _patterns("exclude_from_weight_decay", exclude_from_weight_decay)
    self._slot_names = slot_names

  def build(self, var_list):
    if self.built:
      return
    super().build(var_list)
    self._path_prefix = model_prefix(var_list)  # The exclusions search below it.
    if self.weight_decay_rate:
      warn_unmatched("exclude_from_weight_decay", self._decay_exclusions, var_list,
                     self._path_prefix)
    warn_unmatched("exclude_from_layer_adaptation", getattr(self, "_adaptation_exclusions", ()),
                   var_list, self._path_prefix)
    self._m, self._v = self.add_optimizer_variables(var_list, list(self._slot_names))

  def exclude_from_weight_decay(self, var_list=None, var_names=None):
    """Refused: Keras matches `variable.name` (a leaf name) and decays outside `update_step`."""
    raise TypeError(f"{type(self).__name__}: pass exclude_from_weight_decay=[regex, ...] to "
                    "the constructor; patterns are matched against variable paths")

  def uses_weight_decay(self, variable, prefix: Optional[str] = None) -> bool:
    """Whether `variable` is decayed: rate > 0 and no exclusion regex found in its path.

    As google-research/bert `_do_use_weight_decay`. Accepts the Keras variable, or the
    `tf.Variable` (or per-replica component) that the optimizer was built with.

    Args:
      variable: the variable.
      prefix: the model's name to leave out of its path (`model_prefix`); None for the
        prefix of the variables this optimizer was built with.
    """
    if not self.weight_decay_rate:
      return False
    if prefix is None:
      prefix = getattr(self, "_path_prefix", "")
    return not matches_any(self._decay_exclusions, self._reference(variable), prefix)

  def _reference(self, variable):
    """The variable passed to `build` for `variable` (which may be its per-replica copy)."""
    if self.built:
      index = self._trainable_variables_indices.get(self._var_key(variable))
      if index is not None:
        return self._trainable_variables[index]
    return variable

  def _update_moments(self, gradient, variable):
    """Assigns and returns m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2 (float Tensors)."""
    g = _dense(gradient, variable)
    index = self._get_variable_index(variable)
    m, v = self._m[index], self._v[index]
    m_t = self.beta_1 * m + (1.0 - self.beta_1) * g
    v_t = self.beta_2 * v + (1.0 - self.beta_2) * tf.square(g)
    self.assign(m, m_t)
    self.assign(v, v_t)
    return m_t, v_t

  def _bias_corrected(self, m_t, v_t):
    """Adam's m_hat, v_hat, with t = iterations + 1 (the update being applied).

    `1 - beta**t` is computed in float64: in float32, 0.999 rounds to 0.99900001, so
    `1 - beta_2` is off by 1.3e-5 relative (as in Keras Adam and TF-Addons LAMB), a 6e-6
    relative error in the first updates.
    """
    t = tf.cast(self.iterations + 1, tf.float64)
    m_scale = tf.cast(1.0 - tf.pow(tf.constant(self.beta_1, tf.float64), t), m_t.dtype)
    v_scale = tf.cast(1.0 - tf.pow(tf.constant(self.beta_2, tf.float64), t), v_t.dtype)
    return m_t / m_scale, v_t / v_scale

  def get_config(self) -> dict:
    config = super().get_config()
    config.pop("weight_decay")  # Always None here; weight_decay_rate is ours.
    config.update(weight_decay_rate=self.weight_decay_rate, beta_1=self.beta_1,
                  beta_2=self.beta_2, epsilon=self.epsilon,
                  exclude_from_weight_decay=list(self._decay_exclusions))
    return config


@keras.saving.register_keras_serializable(package="tfbert")
class AdamW(_DecoupledWeightDecayOptimizer):
  """Adam with decoupled weight decay, as google-research/bert `AdamWeightDecayOptimizer`.

  Per variable, with gradient g and learning rate lr:
    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
    update = m / (sqrt(v) + eps)   (m_hat, v_hat of Adam if bias_correction)
    update += weight_decay_rate * var   (unless excluded)
    var -= lr * update
  The defaults (no bias correction, epsilon 1e-6) reproduce google-research/bert exactly;
  Keras's AdamW differs (bias correction, epsilon 1e-7, leaf-name exclusions).

  Args:
    learning_rate: float or `LearningRateSchedule` (evaluated at `iterations`).
    weight_decay_rate: Decoupled weight decay; google-research/bert uses 0.01.
    beta_1: First-moment decay.
    beta_2: Second-moment decay.
    epsilon: Added to `sqrt(v)`.
    bias_correction: Whether to use Adam's bias-corrected moments.
    exclude_from_weight_decay: Regexes searched in variable paths, e.g.
      `BERT_WEIGHT_DECAY_EXCLUSIONS`; None excludes nothing.
    **kwargs: Forwarded to `keras.optimizers.Optimizer` (clipnorm, name, ...).

  Raises:
    ValueError: On out-of-range hyperparameters or a non-None `weight_decay`.
    TypeError: If an exclusion list is a bare string.
  """

  def __init__(self, learning_rate, weight_decay_rate: float = 0.0, beta_1: float = 0.9,
               beta_2: float = 0.999, epsilon: float = 1e-6, bias_correction: bool = False,
               exclude_from_weight_decay: Optional[Sequence[str]] = None, **kwargs):
    # Slot names as google-research/bert's `<var>/adam_m`, `<var>/adam_v`.
    super().__init__(learning_rate, weight_decay_rate, beta_1, beta_2, epsilon,
                     exclude_from_weight_decay, ("adam_m", "adam_v"), **kwargs)
    self.bias_correction = bool(bias_correction)

  def update_step(self, gradient, variable, learning_rate):
    """Applies one update to `variable`; safe to call per variable in cross-replica context.

    Args:
      gradient: float Tensor or `tf.IndexedSlices` of the variable's shape (all-reduced).
      variable: A variable the optimizer was built with (or its per-replica copy).
      learning_rate: float scalar, the rate for this update.
    """
    self.scaled_update_step(gradient, variable, learning_rate, 1.0)

  def scaled_update_step(self, gradient, variable, learning_rate, scale):
    """`update_step` with the gradient `gradient * scale` (clipping, accumulation mean).

    Without bias correction (google-research/bert's update) the gradient scaling, both
    moments, the weight decay and the step are one XLA-compiled loop over the variable and
    its slots, formula for formula as `AdamWeightDecayOptimizer.apply_gradients`, instead
    of a scaling pass, a weight-decay pass and TensorFlow's `ResourceApplyAdam` kernel
    (whose float32 1 - beta_2 is 1.3e-5 relative off Google's). With bias correction,
    Keras-style ops.

    Args:
      gradient, variable, learning_rate: As `update_step`.
      scale: float scalar Tensor or number multiplying the gradient.
    """
    lr = tf.cast(learning_rate, variable.dtype)
    scale = tf.cast(scale, variable.dtype)
    index = self._get_variable_index(variable)
    m, v = self._m[index], self._v[index]
    if not self.bias_correction:
      decay = self.weight_decay_rate if self.uses_weight_decay(variable) else 0.0
      new_var, new_m, new_v = _google_adamw_step(
          tf.convert_to_tensor(variable), tf.convert_to_tensor(m), tf.convert_to_tensor(v),
          _dense(gradient, variable), scale, lr, decay, self.beta_1, self.beta_2, self.epsilon)
      self.assign(m, new_m)
      self.assign(v, new_v)
      self.assign(variable, new_var)
      return
    m_t, v_t = self._bias_corrected(*self._update_moments(_dense(gradient, variable) * scale,
                                                          variable))
    update = m_t / (tf.sqrt(v_t) + self.epsilon)
    if self.uses_weight_decay(variable):
      update += self.weight_decay_rate * variable
    self.assign_sub(variable, lr * update)

  def get_config(self) -> dict:
    return {**super().get_config(), "bias_correction": self.bias_correction}


@keras.saving.register_keras_serializable(package="tfbert")
class Lamb(_DecoupledWeightDecayOptimizer):
  """LAMB (You et al., 2019, "Large Batch Optimization for Deep Learning"), as TF-Addons.

  Per variable, with t = iterations + 1:
    m, v as Adam;  update = m_hat / (sqrt(v_hat) + eps) (+ weight_decay_rate * var)
    ratio = ||var|| / ||update|| if both norms > 0 else 1   (1 if excluded from adaptation)
    var -= ratio * lr * update
  This matches TF-Addons / Model Garden `LAMB`, except for one default: there,
  `exclude_from_layer_adaptation=None` silently falls back to `exclude_from_weight_decay`;
  here None means *no* exclusions, so every variable is adapted unless listed explicitly.

  Args:
    learning_rate: float or `LearningRateSchedule` (evaluated at `iterations`).
    weight_decay_rate: Decoupled weight decay (NVIDIA/Model Garden BERT-LAMB use 0.01).
    beta_1: First-moment decay.
    beta_2: Second-moment decay.
    epsilon: Added to `sqrt(v_hat)`; 1e-6 as TF-Addons and Model Garden.
    exclude_from_weight_decay: Regexes searched in variable paths; None excludes nothing.
    exclude_from_layer_adaptation: Regexes searched in variable paths; None excludes nothing.
    **kwargs: Forwarded to `keras.optimizers.Optimizer` (clipnorm, name, ...).

  Raises:
    ValueError: On out-of-range hyperparameters or a non-None `weight_decay`.
    TypeError: If an exclusion list is a bare string.
  """

  def __init__(self, learning_rate, weight_decay_rate: float = 0.0, beta_1: float = 0.9,
               beta_2: float = 0.999, epsilon: float = 1e-6,
               exclude_from_weight_decay: Optional[Sequence[str]] = None,
               exclude_from_layer_adaptation: Optional[Sequence[str]] = None, **kwargs):
    # Slot names as TF-Addons / Model Garden LAMB (`m`, `v`).
    super().__init__(learning_rate, weight_decay_rate, beta_1, beta_2, epsilon,
                     exclude_from_weight_decay, ("m", "v"), **kwargs)
    self._adaptation_exclusions = _patterns("exclude_from_layer_adaptation",
                                            exclude_from_layer_adaptation)

  def uses_layer_adaptation(self, variable) -> bool:
    """Whether `variable` gets the trust ratio: no adaptation-exclusion regex in its path."""
    return not matches_any(self._adaptation_exclusions, self._reference(variable),
                           getattr(self, "_path_prefix", ""))

  def update_step(self, gradient, variable, learning_rate):
    """Applies one update to `variable`; safe to call per variable in cross-replica context.

    Args: as `AdamW.update_step`. The norms are over this variable only: each replica holds
    a full copy, so no communication is needed.
    """
    lr = tf.cast(learning_rate, variable.dtype)
    m_hat, v_hat = self._bias_corrected(*self._update_moments(gradient, variable))
    update = m_hat / (tf.sqrt(v_hat) + self.epsilon)
    if self.uses_weight_decay(variable):
      update += self.weight_decay_rate * variable
    ratio = 1.0
    if self.uses_layer_adaptation(variable):
      w_norm = tf.norm(tf.convert_to_tensor(variable))
      u_norm = tf.norm(update)
      safe_u_norm = tf.where(u_norm > 0, u_norm, 1.0)
      ratio = tf.where((w_norm > 0) & (u_norm > 0), w_norm / safe_u_norm, 1.0)
    self.assign_sub(variable, ratio * lr * update)

  def get_config(self) -> dict:
    return {**super().get_config(),
            "exclude_from_layer_adaptation": list(self._adaptation_exclusions)}
