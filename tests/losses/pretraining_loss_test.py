"""Tests for tfbert.losses.pretraining_loss and BertPretrainer.train_step: exact normalization.

2 replicas x 2 micro-steps x 4 sequences must equal one device with the 16 sequences, with
micro-batches whose masked-token counts differ (a mean of per-micro-batch means would not),
for both objectives (MLM + NSP, and MLM alone).
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import helpers, numpy_reference, training_loop
from tfbert import BertPretrainer
from tfbert.losses.pretraining_loss import pretraining_losses, sparse_cross_entropy
from tfbert.training import optimization

CONFIG = helpers.odd_config(num_hidden_layers=1, initializer_range=0.02)
SEQ, P = 7, 3


def pretraining_batch(n, seed, objective="mlm_nsp"):
  """Features with labels; masked-token weights vary per example (1 to 3 real predictions).
  For the objective "mlm" without `next_sentence_labels` (the model must not need them)."""
  rng = np.random.default_rng(seed)
  f = helpers.random_features(CONFIG, seed=seed, batch=n, seq=SEQ)
  real = rng.integers(1, P + 1, n)
  f["masked_lm_weights"] = (np.arange(P)[None] < real[:, None]).astype(np.float32)
  f["masked_lm_ids"] = rng.integers(0, CONFIG.vocab_size, (n, P)).astype(np.int32)
  f["next_sentence_labels"] = rng.integers(0, 2, n).astype(np.int32)
  if objective == "mlm":
    del f["next_sentence_labels"]
  return f


def with_window_features(batch, micro_steps):
  """Adds the pipeline's window features (the whole batch is one window)."""
  n = len(batch["input_ids"])
  out = dict(batch)
  out["window_mlm_weight"] = np.full(n, batch["masked_lm_weights"].sum(), np.float32)
  out["window_examples"] = np.full(n, n, np.float32)
  return out


def initial_weights(objective="mlm_nsp"):
  keras.utils.set_random_seed(1)
  model = BertPretrainer(CONFIG, objective=objective)
  model.build()
  return model.get_weights()


def make_model(weights, objective="mlm_nsp"):
  model = BertPretrainer(CONFIG, objective=objective)
  model.build()
  model.set_weights(weights)
  return model


def log_softmax(z):
  """float64 log-softmax over the last axis."""
  return (z - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True))
          - z.max(-1, keepdims=True))


def adamw(steps):
  return optimization.create_optimizer(optimization.OptimizerConfig(
      optimizer="adamw", learning_rate=1e-2, num_warmup_steps=0, num_train_steps=10, clip_norm=1.0,
      gradient_accumulation_steps=steps, accumulation_reduction="sum"))


def test_loss_matches_google_definition_on_one_batch():
  batch = pretraining_batch(5, 0)
  weights = numpy_reference.random_google_weights(CONFIG.to_dict(), 0)
  model = helpers.loaded(BertPretrainer(CONFIG), weights)
  out = model(batch, training=False)
  want = numpy_reference.bert_forward(weights, CONFIG.to_dict(), batch["input_ids"],
                                      batch["input_mask"], batch["segment_ids"],
                                      batch["masked_lm_positions"])
  mlm = -np.take_along_axis(log_softmax(want["mlm_logits"]), batch["masked_lm_ids"][..., None],
                            -1)[..., 0]
  w = batch["masked_lm_weights"]
  nsp = -np.take_along_axis(log_softmax(want["nsp_logits"]),
                            batch["next_sentence_labels"][:, None], -1)[:, 0]
  # run_pretraining.py: sum(w * ce) / (sum(w) + 1e-5) + mean(nsp ce). tfbert divides by sum(w)
  # exactly (every batch has masked tokens); the 1e-5 changes the loss by <1e-5 relative.
  google = (mlm * w).sum() / (w.sum() + 1e-5) + nsp.mean()
  terms = pretraining_losses(out, batch, tf.constant(w.sum()), tf.constant(5.0))
  assert float(terms["loss"]) == pytest.approx(google, rel=2e-5)


def test_mlm_only_loss_equals_the_float64_oracle_on_fixed_masks():
  """Objective "mlm": no NSP head or logits; the loss is sum(w * CE) / N of the window."""
  batch = pretraining_batch(5, 0, objective="mlm")
  weights = numpy_reference.random_google_weights(CONFIG.to_dict(), 0)
  masked_lm = {n: w for n, w in weights.items() if not n.startswith("cls/seq_relationship/")}
  model = helpers.loaded(BertPretrainer(CONFIG, objective="mlm"), masked_lm)
  assert model.nsp_head is None
  out = model(batch, training=False)
  assert "nsp_logits" not in out
  want = numpy_reference.bert_forward(weights, CONFIG.to_dict(), batch["input_ids"],
                                      batch["input_mask"], batch["segment_ids"],
                                      batch["masked_lm_positions"])["mlm_logits"]  # [B, P, V]
  ce = -np.take_along_axis(log_softmax(want), batch["masked_lm_ids"][..., None], -1)[..., 0]
  w = batch["masked_lm_weights"].astype(np.float64)
  window = 2.5 * w.sum()  # This micro-batch's share of a larger window's N.
  terms = pretraining_losses(out, batch, tf.constant(window, tf.float32), tf.constant(5.0))
  assert set(terms) == {"loss", "mlm_loss_sum", "mlm_weight", "mlm_correct"}
  # float32 forward of a 1-layer H 32 model against float64: ~1e-7 relative.
  assert float(terms["loss"]) == pytest.approx((ce * w).sum() / window, rel=2e-6)
  assert float(terms["mlm_loss_sum"]) == pytest.approx((ce * w).sum(), rel=2e-6)
  hits = (want.argmax(-1) == batch["masked_lm_ids"]) * w
  assert float(terms["mlm_correct"]) == hits.sum()


@pytest.fixture(scope="module")
def one_device_steps():
  """objective -> its reference: one device, one AdamW step on all 16 sequences of
  `pretraining_batch(16, 3)` from `initial_weights`. Built once per objective and kept as
  numbers (the trainable weights after the step, the step's logs, the pooler before and
  after), not as a live model."""
  built = {}

  def step(objective):
    if objective not in built:
      init = initial_weights(objective)
      model = make_model(init, objective)
      model.compile(optimizer=adamw(1))
      pooler = [v.numpy() for v in model.encoder.pooler.weights]
      logs = model.train_on_batch(pretraining_batch(16, 3, objective), return_dict=True)
      built[objective] = dict(
          init=init, logs={k: float(v) for k, v in logs.items()}, pooler_before=pooler,
          pooler_after=[v.numpy() for v in model.encoder.pooler.weights],
          trainable=[v.numpy() for v in model.trainable_variables])
    return built[objective]

  return step


def max_diff_to(model, weights):
  """The largest absolute difference between `model`'s trainable weights and `weights`."""
  return max(float(np.max(np.abs(x.numpy() - y)))
             for x, y in zip(model.trainable_variables, weights, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["mlm_nsp", "mlm"])
def test_two_replicas_two_micro_steps_four_sequences_equal_sixteen_on_one_device(
    objective, one_device_steps):
  reference = one_device_steps(objective)  # One device, one step on all 16 sequences.
  init = reference["init"]
  big = pretraining_batch(16, 3, objective)
  counts = big["masked_lm_weights"].reshape(4, 4, P).sum(axis=(1, 2))
  assert len(set(counts.tolist())) > 1  # micro-batch masked-token counts differ
  reference = reference["trainable"]
  # 2 replicas x 2 micro-steps x 4 sequences (global micro-batch 8), window features attached.
  strategy = training_loop.mirrored_strategy()
  windowed = with_window_features(big, 2)
  with strategy.scope():
    model = make_model(init, objective)
    model.compile(optimizer=adamw(2))
  dataset = tf.data.Dataset.from_tensor_slices(windowed).batch(8)
  model.fit(dataset, epochs=1, verbose=0)
  assert int(model.optimizer.iterations.numpy()) == 1
  diff = max_diff_to(model, reference)
  assert diff < 1e-5
  # Per-micro-batch normalization (no window features) is measurably different.
  with strategy.scope():
    naive = make_model(init, objective)
    naive.compile(optimizer=adamw(2))
  naive.fit(tf.data.Dataset.from_tensor_slices(big).batch(8), epochs=1, verbose=0)
  assert max_diff_to(naive, reference) > 10 * max(diff, 1e-6)


@pytest.mark.parametrize("objective, metrics", [
    ("mlm_nsp", {"loss", "mlm_loss", "mlm_accuracy", "nsp_loss", "nsp_accuracy"}),
    ("mlm", {"loss", "mlm_loss", "mlm_accuracy"}),
])
@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_metrics_are_weighted_means_over_the_step(objective, metrics, one_device_steps):
  """The logs of the reference step (16 sequences, 1 to 3 masked tokens each)."""
  step = one_device_steps(objective)
  logs = step["logs"]
  assert set(logs) == metrics
  assert logs["loss"] == pytest.approx(logs["mlm_loss"] + logs.get("nsp_loss", 0.0))
  assert 0.0 <= logs["mlm_accuracy"] <= 1.0 and 0.0 <= logs.get("nsp_accuracy", 0.0) <= 1.0
  # Only the NSP head reads the pooler: with the objective "mlm" it is neither trained nor
  # decayed (AdamW's decoupled decay would shrink it towards zero step by step).
  moved = [np.any(a != b) for a, b in zip(step["pooler_after"], step["pooler_before"],
                                          strict=True)]
  assert moved == ([True, True] if objective == "mlm_nsp" else [False, False])


def test_fused_cross_entropy_matches_tensorflow_kernel_and_argmax():
  rng = np.random.default_rng(3)
  n, v = 11, 1013  # odd sizes: no accidental vector-width alignment
  logits = tf.constant(rng.normal(0.0, 4.0, (n, v)).astype(np.float32))
  labels = tf.constant(rng.integers(0, v, n).astype(np.int32))
  # Row 0: its label holds the unique max (hit). Row 1: a tie between the label and an
  # earlier index (argmax takes the first, so no hit). Row 2: a tie with a later index (hit).
  logits = logits.numpy()
  logits[0, labels[0]] = 100.0
  logits[1, 5], logits[1, 9] = 50.0, 50.0
  logits[2, 7], logits[2, 8] = 60.0, 60.0
  labels = labels.numpy()
  labels[1], labels[2] = 9, 7
  # Row 3: the label 1000 below the row's peak; exp(label - peak) underflows to 0, the loss
  # (about 1013) must not.
  logits[3, labels[3]] = -1000.0
  logits, labels = tf.constant(logits), tf.constant(labels)
  d_loss = tf.constant(rng.normal(size=n).astype(np.float32))  # a non-constant upstream
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(logits)
    loss, hit = sparse_cross_entropy(labels, logits)
    want = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
  want_hit = (np.argmax(logits.numpy(), -1) == labels.numpy()).astype(np.float32)
  np.testing.assert_array_equal(hit, want_hit)
  assert list(hit.numpy()[:3]) == [1.0, 0.0, 1.0]
  assert 1000.0 < loss.numpy()[3] < 1030.0
  # float32 log-sum-exp over 1013 terms, summed in another order than the kernel's: each
  # row within 2 ulps of its own value (measured: 10 rows equal, one 1 ulp off). Rounding
  # peak - log(p) before subtracting the label logit was 24 ulps off on row 1 (0.69).
  # Near a loss of 0 an ulp of the loss means nothing: the loss is -log of the peak's
  # probability, and without oneDNN (Eigen's softmax: TensorFlow's default on CPUs without
  # AVX512, e.g. AMD Zen 3) a row whose peak dominates gets probability 1 - 2^-24 instead of
  # 1, so row 0's loss is 2^-24 = 6.0e-8 where the kernel says 0. So: within 2 ulps, or
  # within 2^-23 absolute (two roundings of the probability).
  error = np.abs(loss.numpy() - want.numpy())
  ulps = error / np.spacing(np.abs(want.numpy()))
  assert np.all((ulps <= 2.0) | (error <= 2.0**-23)), (ulps, error)
  # Gradients are softmax - onehot in [-1, 1] scaled by |d_loss| < 3 (ulp <= 2.4e-7):
  # measured max 6.0e-8.
  np.testing.assert_allclose(tape.gradient(loss, logits, d_loss),
                             tape.gradient(want, logits, d_loss), atol=1.5e-6)
