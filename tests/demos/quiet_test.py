"""Tests for tools.demos.quiet: TF_CPP_MIN_LOG_LEVEL reaches TensorFlow's Abseil logging."""

import os
import subprocess
import sys

import pytest

from tests.demos import output_noise
from tfbert_tools.demos import quiet

# Freezing runs Grappler, which logs Abseil INFO lines ("Starting new session"); so does XLA
# at a process's first compilation ("Compiled cluster using XLA!").
_SCRIPT = """
import os, sys
import tensorflow as tf
from tensorflow.python.framework import convert_to_constants
from tfbert_tools.demos import quiet

def freeze():
  variable = tf.Variable(2.0)
  convert_to_constants.convert_variables_to_constants_v2(tf.function(
      lambda x: x * variable).get_concrete_function(tf.TensorSpec([None], tf.float32)))

freeze()
sys.stderr.flush()
os.write(2, b"-- quiet --\\n")
assert quiet.follow_tf_cpp_min_log_level()
freeze()
print(tf.function(lambda x: x + 1.0, jit_compile=True)(tf.constant(1.0)).numpy())
"""


@pytest.mark.slow  # A fresh process: Abseil's first line and XLA's first compile are per process.
def test_abseil_info_lines_stop_at_tf_cpp_min_log_level_2(tmp_path):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  run = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300, check=False)
  assert run.returncode == 0, run.stderr[-3000:]
  before, after = run.stderr.split("-- quiet --\n")
  # Without it, TF_CPP_MIN_LOG_LEVEL=2 leaves Abseil's lines: the test sees what it checks.
  assert any("Starting new session" in line for line in output_noise.noise(before)), before
  assert output_noise.noise(after) == [] and output_noise.noise(run.stdout) == []
  assert run.stdout.strip() == "2.0"


def test_nothing_to_follow_without_a_numeric_level(monkeypatch):
  monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
  assert not quiet.follow_tf_cpp_min_log_level()
  monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "quiet")
  assert not quiet.follow_tf_cpp_min_log_level()
  monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")  # The tests' own level (conftest.py).
  assert quiet.follow_tf_cpp_min_log_level()


def test_the_noise_check_flags_what_the_demo_printed_before_and_no_tfbert_line():
  printed = """\
create_pretraining_data: wrote 3952 instances from 79 documents to 2 shard(s) in /tmp/d
step  25/300 (8.3%) mlm_loss 8.3839 mlm_accuracy 0.0498 | 0.416 s/step, eta 1:54
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1795912771.181735   21617 device_compiler.h:196] Compiled cluster using XLA!
WARNING:tensorflow:Issue encountered when serializing table_initializer.
Type is unsupported, or the types of the items don't match field type in CollectionDef.
WARNING: Issue encountered when serializing table_initializer.
I0000 00:00:1795912806.576346   21617 single_machine.cc:376] Starting new session
WARNING: predicting with an untrained span_head: the source has none
2026-11-29 00:41:31.055818: E external/local_xla/xla/stream_executor/cuda/cuda_platform.cc:51] \
failed call to cuInit: INTERNAL: CUDA error
2026-11-29 00:39:20.076885: I tensorflow/core/util/port.cc:153] oneDNN custom operations are on.
INFO:tensorflow:Assets written to: /tmp/d/export/assets
before fine-tuning (pretrained encoder, fresh span head): EM 1.25 / F1 9.54
"""
  lines = printed.splitlines()
  assert output_noise.noise(printed) == [lines[i] for i in (2, 3, 4, 6, 7, 9, 10, 11)]
