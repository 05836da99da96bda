"""The tools as a user meets them: bad input ends a tool with one line naming the culprit.

Each case runs a real tool (its `run()`, flags parsed from argv, in this process: see
tests/tool_process.py; a fresh process's quiet start is tests/runtime/cli_test.py's) on one
bad input and checks what a user sees: exit status 1, exactly one stderr line `<tool>: error: ...`
naming the culprit (file, field, flag), no traceback, and nothing written where the tool
would write. The library tests prove each check; this proves the tools surface them.
"""

import json
import os

import pytest

from tests import numpy_reference, tool_process
from tfbert.checkpoints import pretrained
from tfbert.checkpoints.google_checkpoint import write_google_checkpoint
from tfbert.config import BertConfig
from tfbert.pretraining import pretraining_data

SEQ, PRED = 32, 5
TINY = dict(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=19, hidden_act="gelu", hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1, max_position_embeddings=SEQ, type_vocab_size=2,
            initializer_range=0.02)


def _write(path, text, mode="w"):
  with open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
    f.write(text)
  return str(path)


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
  """{name: (argv, expected substrings of the error line, path that must not exist)}."""
  d = tmp_path_factory.mktemp("bad_inputs")
  vocab = pretrained.minilm_vocab_file()
  data = d / "data"
  corpus = pretraining_data.pydoc_corpus(str(d / "corpus.txt"), max_documents=3)
  pretraining_data.create_pretraining_data(
      [corpus], str(data), pretraining_data.PretrainingDataConfig(
          vocab_file=vocab, max_seq_length=SEQ, max_predictions_per_seq=PRED, dupe_factor=1),
      log_every_seconds=1e9)
  BertConfig(**TINY).to_json_file(str(d / "bert_config.json"))
  BertConfig(**{**TINY, "max_position_embeddings": 2 * SEQ}).to_json_file(
      str(d / "bert_config_64.json"))
  partial = {k: v for k, v in TINY.items() if k != "num_hidden_layers"}
  _write(d / "partial_config.json", json.dumps(partial))
  squad_v2 = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{
      "context": "Alan went home.", "qas": [{"id": "q1", "question": "Who left?",
                                             "answers": [], "is_impossible": True}]}]}]}
  _write(d / "train-v2.0.json", json.dumps(squad_v2))
  squad_v1 = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
      "context": "Alan went home.", "qas": [{"id": "q1", "question": "Who went home?",
                                             "answers": [{"text": "Alan",
                                                          "answer_start": 0}]}]}]}]}
  _write(d / "train-v1.1.json", json.dumps(squad_v1))
  _write(d / "train.conll", "Alan B-PER\nwent O\nhome O\n")
  glue = d / "mrpc"
  glue.mkdir()
  header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
  _write(glue / "train.tsv", header + "1\t1\t2\tA cat sat.\tA cat sat down.\n")
  _write(glue / "dev.tsv", header)  # No examples.
  _write(d / "latin1_vocab.txt", b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ncaf\xe9\n", "wb")
  _write(d / "model.safetensors", b"\x10\x00\x00\x00\x00\x00\x00\x00{not json", "wb")
  _write(d / "config.json", json.dumps({"model_type": "bert", **TINY}))
  no_vocab = d / "no_vocab"
  no_vocab.mkdir()
  write_google_checkpoint(numpy_reference.random_google_weights(TINY, 0),
                          str(no_vocab / "bert_model.ckpt"), config=BertConfig(**TINY))
  common = [f"--bert_config_file={d / 'bert_config.json'}", f"--vocab_file={vocab}"]
  return {
      "run_pretraining: data of another sequence length": (
          ["run_pretraining", f"--bert_config_file={d / 'bert_config_64.json'}",
           f"--input_files={data}/*.tfrecord", f"--model_dir={d / 'pretrain'}",
           "--max_seq_length=64", f"--max_predictions_per_seq={PRED}"],
          ["pretraining-00000-of-00001.tfrecord", "input_ids", "--max_seq_length=64"],
          d / "pretrain"),
      "run_pretraining: bert_config.json without a field": (
          ["run_pretraining", f"--bert_config_file={d / 'partial_config.json'}",
           f"--input_files={data}/*.tfrecord", f"--model_dir={d / 'pretrain2'}"],
          ["partial_config.json", "num_hidden_layers"], d / "pretrain2"),
      "run_squad: SQuAD 2.0 data without the v2 flag": (
          ["run_squad", "--do_train", f"--train_file={d / 'train-v2.0.json'}",
           f"--output_dir={d / 'squad'}", *common],
          ["train-v2.0.json", "--version_2_with_negative"], d / "squad"),
      "run_pretraining: a sequence longer than the model": (
          ["run_pretraining", f"--bert_config_file={d / 'bert_config.json'}",
           f"--input_files={data}/*.tfrecord", f"--model_dir={d / 'pretrain3'}",
           "--max_seq_length=64", f"--max_predictions_per_seq={PRED}"],
          ["max_seq_length 64 exceeds max_position_embeddings 32"], d / "pretrain3"),
      "run_squad: a window longer than the model": (
          ["run_squad", "--do_train", f"--train_file={d / 'train-v1.1.json'}",
           f"--output_dir={d / 'squad3'}", "--max_seq_length=64", "--max_query_length=16",
           "--doc_stride=16", *common],
          ["max_seq_length 64 exceeds max_position_embeddings 32"], d / "squad3"),
      "run_ner: a zero train batch": (
          ["run_ner", "--do_train", f"--train_file={d / 'train.conll'}",
           f"--output_dir={d / 'ner'}", "--train_batch_size=0", *common],
          ["train_batch_size (0)", "must be >= 1"], d / "ner"),
      "run_squad: a stride longer than the window": (
          ["run_squad", "--do_train", f"--train_file={d / 'train-v1.1.json'}",
           f"--output_dir={d / 'squad2'}", "--max_seq_length=32", "--max_query_length=8",
           "--doc_stride=30", *common],
          ["doc_stride", "max_query_length"], d / "squad2"),
      "run_classifier: an empty dev file": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           "--do_eval", f"--output_dir={d / 'mrpc_out'}", "--max_seq_length=16", *common],
          [str(glue / "dev.tsv"), "no examples"], d / "mrpc_out"),
      "create_pretraining_data: a vocabulary that is not UTF-8": (
          ["create_pretraining_data", f"--input_file={corpus}",
           f"--vocab_file={d / 'latin1_vocab.txt'}", f"--output_dir={d / 'data2'}"],
          ["latin1_vocab.txt", "line 6"], d / "data2"),
      "run_classifier: a cased --do_lower_case for an uncased checkpoint": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           f"--output_dir={d / 'mrpc_cased'}", "--init_hf_dir=minilm", "--do_lower_case=false"],
          ["casing mismatch: --do_lower_case=false", "tokenizer_config.json",
           "do_lower_case=true", "--allow_casing_mismatch"], d / "mrpc_cased"),
      "convert_checkpoint: an hf output without a vocabulary": (
          ["convert_checkpoint", f"--input={no_vocab / 'bert_model.ckpt'}", "--output_format=hf",
           f"--output={d / 'hf_out'}"],
          [str(no_vocab / "bert_model.ckpt"), "--vocab_file"], d / "hf_out"),
      "convert_checkpoint: a corrupt safetensors file": (
          ["convert_checkpoint", "--input_format=hf", f"--input={d}",
           "--output_format=tfbert", f"--output={d / 'out' / 'model.keras'}"],
          [str(d / "model.safetensors")], d / "out"),
  }


@pytest.fixture(scope="module")
def results(cases):
  """{name: (exit status, stdout, stderr)}: each tool run in this process, one after another
  (tests/tool_process.py: their own flags each time, native output captured)."""
  finished = {}
  for name, (argv, _, _) in cases.items():
    run = tool_process.run_tool(argv[0], *argv[1:])
    finished[name] = (run.returncode, run.stdout, run.stderr)
  return finished


CASE_NAMES = [
    "run_pretraining: data of another sequence length",
    "run_pretraining: bert_config.json without a field",
    "run_squad: SQuAD 2.0 data without the v2 flag",
    "run_squad: a stride longer than the window",
    "run_pretraining: a sequence longer than the model",
    "run_squad: a window longer than the model",
    "run_ner: a zero train batch",
    "run_classifier: an empty dev file",
    "create_pretraining_data: a vocabulary that is not UTF-8",
    "run_classifier: a cased --do_lower_case for an uncased checkpoint",
    "convert_checkpoint: an hf output without a vocabulary",
    "convert_checkpoint: a corrupt safetensors file",
]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_bad_input_ends_the_tool_with_one_line_naming_the_culprit(cases, results, name):
  _, expected, untouched = cases[name]
  code, _, err = results[name]
  tool = name.split(":")[0]
  assert code == 1, (code, err[-3000:])
  lines = err.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(f"{tool}: error: "), err[-3000:]
  for part in expected:
    assert part in lines[0], (part, lines[0])
  assert not os.path.exists(untouched), sorted(os.listdir(untouched))
