"""Tests for tools.benchmarks.benchmark_peer: the Model Garden step runs and its losses are Model
Garden's."""

import dataclasses
import math

import numpy as np
import pytest
import tensorflow as tf

from tests.benchmarks import forked_benchmark
from tfbert_tools.benchmarks import benchmark, benchmark_peer

TINY_PEER = benchmark.StepCase(implementation="model_garden", hidden_size=16, num_layers=1,
                               num_heads=2, intermediate_size=19, vocab_size=53, seq_length=11,
                               max_predictions=3, batch_size=3, warmup_steps=1, windows=1,
                               steps_per_window=1)


def _cross_entropy(logits, labels):
  """NumPy sparse softmax cross-entropy per row: [..., C], [...] -> [...]."""
  shifted = logits - logits.max(-1, keepdims=True)
  log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
  return -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]


def test_pretraining_loss_is_weighted_mlm_mean_plus_mean_nsp():
  rng = np.random.default_rng(0)
  mlm_logits = rng.normal(size=(3, 2, 5)).astype(np.float32)   # [B, P, V]
  nsp_logits = rng.normal(size=(3, 2)).astype(np.float32)      # [B, 2]
  ids, labels = np.array([[1, 4], [0, 2], [3, 3]]), np.array([0, 1, 1])
  weights = np.array([[1, 0], [1, 1], [0.5, 0]], np.float32)  # 0 = padding position
  batch = {"masked_lm_ids": tf.constant(ids), "masked_lm_weights": tf.constant(weights),
           "next_sentence_labels": tf.constant(labels)}
  loss = benchmark_peer.pretraining_loss(batch, {"mlm_logits": tf.constant(mlm_logits),
                                                 "next_sentence": tf.constant(nsp_logits)})
  mlm = (_cross_entropy(mlm_logits, ids) * weights).sum() / weights.sum()
  assert float(loss) == pytest.approx(mlm + _cross_entropy(nsp_logits, labels).mean(), rel=1e-5)


def test_squad_loss_is_the_mean_of_start_and_end_losses():
  rng = np.random.default_rng(1)
  start, end = rng.normal(size=(2, 3, 7)).astype(np.float32)  # [B, S] each
  starts, ends = np.array([0, 2, 6]), np.array([1, 2, 6])
  loss = benchmark_peer.squad_loss(
      {"start_positions": tf.constant(starts), "end_positions": tf.constant(ends)},
      [tf.constant(start), tf.constant(end)])
  want = (_cross_entropy(start, starts).mean() + _cross_entropy(end, ends).mean()) / 2
  assert float(loss) == pytest.approx(want, rel=1e-5)


# Loss at init, B = 48 so that the batch means settle. MLM: the decoder is the embedding
# table (truncated normal, stddev 0.02) applied to a LayerNorm output, so logits have std
# <= sqrt(H) * 0.02 = 0.08 (measured 0.07): the loss exceeds ln V by ~std^2 / 2 = 0.003,
# +- 0.07 / sqrt(48 * 3) = 0.006. NSP: Model Garden's ClassificationHead is glorot-initialized
# (dense H x H, tanh, then H x 2), logits std ~0.5-0.7 at H = 16 (measured 0.48-0.66 over 4
# seeds), so the logit difference has std <= 1 and the NSP loss exceeds ln 2 by ~Var / 8
# <= 0.125, +- ~0.5 / sqrt(48) = 0.07. 0.35 covers that bias plus 3 standard deviations.
@pytest.mark.slow
def test_peer_pretraining_step_runs_with_xla_from_a_near_uniform_loss():
  case = dataclasses.replace(TINY_PEER, batch_size=48, jit_compile=True)
  result = benchmark_peer.run_step_case(case)
  assert np.isfinite(result["first_loss"]) and np.isfinite(result["last_loss"])
  assert result["first_loss"] == pytest.approx(math.log(53) + math.log(2), abs=0.35)
  assert result["flops_per_example"] == TINY_PEER.flops_per_example()


@pytest.mark.slow
def test_peer_squad_step_runs_in_its_own_process():
  """The one benchmark test whose child is a fresh interpreter, as `benchmark` starts it
  (`run_in_subprocess`: PYTHONPATH, working directory and the installed modules its code
  string imports); the others fork theirs (tests/benchmarks/forked_benchmark.py)."""
  case = dataclasses.replace(TINY_PEER, task="squad")
  result = benchmark.run_step_case_in_subprocess(case, timeout=300)
  assert result["case"] == dataclasses.asdict(case)
  assert np.isfinite(result["first_loss"]) and result["examples_per_second"] > 0
  assert result["peak_rss_mib"] > 0


def test_each_runner_refuses_the_other_implementation():
  with pytest.raises(ValueError, match="model_garden cases"):
    benchmark_peer.run_step_case(dataclasses.replace(TINY_PEER, implementation="tfbert"))
  with pytest.raises(ValueError, match="tfbert cases"):
    benchmark.run_step_case(TINY_PEER)


@pytest.mark.slow
def test_interleaved_rounds_time_both_steps_in_one_process(monkeypatch):
  forked_benchmark.fork_benchmark_processes(monkeypatch)  # One process of its own, forked.
  case = dataclasses.replace(TINY_PEER, implementation="tfbert", windows=3)
  result = benchmark.run_interleaved_in_subprocess(case, timeout=300)
  runs = result["runs"]
  # Three rounds, the order swapped every round.
  assert [r["case"]["implementation"] for r in runs] == [
      "tfbert", "model_garden", "model_garden", "tfbert", "tfbert", "model_garden"]
  rates = [{r["case"]["implementation"]: r["examples_per_second"] for r in runs[i:i + 2]}
           for i in range(0, 6, 2)]
  assert result["ratios"] == [r["tfbert"] / r["model_garden"] for r in rates]
  assert result["median_ratio"] == sorted(result["ratios"])[1]
  # Both start near the uniform loss ln V + ln 2 (see the test above for the bounds).
  for loss in result["first_losses"].values():
    assert loss == pytest.approx(math.log(53) + math.log(2), abs=0.5)
  assert result["peak_rss_mib"] > 0
