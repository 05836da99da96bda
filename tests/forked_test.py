"""Tests for tests.forked: a forked child runs a command as a fresh `python` would."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests import forked
from tfbert.text import text_normalization

pytestmark = pytest.mark.slow  # The first test in a worker waits for the server's imports.

_REPORT = textwrap.dedent("""
    import json, os, sys
    import tensorflow as tf
    print(json.dumps({
        "argv": sys.argv, "cwd": os.getcwd(), "marker": os.environ.get("FORKED_MARKER"),
        "tf_config": "TF_CONFIG" in os.environ,
        "devices": len(tf.config.list_logical_devices("CPU")),
        "tools": sorted(m for m in sys.modules if m.startswith("tfbert_tools")),
    }))
    print("to stderr", file=sys.stderr)
    sys.exit(int(sys.argv[1]))
""")


def test_a_child_runs_the_command_with_its_argv_environment_and_directory(tmp_path):
  """Its own argv, environment (nothing else: the test process's TF_CONFIG-free env is
  replaced, not merged) and working directory; stdout and stderr apart; its exit status.
  TensorFlow in it is fresh: one logical CPU, not the two this test process configured
  (tests/conftest.py), so it is not a copy of this process; no tool is loaded."""
  env = {**os.environ, "FORKED_MARKER": "m1"}
  result = forked.run([sys.executable, "-c", _REPORT, "3", "x y"], env=env, cwd=tmp_path,
                      capture_output=True, text=True, timeout=120)
  assert result.returncode == 3, result.stderr
  report = json.loads(result.stdout.strip().splitlines()[-1])
  assert report == {"argv": ["-c", "3", "x y"], "cwd": str(tmp_path), "marker": "m1",
                    "tf_config": False, "devices": 1, "tools": []}
  assert result.stderr.strip().endswith("to stderr")


def test_a_child_starts_with_the_tokenizer_tables_the_server_computed():
  """`tests.forked_preload`: the per-character tables are in the child's caches before it
  asks (a fresh process has none), and they are the tables a fresh computation gives."""
  code = textwrap.dedent("""
      import hashlib
      from tfbert.text import text_normalization as t
      print(t.normalization_table.cache_info().currsize, t.final_sigma_regex.cache_info().currsize)
      tables = (t.normalization_table(True), t.normalization_table(False), t.final_sigma_regex())
      print(len(tables[0][0]), hashlib.sha256(repr(tables).encode()).hexdigest())
  """)
  child = forked.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert child.returncode == 0, child.stderr
  cached = child.stdout.splitlines()
  assert cached[0] == "2 1"
  assert int(cached[1].split()[0]) > 90_000  # Uncased: every upper-case letter, CJK, ...
  # The same tables computed here, by the functions themselves, not read from any cache.
  computed = (text_normalization.normalization_table.__wrapped__(True),
              text_normalization.normalization_table.__wrapped__(False),
              text_normalization.final_sigma_regex.__wrapped__())
  assert cached[1].split()[1] == hashlib.sha256(repr(computed).encode()).hexdigest()


def test_a_script_runs_as_main_with_its_directory_on_the_path(tmp_path):
  (tmp_path / "helper_module_for_forked.py").write_text("VALUE = 7\n", encoding="utf-8")
  script = tmp_path / "script.py"
  script.write_text("import sys, helper_module_for_forked as h\n"
                    "print(__name__, h.VALUE, sys.argv[1:])\n", encoding="utf-8")
  result = forked.run([sys.executable, str(script), "a"], capture_output=True, text=True,
                      timeout=120)
  assert (result.returncode, result.stdout.strip()) == (0, "__main__ 7 ['a']"), result.stderr


def test_a_killed_child_reports_the_signal_and_a_timeout_is_raised():
  process = forked.popen([sys.executable, "-c", "import time; time.sleep(60)"])
  assert isinstance(process, forked.Popen), forked.unforkable_variables()
  with pytest.raises(subprocess.TimeoutExpired):
    process.wait(timeout=0.2)
  process.send_signal(signal.SIGKILL)
  assert process.wait(timeout=60) == -signal.SIGKILL


def test_an_uncaught_exception_prints_its_traceback_and_exits_1():
  result = forked.run([sys.executable, "-c", "raise KeyError('boom')"], capture_output=True,
                      text=True, timeout=120)
  assert result.returncode == 1
  assert "Traceback" in result.stderr and "KeyError: 'boom'" in result.stderr

# A float32 forward and backward pass of attention-like ops with dropout, on oneDNN's kernels
# where TensorFlow uses them, and the settings that decide those kernels and their threads.
_COMPUTE = textwrap.dedent("""
    import hashlib, json, os
    import tensorflow as tf
    x = tf.random.stateless_normal([37, 64], seed=[1, 2])
    w = tf.Variable(tf.random.stateless_normal([64, 64], seed=[3, 4]))
    with tf.GradientTape() as tape:
      h = tf.nn.gelu(tf.matmul(x, w))
      a = tf.nn.softmax(tf.einsum("ik,jk->ij", h, h) / 8.0)
      keep = tf.random.stateless_uniform(a.shape, seed=[5, 6]) >= 0.1
      y = tf.reduce_sum(tf.where(keep, a / 0.9, 0.0) @ h)
    grad = tape.gradient(y, w)
    digest = hashlib.sha256(h.numpy().tobytes() + a.numpy().tobytes() + grad.numpy().tobytes())
    print(json.dumps({
        "digest": digest.hexdigest(),
        "env": {k: v for k, v in sorted(os.environ.items())
                if k.startswith(("TF_", "OMP_", "KMP_", "MKL", "ONEDNN", "DNNL"))},
        "intra": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter": tf.config.threading.get_inter_op_parallelism_threads(),
        "devices": len(tf.config.list_logical_devices("CPU")),
    }))
""")


def test_a_child_computes_bit_for_bit_what_a_fresh_interpreter_computes():
  """The suite compares runs of forked children with each other and with runs in the test's
  process, bit for bit: a child must compute as a fresh `python` would. The same float32
  matmul, GELU, softmax, dropout and gradient in a fresh interpreter and in a child give the
  same bytes, under the same TensorFlow settings and environment (a variable left set by a
  library, as tf2onnx once did, differs here)."""
  command = [sys.executable, "-c", _COMPUTE]
  fresh = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
  child = forked.run(command, capture_output=True, text=True, timeout=300)
  assert fresh.returncode == 0 and child.returncode == 0, (fresh.stderr[-2000:],
                                                            child.stderr[-2000:])
  assert json.loads(child.stdout) == json.loads(fresh.stdout)


def _other(name):
  """A value of the variable `name` other than this process's."""
  return "1" if os.environ.get(name) == "0" else "0"


@pytest.mark.parametrize("args, variable", [
    (["/bin/echo", "x"], None),  # Not this interpreter.
    ([sys.executable, "-X", "importtime", "-c", "pass"], None),  # Interpreter options.
    ([sys.executable, "-c", "pass"], "TF_CPP_MIN_LOG_LEVEL"),  # Read at import.
    ([sys.executable, "-c", "pass"], "TF_ENABLE_ONEDNN_OPTS"),
])
def test_what_a_fork_cannot_give_gets_a_fresh_process(args, variable):
  env = None if variable is None else {**os.environ, variable: _other(variable)}
  process = forked.popen(args, env=env, stdout=subprocess.DEVNULL)
  assert isinstance(process, subprocess.Popen)
  assert process.wait(timeout=120) == 0
