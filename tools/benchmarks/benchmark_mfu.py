"""Model FLOP utilisation (MFU): analytic training FLOPs against this machine's matmul peak.

MFU (Chowdhery et al. 2022, "PaLM", appendix B) is the model's useful FLOPs per second over
the hardware's peak. The peak here is not a datasheet number but *measured*: the median
GFLOP/s of one large dense `tf.matmul` on this machine, in the dtype the case computes in
(float32 for "float32", bfloat16 for "mixed_bfloat16").

Training FLOPs per example are 3 x the forward matmul FLOPs (the backward pass computes the
gradients of both the inputs and the weights of every matmul: 2 x forward). A multiply-add
counts 2 FLOPs. Forward, with the legend below:

  encoder, per layer and token:   2 * (4H^2 + 2HI)   Q, K, V and output projections (4 of
                                                     H x H) and the feed-forward (H x I, I x H)
                                + 2 * 2 * S * H      scores Q K^T and the weighted sum of V
  MLM head, per masked position:  2 * H^2 + 2 * H * V  transform and tied-embedding decoder
  NSP, per example:               2 * H^2 + 2 * 2H     pooler and the 2-way classifier
  SQuAD span head, per token:     2 * 2H               start and end logits

so pretraining = 3 * (L * S * (2(4H^2 + 2HI) + 4SH) + P * (2H^2 + 2HV) + 2H^2 + 4H) and
SQuAD = 3 * (L * S * (2(4H^2 + 2HI) + 4SH) + 4SH). Not counted (no matmul, O(S * H) each):
embedding lookups, biases, LayerNorm, softmax, activations, dropout, the losses and the
optimizer update. The pooler of a SQuAD model (2H^2 per example, its output unused) is not
counted either; the same FLOPs are used for tfbert and its peer.

Shape legend: H hidden, I intermediate, L layers, S sequence, P masked positions,
V vocabulary.
"""

import time

import tensorflow as tf

TASKS = ("pretraining", "squad")
# Dtype policy -> dtype of its matmuls (the variables stay float32 under mixed precision).
MATMUL_DTYPES = {"float32": "float32", "mixed_bfloat16": "bfloat16"}


def forward_flops_per_example(task: str, *, hidden_size: int, num_layers: int,
                              intermediate_size: int, vocab_size: int, seq_length: int,
                              max_predictions: int) -> int:
  """Forward matmul FLOPs of one example (see the module docstring for the formula).

  Args:
    task: "pretraining" (MLM over `max_predictions` positions + NSP) or "squad" (span head).
    hidden_size, num_layers, intermediate_size, vocab_size: H, L, I, V.
    seq_length, max_predictions: S, P (P unused for "squad").

  Returns:
    int FLOPs.
  """
  h, i, s = hidden_size, intermediate_size, seq_length
  encoder = num_layers * s * (2 * (4 * h * h + 2 * h * i) + 2 * 2 * s * h)
  if task == "pretraining":
    return encoder + max_predictions * (2 * h * h + 2 * h * vocab_size) + 2 * h * h + 2 * 2 * h
  if task == "squad":
    return encoder + s * 2 * 2 * h
  raise ValueError(f"task must be one of {TASKS}, got {task!r}")


def training_flops_per_example(task: str, **sizes: int) -> int:
  """3 x `forward_flops_per_example(task, **sizes)`: forward plus a 2x backward pass."""
  return 3 * forward_flops_per_example(task, **sizes)


def matmul_dtype(dtype_policy: str) -> str:
  """The dtype whose matmul peak a case of `dtype_policy` is measured against."""
  if dtype_policy not in MATMUL_DTYPES:
    raise ValueError(f"dtype policy must be one of {tuple(MATMUL_DTYPES)}, got {dtype_policy!r}")
  return MATMUL_DTYPES[dtype_policy]


def measure_matmul_peak(dtype: str = "float32", size: int = 2048, warmup: int = 3,
                        repeats: int = 20) -> float:
  """Best GFLOP/s of a [size, size] x [size, size] `tf.matmul` in `dtype`, after warm-up.

  The best (fastest) of `repeats` calls, not the median: a peak is what the machine can
  reach, and on this 2-core VM the median of 10 calls varied by up to 2x between runs
  (bfloat16: 442 and 955 GFLOP/s an hour apart) while the best was steadier.

  The product is reduced to a scalar inside the `tf.function` and read back, so each call
  is synchronized; the reduction (size^2 additions) is ~1/size of the 2 * size^3 FLOPs
  counted and is left out of the count.

  Args:
    dtype: "float32" or "bfloat16".
    size: the matrices' side (2048: large enough for the machine's best kernel).
    warmup: unmeasured calls first (tracing, thread pools, caches).
    repeats: measured calls; the fastest is returned.

  Returns:
    float GFLOP/s, > 0.
  """
  a = tf.cast(tf.random.stateless_normal([size, size], seed=[1, 2]), dtype)
  b = tf.cast(tf.random.stateless_normal([size, size], seed=[3, 4]), dtype)

  @tf.function
  def product_sum(x, y):
    return tf.reduce_sum(tf.cast(tf.matmul(x, y), tf.float32))

  return 2.0 * size ** 3 / fastest_call(product_sum, (a, b), warmup, repeats) / 1e9


def fastest_call(fn, args: tuple, warmup: int, repeats: int) -> float:
  """Seconds of the fastest of `repeats` calls `float(fn(*args))`, after `warmup` calls."""
  for _ in range(warmup):
    float(fn(*args))
  seconds = []
  for _ in range(repeats):
    start = time.perf_counter()
    float(fn(*args))
    seconds.append(time.perf_counter() - start)
  return min(seconds)


def utilisation(examples_per_second: float, flops_per_example: float,
                peak_gflops: float) -> tuple[float, float]:
  """(achieved GFLOP/s, MFU as a fraction of `peak_gflops`)."""
  achieved = examples_per_second * flops_per_example / 1e9
  return achieved, achieved / peak_gflops
