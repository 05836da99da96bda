"""Tests for tfbert.runtime.traces: what a run traced dies with it.

Each test shows TF's own cache holding the object first (so the test fails if `released`
stops trimming it), then that `released` lets it go; `weakref`s tell whether an object lives.
"""

import gc
import weakref

import pytest
import tensorflow as tf

from tfbert.runtime import traces
from tfbert.training import distribution


@tf.custom_gradient
def _doubled_gradient(x):
  return tf.identity(x), lambda dy: 2.0 * dy


class _Holder:
  """Stands for a model: something a traced function's closure keeps."""

  def __init__(self):
    self.scale = tf.constant(3.0)


def _trace_a_custom_gradient(holder):
  """Traces a function whose gradient is custom; returns a weakref to its function."""

  @tf.function
  def gradient(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = _doubled_gradient(x * holder.scale)
    return tape.gradient(y, x)

  assert float(gradient(tf.constant(1.0))) == 6.0  # 2 x 3: the custom gradient was used.
  return weakref.ref(gradient)


def _custom_gradient_names():
  return {n for n in traces._custom_gradients() if n.startswith(traces.CUSTOM_GRADIENT_PREFIX)}


def test_custom_gradients_registered_within_are_dropped_and_their_trace_dies():
  before = _custom_gradient_names()
  held = _trace_a_custom_gradient(_Holder())  # Outside: TF keeps the registration.
  kept = _custom_gradient_names() - before
  assert kept  # TF registered one gradient name for the trace, and keeps it.
  with traces.released():
    holder = _Holder()
    alive = weakref.ref(holder)
    _trace_a_custom_gradient(holder)
    assert len(_custom_gradient_names() - before - kept) == 1
    del holder
  gc.collect()
  assert _custom_gradient_names() - before == kept  # Only the outside one is left.
  assert alive() is None  # The trace, its closure and its holder are gone.
  del held


def test_a_strategys_function_clones_made_within_are_dropped_with_the_model():
  distribution.configure_cpu_devices(2)
  cache = traces.mirrored_run._cfer_fn_cache  # pylint: disable=protected-access

  def train_once(strategy):
    holder = _Holder()

    @tf.function
    def replica_step():
      return holder.scale * 2.0

    @tf.function
    def step():
      return strategy.run(replica_step)

    step()
    return weakref.ref(holder)

  outside = distribution.create_strategy("mirrored", 2)
  alive = train_once(outside)
  gc.collect()
  assert outside in cache and alive() is not None  # TF's cache keeps the clone and closure.
  with traces.released():
    kept_alive = train_once(outside)  # A strategy from before: only the new clone goes.
    inside = distribution.create_strategy("mirrored", 2)
    inside_alive = train_once(inside)
  gc.collect()
  assert kept_alive() is None and inside_alive() is None
  assert alive() is not None  # What was cached before `released` is not its business.
  assert len(cache[outside]) == 1


def test_what_a_failing_run_traced_is_dropped_too():
  before = _custom_gradient_names()
  with pytest.raises(RuntimeError, match="stopped"):
    with traces.released():
      _trace_a_custom_gradient(_Holder())
      raise RuntimeError("stopped")
  assert _custom_gradient_names() == before


def _make_step():
  """A new `tf.function` from the same `def` at each call, as tfbert's prediction step is
  made once per model: TF counts their traces together (by code object)."""

  @tf.function
  def step(x):
    return x + 1.0

  return step


def _retracing_warnings(caplog, runs, traces_per_run):
  """The retracing warnings of `runs` runs, each tracing `traces_per_run` new steps."""
  caplog.clear()
  for _ in range(runs):
    with traces.released():
      for _ in range(traces_per_run):
        _make_step()(tf.constant(1.0))
  return [r for r in caplog.records if "triggered tf.function retracing" in r.getMessage()]


def test_retracing_counts_started_within_are_dropped(caplog):
  """Runs in turn in one process (a sweep, the suite) added up the traces of their one-per-
  model steps, and a later run's evaluations were told of retracing they did not do."""
  caplog.set_level("WARNING", logger="tensorflow")
  code = _make_step.__code__.co_consts  # Only the inner def's code object is counted.
  counts = traces._tracing_counts()._detectors
  with traces.released():
    _make_step()(tf.constant(1.0))
    assert any(c in counts for c in code)
  assert not any(c in counts for c in code)
  assert _retracing_warnings(caplog, runs=3, traces_per_run=4) == []
  # The same 12 traces in one run: TF's warning, which the counts dropped above prevented.
  assert _retracing_warnings(caplog, runs=1, traces_per_run=12)


def _scaled(x):
  return x * 2.0


_SHARED = tf.function(_scaled, autograph=False)  # Module-level: older than every run.


def test_the_retracing_counts_of_a_function_older_than_the_run_are_restored(caplog):
  """The fresh clone of 34fd2b5: the SQuAD demo was warned "5 out of the last 16 calls to
  normalize_forward triggered tf.function retracing": the LayerNorm kernel is one
  module-level `tf.function`, traced once per new shape, and the runs before it in the
  worker had added up their traces of their own models' shapes."""
  caplog.set_level("WARNING", logger="tensorflow")
  _SHARED(tf.zeros([1]))  # Its counts begin before any run.
  for run in range(3):  # Each run traces it for 3 shapes of its own: 9 traces in all.
    with traces.released():
      for size in range(3):
        _SHARED(tf.zeros([2 + 3 * run + size]))
  assert [r for r in caplog.records if "triggered tf.function retracing" in r.getMessage()] == []
  detector = traces._tracing_counts()._detectors[_scaled.__code__]
  assert (detector._calls_per_tracings, detector._call_count) == ([1], 1)  # As before the runs.
