"""Tests for tfbert.squad.squad_export: a SQuAD SavedModel that a fresh process serves exactly.

One span labeler (odd sizes, the real 30,522-entry uncased vocab; its export is shared:
tests/tiny_exports.py) is served with both signatures by ONE fresh Python process that
imports only `tensorflow` and `tensorflow_text`. Its `answer_question` signature must give
the answers of the Python pipeline (squad_features' first window, then squad_postprocess
with an exhaustive n-best).
A v2.0 export of the same model must answer "" exactly where that pipeline's v2.0 rule
does, at two thresholds that decide differently, in the process that built it and in a
fresh one (the same fresh process as the v1.1 export's: `squad_served`).

Why 1e-5: as in export_test, the SavedModel runs a Grappler-optimized float32 graph and
Keras runs eagerly; reordered reductions cost a few float32 ulps per op, ~1e-6 over the
odd config's 3 layers, while a wrong mask or segment input moves logits by > 1e-2.
"""

import json
import os
import types

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers, tiny_exports
from tfbert import BertEncoder, BertSpanLabeler
from tfbert.checkpoints import pretrained
from tfbert.serving import export
from tfbert.squad import squad_data, squad_export, squad_features, squad_postprocess
from tfbert.text import tokenization

TOL = 1e-5  # See the module docstring.
# Thresholds are put >= 1e-3 from every null-score difference: the export's logits differ
# from Keras' by ~1e-6 (TOL), so no decision can flip between the two on rounding.
V2_MARGIN = 1e-3
# The shared export's (tests/tiny_exports.py); the v2.0 exports below use the same.
SQUAD_SEQ, SQUAD_QUERY, SQUAD_ANSWER = (tiny_exports.SQUAD_SEQ, tiny_exports.SQUAD_QUERY,
                                        tiny_exports.SQUAD_ANSWER)
QUESTIONS = ["Where was Zoë born?", "", "a question longer than five word pieces surely",
             "Who?", "What is BERT?"]
CONTEXTS = ["Zoë was born in Zürich (1895) and ate at a café naïvely.", "Short context.",
            "A context long enough that the single window must cut it, somewhere after here.",
            "", "BERT是一个模型。It reads text."]

SQUAD_SERVE_SCRIPT = r"""
import json, os, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  Registers the tokenizer's ops.

inputs_path, outputs_path, export_dir, v2_dir = sys.argv[1:]
given = np.load(inputs_path)
loaded = tf.saved_model.load(export_dir)
features = {n: tf.constant(given[n]) for n in ("input_ids", "input_mask", "segment_ids")}
out = {k: v.numpy() for k, v in loaded.signatures["serving_default"](**features).items()}
answers = loaded.signatures["answer_question"](question=tf.constant(given["question"]),
                                               context=tf.constant(given["context"]))

def specs(structure):
  return {k: [v.dtype.name, v.shape.as_list()] for k, v in structure.items()}

# The v2.0 export: its answers at the threshold it baked in, and the record it wrote.
v2 = tf.saved_model.load(v2_dir).signatures["answer_question"]
got = v2(question=tf.constant(given["question"]), context=tf.constant(given["context"]))
out.update({"v2/" + k: v.numpy() for k, v in got.items() if k != "answer"})
np.savez(outputs_path, **out)
with open(os.path.join(v2_dir, "answer_question.json"), encoding="utf-8") as f:
  recorded = json.load(f)

print(json.dumps({
    "answer": [a.decode("utf-8") for a in answers["answer"].numpy()],
    "score": answers["score"].numpy().tolist(), "score_dtype": answers["score"].dtype.name,
    "signatures": {name: {"inputs": specs(fn.structured_input_signature[1]),
                          "outputs": specs(fn.structured_outputs)}
                   for name, fn in loaded.signatures.items()},
    "v2": {"answer": [a.decode("utf-8") for a in got["answer"].numpy()], "recorded": recorded,
           "outputs": specs(v2.structured_outputs)},
    "tfbert_imported": "tfbert" in sys.modules,
}))
"""


def _python_answers(model, tokenizer, **postprocess):
  """Answers by the Python pipeline: first window of squad_features, exhaustive n-best;
  `postprocess`: more `PostprocessConfig` fields (the v2.0 ones)."""
  examples = [squad_data.SquadExample(str(i), q, c, ())
              for i, (q, c) in enumerate(zip(QUESTIONS, CONTEXTS))]
  # doc_stride = S: windows do not overlap, so every token of window 0 is max-context.
  config = squad_features.FeatureConfig(SQUAD_SEQ, SQUAD_SEQ, SQUAD_QUERY)
  features = [f for f in squad_features.convert_examples_to_features(
      examples, tokenizer, config).features if f.doc_span_index == 0]
  logits = model({n: np.stack([getattr(f, n) for f in features]) for n in export.FEATURE_NAMES})
  return squad_postprocess.postprocess_predictions(
      examples, features, logits["start_logits"].numpy(), logits["end_logits"].numpy(),
      squad_postprocess.PostprocessConfig(n_best_size=SQUAD_SEQ, max_answer_length=SQUAD_ANSWER,
                                          **postprocess))


@pytest.fixture(scope="module")
def v2(tmp_path_factory, tiny_span_labeler_export):
  """The shared span labeler's Python v2.0 reference (`_v2_reference`), and its v2.0 export
  with the higher of the two thresholds baked in."""
  model = tiny_span_labeler_export.model
  want, thresholds = _v2_reference(model)
  export_dir = squad_export.export_squad_saved_model(
      model, str(tmp_path_factory.mktemp("squad_v2") / "squad_v2"),
      pretrained.minilm_vocab_file(), True, max_seq_length=SQUAD_SEQ,
      max_query_length=SQUAD_QUERY, max_answer_length=SQUAD_ANSWER,
      version_2_with_negative=True, null_score_diff_threshold=thresholds[1])
  return types.SimpleNamespace(model=model, want=want, thresholds=thresholds,
                               export_dir=export_dir)


@pytest.fixture(scope="module")
def squad_served(tmp_path_factory, tiny_span_labeler_export, v2):
  """Serves both signatures of a span labeler's export (shared, read only:
  tests/tiny_exports.py), and the `answer_question` of its v2.0 export (`v2`), in one fresh
  process."""
  model, config = tiny_span_labeler_export.model, tiny_span_labeler_export.config
  export_dir = tiny_span_labeler_export.export_dir
  root = tmp_path_factory.mktemp("squad_export")
  features = helpers.random_features(config, seq=SQUAD_SEQ)
  features = {n: features[n] for n in export.FEATURE_NAMES}
  work = root / "work"
  work.mkdir()
  outputs, report = helpers.serve_in_fresh_process(
      SQUAD_SERVE_SCRIPT, work, {"question": np.array(QUESTIONS), "context": np.array(CONTEXTS),
                                 **features}, export_dir, v2.export_dir)
  logits = {k: v for k, v in outputs.items() if not k.startswith("v2/")}
  v2_outputs = {k[len("v2/"):]: v for k, v in outputs.items() if k.startswith("v2/")}
  return types.SimpleNamespace(model=model, features=features, logits=logits, report=report,
                               export_dir=export_dir, v2_outputs=v2_outputs)


@pytest.mark.slow  # Shares the ~25 s `squad_served` fixture.
def test_squad_feature_signature_serves_the_keras_logits(squad_served):
  want = squad_served.model(squad_served.features, training=False)
  for name in squad_export.SPAN_OUTPUT_NAMES:
    got = squad_served.logits[name]
    assert got.dtype == np.float32 and got.shape == (helpers.BATCH, SQUAD_SEQ)
    assert helpers.max_abs_diff(got, want[name]) < TOL
  assert not squad_served.report["tfbert_imported"]


@pytest.mark.slow  # Shares the ~25 s `squad_served` fixture.
def test_squad_text_signature_answers_like_the_python_pipeline(squad_served):
  tokenizer = tokenization.WordPieceTokenizer(pretrained.minilm_vocab_file(), True)
  want = _python_answers(squad_served.model, tokenizer)
  got = squad_served.report
  assert got["answer"] == [p.text for p in want]
  assert got["answer"][0] and got["answer"][2]  # Real spans, not the no-answer "".
  assert got["score"][3] == float("-inf") and got["answer"][3] == ""  # Empty context.
  for score, prediction in zip(got["score"], want):
    if prediction.text:
      best = prediction.nbest[0]
      assert abs(score - (best.start_logit + best.end_logit)) < TOL


@pytest.mark.slow  # Shares the ~25 s `squad_served` fixture.
def test_squad_signatures_names_dtypes_and_shapes(squad_served):
  assert squad_served.report["signatures"] == {
      **{signature: {
          "inputs": {n: [dtype.name, [None, None]] for n in names},
          "outputs": {n: ["float32", [None, None]] for n in squad_export.SPAN_OUTPUT_NAMES}}
         for signature, (names, dtype) in export.ID_SIGNATURES.items()},
      "answer_question": {
          "inputs": {"question": ["string", [None]], "context": ["string", [None]]},
          "outputs": {"answer": ["string", [None]], "score": ["float32", [None]]}},
  }


@pytest.mark.slow  # Shares the ~25 s `squad_served` fixture.
def test_v1_1_export_records_that_it_never_answers_empty(squad_served):
  with open(os.path.join(squad_served.export_dir, squad_export.ANSWER_CONFIG_FILE),
            encoding="utf-8") as f:
    recorded = json.load(f)
  assert {k: recorded[k] for k in ("signature", "version_2_with_negative",
                                   "null_score_diff_threshold", "max_seq_length",
                                   "max_query_length", "max_answer_length")} == {
      "signature": "answer_question", "version_2_with_negative": False,
      "null_score_diff_threshold": None, "max_seq_length": SQUAD_SEQ,
      "max_query_length": SQUAD_QUERY, "max_answer_length": SQUAD_ANSWER}
  assert "never" in recorded["rule"]


def _v2_reference(model):
  """(predictions of the Python pipeline in v2.0 at threshold 0, two thresholds between
  their null-score differences that answer different rows)."""
  tokenizer = tokenization.WordPieceTokenizer(pretrained.minilm_vocab_file(), True)
  want = _python_answers(model, tokenizer, version_2_with_negative=True)
  diffs = sorted(p.null_score_diff for p in want if np.isfinite(p.null_score_diff))
  assert len(diffs) == 4 and min(np.diff(diffs)) > V2_MARGIN * 2, diffs
  # Answered at `low`: the row of the smallest difference; at `high`: the two smallest.
  # The other rows (and the empty context's, difference +inf) are "".
  return want, ((diffs[0] + diffs[1]) / 2, (diffs[1] + diffs[2]) / 2)


def _v2_module(model, threshold):
  return squad_export.SquadExport(
      model, pretrained.minilm_vocab_file(), True, SQUAD_SEQ, SQUAD_QUERY, SQUAD_ANSWER,
      version_2_with_negative=True, null_score_diff_threshold=threshold)


def _expected_v2(model, threshold):
  """The Python pipeline's v2.0 answers at `threshold` (squad_postprocess's rule)."""
  tokenizer = tokenization.WordPieceTokenizer(pretrained.minilm_vocab_file(), True)
  return [p.text for p in _python_answers(model, tokenizer, version_2_with_negative=True,
                                          null_score_diff_threshold=threshold)]


@pytest.mark.slow  # Shares `v2` and the `squad_served` fixture's fresh process.
def test_v2_answer_question_applies_the_threshold_as_the_predictions_do(v2, squad_served):
  """At the lower threshold in this process (a `SquadExport` traced here), at the higher
  one as the fresh process served `v2`'s export of it."""
  model, want, (low, high) = v2.model, v2.want, v2.thresholds
  got = _v2_module(model, low).answer_question(tf.constant(QUESTIONS), tf.constant(CONTEXTS))
  results = {
      low: ([a.decode("utf-8") for a in got["answer"].numpy()], got["score"].numpy(),
            got["null_score"].numpy()),
      high: (squad_served.report["v2"]["answer"], squad_served.v2_outputs["score"],
             squad_served.v2_outputs["null_score"])}
  for threshold, (answers, scores, null_scores) in results.items():
    assert answers == _expected_v2(model, threshold), threshold
    # `score` stays the best span's (v1.1's output) and `null_score` is the [CLS] start +
    # end logit, both as the pipeline scores them.
    for score, null_score, prediction in zip(scores, null_scores, want):
      if np.isfinite(prediction.null_score_diff):
        span = next(e for e in prediction.nbest if e.text)
        null = next(e for e in prediction.nbest if not e.text)
        assert abs(score - (span.start_logit + span.end_logit)) < TOL
        assert abs(null_score - (null.start_logit + null.end_logit)) < TOL
  answered = {threshold: answers for threshold, (answers, _, _) in results.items()}
  assert answered[low] != answered[high]  # Two outcomes: the threshold is what decides.
  assert sum(map(bool, answered[low])) == 1 and sum(map(bool, answered[high])) == 2


@pytest.mark.slow  # Shares the `squad_served` fixture's fresh process and `v2`'s export.
def test_v2_export_serves_its_baked_threshold_in_a_fresh_process(squad_served, v2):
  high = v2.thresholds[1]
  report, outputs = squad_served.report["v2"], squad_served.v2_outputs
  assert report["answer"] == _expected_v2(v2.model, high)
  assert report["outputs"] == {"answer": ["string", [None]], "score": ["float32", [None]],
                               "null_score": ["float32", [None]]}
  assert outputs["null_score"].dtype == np.float32
  assert report["recorded"]["version_2_with_negative"] is True
  assert report["recorded"]["null_score_diff_threshold"] == high  # JSON floats round-trip.
  assert not squad_served.report["tfbert_imported"]


def test_v2_export_refuses_a_nan_threshold(tmp_path):
  model = BertSpanLabeler(helpers.odd_config())
  with pytest.raises(ValueError, match="null_score_diff_threshold is NaN"):
    squad_export.export_squad_saved_model(
        model, str(tmp_path / "x"), pretrained.minilm_vocab_file(), True, max_seq_length=19,
        max_query_length=5, version_2_with_negative=True, null_score_diff_threshold=float("nan"))
  assert not os.listdir(tmp_path)


def test_best_spans_by_hand():
  # Context at positions 2..5; spans of at most 2 wordpieces.
  start = tf.constant([[9., 0., 1., 5., 0., 2., 0.]])
  end = tf.constant([[9., 0., 3., 0., 4., 1., 8.]])
  got = squad_export.best_spans(start, end, tf.constant([2]), tf.constant([4]), 2)
  # 3 -> 4 scores 9; 0 and 6 are outside the context; 3 -> 5 (6) and 2 -> 2 (4) lose.
  assert [int(got[0][0]), int(got[1][0]), float(got[2][0])] == [3, 4, 9.0]
  nothing = squad_export.best_spans(start, end, tf.constant([2]), tf.constant([0]), 2)
  assert float(nothing[2][0]) == float("-inf")


def test_squad_export_rejects_other_models_and_windows_that_do_not_fit(tmp_path):
  vocab = pretrained.minilm_vocab_file()
  with pytest.raises(TypeError, match="BertEncoder"):
    squad_export.export_squad_saved_model(BertEncoder(helpers.odd_config()), str(tmp_path / "x"),
                                    vocab, True)
  model = BertSpanLabeler(helpers.odd_config())  # max_position_embeddings 19.
  with pytest.raises(ValueError, match="max_position_embeddings 19"):
    squad_export.export_squad_saved_model(model, str(tmp_path / "x"), vocab, True,
                                          max_seq_length=20)
  with pytest.raises(ValueError, match="max_query_length"):
    squad_export.export_squad_saved_model(model, str(tmp_path / "x"), vocab, True,
                                          max_seq_length=19, max_query_length=16)
  assert not os.listdir(tmp_path)
