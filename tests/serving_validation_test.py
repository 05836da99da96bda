"""Tests that every served signature validates its inputs in the graph (tfbert.serving.export).

Four small exports with odd sizes: an encoder and a single-text classifier whose
vocab_size (1009) is smaller than the real 30,522-entry uncased vocab they tokenize with,
so their text signatures can pack an id outside the model ("!" is id 999, "+" id 1009);
and a pair classifier and a SQuAD span labeler with the full vocab (shared with other
files' tests: tests/tiny_exports.py). Every id signature
(`export.ID_SIGNATURES`: Google's and Hugging Face's input names, int32 and int64) gets
every malformed feature request, under its own names and dtype. ONE fresh Python
process (tensorflow and tensorflow_text only) loads all four, sends every malformed
request in sequence, catching and reporting each error, then the valid requests. Its
return code 0 proves that no request aborted it: before the checks, `classify_text` with
text_a of batch 2 and text_b of batch 1 killed the process (SIGABRT in tensorflow-text).

Why 1e-5 for the valid requests: as in tests/serving/export_test.py, the SavedModel runs a
Grappler-optimized float32 graph and Keras runs eagerly; reordered reductions cost a few
ulps per op (~1e-6 over 3 layers), while a wrong input moves outputs by > 1e-2. That the
checks leave valid outputs bit-identical was measured once against exports made without
them (same weights, every output of every signature equal); it is not asserted here.
"""

import json
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import helpers, numpy_reference, tiny_exports
from tfbert import BertClassifier, BertEncoder
from tfbert.checkpoints import pretrained
from tfbert.classifier import classifier_export, classifier_features
from tfbert.serving import export
from tfbert.squad import squad_export
from tfbert.text import inputs, tokenization

TOL = 1e-5  # See the module docstring.
SMALL_VOCAB = 1009  # Below the real vocab: "+" (id 1009) packs outside the model.
TEXT_SEQ = 11  # S of the encoder's and the single-text classifier's text signatures.
# The shared exports' (tests/tiny_exports.py): the pair classifier's S, the span labeler's.
PAIR_SEQ = tiny_exports.PAIR_SEQ
SQUAD_SEQ, SQUAD_QUERY, SQUAD_ANSWER = (tiny_exports.SQUAD_SEQ, tiny_exports.SQUAD_QUERY,
                                        tiny_exports.SQUAD_ANSWER)
BATCH, SEQ = 3, 7

# Runs in the fresh process: argv = inputs .npz, outputs .npz, plan (JSON list of
# [export_dir, signature, input names]); inputs of request i are "i/<name>" in the .npz.
REQUESTS_SCRIPT = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  Registers the tokenizer's ops.

inputs_path, outputs_path, plan = sys.argv[1:]
given = np.load(inputs_path)
loaded, out, report = {}, {}, []
for i, (export_dir, signature, names) in enumerate(json.loads(plan)):
  if export_dir not in loaded:
    loaded[export_dir] = tf.saved_model.load(export_dir)
  try:
    result = loaded[export_dir].signatures[signature](
        **{n: tf.constant(given[f"{i}/{n}"]) for n in names})
  except Exception as e:  # Reported; the test judges it.
    report.append({"error": type(e).__name__, "message": str(e)})
    continue
  for key, value in result.items():
    value = value.numpy()
    out[f"{i}/{key}"] = value.astype("S") if value.dtype == object else value
  report.append({"error": None})
np.savez(outputs_path, **out)
print(json.dumps(report))
"""


KINDS = ("encoder", "single", "pair", "squad")


def _features(config, batch=BATCH, seq=SEQ):
  """Valid int32 features [batch, seq] for `config`."""
  ids, mask, segments = numpy_reference.random_inputs(config.to_dict(), batch, seq, 7)
  return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def _with(features, name, position, value):
  changed = {k: v.copy() for k, v in features.items()}
  changed[name][position] = value
  return changed


# Malformed feature requests: name -> (features of a valid [3, 7] request -> bad ones,
# the message expected, formatted with the model's config).
FEATURE_CASES = {
    "id_equal_to_vocab_size": (
        lambda f, c: _with(f, "input_ids", (1, 4), c.vocab_size),
        "serving_default: input_ids holds {vocab_size} at [1, 4], outside the vocabulary "
        "[0, {vocab_size})"),
    "negative_id": (
        lambda f, c: _with(f, "input_ids", (0, 2), -1),
        "serving_default: input_ids holds -1 at [0, 2], outside the vocabulary"),
    "segment_id_equal_to_type_vocab_size": (
        lambda f, c: _with(f, "segment_ids", (2, 5), c.type_vocab_size),
        "serving_default: segment_ids holds {type_vocab_size} at [2, 5], outside the token "
        "types [0, {type_vocab_size})"),
    "mask_value_2": (
        lambda f, c: _with(f, "input_mask", (0, 0), 2),
        "serving_default: input_mask holds 2 at [0, 0], outside the mask values 0 and 1"),
    "one_past_max_position_embeddings": (
        lambda f, c: _features(c, seq=c.max_position_embeddings + 1),
        "serving_default: input_ids has sequence length {p1}, outside [1, "
        "{max_position_embeddings}] (max_position_embeddings)"),
    "mask_shorter": (
        lambda f, c: {**f, "input_mask": f["input_mask"][:, :-1]},
        "serving_default: input_mask has shape [3 6] but input_ids has [3 7]"),
    "segments_of_another_batch": (
        lambda f, c: {**f, "segment_ids": np.concatenate([f["segment_ids"]] * 2)},
        "serving_default: segment_ids has shape [6 7] but input_ids has [3 7]"),
    "ids_of_rank_3": (
        lambda f, c: {**f, "input_ids": f["input_ids"][:, :, None]},
        "Shape of tensor input_ids [3,7,1] is not compatible with expected shape [?,?]"),
}


def _text_pairs(first, second, sizes):
  # These texts, batches 2 and 1, aborted 3 of 3 fresh processes before the checks.
  return {first: np.array(["some words here"] * sizes[0]),
          second: np.array(["some words here"] * sizes[1])}


# Malformed text requests: name -> (export, signature, inputs, the message expected).
TEXT_CASES = {
    **{f"pair_batches_{a}_{b}": (
        "pair", "classify_text", _text_pairs("text_a", "text_b", (a, b)),
        f"classify_text: text_b has batch size {b} but text_a has {a}")
       for a, b in ((2, 1), (3, 1), (1, 3))},
    **{f"squad_batches_{a}_{b}": (
        "squad", "answer_question", _text_pairs("question", "context", (a, b)),
        f"answer_question: context has batch size {b} but question has {a}")
       for a, b in ((2, 1), (3, 1), (1, 3))},
    "pair_text_a_of_rank_2": (
        "pair", "classify_text",
        {"text_a": np.array([["a"], ["b"]]), "text_b": np.array(["c", "d"])},
        "Shape of tensor text_a [2,1] is not compatible with expected shape [?]"),
    "squad_scalar_context": (
        "squad", "answer_question", {"question": np.array(["q"]), "context": np.array("c")},
        "Shape of tensor context [] is not compatible with expected shape [?]"),
    "single_packs_an_id_outside_the_model": (
        "single", "classify_text", {"text_a": np.array(["!", "! +"])},
        f"classify_text: input_ids (packed from text_a) holds {SMALL_VOCAB} at [1, 2], outside "
        f"the vocabulary [0, {SMALL_VOCAB})"),
    "single_text_a_of_rank_2": (
        "single", "classify_text", {"text_a": np.array([["!"]])},
        "Shape of tensor text_a [1,1] is not compatible with expected shape [?]"),
    "encoder_packs_an_id_outside_the_model": (
        "encoder", "encode_text", {"text": np.array(["+", "!"])},
        f"encode_text: input_ids (packed from text) holds {SMALL_VOCAB} at [0, 1], outside the "
        f"vocabulary [0, {SMALL_VOCAB})"),
    "encoder_scalar_text": (
        "encoder", "encode_text", {"text": np.array("!")},
        "Shape of tensor text [] is not compatible with expected shape [?]"),
}

# The other id signatures take the same features under their names and dtype
# (`export.ID_SIGNATURES`), and must refuse them the same way, naming the client's inputs.
OTHER_ID_SIGNATURES = [name for name in export.ID_SIGNATURES if name != "serving_default"]


def _as_signature(features, signature):
  """Google-name int32 features as `signature` takes them (names, dtype)."""
  names, dtype = export.ID_SIGNATURES[signature]
  return {client: features[name].astype(dtype.as_numpy_dtype)
          for name, client in zip(export.FEATURE_NAMES, names)}


def _as_signature_message(message, signature):
  names, _ = export.ID_SIGNATURES[signature]
  message = message.replace("serving_default:", f"{signature}:")
  for name, client in zip(export.FEATURE_NAMES, names):
    message = message.replace(name, client)
  return message


# An int64 id that int32 would wrap into the vocabulary (2**32 + 5 -> 5) is still refused.
WRAPPING_ID = 2**32 + 5

MALFORMED = ([f"{kind}/{case}" for kind in KINDS for case in FEATURE_CASES]
             + [f"{kind}/{case}@{signature}" for kind in KINDS for case in FEATURE_CASES
                for signature in OTHER_ID_SIGNATURES]
             + [f"{kind}/wrapping_id@{signature}" for kind in KINDS
                for signature in ("serving_int64", "serving_hf")]
             + list(TEXT_CASES))

# Valid requests after the malformed ones: export, signature, inputs.
PUNCTUATION = np.array(["! # $", "", "( ' ) * %"])  # Ids 999..1008: inside SMALL_VOCAB.
PAIRS = (np.array(["He said hi .", "A cat sat on the mat.", "Who knows?"]),
         np.array(["He greeted us .", "", "Nobody, really, knows it all."]))
QUESTION_CONTEXT = (np.array(["Where was Zoe born?", "Who?", "What is BERT?"]),
                    np.array(["Zoe was born in Zurich.", "", "BERT is a model that reads."]))


def _valid_requests(configs):
  features = {kind: _features(config) for kind, config in configs.items()}
  return {**{f"{kind}/serving_default": (kind, "serving_default", features[kind])
             for kind in configs},
          **{f"{kind}/{signature}": (kind, signature, _as_signature(features[kind], signature))
             for kind in configs for signature in OTHER_ID_SIGNATURES},
          "encoder/empty_batch": ("encoder", "serving_default",
                                  {k: v[:0] for k, v in features["encoder"].items()}),
          "encoder/encode_text": ("encoder", "encode_text", {"text": PUNCTUATION}),
          "single/classify_text": ("single", "classify_text", {"text_a": PUNCTUATION}),
          "pair/classify_text": ("pair", "classify_text",
                                 {"text_a": PAIRS[0], "text_b": PAIRS[1]}),
          "squad/answer_question": ("squad", "answer_question",
                                    dict(zip(("question", "context"), QUESTION_CONTEXT)))}


def _export(kind, config, root, vocab):
  """Builds the model of `kind` (the small-vocab encoder or single-text classifier) and
  exports it; returns (model, export directory)."""
  path = str(root / kind)
  if kind == "encoder":
    weights = numpy_reference.random_google_weights(config.to_dict(), seed=3)
    model = helpers.loaded(BertEncoder(config), weights, allow_unused=True)
    return model, export.export_encoder_saved_model(model, path, vocab_file=vocab,
                                                    seq_length=TEXT_SEQ)
  keras.utils.set_random_seed(5)
  model = BertClassifier(config, 2)
  model.build()
  return model, classifier_export.export_classifier_saved_model(
      model, path, vocab, True, TEXT_SEQ, ("no", "yes"), False)


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_pair_classifier_export, tiny_span_labeler_export):
  """Exports the two small-vocab models; with the shared pair classifier and span labeler
  (tests/tiny_exports.py, read only) one fresh process sends them every malformed, then
  valid, request."""
  root = tmp_path_factory.mktemp("serving_validation")
  vocab = pretrained.minilm_vocab_file()
  configs = {"encoder": helpers.odd_config(vocab_size=SMALL_VOCAB),
             "single": helpers.odd_config(vocab_size=SMALL_VOCAB)}
  exported = {kind: _export(kind, config, root, vocab) for kind, config in configs.items()}
  for kind, shared in (("pair", tiny_pair_classifier_export),
                       ("squad", tiny_span_labeler_export)):
    configs[kind] = shared.config
    exported[kind] = (shared.model, shared.export_dir)
  # Text cases first: pair batches 2 and 1 in a fresh heap is what aborted most reliably.
  requests = {name: case[:3] for name, case in TEXT_CASES.items()}
  for kind, config in configs.items():
    for case, (make, _) in FEATURE_CASES.items():
      requests[f"{kind}/{case}"] = (kind, "serving_default", make(_features(config), config))
      for signature in OTHER_ID_SIGNATURES:
        requests[f"{kind}/{case}@{signature}"] = (
            kind, signature, _as_signature(make(_features(config), config), signature))
    for signature in ("serving_int64", "serving_hf"):
      wrapping = _as_signature(_features(config), signature)
      wrapping["input_ids"][2, 3] = WRAPPING_ID
      requests[f"{kind}/wrapping_id@{signature}"] = (kind, signature, wrapping)
  requests.update(_valid_requests(configs))
  names = list(requests)
  arrays = {f"{i}/{arg}": value for i, name in enumerate(names)
            for arg, value in requests[name][2].items()}
  plan = [[exported[kind][1], signature, list(args)]
          for kind, signature, args in requests.values()]
  work = root / "work"
  work.mkdir()
  outputs, report = helpers.serve_in_fresh_process(REQUESTS_SCRIPT, work, arrays,
                                                   json.dumps(plan))
  results = {name: {**report[i], "outputs": {key.split("/", 1)[1]: value
                                             for key, value in outputs.items()
                                             if key.split("/", 1)[0] == str(i)}}
             for i, name in enumerate(names)}
  return types.SimpleNamespace(configs=configs, models={k: v[0] for k, v in exported.items()},
                               requests=requests, results=results,
                               tokenizer=tokenization.WordPieceTokenizer(vocab, True))


def _expected_message(name, configs):
  if name in TEXT_CASES:
    return TEXT_CASES[name][3]
  kind, case = name.split("/")
  case, _, signature = case.partition("@")
  config = configs[kind]
  if case == "wrapping_id":
    return (f"{signature}: input_ids holds {WRAPPING_ID} at [2, 3], outside the vocabulary "
            f"[0, {config.vocab_size})")
  message = FEATURE_CASES[case][1].format(p1=config.max_position_embeddings + 1,
                                          **config.to_dict())
  return _as_signature_message(message, signature) if signature else message


@pytest.mark.slow  # Shares the ~2 min `served` fixture (four exports, one fresh process).
@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_request_raises_invalid_argument_naming_the_input(served, name):
  result = served.results[name]
  assert result["error"] == "InvalidArgumentError", result
  assert _expected_message(name, served.configs) in result["message"]


def _assert_close(got, want):
  assert got.dtype == np.float32 and got.shape == tuple(want.shape)
  assert helpers.max_abs_diff(got, want) < TOL


@pytest.mark.slow  # Shares the ~2 min `served` fixture.
def test_valid_feature_requests_still_give_the_keras_outputs(served):
  for kind, model in served.models.items():
    result = served.results[f"{kind}/serving_default"]
    assert result["error"] is None, result
    want = model(served.requests[f"{kind}/serving_default"][2], training=False)
    names = {"encoder": export.OUTPUT_NAMES, "squad": squad_export.SPAN_OUTPUT_NAMES}.get(
        kind, ("logits",))
    for name in names:
      _assert_close(result["outputs"][name], want[name])
    # Every other id signature: the same features under its names and dtype, the same
    # graph after the cast to int32, so the same outputs bit for bit.
    for signature in OTHER_ID_SIGNATURES:
      other = served.results[f"{kind}/{signature}"]
      assert other["error"] is None, (signature, other)
      for name in names:
        np.testing.assert_array_equal(other["outputs"][name], result["outputs"][name])
  empty = served.results["encoder/empty_batch"]
  assert empty["error"] is None, empty
  assert empty["outputs"]["sequence_output"].shape == (0, SEQ, 32)


@pytest.mark.slow  # Shares the ~2 min `served` fixture.
def test_valid_text_requests_still_give_the_keras_outputs(served):
  tokenizer = served.tokenizer
  encoder = served.results["encoder/encode_text"]
  assert encoder["error"] is None, encoder
  packed = inputs.pack_inputs([tokenizer.tokenize(tf.constant(PUNCTUATION))], TEXT_SEQ,
                              tokenizer.cls_id, tokenizer.sep_id)
  want = served.models["encoder"](packed, training=False)
  for name in export.OUTPUT_NAMES:
    _assert_close(encoder["outputs"][name], want[name])
  for kind, texts, seq in (("single", (PUNCTUATION, None), TEXT_SEQ),
                           ("pair", PAIRS, PAIR_SEQ)):
    result = served.results[f"{kind}/classify_text"]
    assert result["error"] is None, result
    packed = classifier_features.pack_text(tokenizer, tf.constant(texts[0]),
                                           None if texts[1] is None else tf.constant(texts[1]),
                                           seq)
    _assert_close(result["outputs"]["logits"],
                  served.models[kind](packed, training=False)["logits"])
  squad = served.results["squad/answer_question"]
  assert squad["error"] is None, squad
  features, first, count, _, _ = squad_export.pack_question_context(
      tokenizer, *map(tf.constant, QUESTION_CONTEXT), SQUAD_SEQ, SQUAD_QUERY)
  logits = served.models["squad"](features, training=False)
  _, _, score = squad_export.best_spans(logits["start_logits"], logits["end_logits"], first,
                                        count, SQUAD_ANSWER)
  got = squad["outputs"]["score"]
  assert got[1] == score[1] == float("-inf")  # Empty context: no answer.
  assert helpers.max_abs_diff(got[[0, 2]], tf.gather(score, [0, 2])) < TOL
