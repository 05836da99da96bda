"""Tests for tfbert.checkpoints.google_checkpoint on Google's own run_pretraining.py output."""

import json
import os
import re
import shutil

import numpy as np
import pytest

from tests import faults, helpers, numpy_reference
from tfbert import BertConfig, BertPretrainer, BertSpanLabeler, load_google_checkpoint
from tfbert.checkpoints import convert, google_checkpoint
from tfbert.runtime import atomic


@pytest.fixture
def tiny(shared_data):
  folder = os.path.join(shared_data, "keras_bert_test_checkpoint")
  return (BertConfig.from_json_file(os.path.join(folder, "bert_config.json")),
          os.path.join(folder, "bert_model.ckpt"))


def test_real_checkpoint_loads_with_every_weight_set_and_slots_ignored(tiny):
  config, prefix = tiny
  model = BertPretrainer(config)
  report = load_google_checkpoint(model, prefix)
  assert len(report.set_weights) == len(model.weights) == 46
  assert len(report.used) == 46
  # 46 adam_m + 46 adam_v + global_step, as listed in variables_listing.txt.
  assert len(report.ignored) == 93 and "global_step" in report.ignored
  assert not report.unused and not report.missing
  stored = google_checkpoint.read_google_checkpoint(prefix)
  for name, variable in google_checkpoint.google_weights(model).items():
    np.testing.assert_array_equal(variable, stored[name])


def test_real_checkpoint_outputs_match_reference(tiny):
  config, prefix = tiny
  model = BertPretrainer(config)
  load_google_checkpoint(model, prefix)
  weights = google_checkpoint.read_google_checkpoint(prefix)
  rng = np.random.default_rng(0)
  ids = rng.integers(0, config.vocab_size, (3, 9)).astype(np.int32)
  mask = np.array([[1] * 9, [1] * 5 + [0] * 4, [1] * 2 + [0] * 7], np.int32)
  seg = (np.arange(9) >= 4).astype(np.int32)[None].repeat(3, 0)
  pos = np.array([[1, 2], [0, 4], [1, 1]], np.int32)
  out = model({"input_ids": ids, "input_mask": mask, "segment_ids": seg,
               "masked_lm_positions": pos}, training=False)
  want = numpy_reference.bert_forward(weights, config.to_dict(), ids, mask, seg, pos)
  for key in ("sequence_output", "pooled_output", "mlm_logits", "nsp_logits"):
    assert helpers.max_abs_diff(out[key], want[key]) < 2e-5, key  # float32 vs float64


def test_export_round_trip_is_bit_exact(tiny, tmp_path):
  config, prefix = tiny
  model = BertPretrainer(config)
  load_google_checkpoint(model, prefix)
  out = str(tmp_path / "export" / "bert_model.ckpt")
  google_checkpoint.export_google_checkpoint(model, out)
  original = google_checkpoint.read_google_checkpoint(prefix)
  exported = google_checkpoint.read_google_checkpoint(out)
  assert set(exported) == {n for n in original if "adam" not in n and n != "global_step"}
  for name, value in exported.items():
    assert value.dtype == original[name].dtype
    np.testing.assert_array_equal(value, original[name])
  assert BertConfig.from_json_file(str(tmp_path / "export" / "bert_config.json")) == config
  again = BertPretrainer(config)
  load_google_checkpoint(again, out)


def test_a_prefix_is_a_str_or_a_path_like_and_nothing_else(tmp_path):
  """pathlib.Path works wherever a str does (it failed with "unsupported operand type(s)
  for +" in read and load, sweep 6); bytes are refused naming the argument."""
  config = helpers.odd_config()
  model = BertPretrainer(config)
  model.build()
  prefix = tmp_path / "ckpt" / "bert_model.ckpt"
  google_checkpoint.export_google_checkpoint(model, prefix)
  assert set(google_checkpoint.list_google_checkpoint(prefix)) == set(
      google_checkpoint.read_google_checkpoint(prefix))
  load_google_checkpoint(BertPretrainer(config), prefix)
  for call in (google_checkpoint.read_google_checkpoint,
               lambda p: google_checkpoint.export_google_checkpoint(model, p)):
    with pytest.raises(TypeError, match=r"prefix must be a str or an os.PathLike.*bytes"):
      call(os.fsencode(str(prefix)))


def test_missing_checkpoint_names_the_index_file(tmp_path):
  with pytest.raises(FileNotFoundError, match=r"nothing\.ckpt\.index does not exist"):
    load_google_checkpoint(BertPretrainer(helpers.odd_config()), str(tmp_path / "nothing.ckpt"))


def _damage_data_truncated(prefix):
  with open(prefix + ".data-00000-of-00001", "r+b") as f:
    f.truncate(5000)  # 8,420 bytes: the tensors past 5,000 are cut off.


def _damage_data_flipped(prefix):
  path = prefix + ".data-00000-of-00001"
  data = bytearray(open(path, "rb").read())
  data[100] ^= 0xFF
  open(path, "wb").write(bytes(data))


def _damage_index_truncated(prefix):
  with open(prefix + ".index", "r+b") as f:
    f.truncate(4000)


@pytest.mark.parametrize("damage, error, message", [
    (_damage_data_truncated, ValueError, "data file {p}.data-00000-of-00001 is truncated "
                                         "(reading bert/"),
    (_damage_data_flipped, ValueError, "data file {p}.data-00000-of-00001 is corrupt "
                                       "(reading bert/embeddings/position_embeddings: "
                                       "TensorBundle at {p} shard 0 (256 bytes): Checksum"),
    (lambda p: os.remove(p + ".data-00000-of-00001"), FileNotFoundError,
     "data file {p}.data-00000-of-00001 is missing"),
    (_damage_index_truncated, ValueError, "index file {p}.index is truncated or corrupt "
                                          "(not an sstable"),
])
def test_a_damaged_checkpoint_names_its_prefix_and_the_damaged_file(tiny, tmp_path, damage,
                                                                     error, message):
  # Before: IndexError "Read less bytes than requested" or an OpError naming nothing.
  _, source = tiny
  for suffix in (".index", ".data-00000-of-00001"):
    shutil.copyfile(source + suffix, str(tmp_path / "bert_model.ckpt") + suffix)
  prefix = str(tmp_path / "bert_model.ckpt")
  damage(prefix)
  with pytest.raises(error) as e:
    google_checkpoint.read_google_checkpoint(prefix)
  assert str(e.value).startswith(f"checkpoint {prefix}: " + message.format(p=prefix)), e.value
  assert "\n" not in str(e.value)
  with pytest.raises(error, match="checkpoint .*bert_model.ckpt: "):
    load_google_checkpoint(BertPretrainer(tiny[0]), prefix)


def test_a_checkpoint_file_given_for_the_prefix_is_answered_with_the_prefix(tiny):
  _, prefix = tiny
  with pytest.raises(FileNotFoundError, match=f"give the prefix {prefix}, without"):
    google_checkpoint.read_google_checkpoint(prefix + ".index")


def test_a_checkpoint_directory_given_for_the_prefix_names_the_prefix_in_it(tiny):
  _, prefix = tiny
  directory = os.path.dirname(prefix)
  with pytest.raises(ValueError, match=re.escape(
      f"{directory} is a directory: give the checkpoint's prefix, its .index file's path "
      f"without .index (e.g. {prefix})")):
    google_checkpoint.read_google_checkpoint(directory)


def test_a_write_stopped_before_the_index_leaves_no_checkpoint_not_a_mixed_one(tiny, tmp_path,
                                                                               monkeypatch):
  # The .index marks the set complete: it goes first and comes back last, so a crash
  # between the renames leaves "no checkpoint", never the old index over new data.
  config, source = tiny
  prefix = str(tmp_path / "bert_model.ckpt")
  weights = google_checkpoint.read_google_checkpoint(source)  # Its model's, as tfbert writes.
  google_checkpoint.write_google_checkpoint(
      {n: w for n, w in weights.items() if "adam" not in n and n != "global_step"}, prefix,
      config=config)
  model = BertPretrainer(config)
  model.build()
  faults.fail_renames_to(monkeypatch, ".index", KeyboardInterrupt("killed"))
  with pytest.raises(KeyboardInterrupt):
    google_checkpoint.export_google_checkpoint(model, prefix)
  monkeypatch.undo()
  assert sorted(os.listdir(tmp_path)) == ["bert_config.json",
                                          "bert_model.ckpt.data-00000-of-00001"]
  with pytest.raises(FileNotFoundError, match="bert_model.ckpt.index does not exist"):
    google_checkpoint.read_google_checkpoint(prefix)


def test_shape_mismatch_is_named(tiny):
  config, prefix = tiny
  model = BertPretrainer(BertConfig(**{**config.to_dict(), "intermediate_size": 17}))
  with pytest.raises(ValueError) as e:
    load_google_checkpoint(model, prefix)
  assert ("bert/encoder/layer_0/intermediate/dense/kernel: source (4, 16) vs model (4, 17)"
          in str(e.value))


def test_weights_that_are_not_finite_numbers_are_named(tiny):
  """Sweep 34, B78: a Hugging Face directory with one NaN in a query kernel loaded, and every
  classification read NaN. Every reader assigns through this one function."""
  config, prefix = tiny
  weights = google_checkpoint.read_google_checkpoint(prefix)
  name = "bert/encoder/layer_0/attention/self/query/kernel"
  weights[name] = weights[name].copy()
  weights[name][0, 1] = np.nan
  weights[name][1, 1] = np.inf
  model = BertPretrainer(config)
  with pytest.raises(ValueError, match=re.escape(
      "weights that are not finite numbers (NaN or inf; a damaged or diverged checkpoint):\n"
      f"  {name}: 2 of {weights[name].size} values")):
    google_checkpoint.assign_google_weights(model, weights, "x")
  load_google_checkpoint(model, prefix)  # The finite original loads.


def test_a_config_that_does_not_describe_the_checkpoint_is_named_first(tiny):
  """Sweep 13 P3: a list of every tensor's shapes, naming neither the config nor the field."""
  config, prefix = tiny
  model = BertPretrainer(BertConfig(**{**config.to_dict(), "intermediate_size": 17}))
  with pytest.raises(ValueError) as e:
    load_google_checkpoint(model, prefix)
  assert str(e.value).startswith(
      f"cannot load {prefix} into BertPretrainer:\nintermediate_size 17 in the model's config, "
      "but the checkpoint's bert/encoder/layer_0/intermediate/dense/kernel is [4, 16]: build "
      "the model with the config the checkpoint was trained with.\nshape mismatch:"), e.value


@pytest.mark.parametrize("field, value, expected", [
    ("hidden_size", 8, "hidden_size 8 in cfg.json, but the checkpoint's "
                       "bert/embeddings/word_embeddings is [15, 4]"),
    ("vocab_size", 30522, "vocab_size 30522 in cfg.json, but the checkpoint's "
                          "bert/embeddings/word_embeddings is [15, 4]"),
    ("max_position_embeddings", 64, "max_position_embeddings 64 in cfg.json, but the "
                                    "checkpoint's bert/embeddings/position_embeddings is [16, 4]"),
    ("type_vocab_size", 16, "type_vocab_size 16 in cfg.json, but the checkpoint's "
                            "bert/embeddings/token_type_embeddings is [2, 4]"),
    ("num_hidden_layers", 3, "num_hidden_layers 3 in cfg.json, but the checkpoint has 2 "
                             "(bert/encoder/layer_0 to layer_1)"),
])
def test_config_mismatch_names_the_first_field_the_tensors_contradict(tiny, field, value,
                                                                      expected):
  config, prefix = tiny
  shapes = google_checkpoint.list_google_checkpoint(prefix)
  assert google_checkpoint.config_mismatch(config, shapes, "cfg.json") is None
  wrong = BertConfig(**{**config.to_dict(), field: value})
  assert google_checkpoint.config_mismatch(wrong, shapes, "cfg.json") == expected


def test_unmatched_tensors_are_listed_unless_allowed(tiny):
  config, prefix = tiny
  model = BertSpanLabeler(config)
  with pytest.raises(ValueError) as e:
    load_google_checkpoint(model, prefix)
  message = str(e.value)
  assert "source tensors with no model weight:\n  cls/predictions/output_bias" in message
  assert "model weights missing from the source:\n  cls/squad/output_bias" in message
  # Sweep 22 P2: each part ends with the keyword that accepts it.
  assert re.search(r"cls/seq_relationship/output_weights\n  pass allow_unused=True to skip "
                   r"them \(e\.g\. the pretraining heads", message)
  assert message.endswith("cls/squad/output_weights\n  pass allow_missing=('span_head',) to "
                          "keep the head's initial values (a new head)")
  report = load_google_checkpoint(model, prefix, allow_unused=True, allow_missing=("span_head",))
  assert report.missing == ("cls/squad/output_bias", "cls/squad/output_weights")
  assert len(report.unused) == 7 and len(report.set_weights) == 39
  with pytest.raises(ValueError, match="no component 'mlm_head'"):
    load_google_checkpoint(model, prefix, allow_missing=("mlm_head",))


def test_missing_encoder_weights_are_never_silently_allowed(tiny, tmp_path):
  config, prefix = tiny
  weights = google_checkpoint.read_google_checkpoint(prefix)
  del weights["bert/encoder/layer_1/output/dense/bias"]
  model = BertPretrainer(config)
  with pytest.raises(ValueError, match="missing from the source:\n  bert/encoder/layer_1/output/"
                                       "dense/bias"):
    google_checkpoint.assign_google_weights(model, weights, "x", allow_missing=("mlm_head",))


def test_allowing_the_unscoped_classifier_head_to_be_missing_does_not_allow_the_pooler(tiny):
  # run_classifier.py's head has no Google scope (`output_weights`, `output_bias`): allowing
  # it to be missing must not, by an empty name prefix, allow every other weight too.
  from tfbert import BertClassifier
  config, prefix = tiny
  weights = google_checkpoint.read_google_checkpoint(prefix)
  del weights["bert/pooler/dense/kernel"]
  with pytest.raises(ValueError, match="missing from the source:\n  bert/pooler/dense/kernel\n"
                                       "  the encoder's weights are never left out: load a "
                                       "checkpoint of this encoder"):
    google_checkpoint.assign_google_weights(BertClassifier(config, 3), weights, "x",
                                            allow_unused=True,
                                            allow_missing=("classifier_head",))
  complete = google_checkpoint.read_google_checkpoint(prefix)
  report = google_checkpoint.assign_google_weights(BertClassifier(config, 3), complete, "x",
                                                   allow_unused=True,
                                                   allow_missing=("classifier_head",))
  assert report.missing == ("output_bias", "output_weights")
  with pytest.raises(ValueError, match="has no component 'pooler'"):
    google_checkpoint.assign_google_weights(BertClassifier(config, 3), complete, "x",
                                            allow_missing=("pooler",))
  # Sweep 33, B86-B88: the components are listed (a close one suggested), and a bare string
  # is refused (iterated, it named 'c', the first letter).
  with pytest.raises(ValueError, match=r"has no component 'clasifier_head' \(did you mean "
                                       r"'classifier_head'\?\); its components: encoder, "
                                       r"classifier_head"):
    google_checkpoint.assign_google_weights(BertClassifier(config, 3), complete, "x",
                                            allow_missing=("clasifier_head",))
  with pytest.raises(TypeError, match=r"a sequence of component names, e.g. "
                                      r"\['classifier_head'\], got the string"):
    google_checkpoint.assign_google_weights(BertClassifier(config, 3), complete, "x",
                                            allow_missing="classifier_head")


@pytest.mark.parametrize("marked", [False, True])
def test_a_checkpoint_is_never_written_into_a_saved_model_or_an_output_tfbert_wrote(
    tmp_path, marked):
  """`convert_checkpoint --output_format=google --output=<export>/variables/variables` replaced
  the SavedModel's weights (and put a vocabulary and configs into its variables/): a prefix
  whose `.index` exists read as this checkpoint's own, written before."""
  export = tmp_path / "export"
  (export / "variables").mkdir(parents=True)
  (export / "saved_model.pb").write_bytes(b"graph")
  for name in ("variables.index", "variables.data-00000-of-00001"):
    (export / "variables" / name).write_bytes(b"the export's weights")
  what = "a SavedModel (it holds saved_model.pb)"
  if marked:
    atomic.write_marker(str(export), atomic.OutputRecord("SavedModel export", "BertClassifier"))
    what = "a SavedModel export of a BertClassifier tfbert wrote"
  before = sorted((d, sorted(n)) for d, _, n in os.walk(tmp_path))
  prefix = str(export / "variables" / "variables")
  config = BertConfig(vocab_size=11, hidden_size=4, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=5)
  with pytest.raises(ValueError, match=re.escape(
      f"{prefix} lies inside {export}, {what}: a Google checkpoint written there would change "
      "that model's files; write it into a directory of its own")):
    google_checkpoint.write_google_checkpoint(
        {"bert/embeddings/word_embeddings": np.zeros((11, 4), np.float32)}, prefix, config=config)
  assert sorted((d, sorted(n)) for d, _, n in os.walk(tmp_path)) == before
  assert (export / "variables" / "variables.index").read_bytes() == b"the export's weights"


def training_checkpoint(run_dir, model_files=()):
  """A run directory whose checkpoints/ckpt-1 is saved as the training loop saves one
  (`tf.train.Checkpoint(model=..., optimizer=...)`), with run_config.json and `model_files`
  beside; its prefix."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  module = tf.Module()
  module.kernel = tf.Variable(np.ones((2, 2), np.float32))
  prefix = tf.train.Checkpoint(model=module, optimizer=tf.Module()).write(
      os.path.join(run_dir, "checkpoints", "ckpt-1"))
  (run_dir / "run_config.json").write_text("{}")
  for name in model_files:
    os.makedirs(os.path.dirname(run_dir / name), exist_ok=True)
    (run_dir / name).write_text("")
  return prefix


def test_a_training_checkpoint_is_named_with_its_runs_model_to_use(tmp_path):
  prefix = training_checkpoint(tmp_path / "run", ["model.keras", "best/model.keras"])
  run = str(tmp_path / "run")
  with pytest.raises(ValueError, match=re.escape(
      f"{prefix} is a training checkpoint of the tfbert run {run} (its model and optimizer "
      f"state, to resume training), not a model to read: convert {run}/model.keras (or "
      f"{run}/best/model.keras)")):
    google_checkpoint.read_google_checkpoint(prefix)
  other = training_checkpoint(tmp_path / "unfinished")
  assert re.search(r"the run has no .*unfinished/model.keras yet .*finish its training \(rerun "
                   r"its command, --do_train --output_dir=", google_checkpoint.
                   training_checkpoint_problem(other))


def test_a_side_file_of_another_model_is_never_replaced_even_with_no_checkpoint_beside_it(
    tmp_path):
  """`tfbert.save(model, "<dir>/mine", "google")` into a folder holding the user's own
  bert_config.json and vocab.txt (no checkpoint) replaced both: an existing side file whose
  content differs is refused, naming it; the same content is written as before."""
  config = BertConfig(vocab_size=11, hidden_size=4, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=5)
  weights = {"bert/embeddings/word_embeddings": np.zeros((11, 4), np.float32)}
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("".join(f"w{i}\n" for i in range(11)))
  folder = tmp_path / "other"
  folder.mkdir()
  prefix = str(folder / "mine")
  theirs = {"bert_config.json": '{"hidden_size": 64, "num_attention_heads": 4}',
            "vocab.txt": "[PAD]\n[UNK]\nhello\n",
            "tokenizer_config.json": '{"do_lower_case": false}'}
  for name, text in theirs.items():
    (folder / name).write_text(text)
    with pytest.raises(ValueError, match=re.escape(
        f"{prefix}: {folder / name} is already there, and this model's {name} differs")):
      google_checkpoint.write_google_checkpoint(weights, prefix, config=config,
                                                vocab_file=str(vocab), do_lower_case=True)
    assert sorted(os.listdir(folder)) == [name]
    assert (folder / name).read_text() == text
    (folder / name).unlink()
  # The same content (a rerun into a folder holding these files) is fine.
  config.to_json_file(str(folder / "bert_config.json"))
  shutil.copy(vocab, folder / "vocab.txt")
  google_checkpoint.write_google_checkpoint(weights, prefix, config=config,
                                            vocab_file=str(vocab), do_lower_case=True)
  assert google_checkpoint.prefixes_in(str(folder)) == ["mine"]
  # This prefix's own checkpoint alone: its side files are rewritten with it.
  bigger = BertConfig(**{**config.to_dict(), "intermediate_size": 6})
  google_checkpoint.write_google_checkpoint(weights, prefix, config=bigger)
  assert BertConfig.from_json_file(str(folder / "bert_config.json")) == bigger


def test_export_google_checkpoint_refuses_a_folder_holding_another_model(tmp_path):
  """Sweep 22 (item 5): `export_google_checkpoint` wrote beside a `.keras` file (or a Hugging
  Face model), which `tfbert.save` refuses: the folder then held two models that
  `tfbert.load` cannot tell apart. Its own checkpoint is rewritten as before."""
  model = BertPretrainer(BertConfig(vocab_size=11, hidden_size=4, num_hidden_layers=1,
                                    num_attention_heads=2, intermediate_size=5))
  model.build()
  for name, holds in (("mine.keras", r"a tfbert model \(mine\.keras\)"),
                      ("config.json", r"a Hugging Face model \(config\.json \+ no "
                                      r"model\.safetensors\)")):
    folder = tmp_path / name.split(".")[0]
    folder.mkdir()
    (folder / name).write_text("{}")
    before = sorted(os.listdir(folder))
    with pytest.raises(ValueError, match=rf"{re.escape(str(folder))} holds {holds}: a Google "
                                         r"checkpoint written at .* would make it hold two "
                                         r"models, .*write it into a folder of its own"):
      google_checkpoint.export_google_checkpoint(model, str(folder / "bert_model.ckpt"))
    assert sorted(os.listdir(folder)) == before
  own = str(tmp_path / "own" / "bert_model.ckpt")
  google_checkpoint.export_google_checkpoint(model, own)
  google_checkpoint.export_google_checkpoint(model, own)


def test_a_checkpoint_tfbert_did_not_write_is_never_written_over(tiny, tmp_path):
  """Sweep 24 S1 (r79): exporting a model back onto the Google checkpoint it was read from
  replaced its 139 tensors (Adam slots, global_step) by the model's 46, and its
  bert_config.json, without a word. tfbert's own export there is rewritten as before."""
  import tfbert  # pylint: disable=import-outside-toplevel
  folder = tmp_path / "google"
  shutil.copytree(os.path.dirname(tiny[1]), folder)
  os.chmod(folder, 0o755)
  for name in os.listdir(folder):
    os.chmod(folder / name, 0o644)
  prefix = str(folder / "bert_model.ckpt")
  before = {name: (folder / name).read_bytes() for name in os.listdir(folder)}
  model = tfbert.load(os.path.dirname(tiny[1]))  # The same weights, read from elsewhere.
  refused = (rf"^{re.escape(prefix)} already holds a checkpoint of 139 tensors, 93 of which "
             r"this model's checkpoint does not write \(.*\): writing over it would lose "
             r"them \(it is an input, .*\); write to another prefix or into another folder$")
  for write in (lambda: google_checkpoint.export_google_checkpoint(model, prefix),
                lambda: tfbert.save(model, prefix, "google"),
                lambda: convert.write_model(model, "google", prefix)):  # convert_checkpoint's
    with pytest.raises(ValueError, match=refused):
      write()
    assert {name: (folder / name).read_bytes() for name in os.listdir(folder)} == before
  own = str(tmp_path / "own" / "bert_model.ckpt")
  google_checkpoint.export_google_checkpoint(model, own)
  google_checkpoint.export_google_checkpoint(model, own)  # Its own export: rewritten.


def test_a_model_is_never_written_over_the_checkpoint_it_was_read_from(tiny, tmp_path):
  """Sweep 24 S1, its other half: a model-only checkpoint (as Google's releases are) holds
  exactly the tensors tfbert writes, so only the model's own record of where it was read
  from tells that writing there would replace an input (a release fine-tuned, then saved
  back over itself); another prefix is written."""
  import tfbert  # pylint: disable=import-outside-toplevel
  release = str(tmp_path / "release" / "bert_model.ckpt")
  google_checkpoint.export_google_checkpoint(
      tfbert.load(os.path.dirname(tiny[1])), release,
      vocab_file=os.path.join(os.path.dirname(tiny[1]), "vocab.txt"), do_lower_case=True)
  folder = os.path.dirname(release)
  before = {name: open(os.path.join(folder, name), "rb").read() for name in os.listdir(folder)}
  for model in (tfbert.load(folder), tfbert.load(folder, task="classifier", labels=("a", "b"))):
    refused = (rf"^{re.escape(release)} is the checkpoint this {type(model).__name__} was read "
               r"from: writing over it would replace that input; write to another prefix")
    for write in (lambda: google_checkpoint.export_google_checkpoint(model, release),
                  lambda: tfbert.save(model, release, "google")):
      with pytest.raises(ValueError, match=refused):
        write()
    assert {name: open(os.path.join(folder, name), "rb").read()
            for name in os.listdir(folder)} == before
  google_checkpoint.export_google_checkpoint(model, str(tmp_path / "other" / "bert_model.ckpt"))


def test_tokenizer_settings_that_nothing_records_or_reads_back_are_refused_before_writing(
    tiny, shared_data, tmp_path):
  """Sweep 33, B96-B100: do_lower_case=True beside a cased vocabulary was written (tfbert.load
  then refused the checkpoint); a model_max_length of 4096 for 64 positions was recorded for
  other tokenizers; do_lower_case or model_max_length without a vocabulary were dropped."""
  from tfbert.text import casing  # pylint: disable=import-outside-toplevel
  config, _ = tiny
  model = BertPretrainer(config)
  prefix = str(tmp_path / "out" / "bert_model.ckpt")
  cased = os.path.join(shared_data, "bert_cased_vocab.txt")
  uncased = os.path.join(shared_data, "bert_uncased_vocab.txt")
  with pytest.raises(casing.CasingMismatchError, match="allow_casing_mismatch"):
    google_checkpoint.export_google_checkpoint(model, prefix, vocab_file=cased,
                                               do_lower_case=True)
  limit = config.max_position_embeddings
  for length in (limit + 1, 0, True):
    with pytest.raises(ValueError, match=rf"model_max_length must be an int in \[1, {limit}\]"):
      google_checkpoint.export_google_checkpoint(model, prefix, vocab_file=uncased,
                                                 do_lower_case=True, model_max_length=length)
  for given in ({"do_lower_case": True}, {"model_max_length": 8}):
    with pytest.raises(ValueError, match=f"^{next(iter(given))}: recorded in "
                                         "tokenizer_config.json .* only with vocab_file"):
      google_checkpoint.export_google_checkpoint(model, prefix, **given)
  assert not (tmp_path / "out").exists()
  # What is consistent is written (and the mismatch when asked for).
  google_checkpoint.export_google_checkpoint(model, prefix, vocab_file=cased,
                                             do_lower_case=True, allow_casing_mismatch=True)
  google_checkpoint.export_google_checkpoint(model, prefix, vocab_file=uncased,
                                             do_lower_case=True, model_max_length=limit)
  assert json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())[
      "model_max_length"] == limit
