"""Tests for tfbert.alignment.alignment: variants, tolerances and the comparison arithmetic."""

import json
import math
import os
import re

import numpy as np
import pytest

from tfbert.alignment import alignment
from tfbert.alignment.alignment import AlignmentConfig, PairReport, Variant
from tfbert.config import BertConfig

TINY = BertConfig(vocab_size=99, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=11)


def _config(*names, **overrides):
  return AlignmentConfig(bert_config=TINY, input_files=["x"],
                         variants=[alignment.parse_variant(n) for n in names], **overrides)


@pytest.mark.parametrize("spec, expected", [
    ("graph", Variant("graph")),
    ("eager", Variant("eager", execution="eager")),
    ("xla", Variant("xla", execution="xla")),
    ("mirrored", Variant("mirrored", replicas=2)),
    ("workers", Variant("workers", workers=2)),
    ("accumulate4", Variant("accumulate4", gradient_accumulation_steps=4)),
    ("resume7", Variant("resume7", resume_at=7)),
    ("bfloat16", Variant("bfloat16", dtype="mixed_bfloat16")),
    ("float16", Variant("float16", dtype="mixed_float16")),
    ("micro_batch_normalization",
     Variant("micro_batch_normalization", loss_normalization="micro_batch")),
    ("m4:replicas=2;gradient_accumulation_steps=4;execution=eager",
     Variant("m4", replicas=2, gradient_accumulation_steps=4, execution="eager")),
])
def test_presets_and_field_specs(spec, expected):
  assert alignment.parse_variant(spec) == expected


@pytest.mark.parametrize("spec, message", [
    ("fast", "unknown variant 'fast'"),
    ("a:colour=red", r"'colour=red' is not field=value"),
    ("a:replicas", r"'replicas' is not field=value"),
    ("a:execution=jit", "execution must be one of"),
    ("a:dtype=float64", "dtype must be one of"),
    ("a:replicas=2;workers=2", "replicas or workers, not both"),
    ("a:gradient_accumulation_steps=0", "must be >= 1"),
])
def test_bad_variant_specs_are_named(spec, message):
  with pytest.raises(ValueError, match=message):
    alignment.parse_variant(spec)


@pytest.mark.parametrize("items, message", [
    (["float32"], "'float32' is not kind=value"),
    (["float32=x"], "'float32=x' is not kind=value"),
    (["float8=1e-3"], "'float8=1e-3' is not kind=value with a kind among float32, "
                      "mixed_bfloat16, mixed_float16"),
    (["float32=-1"], "'float32=-1'"),
    (["mixed_float16=nan"], "'mixed_float16=nan'"),
])
def test_bad_tolerances_are_named(items, message):
  with pytest.raises(ValueError, match=re.escape(f"--tolerances item {message}")):
    alignment.parse_tolerances(items)


def test_a_tolerance_kind_given_twice_is_refused_naming_it():
  """`--tolerances=float32=1e-3,float32=1` checked at 1.0, the last one, without a word
  (sweep 34, A53)."""
  with pytest.raises(ValueError, match=re.escape(
      "--tolerances gives the kind float32 more than once (float32=1e-3, float32=1): give "
      "each kind once")):
    alignment.parse_tolerances(["float32=1e-3", "mixed_float16=1e-2", "float32=1"])


def test_tolerances_parse_and_whole_numbers_in_variant_fields():
  assert alignment.parse_tolerances(["float32=2e-5", "mixed_bfloat16=1e-3"]) == {
      "float32": 2e-5, "mixed_bfloat16": 1e-3}
  with pytest.raises(ValueError, match="variant 'a:replicas=two': replicas must be a whole "
                                       "number, got 'two'"):
    alignment.parse_variant("a:replicas=two")


def test_config_checks_name_the_variant():
  with pytest.raises(ValueError, match="at least two"):
    _config("graph")
  with pytest.raises(ValueError, match="unique"):
    _config("graph", "graph")
  with pytest.raises(ValueError, match=r"variant 'accumulate5' splits each step .* = 5 "
                                       r"parts, which must divide train_batch_size \(32\)"):
    _config("graph", "accumulate5")
  with pytest.raises(ValueError, match=r"variant 'resume20' stops after step 20 to resume, "
                                       r"which must be below steps \(20\)"):
    _config("graph", "resume20", steps=20)
  with pytest.raises(ValueError, match="tolerance kinds"):
    _config("graph", "eager", tolerances={"float8": 1.0})


@pytest.mark.parametrize("variants, steps, message", [
    # A bound from another setting is the relation, never a range that can be empty.
    (("graph", "resume5"), 1, "variant 'resume5' stops after step 5 to resume, which must be "
     "below steps (1): raise steps above 5 or resume earlier"),
    (("graph", "resume0"), 3, "variant 'resume0': resume_at (the step it stops after, then "
     "resumes) must be >= 1, got 0"),
    (("graph", "accumulate3"), 3, "variant 'accumulate3' splits each step into "
     "gradient_accumulation_steps x replicas x workers = 3 x 1 x 1 = 3 parts, which must "
     "divide train_batch_size (32)"),
    (("graph", "a:workers=0"), 3, "variant 'a': workers must be >= 1, got 0"),
])
def test_a_range_from_another_setting_is_stated_as_the_relation(variants, steps, message):
  with pytest.raises(ValueError) as e:
    _config(*variants, steps=steps)
  assert message in str(e.value)
  assert "[1, 0]" not in str(e.value)


def test_a_pair_takes_the_looser_tolerance_of_its_kinds():
  config = _config("graph", "bfloat16", "float16", tolerances={"mixed_float16": 0.02})
  graph, bf16, fp16 = config.variants
  assert config.tolerance(graph, graph) == alignment.DEFAULT_TOLERANCES["float32"] == 1e-5
  assert config.tolerance(graph, bf16) == config.tolerance(bf16, graph) == 5e-4
  assert config.tolerance(graph, fp16) == 0.02  # overridden
  assert config.replicas_needed == 1
  assert _config("graph", "mirrored").replicas_needed == 2


def test_compare_curves_by_hand():
  # Deviations 0, 0.001, 0.02 on losses 10, 5, 4: relative 0, 2e-4, 5e-3.
  max_abs, max_rel, first = alignment.compare_curves([10.0, 5.0, 4.0], [10.0, 5.001, 3.98],
                                                     1e-3)
  assert max_abs == pytest.approx(0.02) and max_rel == pytest.approx(5e-3)
  assert first == 3
  assert alignment.compare_curves([10.0, 5.0, 4.0], [10.0, 5.001, 3.98], 1e-2)[2] is None


def test_compare_curves_fails_on_nan_and_on_a_missing_step():
  assert alignment.compare_curves([1.0, 2.0], [1.0, float("nan")], 1.0)[2] == 2
  assert alignment.compare_curves([1.0, 2.0, 3.0], [1.0, 2.0], 1.0)[2] == 3


def test_compare_weights_by_hand():
  a = {"w": np.array([1.0, -4.0]), "b": np.array([0.5])}
  b = {"w": np.array([1.0, -4.002]), "b": np.array([0.501])}
  # Each tensor against its own scale: b's 0.001 on 0.5 (2e-3) is the worst, not w's 5e-4.
  assert alignment.compare_weights(a, b) == (pytest.approx(0.002), pytest.approx(0.002), "b")
  with pytest.raises(ValueError, match=r"differ in names: \['c'\]"):
    alignment.compare_weights(a, {**b, "c": np.zeros(1)})
  # Sweep 30, B83/B84: NumPy broadcast (2,) against (1,) to "identical"; empty curves passed.
  with pytest.raises(ValueError, match=r"differ in shapes: \{'w': \(\(2,\), \(1,\)\)\}"):
    alignment.compare_weights(a, {**b, "w": np.array([1.0])})
  with pytest.raises(ValueError, match="no weights to compare"):
    alignment.compare_weights({}, {})
  with pytest.raises(ValueError, match=r"a loss curve is empty \(0 and 0 steps\)"):
    alignment.compare_curves([], [], 1.0)


@pytest.mark.parametrize("name", ["a/", "../../esc", ".hidden", "", "a b"])
def test_a_variant_name_that_is_no_plain_directory_name_is_refused(name):
  """Sweep 30, B80/B82: "a" and "a/" shared one run directory (the second resumed the
  first's finished run: deviation 0, ALIGNED); "../../esc" wrote outside the workdir."""
  with pytest.raises(ValueError, match="a name is letters, digits and _ . \\+ -"):
    Variant(name)
  Variant("accumulate2.v-1+x_y")  # Plain names pass.


def test_report_and_table(tmp_path):
  config = _config("graph", "eager", "bfloat16")
  pairs = [PairReport("eager", "graph", 1e-5, 1e-7, 2e-8, None, 1e-8, 1e-8),
           PairReport("bfloat16", "graph", 5e-2, 0.5, 0.06, 3)]
  report = alignment.report_json(config, {"graph": [3.0, 2.0], "eager": [3.0, 2.0],
                                          "bfloat16": [3.0, 2.1]}, pairs)
  assert report["reference"] == "graph" and not report["passed"]
  assert [p["passed"] for p in report["pairs"]] == [True, False]
  path = str(tmp_path / "r" / "report.json")
  alignment.write_report(path, report)
  assert json.load(open(path)) == report
  table = alignment.format_table(pairs)
  assert "eager" in table and "DIFFERS" in table and table.count("\n") == 2


def test_a_small_tensor_changing_sign_is_a_weights_difference():
  """Sweep 32, B62: measured against the model's largest weight (1.0), a bias of 2e-6 turned
  to -2e-6 deviated 4e-6 < 1e-5 and passed; against its own scale it deviates 2.0."""
  a = {"embeddings": np.array([1.0, -1.0]), "bias": np.array([2e-6, 1e-6])}
  b = {"embeddings": np.array([1.0, -1.0]), "bias": np.array([-2e-6, 1e-6])}
  deviation, relative, worst = alignment.compare_weights(a, b)
  assert deviation == pytest.approx(4e-6) and relative == pytest.approx(2.0) and worst == "bias"
  pair = PairReport("x", "graph", 1e-5, 0.0, 0.0, None, deviation, relative, worst)
  assert not pair.passed
  assert "DIFFERS (final weights: bias)" in alignment.format_table([pair])
  # A tensor both runs left at zero agrees; a NaN never does.
  assert alignment.compare_weights({"z": np.zeros(3)}, {"z": np.zeros(3)}) == (0.0, 0.0, "z")
  assert alignment.compare_weights(a, {**b, "bias": np.array([np.nan, 1e-6])})[1] == math.inf


def test_weights_over_tolerance_fail_the_pair():
  assert not PairReport("x", "graph", 1e-5, 0.0, 0.0, None, 1.0, 2e-5).passed
  assert PairReport("x", "graph", 1e-5, 0.0, 0.0, None).passed


def test_input_files_naming_a_pipe_are_refused_with_the_flag(tmp_path):
  """Every variant reads the data again (sweep 8, PS04: a pipe failed in TensorFlow)."""
  os.mkfifo(tmp_path / "records")
  with pytest.raises(ValueError, match=re.escape(
      f"--input_files {tmp_path / 'records'} is a named pipe: a run reads each input more "
      "than once")):
    AlignmentConfig(bert_config=TINY, input_files=[str(tmp_path / "records")],
                    variants=[alignment.parse_variant(n) for n in ("graph", "eager")])


def test_fine_tuning_with_the_default_optimizer_says_it_is_the_default():
  """Sweep 11 P4: the refusal named an 'sgd' the caller never gave (the field's default)."""
  with pytest.raises(ValueError, match=re.escape(
      "fine-tuning (classifier) trains AdamW: optimizer is left at its default, the "
      "pretraining comparison's SGD: pass optimizer=OptimizerConfig(optimizer='adamw', ...)")):
    _config("graph", "accumulate2", task="classifier", train_file="train.tsv")
  sgd = alignment.optimization.OptimizerConfig(optimizer="sgd", learning_rate=0.1)
  with pytest.raises(ValueError, match=re.escape(
      "fine-tuning (squad) trains AdamW: optimizer.optimizer must be 'adamw', got 'sgd'")):
    _config("graph", "accumulate2", task="squad", train_file="train.json", optimizer=sgd)


def _gradients(model, features, labels):
  """{google name: max |gradient|} of the model's mean example loss."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from tfbert.checkpoints import google_names  # pylint: disable=import-outside-toplevel
  variables = google_names.google_variable_map(model)
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(model.example_losses(model(features), labels))
  grads = tape.gradient(loss, list(variables.values()))
  return {name: 0.0 if g is None else float(np.max(np.abs(tf.convert_to_tensor(g))))
          for name, g in zip(variables, grads)}


@pytest.mark.parametrize("task", ["squad", "classifier"])
def test_the_weights_left_out_are_exactly_those_the_loss_does_not_depend_on(task):
  """`loss_invariant_weights` against the gradients of a 2-layer model: every weight it names
  has a gradient of float32 rounding (<= 1e-6 of the largest), and the neighbours it does not
  name have a real one (the first layer's output LayerNorm beta, the head's bias of a
  classifier), so the list is neither short (its noise failed the SQuAD alignment at 0.47 per
  tensor) nor broad."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from tfbert.models import BertClassifier, BertSpanLabeler  # pylint: disable=import-outside-toplevel
  config = BertConfig(vocab_size=37, hidden_size=12, num_hidden_layers=2, num_attention_heads=3,
                      intermediate_size=13, max_position_embeddings=16,
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  rng = np.random.default_rng(5)
  features = {"input_ids": rng.integers(1, 37, (5, 11)), "input_mask": np.ones((5, 11), np.int32),
              "segment_ids": np.zeros((5, 11), np.int32)}
  features["input_mask"][:, 9:] = 0
  tf.keras.utils.set_random_seed(7)
  if task == "squad":
    model = BertSpanLabeler(config, dtype="float32")
    labels = {"start_logits": rng.integers(0, 9, 5), "end_logits": rng.integers(0, 9, 5)}
  else:
    model = BertClassifier(config, num_classes=3, dtype="float32")
    labels = {"logits": rng.integers(0, 3, 5)}
  model(features)
  gradients = _gradients(model, features, labels)
  largest = max(gradients.values())
  left_out = alignment.loss_invariant_weights(task, 2, gradients)
  expected = ["bert/encoder/layer_0/attention/self/key/bias",
              "bert/encoder/layer_1/attention/self/key/bias"]
  if task == "squad":
    expected += ["bert/encoder/layer_1/output/LayerNorm/beta", "cls/squad/output_bias"]
  assert left_out == sorted(expected)
  for name in left_out:
    assert gradients[name] <= 1e-6 * largest, (name, gradients[name], largest)
  assert gradients["bert/encoder/layer_0/output/LayerNorm/beta"] > 1e-3 * largest
  if task == "classifier":
    assert gradients["output_bias"] > 1e-3 * largest
