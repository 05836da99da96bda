"""A run lets go of its traces: `with traces.released(): ...` around a whole run.

TensorFlow keeps two process-wide caches that hold every traced function of a run, and with
them the run's model, optimizer slots and graphs, for as long as the process lives:

- `tf.custom_gradient` in a traced function registers its gradient function under a new
  name ("CustomGradient-<n>") in TF's global gradient registry, never removed; the gradient
  function's closure holds tensors of the trace's graph. tfbert's layers use custom gradients
  (LayerNorm, GELU, fused attention pieces, dropout, the MLM loss), so every trace of a
  training step adds about 22 entries.
- `MirroredStrategy.run(fn)` with a `tf.function` `fn` caches a clone of `fn` per strategy in
  a weak-key dictionary whose value holds `fn` itself: neither key ever dies, and the
  strategy's mirrored variables keep the model alive.

A third keeps counts, not objects: `tf.function` warns "N out of the last M calls to <f>
triggered tf.function retracing" from counts kept per Python *code* object, shared by every
`tf.function` made from the same `def` (tfbert makes one prediction step per model, from
one `def`). Runs one after another in a process (a sweep, a notebook, the test suite) added
up their traces there, so a later run's first evaluations warned of retracing it did not
do. The counts a run started are dropped with it, and those of functions older than the
run (a module-level `tf.function`, such as the LayerNorm kernel, traced once per new shape)
are put back as they were: a run's traces of its own model are not counted against the
next run.

Measured (TF 2.20, a 1-layer H16 pretraining run of 6 steps, mirrored over 2 CPU devices):
each run left about 60 MB in the process, so a sweep or a notebook that trains repeatedly
grows without bound; with `released()` around each run the resident memory stays flat
(docs/testing.md). A run's functions are not reused after it (the run returns numbers and
files, not the model), so what it registered is dropped when it ends: the gradient
registrations made during the run and the strategies' call-for-each-replica clones made
during it. Gradients needed by a later trace are registered again by that trace.
"""

import contextlib
import weakref
from typing import Iterator

from tensorflow.python.distribute import mirrored_run
from tensorflow.python.eager.polymorphic_function import polymorphic_function
from tensorflow.python.framework import ops

CUSTOM_GRADIENT_PREFIX = "CustomGradient-"


def _custom_gradients() -> dict:
  """TF's registry of gradient functions by name (a private TF dict, read and trimmed)."""
  return ops.gradient_registry._registry  # pylint: disable=protected-access


def _tracing_counts():
  """TF's retracing counts by code object (a private TF weak-key dict, read and trimmed)."""
  return polymorphic_function._frequent_tracing_detector_manager  # pylint: disable=protected-access


@contextlib.contextmanager
def released() -> Iterator[None]:
  """Within: a run. After (also after an exception): the custom gradients registered, the
  strategies' per-function caches filled and the retracing counts started within are
  dropped, and the retracing counts of older functions restored."""
  registry = _custom_gradients()
  names_before = set(registry)
  counts = _tracing_counts()
  # pylint: disable=protected-access
  with counts._lock:  # The codes counted before the run, and their counts then.
    kept = weakref.WeakKeyDictionary(
        {code: (list(detector._calls_per_tracings), detector._call_count)
         for code, detector in counts._detectors.items()})
  cache = mirrored_run._cfer_fn_cache  # pylint: disable=protected-access
  # Weak sets: remembering what was there must not keep it alive either.
  before = weakref.WeakKeyDictionary(
      {strategy: weakref.WeakSet(functions.keys()) for strategy, functions in cache.items()})
  try:
    yield
  finally:
    with counts._lock:  # pylint: disable=protected-access
      detectors = counts._detectors  # pylint: disable=protected-access
      for code, detector in list(detectors.items()):
        if code not in kept:
          del detectors[code]
        else:
          detector._calls_per_tracings, detector._call_count = kept[code]
    for name in set(registry) - names_before:
      if name.startswith(CUSTOM_GRADIENT_PREFIX):
        del registry[name]
    for strategy in list(cache.keys()):
      if strategy not in before:
        del cache[strategy]
      else:
        functions = cache[strategy]
        for function in list(functions.keys()):
          if function not in before[strategy]:
            del functions[function]
