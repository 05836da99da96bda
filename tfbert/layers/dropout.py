"""Dropout whose keep-mask is a hash of the element's index, fused into one XLA loop.

BERT applies dropout to the attention probabilities [B, N, S, S] and to every [B, S, H]
layer output. On CPU, TensorFlow's Philox generator plus the compare, cast and multiply
passes cost more than the rest of the dropout, and a stored mask must be read back by the
gradient. Here element i of a call is kept when the top 16 bits of

    splitmix64(key, i) = mix(key + (i + 1) * 0x9E3779B97F4A7C15)

are >= round(rate * 65536): SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom
number generators", OOPSLA 2014; Vigna's `splitmix64.c`), output number i + 1 of the
generator seeded with `key`. Each element's decision is a function of (key, i) alone, so
`Dropout.call` draws the mask inside the XLA loop that applies it, and its gradient loop
draws it again instead of storing it. Fused kernels that apply a mask inside a loop with
reductions (`tfbert.layers.fused`, LayerNorm) take a stored bool mask instead
(`Dropout.keep_mask`, one XLA loop): a hash inside their loops made the residual
LayerNorm's forward and gradient 1.4x slower in float32 (31.9 against 22.2 ms at
[4096, 256], tools/benchmark.py --benchmark=kernels at commit 17987d4).

The drop probability is round(rate * 65536) / 65536 (0.10000610 for rate 0.1; Keras'
float draws give rate up to float32 rounding). Kept elements are scaled by
65536 / (65536 - threshold), the inverse of the exact keep probability, so the expected
output equals the input. The product is computed in float32 (or float64) and rounded once
to the output dtype.

Keys. Inside a training step (`step_keys`, entered by `BertPretrainer.train_step`) a call's
key is a pure function of (the layer's seed, the step, the global replica id, the n-th call
of the layer within the step): `step_key` hashes them with splitmix64. Nothing random is
state, so a run restored from a checkpoint (which holds the optimizer's micro-step counter)
draws exactly the uninterrupted run's masks; replicas draw different masks; and replica r
draws the same masks whether it runs in this process or another (`replica_id_in_sync_group`
is global under `MultiWorkerMirroredStrategy`). Outside a step (Keras' own `fit`, eager
calls) the layer falls back to a `keras.random.SeedGenerator` that advances on every
training call, like Keras' `Dropout`: the key is splitmix64 of the generator's (seed,
counter), mixed with the replica id when several replicas run. A generator's state lives in
a variable that `tf.distribute` mirrors (every replica would read the same counter) and that
a `tf.train.Checkpoint` of the model does not hold (a resumed run would replay other masks).
`keras.utils.set_random_seed` fixes the layer's seed either way.
"""

import contextlib
import random
import threading
from typing import Optional

import keras
import tensorflow as tf

_LEVELS = 65536  # 2^16 values of a 16-bit draw.
_GAMMA = 0x9E3779B97F4A7C15  # SplitMix64's increment (odd; 2^64 / golden ratio).
_MIX = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)  # Stafford's variant 13 multipliers.


def keep_threshold(rate: float) -> int:
  """The smallest kept 16-bit value: drop probability = keep_threshold(rate) / 65536."""
  return int(round(rate * _LEVELS))


def keep_scale(rate: float) -> float:
  """Factor of kept elements: 65536 / (65536 - threshold), 1 / exact keep probability."""
  return _LEVELS / (_LEVELS - keep_threshold(rate))


def _u64(value: int) -> tf.Tensor:
  return tf.constant(value, tf.uint64)


def _xor_shift(z: tf.Tensor, bits: int) -> tf.Tensor:
  return tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(bits)))


def splitmix64(key: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
  """Output number index + 1 of SplitMix64 seeded with `key` (uint64 arithmetic, wrapping).

  Args:
    key: uint64 scalar (the generator's seed).
    index: uint64 Tensor of any shape.

  Returns:
    uint64 Tensor of index's shape.
  """
  z = key + (index + _u64(1)) * _u64(_GAMMA)
  z = _xor_shift(z, 30) * _u64(_MIX[0])
  z = _xor_shift(z, 27) * _u64(_MIX[1])
  return _xor_shift(z, 31)


def keep_mask(key: tf.Tensor, shape, threshold) -> tf.Tensor:
  """bool keep-mask: element i (row-major) is kept iff splitmix64(key, i) >> 48 >= threshold.

  Args:
    key: uint64 scalar key of one dropout call (`Dropout.key`).
    shape: int shape of the mask.
    threshold: int `keep_threshold(rate)` (Python or int32 scalar).

  Returns:
    bool Tensor of `shape`.
  """
  index = tf.bitcast(tf.range(tf.reduce_prod(shape), dtype=tf.int64), tf.uint64)
  top16 = tf.cast(tf.bitwise.right_shift(splitmix64(key, index), _u64(48)), tf.int32)
  return tf.reshape(top16 >= threshold, shape)


_compiled_keep_mask = tf.function(keep_mask, jit_compile=True, autograph=False)


def _wide(dtype: tf.DType) -> tf.DType:
  """float32, or float64 for float64 inputs: where the masked product is computed."""
  return tf.float64 if dtype == tf.float64 else tf.float32


@tf.function(jit_compile=True, autograph=False)
def _masked(x, key, threshold, scale, out_dtype):
  keep = keep_mask(key, tf.shape(x), threshold)
  wide = _wide(x.dtype)
  kept = tf.cast(x, wide) * tf.cast(scale, wide)
  return tf.cast(tf.where(keep, kept, tf.zeros([], wide)), out_dtype)


def drop(x: tf.Tensor, key: tf.Tensor, rate: float, dtype=None) -> tf.Tensor:
  """where(keep_mask(key), x * keep_scale(rate), 0) as one XLA loop, gradient likewise.

  Args:
    x: float Tensor of any shape.
    key: uint64 scalar key (`Dropout.key`).
    rate: Drop rate in [0, 1).
    dtype: Output dtype (default x's); the product is rounded once to it.

  Returns:
    Tensor of x's shape in `dtype`.
  """
  x = tf.convert_to_tensor(x)
  out_dtype = tf.as_dtype(dtype or x.dtype)
  threshold = tf.constant(keep_threshold(rate), tf.int32)
  scale = tf.constant(keep_scale(rate), tf.float64)

  @tf.custom_gradient
  def fn(x):
    def grad(dy):
      return _masked(dy, key, threshold, scale, x.dtype)

    return _masked(x, key, threshold, scale, out_dtype), grad

  return fn(x)


def call_key(seed_state: tf.Tensor) -> tf.Tensor:
  """uint64 key of one call from a `SeedGenerator.next()` state [seed, counter] (int64)."""
  seed, counter = tf.unstack(tf.bitcast(tf.cast(seed_state, tf.int64), tf.uint64))
  return splitmix64(seed, counter)


def _as_u64(value) -> tf.Tensor:
  """An integer (Python or Tensor, 64 bits or fewer) as a uint64 scalar, bits kept."""
  if isinstance(value, int):
    return _u64(value % 2 ** 64)
  return tf.bitcast(tf.cast(value, tf.int64), tf.uint64)


def _splitmix64_int(key: int, index: int) -> int:
  """`splitmix64` on Python integers, for the parts of a key known when tracing."""
  mask = 2 ** 64 - 1
  z = (key + (index + 1) * _GAMMA) & mask
  z = ((z ^ (z >> 30)) * _MIX[0]) & mask
  z = ((z ^ (z >> 27)) * _MIX[1]) & mask
  return z ^ (z >> 31)


def step_base(step, replica) -> tf.Tensor:
  """uint64 splitmix64(step, replica): the part of `step_key` shared by a step's layers."""
  return splitmix64(_as_u64(step), _as_u64(replica))


def step_key(seed: int, step, replica, call: int = 0) -> tf.Tensor:
  """uint64 key of a layer's call in a training step: a pure function of its four inputs.

  splitmix64(splitmix64(step, replica), splitmix64(seed, call)), where splitmix64(k, i) is
  output number i + 1 of SplitMix64 seeded with k. `step_keys` computes the (step,
  replica) part once per step and the (seed, call) part in Python while tracing, so a
  call costs one scalar splitmix64, as the seed generator's key does.

  Args:
    seed: the layer's seed (`Dropout.stream_seed`), a Python int.
    step: int scalar (Python or Tensor), the step (`BertPretrainer`: the micro-step).
    replica: int scalar, the global replica id (`replica_id_in_sync_group`).
    call: which call of the layer within the step (0 for the first).

  Returns:
    uint64 scalar.
  """
  return _layer_key(step_base(step, replica), seed, call)


def _layer_key(base: tf.Tensor, seed: int, call: int) -> tf.Tensor:
  return splitmix64(base, _u64(_splitmix64_int(seed % 2 ** 64, call)))


_CONTEXT = threading.local()  # MirroredStrategy runs each replica's step in its own thread.


class _StepKeys:
  """The keys of one training step on one replica: `key(layer)` counts the layer's calls."""

  def __init__(self, step, replica):
    self.base = step_base(step, replica)
    self.calls = {}

  def key(self, layer: "Dropout") -> tf.Tensor:
    call = self.calls.get(id(layer), 0)
    self.calls[id(layer)] = call + 1
    return _layer_key(self.base, layer.stream_seed, call)


def _replica_id():
  """The global replica id in a replica context of several replicas, else None."""
  context = tf.distribute.get_replica_context()
  if context is None or context.num_replicas_in_sync == 1:
    return None
  return context.replica_id_in_sync_group


@contextlib.contextmanager
def step_keys(step, replica=None):
  """Within the block, every training call of a `Dropout` draws `step_key(...)`.

  Enter it once per step in the replica's `train_step` (on the replica's thread).

  Args:
    step: int scalar (Tensor or Python) that numbers the step; a restored run must see
      the same numbers (e.g. the optimizer's micro-step counter, which is checkpointed).
    replica: the global replica id; default: the current replica context's
      `replica_id_in_sync_group` (0 without a strategy).
  """
  if replica is None:
    replica = _replica_id()
  previous = getattr(_CONTEXT, "keys", None)
  _CONTEXT.keys = _StepKeys(step, 0 if replica is None else replica)
  try:
    yield
  finally:
    _CONTEXT.keys = previous


@keras.saving.register_keras_serializable(package="tfbert")
class Dropout(keras.layers.Layer):
  """Inverted dropout with hashed 16-bit decisions (see the module docstring).

  Args:
    rate: Drop probability in [0, 1).
    seed: Optional seed of the layer's keys (`stream_seed`; by default drawn from Python's
      `random`, which `keras.utils.set_random_seed` seeds).
    **kwargs: Forwarded to `keras.layers.Layer`.
  """

  def __init__(self, rate: float, seed=None, **kwargs):
    super().__init__(**kwargs)
    if not 0.0 <= rate < 1.0:
      raise ValueError(f"{self.name}: dropout rate must be in [0, 1), got {rate!r}")
    self.rate = rate
    self.seed = seed
    # Keras' SeedGenerator(None) draws this same number (random.randint(1, 1e9)), so the
    # fallback generator's stream is unchanged; `keras.utils.set_random_seed` fixes it.
    self.stream_seed = seed if seed is not None else random.randint(1, int(1e9))
    self.seed_generator = keras.random.SeedGenerator(self.stream_seed)
    self.built = True

  @property
  def scale(self) -> float:
    """Factor of kept elements (`keep_scale(rate)`)."""
    return keep_scale(self.rate)

  def key(self, training=None) -> Optional[tf.Tensor]:
    """A fresh uint64 key of one call, or None when dropout is off (inference, rate 0).

    In a `step_keys` block: `step_key(stream_seed, step, replica, n-th call)`. Elsewhere:
    from the layer's seed generator, mixed with the replica id under several replicas.
    """
    if not training or keep_threshold(self.rate) == 0:
      return None
    keys = getattr(_CONTEXT, "keys", None)
    if keys is not None:
      return keys.key(self)
    key = call_key(self.seed_generator.next())
    replica = _replica_id()
    return key if replica is None else splitmix64(key, _as_u64(replica))

  def keep_mask(self, shape, training=None) -> Optional[tf.Tensor]:
    """A fresh bool keep-mask of `shape` (one XLA loop), or None when dropout is off.

    For fused kernels that apply the mask themselves (`tfbert.layers.fused`).
    """
    key = self.key(training)
    if key is None:
      return None
    return _compiled_keep_mask(key, tf.convert_to_tensor(shape, tf.int32),
                               tf.constant(keep_threshold(self.rate), tf.int32))

  def drop(self, x: tf.Tensor, training=None, dtype=None) -> tf.Tensor:
    """Dropout of x, without Keras' input autocast, output in `dtype` (default x's).

    For callers that hold float32 values to be dropped and rounded to a 16-bit compute
    dtype in one pass (the attention probabilities).
    """
    key = self.key(training)
    if key is None:
      return x if dtype is None else tf.cast(x, dtype)
    return drop(x, key, self.rate, dtype)

  def call(self, x: tf.Tensor, training=None) -> tf.Tensor:
    """Args: x: float Tensor of any shape. Returns: x with dropped elements zeroed."""
    return self.drop(x, training)

  def compute_output_shape(self, input_shape):
    return input_shape

  def get_config(self):
    return {**super().get_config(), "rate": self.rate, "seed": self.seed}
