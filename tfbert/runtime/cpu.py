"""What CPU this is: its model name, the instruction sets that change BERT's kernels, oneDNN.

Numerics and speed differ between the CPU kinds tfbert runs on (docs/pitfalls.md, "CPU
kinds"): float16 kernels, bfloat16 matmul peaks, and whether TensorFlow uses oneDNN at all
(by default only on CPUs with AVX512). Precision checks name the CPU in their errors, exports
record it beside what they chose, and every benchmark row says where it ran.
"""

import functools

# The /proc/cpuinfo flags that select different matmul and conversion kernels.
RELEVANT_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                  "amx_bf16", "amx_tile")


@functools.lru_cache(maxsize=None)
def _cpuinfo() -> tuple[str, frozenset]:
  name, flags = "unknown CPU", frozenset()
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        key, _, value = line.partition(":")
        if key.strip() == "model name" and name == "unknown CPU":
          name = value.strip()
        elif key.strip() == "flags" and not flags:
          flags = frozenset(value.split())
  except OSError:
    pass
  return name, flags


def cpu_name() -> str:
  """The CPU's model name ("AMD EPYC", "Intel(R) Xeon(R) ..."; "unknown CPU" off Linux)."""
  return _cpuinfo()[0]


def isa_flags() -> tuple[str, ...]:
  """The `RELEVANT_FLAGS` this CPU has, in that order."""
  flags = _cpuinfo()[1]
  return tuple(flag for flag in RELEVANT_FLAGS if flag in flags)


def onednn_enabled() -> bool:
  """Whether this TensorFlow runs oneDNN's CPU kernels (its default only with AVX512)."""
  from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-direct-tensorflow-import

  return bool(_pywrap_util_port.IsMklEnabled())


def describe() -> str:
  """One line, e.g. "AMD EPYC (avx2 fma; oneDNN off)"."""
  flags = " ".join(isa_flags()) or "no AVX2"
  return f"{cpu_name()} ({flags}; oneDNN {'on' if onednn_enabled() else 'off'})"
