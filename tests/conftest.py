"""Shared pytest set-up: quiet TensorFlow, the shared-data and small-disk fixtures, float32
policy reset."""

import os
import uuid

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tests import faults  # noqa: E402
from tfbert.runtime import files  # noqa: E402

# The time profile of docs/testing.md, recorded when TFBERT_TEST_PROFILE names a folder;
# the longest tests first, dealt evenly to the xdist workers.
pytest_plugins = ["tests.profiling", "tests.scheduling"]

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
