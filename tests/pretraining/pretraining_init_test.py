"""Tests for tfbert.pretraining.pretraining_init: continued pretraining starts from the model a
user has. A Hugging Face `BertForMaskedLM` directory (no next-sentence head, no pooler) made
here starts a run whose first-step MLM loss is the float64 NumPy oracle's on those weights;
the shipped MiniLM's sentence-transformers directory gives its config and encoder (its MLM
head fresh); a bad source is named before anything is written."""

import json
import os
import re
import types

import numpy as np
import pytest

from tests import helpers, numpy_reference, tool_process
from tfbert.checkpoints import huggingface, pretrained
from tfbert.checkpoints.google_checkpoint import google_weights
from tfbert.config import BertConfig
from tfbert.models import BertPretrainer
from tfbert.pretraining import input_pipeline, pretraining_init
from tfbert.pretraining.pretraining_run import PretrainingRunConfig, run_pretraining
from tfbert.training import optimization

SEQ, PRED = 23, 5
TINY = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=19, max_position_embeddings=SEQ, type_vocab_size=2,
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                  initializer_range=0.2)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return helpers.pydoc_records(tmp_path_factory.mktemp("pretraining_data"), SEQ, PRED,
                               max_documents=6, num_shards=1)


def _masked_lm_directory(directory, seed=4):
  """A Hugging Face `BertForMaskedLM` directory of random weights: no pooler, no NSP head.
  Returns every weight (Google names; the oracle's forward computes a pooled output too,
  which the MLM loss does not read)."""
  weights = {name: w.astype(np.float32) for name, w in
             numpy_reference.random_google_weights(TINY.to_dict(), seed=seed).items()}
  masked_lm = {name: w for name, w in weights.items()
               if not name.startswith(("cls/seq_relationship/", "bert/pooler/"))}
  huggingface.save_hf_checkpoint(TINY, masked_lm, str(directory), pretrained.minilm_vocab_file(),
                                 True, task={"architectures": ["BertForMaskedLM"]})
  return weights


@pytest.mark.slow  # ~5 s: one tiny run.
def test_a_masked_lm_directory_starts_the_run_at_the_oracles_first_loss(data_dir, tmp_path):
  weights = _masked_lm_directory(tmp_path / "hf")
  files = [os.path.join(data_dir, "*.tfrecord")]
  optimizer = optimization.OptimizerConfig(optimizer="adamw", learning_rate=1e-3,
                                           num_warmup_steps=0, num_train_steps=1)
  run_pretraining(PretrainingRunConfig(
      bert_config=TINY, input_files=files, model_dir=str(tmp_path / "run"), optimizer=optimizer,
      train_batch_size=7, max_seq_length=SEQ, max_predictions_per_seq=PRED, log_steps=1,
      save_checkpoints_steps=1, seed=3, deterministic=True, export_saved_model=False,
      init_hf_dir=str(tmp_path / "hf")))
  with open(tmp_path / "run" / "metrics.jsonl", encoding="utf-8") as f:
    first = json.loads(f.readline())
  assert first["step"] == 1
  # The run's first batch (deterministic order: the records as written) through the oracle.
  batch = next(iter(input_pipeline.pretraining_dataset(
      files, 7, seq_length=SEQ, max_predictions=PRED, shuffle=False, seed=3,
      deterministic=True)))
  batch = {name: value.numpy() for name, value in batch.items()}
  logits = numpy_reference.bert_forward(
      weights, TINY.to_dict(), batch["input_ids"], batch["input_mask"], batch["segment_ids"],
      batch["masked_lm_positions"])["mlm_logits"]                          # [B, P, V] float64
  logits = logits - logits.max(axis=-1, keepdims=True)
  log_probs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
  picked = np.take_along_axis(log_probs, batch["masked_lm_ids"][..., None], axis=-1)[..., 0]
  mask_weights = batch["masked_lm_weights"].astype(np.float64)
  oracle = -(picked * mask_weights).sum() / mask_weights.sum()
  # float32 forward and loss of a 1-layer H 16 model against float64: ~1e-7 relative.
  assert first["mlm_loss"] == pytest.approx(oracle, rel=2e-6)


def test_the_shipped_minilm_gives_its_config_and_encoder_and_a_fresh_mlm_head():
  source = types.SimpleNamespace(init_hf_dir=pretrained.minilm_dir())
  config = pretraining_init.source_config(source)
  assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (384, 6, 30522)
  model = BertPretrainer(config)
  model.build()
  fresh = {n: w for n, w in google_weights(model).items() if n.startswith("cls/predictions/")}
  read = pretraining_init.read_source(source)
  report = pretraining_init.load_source(model, read)
  loaded = google_weights(model)
  for name in read.weights:
    if name.startswith("bert/") and name in loaded:
      np.testing.assert_array_equal(loaded[name], read.weights[name], err_msg=name)
  for name, value in fresh.items():  # The MLM head keeps its fresh values.
    np.testing.assert_array_equal(loaded[name], value, err_msg=name)
  assert report.source.endswith(os.path.basename(read.name))


def test_two_sources_or_a_missing_one_are_refused_before_any_work(tmp_path):
  with pytest.raises(ValueError, match="give one of --init_checkpoint, --init_hf_dir, "
                                       "--init_tfbert; got --init_hf_dir and --init_tfbert"):
    pretraining_init.given(types.SimpleNamespace(init_hf_dir="a", init_tfbert="b"))
  with pytest.raises(FileNotFoundError, match="--init_hf_dir .*nowhere: no such directory"):
    pretraining_init.read_source(types.SimpleNamespace(init_hf_dir=str(tmp_path / "nowhere")))
  with pytest.raises(FileNotFoundError, match="--init_tfbert .*nowhere.keras: no such file"):
    pretraining_init.read_source(types.SimpleNamespace(
        init_tfbert=str(tmp_path / "nowhere.keras")))


def test_the_tool_needs_a_config_or_a_source_that_gives_one(data_dir, tmp_path):
  run = tool_process.run_tool("run_pretraining", f"--input_files={data_dir}/*.tfrecord",
                              f"--model_dir={tmp_path / 'run'}")
  assert run.returncode != 0
  assert "--bert_config_file is needed without --init_checkpoint, --init_hf_dir or " \
         "--init_tfbert" in run.stderr
  assert not (tmp_path / "run").exists()


def test_a_config_that_does_not_fit_the_source_is_named_in_one_line():
  source = types.SimpleNamespace(init_hf_dir=pretrained.minilm_dir(), init_checkpoint=None,
                                 init_tfbert=None, bert_config=TINY)
  with pytest.raises(ValueError, match=r"does not fit --init_hf_dir .*: hidden_size 16 vs 384; "
                                       r".*num_hidden_layers 1 vs 6"):
    pretraining_init.check_config(source)
  pretraining_init.check_config(types.SimpleNamespace(  # The source's own config: fine.
      init_hf_dir=pretrained.minilm_dir(), bert_config=pretraining_init.source_config(source)))


def test_an_mlm_run_from_an_encoder_starts_only_its_mlm_head_fresh(tmp_path, caplog):
  """A `BertModel` directory (encoder and pooler, no head): the objective "mlm" has no NSP
  head to start, so the log names the MLM head alone; "mlm_nsp" names both."""
  weights = {n: w.astype(np.float32) for n, w in numpy_reference.random_google_weights(
      TINY.to_dict(), seed=5).items() if n.startswith("bert/")}
  huggingface.save_hf_checkpoint(TINY, weights, str(tmp_path / "hf"),
                                 task={"architectures": ["BertModel"]})
  source = pretraining_init.read_source(types.SimpleNamespace(init_hf_dir=str(tmp_path / "hf")))
  fresh = {}
  for objective in ("mlm", "mlm_nsp"):
    caplog.clear()
    model = BertPretrainer(TINY, objective=objective)
    with caplog.at_level("INFO", logger="absl"):
      pretraining_init.load_source(model, source)
    fresh[objective] = re.findall(r"has no (\w+): it starts fresh", caplog.text)
    loaded = google_weights(model)
    for name, value in weights.items():
      np.testing.assert_array_equal(loaded[name], value, err_msg=name)
  assert fresh == {"mlm": ["mlm_head"], "mlm_nsp": ["mlm_head", "nsp_head"]}


def test_the_tool_reads_minilm_as_the_shipped_sentence_transformers_directory(tmp_path):
  """`--init_hf_dir=minilm` names the shipped MiniLM, as in the fine-tuning tools: the
  model's config is read from it, and the run goes on to its next check (here a refusal:
  raw text trains masked-LM alone), not "minilm/config.json not found"."""
  run = tool_process.run_tool(
      "run_pretraining", "--init_hf_dir=minilm", f"--model_dir={tmp_path / 'run'}",
      f"--train_text_files={tmp_path / 'notes.txt'}", "--objective=mlm_nsp")
  assert run.returncode == 1
  assert "--train_text_files trains masked LM alone" in run.stderr, run.stderr
  assert not os.path.exists(tmp_path / "run")


def test_a_source_of_another_kind_is_named_before_any_part_is_read(tmp_path):
  """A vocab.txt given as --init_hf_dir said "config file not found: .../vocab.txt/
  config.json"; a Hugging Face directory given as --init_checkpoint, "config file not found:
  <parent>/bert_config.json"."""
  vocab = pretrained.minilm_vocab_file()
  minilm = pretrained.minilm_dir()
  for read in (pretraining_init.source_config, pretraining_init.read_source):
    with pytest.raises(ValueError, match=f"^--init_hf_dir {re.escape(vocab)}: a file, where a "
                                         "Hugging Face or sentence-transformers model directory"):
      read(types.SimpleNamespace(init_hf_dir=vocab))
    with pytest.raises(ValueError, match=f"^--init_checkpoint {re.escape(minilm)} is a "
                                         "sentence-transformers directory: pass "
                                         f"--init_hf_dir={re.escape(minilm)}$"):
      read(types.SimpleNamespace(init_checkpoint=minilm))
  prefix = tmp_path / "bert_model.ckpt"
  (tmp_path / "bert_model.ckpt.index").write_text("", encoding="utf-8")
  with pytest.raises(FileNotFoundError, match="no bert_config.json beside the checkpoint .*: "
                                              "pass --bert_config_file"):
    pretraining_init.source_config(types.SimpleNamespace(init_checkpoint=str(prefix)))
