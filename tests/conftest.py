"""Shared pytest set-up: quiet TensorFlow, the shared-data fixture, float32 policy reset."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture
def shared_data() -> str:
  """The `../shared/data` folder from TFBERT_SHARED_DATA, or a clear skip."""
  path = os.environ.get("TFBERT_SHARED_DATA")
  if not path:
    pytest.skip("TFBERT_SHARED_DATA is not set; point it at ../shared/data (.ci/run does)")
  if not os.path.isdir(path):
    pytest.skip(f"TFBERT_SHARED_DATA={path} is not a directory")
  return path


@pytest.fixture(autouse=True)
def _float32_policy():
  """Every test starts and ends with the float32 policy, whatever it set."""
  keras.mixed_precision.set_global_policy("float32")
  yield
  keras.mixed_precision.set_global_policy("float32")
