"""Child processes forked from a server that has imported TensorFlow once: `Popen`, `run`.

Most of a tiny tool run's or worker's time in a fresh interpreter is the import of
TensorFlow, Keras and tfbert (about 5 s of CPU of a 19 s classifier run on an AMD Zen 4,
docs/testing.md). A test that needs a second process (a worker of a
`MultiWorkerMirroredStrategy` cluster, a run to SIGKILL or SIGTERM) needs a process, not
that import: `Popen` here forks the child from a server process (`multiprocessing`'s
forkserver, one per test process) that imported those modules and nothing else. The child
is a process of its own (its own pid, memory, signals, exit status; killed, it dies alone)
and then runs the command as `python` would: the script or `-m` module as `__main__`, its
argv, environment, working directory and output files.

What it shares with a fresh interpreter, and why the proofs keep their meaning:

* No TensorFlow runtime state: the server only imported modules; no op ran, no device, no
  thread pool or strategy existed before the fork (TensorFlow creates them at the first
  op, in the child, from the child's environment: `TF_NUM_INTRAOP_THREADS`, `TF_CONFIG`).
  A forked classifier run ended bit for bit equal to the same run in a fresh interpreter
  (tests/classifier/classifier_run_test.py compares one with the other).
* The tool's flags are defined and parsed in the child: the server imports no tool.
* What a fresh interpreter fixes at import is the server's: `TF_CPP_MIN_LOG_LEVEL`,
  `TF_ENABLE_ONEDNN_OPTS`, the Python path. A command whose environment differs from the
  server's in a variable read at import, or that runs anything but `python SCRIPT` /
  `python -m MODULE` / `python -c CODE`, gets a plain `subprocess.Popen`. Tests whose point
  is a fresh interpreter (its quiet start, an interpreter without tfbert, oneDNN off) use
  `subprocess` directly.

The server and its children belong to the test process: the server exits with it.
`TFBERT_TEST_FORK=0` turns forking off (every child a fresh interpreter), to compare.
"""

import atexit
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
import threading
import traceback

# Imported once by the server; every child starts with them loaded.
PRELOAD = ("tensorflow", "keras", "tensorflow_text", "tfbert", "tfbert.tasks.runner",
           "tfbert.pretraining.pretraining_run", "tfbert.classifier.classifier_run",
           "tfbert.tagging.tagging_run", "tfbert.embeddings.embedding_run",
           "tfbert.squad.squad_run", "tests.forked", "tests.forked_preload")

# Read when a Python or TensorFlow process starts: a child asking for other values than the
# server started with gets a fresh interpreter.
IMPORT_TIME_VARIABLES = ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS", "PYTHONPATH",
                         "PYTHONHASHSEED", "KERAS_BACKEND", "TF_USE_LEGACY_KERAS",
                         "CUDA_VISIBLE_DEVICES", "PYTHONWARNINGS")

# Set by tests/grappler.py for each test: "off" when the test runs its graphs without
# Grappler's rewrites, so that a forked child computes as the test's own runs do. A fresh
# interpreter runs the product's defaults (the rewrites on).
REWRITES_VARIABLE = "TFBERT_TEST_REWRITES"

_lock = threading.Lock()
_context = None
_server_env = None
_child_cpu = [0.0]  # CPU seconds of the forked children that exited (`child_cpu`).


def child_cpu() -> float:
  """CPU seconds (user + system) of every forked child that has exited so far: theirs is
  charged to the server, not to this process's `RUSAGE_CHILDREN` (tests/profiling.py adds
  this)."""
  return _child_cpu[0]


def _forkserver():
  """The test process's forkserver context, started with `PRELOAD` on first use."""
  global _context, _server_env
  with _lock:
    if _context is None:
      context = multiprocessing.get_context("forkserver")
      context.set_forkserver_preload(list(PRELOAD))
      _server_env = {name: os.environ.get(name) for name in IMPORT_TIME_VARIABLES}
      _context = context
    return _context


def _forkable(args, env) -> bool:
  """Whether `args` is `python SCRIPT|-m MODULE|-c CODE ...` with the server's import-time
  environment (and forking is on)."""
  if os.environ.get("TFBERT_TEST_FORK", "1") == "0":
    return False
  if not isinstance(args, (list, tuple)) or len(args) < 2 or args[0] != sys.executable:
    return False
  if args[1].startswith("-") and args[1] not in ("-m", "-c"):
    return False
  if args[1] in ("-m", "-c") and len(args) < 3:
    return False
  return not unforkable_variables(env)


def unforkable_variables(env=None) -> dict:
  """{name: (the server's value, `env`'s)} of the import-time variables in which `env`
  (default: this process's environment) differs from the server's: why a command that
  could be forked gets a fresh interpreter."""
  _forkserver()
  env = os.environ if env is None else env
  return {name: (_server_env[name], env.get(name)) for name in IMPORT_TIME_VARIABLES
          if env.get(name) != _server_env[name]}


def _open_output(target, default):
  """A path to write a stream to in the child (None: inherit `default`)."""
  if target is None:
    return default
  if target == subprocess.DEVNULL:
    return os.devnull
  return target


def _main(args, env, cwd, stdout_path, stderr_path, cpu_path):
  """In the child: runs `args` as `python` would, then exits with its status, having written
  its CPU seconds to `cpu_path`."""
  os.environ.clear()
  os.environ.update(env)
  if env.get(REWRITES_VARIABLE) == "off":  # The test's own setting (tests/grappler.py).
    import tensorflow as tf  # Preloaded: no import cost.
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
  if cwd is not None:
    os.chdir(cwd)
  null = os.open(os.devnull, os.O_RDONLY)
  os.dup2(null, 0)
  for fd, path in ((1, stdout_path), (2, stderr_path)):
    if path is not None:
      out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
      os.dup2(out, fd)
      os.close(out)
  sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own descriptor
  status = 0
  try:
    if args[1] == "-m":
      sys.argv = [args[2], *args[3:]]
      sys.path.insert(0, os.getcwd())
      runpy.run_module(args[2], run_name="__main__", alter_sys=True)
    elif args[1] == "-c":
      sys.argv = ["-c", *args[3:]]
      sys.path.insert(0, "")
      exec(compile(args[2], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
    else:
      sys.argv = list(args[1:])
      sys.path.insert(0, os.path.dirname(os.path.abspath(args[1])))
      runpy.run_path(args[1], run_name="__main__")
  except SystemExit as e:
    if e.code is None or isinstance(e.code, int):
      status = e.code or 0
    else:
      print(e.code, file=sys.stderr)
      status = 1
  except BaseException:  # noqa: BLE001 - as the interpreter: print the traceback, exit 1
    traceback.print_exc()
    status = 1
  try:
    atexit._run_exitfuncs()  # noqa: SLF001 - what the interpreter runs at exit
  finally:
    sys.stdout.flush()
    sys.stderr.flush()
    times = os.times()  # A forked child's start at zero.
    with open(cpu_path, "w", encoding="utf-8") as f:
      f.write(repr(times.user + times.system + times.children_user + times.children_system))
    os._exit(status)


class Popen:
  """A forked child with the part of `subprocess.Popen`'s interface the tests use.

  stdout / stderr: None (the test process's), `subprocess.DEVNULL`, `subprocess.PIPE`
  (collected into a temporary file and returned by `communicate`) or, for stderr,
  `subprocess.STDOUT`. Input is /dev/null.
  """

  def __init__(self, args, env=None, cwd=None, stdout=None, stderr=None, text=False):
    self.args = list(args)
    self.returncode = None
    self._text = text
    self._files = {}
    paths = {}
    for name, target in (("stdout", stdout), ("stderr", stderr)):
      if target == subprocess.PIPE:
        handle, path = tempfile.mkstemp(prefix=f"tfbert-forked-{name}-")
        os.close(handle)
        self._files[name] = path
        paths[name] = path
      elif target == subprocess.STDOUT and name == "stderr":
        paths[name] = paths["stdout"]
      else:
        paths[name] = _open_output(target, None)
    handle, self._cpu_path = tempfile.mkstemp(prefix="tfbert-forked-cpu-")
    os.close(handle)
    self._process = _forkserver().Process(
        target=_main, args=(self.args, dict(os.environ if env is None else env),
                            None if cwd is None else os.fspath(cwd), paths["stdout"],
                            paths["stderr"], self._cpu_path), daemon=False)
    self._process.start()
    self.pid = self._process.pid

  def poll(self):
    """The exit status, or None while it runs."""
    if self.returncode is None and not self._process.is_alive():
      self.returncode = self._process.exitcode
      self._count_cpu()
    return self.returncode

  def _count_cpu(self):
    """Adds the child's CPU seconds to `child_cpu` (none for a child killed by a signal)."""
    try:
      with open(self._cpu_path, encoding="utf-8") as f:
        text = f.read()
      os.remove(self._cpu_path)
    except OSError:
      return
    if text:
      _child_cpu[0] += float(text)

  def wait(self, timeout=None):
    """Waits for the exit; raises `subprocess.TimeoutExpired` after `timeout` seconds."""
    self._process.join(timeout)
    if self.poll() is None:
      raise subprocess.TimeoutExpired(self.args, timeout)
    return self.returncode

  def communicate(self, timeout=None):
    """Waits, then returns (stdout, stderr) of the streams given as PIPE (else None)."""
    self.wait(timeout)
    return tuple(self._read(name) for name in ("stdout", "stderr"))

  def _read(self, name):
    path = self._files.pop(name, None)
    if path is None:
      return None
    with open(path, "rb") as f:
      data = f.read()
    os.remove(path)
    return data.decode("utf-8", "replace") if self._text else data

  def send_signal(self, signal_number):
    if self.poll() is None:
      os.kill(self.pid, signal_number)

  def terminate(self):
    self.send_signal(15)

  def kill(self):
    self.send_signal(9)

  def __del__(self):
    for path in [*self._files.values(), getattr(self, "_cpu_path", None)]:
      if path is None:
        continue
      try:
        os.remove(path)
      except OSError:
        pass


def popen(args, **kwargs):
  """`Popen` (forked) where the command allows, else `subprocess.Popen`."""
  if _forkable(args, kwargs.get("env")) and set(kwargs) <= {"env", "cwd", "stdout", "stderr",
                                                             "text"}:
    return Popen(args, **kwargs)
  return subprocess.Popen(args, **kwargs)


def run(args, env=None, cwd=None, timeout=None, capture_output=False, text=False,
        check=False):
  """`subprocess.run` with the child forked where the command allows (`popen`)."""
  pipe = subprocess.PIPE if capture_output else None
  process = popen(args, env=env, cwd=cwd, stdout=pipe, stderr=pipe, text=text)
  try:
    out, err = process.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    process.kill()
    process.wait(timeout=60)
    raise
  result = subprocess.CompletedProcess(process.args, process.returncode, out, err)
  if check:
    result.check_returncode()
  return result
