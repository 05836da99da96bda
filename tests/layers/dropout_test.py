"""Tests for tfbert.layers.dropout."""

import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tfbert.layers import dropout
from tfbert.training import workers


def test_keep_threshold_and_scale_for_berts_rate():
  # round(0.1 * 65536) = round(6553.6) = 6554, drop probability 6554 / 65536 = 0.100006.
  assert dropout.keep_threshold(0.1) == 6554
  assert dropout.keep_threshold(0.0) == 0
  assert dropout.keep_scale(0.1) == 65536 / (65536 - 6554)


# SplitMix64's published outputs: seed 1234567 (Rosetta Code, "Pseudo-random
# numbers/Splitmix64", from Vigna's splitmix64.c) and the first output for seed 0.
_SEED_1234567 = [6457827717110365317, 3203168211198807973, 9817491932198370423,
                 4593380528125082431, 16408922859458223821]
_SEED_0_FIRST = 0xE220A8397B1DCDAF


@pytest.mark.parametrize("compiled", [False, True])
def test_splitmix64_reproduces_the_published_outputs(compiled):
  fn = tf.function(dropout.splitmix64, jit_compile=True) if compiled else dropout.splitmix64
  got = fn(tf.constant(1234567, tf.uint64), tf.constant(range(5), tf.uint64)).numpy()
  assert [int(v) for v in got] == _SEED_1234567
  assert int(fn(tf.constant(0, tf.uint64), tf.constant(0, tf.uint64))) == _SEED_0_FIRST


def _numpy_keep_mask(key: int, shape, threshold: int) -> np.ndarray:
  """An independent NumPy SplitMix64 (uint64 arithmetic wraps): top 16 bits >= threshold."""
  with np.errstate(over="ignore"):
    z = np.uint64(key) + (np.arange(np.prod(shape), dtype=np.uint64) + np.uint64(1)) * \
        np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
  return ((z >> np.uint64(48)) >= threshold).reshape(shape)


def test_keep_mask_is_splitmix64_of_the_row_major_index():
  key = 0xFEDCBA9876543210
  want = _numpy_keep_mask(key, (7, 11, 13), 6554)
  assert _numpy_keep_mask(1234567, (5,), 0).all()
  # The NumPy reference itself reproduces the published outputs' top 16 bits.
  for i, value in enumerate(_SEED_1234567):
    top = value >> 48
    assert _numpy_keep_mask(1234567, (5,), top)[i] and not _numpy_keep_mask(
        1234567, (5,), top + 1)[i]
  got = dropout.keep_mask(tf.constant(key, tf.uint64), [7, 11, 13], 6554)
  np.testing.assert_array_equal(got.numpy(), want)
  compiled = tf.function(dropout.keep_mask, jit_compile=True)
  np.testing.assert_array_equal(
      compiled(tf.constant(key, tf.uint64), tf.constant([7, 11, 13]), tf.constant(6554)), want)


def test_inference_and_rate_zero_are_the_identity():
  x = tf.random.normal([3, 5, 7])
  assert dropout.Dropout(0.1)(x, training=False) is x
  np.testing.assert_array_equal(dropout.Dropout(0.0)(x, training=True), x)


def test_drop_rate_and_scale_over_many_elements():
  layer = dropout.Dropout(0.1, seed=3)
  x = tf.ones([251, 397])  # 99,647 elements, odd sizes.
  y = layer(x, training=True).numpy()
  kept_value = 65536 / (65536 - 6554)
  assert set(np.unique(y)) == {0.0, np.float32(kept_value)}
  dropped = float(np.mean(y == 0.0))
  # Binomial(99647, 0.100006): standard deviation sqrt(p (1 - p) / n) = 9.5e-4; 5 sigma.
  assert abs(dropped - 0.100006) < 5 * 9.5e-4
  # The mean of the output is 1 in expectation; its standard deviation is
  # kept_value * 9.5e-4 = 1.06e-3, and 5 sigma bounds it.
  assert abs(float(y.mean()) - 1.0) < 5 * 1.06e-3


@pytest.mark.parametrize("offset", [1, 2, 128, 397])
def test_decisions_of_nearby_elements_are_independent(offset):
  """Elements `offset` apart (neighbours, rows of a [*, 128] or [*, 397] tensor) must not
  share decisions: a shared decision would give P(both dropped) = 0.1, not 0.01."""
  y = dropout.Dropout(0.1, seed=5)(tf.ones([200000 + offset]), training=True).numpy()
  dropped = y == 0.0
  both = float(np.mean(dropped[:-offset] & dropped[offset:]))
  # 200,000 pairs, p = 0.1000061^2 = 0.0100012, sd sqrt(p (1 - p) / 2e5) = 2.2e-4; 5 sigma.
  assert abs(both - 0.0100012) < 5 * 2.2e-4


def test_consecutive_calls_and_layers_decide_independently():
  """Calls whose keys come from consecutive seed-generator counters, and two layers."""
  x = tf.ones([100003])
  a, b = dropout.Dropout(0.1, seed=8), dropout.Dropout(0.1, seed=9)
  masks = [a(x, training=True).numpy() == 0.0, a(x, training=True).numpy() == 0.0,
           b(x, training=True).numpy() == 0.0]
  for i, j in ((0, 1), (0, 2), (1, 2)):
    both = float(np.mean(masks[i] & masks[j]))
    # 100,003 elements, p = 0.0100012, sd sqrt(p (1 - p) / 1e5) = 3.1e-4; 5 sigma.
    assert abs(both - 0.0100012) < 5 * 3.1e-4


def test_sixteen_bit_values_are_uniform():
  """Drop rates at thresholds across the 16-bit range: P(top16 < t) = t / 65536."""
  key = tf.constant(77, tf.uint64)
  n = 200003
  for threshold in (1, 655, 6554, 32768, 58982, 65535):
    dropped = 1.0 - float(tf.reduce_mean(tf.cast(dropout.keep_mask(key, [n], threshold),
                                                 tf.float64)))
    p = threshold / 65536
    # Binomial(n, p): 5 sigma, plus 1 / n for the smallest threshold (p n = 3).
    assert abs(dropped - p) < 5 * np.sqrt(p * (1 - p) / n) + 1 / n, threshold


def test_gradient_is_the_same_mask_times_the_scale():
  layer = dropout.Dropout(0.3, seed=7)
  x = tf.Variable(tf.random.normal([13, 17]))
  with tf.GradientTape() as tape:
    y = layer(x, training=True)
    loss = tf.reduce_sum(y * 2.0)
  grad = tape.gradient(loss, x).numpy()
  mask = y.numpy() != 0.0  # x is never exactly 0 here
  scale = 65536 / (65536 - dropout.keep_threshold(0.3))
  np.testing.assert_allclose(grad, np.where(mask, 2.0 * scale, 0.0), rtol=1e-6)


def test_new_masks_each_call_and_repeatable_under_a_global_seed():
  def two_calls():
    keras.utils.set_random_seed(11)
    layer = dropout.Dropout(0.5)
    x = tf.ones([64])
    return layer(x, training=True).numpy(), layer(x, training=True).numpy()

  first, second = two_calls()
  assert not np.array_equal(first, second)
  again = two_calls()
  np.testing.assert_array_equal(first, again[0])
  np.testing.assert_array_equal(second, again[1])


def test_bfloat16_keeps_its_dtype_and_bad_rates_are_named():
  y = dropout.Dropout(0.1, dtype="mixed_bfloat16")(tf.ones([9], tf.bfloat16), training=True)
  assert y.dtype == tf.bfloat16
  with pytest.raises(ValueError, match="dropout rate must be in"):
    dropout.Dropout(1.0, name="attention_dropout")


def test_drop_to_bfloat16_rounds_the_float32_product_once():
  """`drop(x, key, rate, bfloat16)` = bfloat16(where(mask, x * scale, 0)), scale exact."""
  x = tf.random.stateless_uniform([17, 29], [3, 4])
  key = tf.constant(99, tf.uint64)
  mask = dropout.keep_mask(key, [17, 29], dropout.keep_threshold(0.1))
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = dropout.drop(x, key, 0.1, tf.bfloat16)
    loss = tf.reduce_sum(tf.cast(y, tf.float32) * 3.0)
  assert y.dtype == tf.bfloat16
  scale = 65536 / (65536 - 6554)
  want = tf.cast(tf.where(mask, x * scale, 0.0), tf.bfloat16)
  np.testing.assert_array_equal(tf.cast(y, tf.float32), tf.cast(want, tf.float32))
  # The gradient reaches x in float32 through the same mask: 3 * scale rounded once.
  grad = tape.gradient(loss, x)
  assert grad.dtype == tf.float32
  want_grad = tf.where(mask, float(tf.cast(tf.cast(3.0, tf.bfloat16), tf.float32)) * scale,
                       0.0)
  np.testing.assert_allclose(grad, want_grad, rtol=2 ** -8)


def test_drop_without_a_key_is_the_identity_or_a_cast():
  x = tf.ones([5])
  layer = dropout.Dropout(0.1)
  assert layer.drop(x, training=False) is x
  assert layer.drop(x, training=False, dtype=tf.bfloat16).dtype == tf.bfloat16




def test_get_config_round_trips():
  layer = dropout.Dropout(0.2, seed=4, name="d")
  again = dropout.Dropout.from_config(layer.get_config())
  assert (again.rate, again.seed, again.name) == (0.2, 4, "d")


def test_keep_mask_is_the_mask_the_layer_applies():
  """`Dropout.keep_mask` (for fused kernels) draws what `call` applies on the same call."""
  x = tf.ones([13, 7, 5])
  applied = dropout.Dropout(0.2, seed=3)(x, training=True).numpy() != 0.0
  mask = dropout.Dropout(0.2, seed=3).keep_mask(tf.shape(x), training=True)
  assert mask.dtype == tf.bool
  np.testing.assert_array_equal(mask, applied)
  assert 0 < np.count_nonzero(~applied) < applied.size
  assert dropout.Dropout(0.2, seed=3).keep_mask([4], training=False) is None
  assert dropout.Dropout(0.0).keep_mask([4], training=True) is None


def _splitmix64(key: int, index: int) -> int:
  """SplitMix64 output number index + 1 for seed `key`, in Python integers (mod 2^64)."""
  z = (key + (index + 1) * 0x9E3779B97F4A7C15) % 2 ** 64
  z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2 ** 64
  z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2 ** 64
  return z ^ (z >> 31)


def _step_key(seed: int, step: int, replica: int, call: int) -> int:
  return _splitmix64(_splitmix64(step, replica), _splitmix64(seed, call))


def test_step_key_is_splitmix64_of_step_replica_and_of_seed_call():
  got = dropout.step_key(123456789, tf.constant(41, tf.int64), tf.constant(1, tf.int32), 2)
  assert got.dtype == tf.uint64 and int(got) == _step_key(123456789, 41, 1, 2)
  assert int(dropout.step_key(7, 0, 0)) == _step_key(7, 0, 0, 0)


N = 997  # Elements of the masks below.


def _masks_in_a_step(layer, step, replica=None, calls=1):
  with dropout.step_keys(tf.constant(step, tf.int64), replica):
    return [layer(tf.ones([N]), training=True).numpy() != 0.0 for _ in range(calls)]


def test_masks_in_a_step_are_a_function_of_seed_step_replica_and_call():
  """What a resumed run relies on: no state, only (layer seed, step, replica, call)."""
  layer = dropout.Dropout(0.1, seed=21)
  first, second = _masks_in_a_step(layer, 5, calls=2)
  np.testing.assert_array_equal(first, _numpy_keep_mask(_step_key(21, 5, 0, 0), [N], 6554))
  np.testing.assert_array_equal(second, _numpy_keep_mask(_step_key(21, 5, 0, 1), [N], 6554))
  layer(tf.ones([N]), training=True)  # Advances the seed generator: no effect in a step.
  np.testing.assert_array_equal(_masks_in_a_step(layer, 5)[0], first)
  # A new layer of the same seed (a restored run) draws the same mask at the same step.
  np.testing.assert_array_equal(_masks_in_a_step(dropout.Dropout(0.1, seed=21), 5)[0], first)
  for other in (_masks_in_a_step(layer, 6)[0], _masks_in_a_step(layer, 5, replica=1)[0],
                _masks_in_a_step(dropout.Dropout(0.1, seed=22), 5)[0], second):
    assert np.count_nonzero(other != first) > 50  # Independent masks differ in ~18% of 997.


def test_unseeded_layers_take_their_seed_from_the_global_seed():
  keras.utils.set_random_seed(5)
  seeds = [dropout.Dropout(0.1).stream_seed for _ in range(2)]
  keras.utils.set_random_seed(5)
  assert [dropout.Dropout(0.1).stream_seed for _ in range(2)] == seeds and seeds[0] != seeds[1]


def _per_replica_masks(strategy, layer, step=None):
  x = tf.ones([N])

  def replica_fn():
    if step is None:  # Outside a training step: the seed generator (Keras' own `fit`).
      return layer(x, training=True)
    with dropout.step_keys(tf.constant(step, tf.int64)):
      return layer(x, training=True)

  outputs = tf.function(lambda: strategy.run(replica_fn))()
  return [v.numpy() != 0.0 for v in strategy.experimental_local_results(outputs)]


@pytest.mark.parametrize("in_a_step", [True, False])
def test_replicas_draw_different_masks(in_a_step):
  """A mirrored seed-generator state gave every replica the same key, hence the same mask."""
  strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  with strategy.scope():
    layer = dropout.Dropout(0.1, seed=13)
  masks = _per_replica_masks(strategy, layer, 7 if in_a_step else None)
  assert np.count_nonzero(masks[0] != masks[1]) > 50
  if in_a_step:  # Replica r's masks are those of (seed, step, r), wherever r runs.
    for r, mask in enumerate(masks):
      np.testing.assert_array_equal(mask, _masks_in_a_step(dropout.Dropout(0.1, seed=13), 7, r)[0])


_WORKER = """
import json, os, sys
import numpy as np, tensorflow as tf
from tfbert.layers import dropout
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
  layer = dropout.Dropout(0.1, seed=13)
def replica_fn(step):
  if step is None:
    return layer(tf.ones([%d]), training=True)
  with dropout.step_keys(tf.constant(step, tf.int64)):
    return layer(tf.ones([%d]), training=True)
masks = [strategy.experimental_local_results(
    tf.function(lambda: strategy.run(replica_fn, args=(s,)))())[0].numpy() != 0 for s in (7, None)]
index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
np.save(f"{sys.argv[1]}.{index}.npy", np.stack(masks))
""" % (N, N)


@pytest.mark.slow
def test_a_replicas_masks_do_not_depend_on_the_process_layout(tmp_path):
  """Replica r of 2 worker processes x 1 replica draws replica r's masks of 1 process x 2."""
  root = helpers.ROOT
  results = workers.launch_workers([sys.executable, "-c", _WORKER, str(tmp_path / "masks")],
                                   cwd=root, timeout=300)
  assert all(r.returncode == 0 for r in results), [r.stdout[-2000:] for r in results]
  strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  with strategy.scope():
    layer = dropout.Dropout(0.1, seed=13)
  in_a_step = _per_replica_masks(strategy, layer, 7)
  fallback = _per_replica_masks(strategy, layer)  # The generator's first call, as there.
  for r in range(2):
    got = np.load(tmp_path / f"masks.{r}.npy")
    np.testing.assert_array_equal(got[0], in_a_step[r])
    np.testing.assert_array_equal(got[1], fallback[r])
