"""Shared pytest set-up: quiet TensorFlow, the shared-data and small-disk fixtures, float32
policy reset, traces released after each test."""

import ctypes
import ctypes.util
import gc
import os
import uuid

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# One core per xdist worker: with a worker per core, each TensorFlow's own pool of a thread
# per core made the two processes wait on each other's threads (docs/testing.md, "Waiting").
# Set before TensorFlow starts, and inherited by every process a test starts, so a run in
# the test's process and one in a subprocess compute alike.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) >= (os.cpu_count() or 1):
  os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")

import keras  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tests import faults, forked  # noqa: E402
from tfbert.runtime import files, traces  # noqa: E402
from tfbert.training import workers  # noqa: E402

# The time profile of docs/testing.md, recorded when TFBERT_TEST_PROFILE names a folder;
# the longest tests first, dealt evenly to the xdist workers; the tiny exports that several
# test files read, built once per session; Grappler's rewrites only where a test's subject
# is a kernel or a precision (tests/grappler.py).
pytest_plugins = ["tests.profiling", "tests.scheduling", "tests.tiny_exports", "tests.grappler"]

# Worker processes of a localhost cluster (the alignment harness's too) are forked from a
# process that imported TensorFlow once, not started as fresh interpreters (tests/forked.py).
workers.POPEN = forked.popen

# Python's cyclic garbage collector in a test process (docs/testing.md, "The collector"):
# the modules imported so far (TensorFlow, Keras, tfbert: millions of objects that live as
# long as the process) leave the collector's generations, and a young collection waits for
# 50,000 new container objects instead of 700. Tracing creates objects by the million, and
# with the defaults the collector took ~10% of a worker's CPU (10.4 s of 109 s for
# squad_run_test.py and models_test.py on the Zen 5; 5.3 s after). Only when to collect
# changes, not what: every cycle is still freed, and nothing a test computes reads it. The
# forked children of tests/forked.py inherit the same from their server
# (tests/forked_preload.py); a fresh interpreter keeps Python's defaults.
gc.freeze()
gc.set_threshold(50_000, 20, 10)

# Two logical CPU devices for the whole session, so MirroredStrategy tests run in-process.
# This must happen before TensorFlow initializes its devices, hence at conftest import.
NUM_LOGICAL_CPUS = 2
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS)


@pytest.fixture
def shared_data() -> str:
  """The `../shared/data` folder from TFBERT_SHARED_DATA, or a clear skip."""
  path = os.environ.get("TFBERT_SHARED_DATA")
  if not path:
    pytest.skip("TFBERT_SHARED_DATA is not set; point it at ../shared/data (.ci/run does)")
  if not os.path.isdir(path):
    pytest.skip(f"TFBERT_SHARED_DATA={path} is not a directory")
  return path


@pytest.fixture
def ram_root():
  """A fresh, existing directory on TensorFlow's in-memory `ram://` filesystem (a stand-in
  for a bucket; it lives in this process only), removed after the test."""
  root = f"ram://tfbert-test-{uuid.uuid4().hex}"
  files.makedirs(root)
  yield root
  files.rmtree(root)


@pytest.fixture
def small_disk(tmp_path):
  """A 64 KiB `tests.faults.LimitedDisk`: a small tmpfs where root may mount one, else a
  file-size limit."""
  with faults.limited_disk(tmp_path, 64 * 1024) as disk:
    yield disk


@pytest.fixture(autouse=True)
def _float32_policy():
  """Every test starts and ends with the float32 policy, whatever it set."""
  keras.mixed_precision.set_global_policy("float32")
  yield
  keras.mixed_precision.set_global_policy("float32")


@pytest.fixture(autouse=True)
def _released_traces():
  """What a test traced outside a run (a `TrainingLoop`, `fit`, a layer's gradient) dies with
  the test, as a run's does (`tfbert.runtime.traces`): the workers of the suite trace
  thousands of functions, and TF's caches kept them all (55-65 MB per training, docs/testing.md).
  Module and session fixtures are set up before this and keep theirs.

  A worker that grew by `TRIM_GROWTH_MB` since its last trim then hands its freed memory
  back to the system: glibc keeps what TensorFlow's threads freed in their arenas, and an
  export of MiniLM (whose frozen graphs peak at ~7 GB, docs/testing.md) left a worker at
  5.9 GB resident, 1.3 GB after a trim; two such workers with their peaks were what ran CI
  out of memory. Only on growth: a trim (with a collection) after every test of a worker
  above a fixed size cost 235 s of teardown in half a suite."""
  with traces.released():
    yield
  if _resident_mb() > _trimmed_at[0] + TRIM_GROWTH_MB:
    _LIBC.malloc_trim(0)
    _trimmed_at[0] = _resident_mb()


TRIM_GROWTH_MB = 1024
_trimmed_at = [1024.0]  # A worker's resident size after its imports: about 1 GB.
_LIBC = ctypes.CDLL(ctypes.util.find_library("c"))


def _resident_mb() -> float:
  """This process's resident memory (Linux: /proc/self/statm, in pages)."""
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
