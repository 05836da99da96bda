"""Grappler's graph rewrites off in the test process, except for the tests of kernels.

Grappler (TensorFlow's graph optimizer) rewrites every `tf.function` graph when it is first
called: constant folding, arithmetic simplification, layout and dependency passes, the
remapper's fused kernels. For the tiny models of this suite the rewriting costs more than
it saves: a 2-layer H32 classifier run on two replicas took about 1 s less of its 4-5 s
with it off (AMD EPYC Zen 5, docs/testing.md), in every run, spread over the passes rather
than one of them.

The rewrites are TensorFlow's and preserve what a graph computes, up to float rounding where
a fused kernel adds in another order; tfbert's own logic (accumulation, resume, replicas,
workers, run directories, exports) computes the same with or without them. So the test
process runs its graphs unrewritten, and:

* a test whose subject is a kernel or a precision runs with Grappler on, as the product
  does (`GRAPPLER_PATHS`, `GRAPPLER_WORDS`, or `@pytest.mark.grappler`): the layers and
  their fused kernels, exports and serving, mixed precision (oneDNN's bfloat16 and float16
  kernels are chosen by the remapper), the demos (the README's recipe as users run it);
* `tests/grappler_test.py` proves a tiny run's loss curve and weights with the rewrites
  equal to those without, within float32 rounding, on this CPU;
* a process the test forks (`tests/forked.py`: killed runs, second workers) computes as the
  test does, with or without the rewrites; a fresh interpreter runs the product's defaults
  (the rewrites on), so a test that compares one with a run of its own or a fork is marked
  `@pytest.mark.grappler`.

`TFBERT_TEST_GRAPPLER=1` runs every test with Grappler on, to compare.
"""

import os

import pytest
import tensorflow as tf

from tests import forked

GRAPPLER_PATHS = ("tests/layers/", "tests/serving/", "tests/demos/", "tests/serving_",
                  "tests/numpy_reference_test.py", "tests/tasks/precision_test.py")
# In a test file's name: exports (a served request's error names its input after the
# rewrites have inlined the signature's function).
GRAPPLER_FILE_WORDS = ("export",)
GRAPPLER_WORDS = ("mixed", "float16", "precision", "dtype")
ALWAYS = os.environ.get("TFBERT_TEST_GRAPPLER") == "1"


def set_grappler(on: bool) -> None:
  """Turns Grappler's rewrites on or off for the functions this process instantiates next
  (the option is read when a function is first called, per configuration), and for the
  children it forks next (`tests.forked.REWRITES_VARIABLE`)."""
  tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": not on})
  os.environ[forked.REWRITES_VARIABLE] = "on" if on else "off"


def grappler_on() -> bool:
  return not tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer",
                                                                 False)


def wants_grappler(item) -> bool:
  """Whether the test `item` runs with Grappler on (see the module docstring)."""
  nodeid = item.nodeid
  path, _, name = nodeid.partition("::")
  return (ALWAYS or item.get_closest_marker("grappler") is not None
          or nodeid.startswith(GRAPPLER_PATHS)
          or any(w in os.path.basename(path) for w in GRAPPLER_FILE_WORDS)
          or any(w in name.lower() for w in GRAPPLER_WORDS))


def pytest_configure(config):
  config.addinivalue_line(
      "markers", "grappler: runs with TensorFlow's Grappler rewrites on, as the product does "
      "(tests/grappler.py): kernels, precisions, and comparisons with another process")
  set_grappler(ALWAYS)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
  """Before the test's fixtures: a module fixture's run is built as its tests run."""
  set_grappler(wants_grappler(item))
