"""The tools as a user meets them: bad input ends a tool with one line naming the culprit.

Each case runs a real tool (its `run()`, flags parsed from argv, in this process: see
tests/tool_process.py; a fresh process's quiet start is tests/runtime/cli_test.py's) on one
bad input and checks what a user sees: exit status 1, exactly one stderr line `<tool>: error: ...`
naming the culprit (file, field, flag), no traceback, and nothing written where the tool
would write. The library tests prove each check; this proves the tools surface them.
"""

import dataclasses
import json
import os
import shutil
import signal

import pytest

from tests import glue_synthetic, numpy_reference, tool_process
from tfbert.checkpoints import pretrained
from tfbert.checkpoints.google_checkpoint import write_google_checkpoint
from tfbert.classifier import classifier_run
from tfbert.config import BertConfig
from tfbert.pretraining import pretraining_data, pretraining_instances
from tfbert.runtime import atomic
from tfbert.serving import export as serving_export
from tfbert.tasks import fine_tuning

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
  scored = d / "mrpc_scored"  # A dev file an untrained model would score.
  scored.mkdir()
  _write(scored / "dev.tsv", header + "1\t1\t2\tA cat sat.\tA cat sat down.\n")
  _write(d / "latin1_vocab.txt", b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ncaf\xe9\n", "wb")
  _write(d / "model.safetensors", b"\x10\x00\x00\x00\x00\x00\x00\x00{not json", "wb")
  _write(d / "config.json", json.dumps({"model_type": "bert", **TINY}))
  no_vocab = d / "no_vocab"
  no_vocab.mkdir()
  write_google_checkpoint(numpy_reference.random_google_weights(TINY, 0),
                          str(no_vocab / "bert_model.ckpt"), config=BertConfig(**TINY))
  common = [f"--bert_config_file={d / 'bert_config.json'}", f"--vocab_file={vocab}"]
  with open(vocab, encoding="utf-8") as f:
    tokens = f.read().split("\n")
  the, a = tokens.index("the"), tokens.index("a")
  tokens[the], tokens[a] = "a", "the"  # Same size and casing, other ids.
  _write(d / "swapped_vocab.txt", "\n".join(tokens))
  tokens[1000] = "ab\x00cd"  # Line 1001.
  _write(d / "nul_vocab.txt", "\n".join(tokens))
  for name, vocab_file, lower in (("data_swapped", str(d / "swapped_vocab.txt"), True),
                                  ("data_cased", vocab, False)):
    pretraining_data.create_pretraining_data(
        [corpus], str(d / name), pretraining_data.PretrainingDataConfig(
            vocab_file=vocab_file, do_lower_case=lower, max_seq_length=SEQ,
            max_predictions_per_seq=PRED, dupe_factor=1), log_every_seconds=1e9)
  minilm = pretrained.minilm_dir()
  utf16 = _write(d / "corpus_utf16.txt", "One line.\nAnother line.\n".encode("utf-16"), "wb")
  export, run = d / "export", d / "run"  # As named: their content is never read.
  for folder, name in ((export, "saved_model.pb"), (run, "model.keras")):
    folder.mkdir()
    _write(folder / name, "")
  return {
      "run_pretraining: continued on data of another vocabulary": (
          ["run_pretraining", f"--input_files={d / 'data_swapped'}/*.tfrecord",
           f"--model_dir={d / 'continued'}", f"--max_seq_length={SEQ}",
           f"--max_predictions_per_seq={PRED}", f"--init_hf_dir={minilm}",
           "--num_train_steps=1", "--num_warmup_steps=0", "--train_batch_size=2",
           "--export_saved_model=false"],
          [f"--init_hf_dir {minilm}", "another vocabulary", str(d / "swapped_vocab.txt"),
           os.path.join(minilm, "vocab.txt"), "create_pretraining_data --vocab_file="],
          d / "continued"),
      "run_pretraining: an uncased source continued on cased data": (
          ["run_pretraining", f"--input_files={d / 'data_cased'}/*.tfrecord",
           f"--model_dir={d / 'continued2'}", f"--max_seq_length={SEQ}",
           f"--max_predictions_per_seq={PRED}", f"--init_hf_dir={minilm}",
           "--num_train_steps=1", "--num_warmup_steps=0", "--train_batch_size=2",
           "--export_saved_model=false"],
          ["do_lower_case=false", "tokenizer_config.json", "do_lower_case=true",
           "create_pretraining_data --do_lower_case=true"], d / "continued2"),
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
      # Old: "starting from random weights", their scores written as the run's (sweep 8).
      "run_classifier: an evaluation without training, a trained model or a source": (
          ["run_classifier", "--task_name=mrpc", "--do_eval", f"--data_dir={scored}",
           f"--output_dir={d / 'eval_only'}", "--max_seq_length=16", *common],
          ["nothing to evaluate", f"{d / 'eval_only'} holds no trained model",
           "--init_tfbert/--init_hf_dir/--init_checkpoint, or --do_train"], d / "eval_only"),
      "run_classifier: an empty dev file": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           "--do_eval", f"--output_dir={d / 'mrpc_out'}", "--max_seq_length=16", *common],
          [str(glue / "dev.tsv"), "no examples"], d / "mrpc_out"),
      "create_pretraining_data: a vocabulary that is not UTF-8": (
          ["create_pretraining_data", f"--input_file={corpus}",
           f"--vocab_file={d / 'latin1_vocab.txt'}", f"--output_dir={d / 'data2'}"],
          ["latin1_vocab.txt", "line 6"], d / "data2"),
      # Old: tensorflow_text's RuntimeError "Cannot traverse from parent id ... This should
      # never happen" (sweep 7 C16).
      "run_classifier: a vocabulary with a NUL in a token": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           f"--output_dir={d / 'mrpc_nul'}", "--max_seq_length=16",
           f"--bert_config_file={d / 'bert_config.json'}", f"--vocab_file={d / 'nul_vocab.txt'}"],
          ["nul_vocab.txt: line 1001", "'\\x00' (U+0000)"], d / "mrpc_nul"),
      "run_classifier: a cased --do_lower_case for an uncased checkpoint": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           f"--output_dir={d / 'mrpc_cased'}", "--init_hf_dir=minilm", "--do_lower_case=false"],
          ["casing mismatch: --do_lower_case=false", "tokenizer_config.json",
           "do_lower_case=true", "--allow_casing_mismatch"], d / "mrpc_cased"),
      "create_pretraining_data: an --output_prefix with a folder": (
          ["create_pretraining_data", f"--input_file={utf16}", f"--vocab_file={vocab}",
           f"--output_dir={d / 'data_prefix'}", "--output_prefix=a/b"],
          ["--output_prefix 'a/b' must be a file name prefix"], d / "data_prefix"),
      # Old: 'error: .../.tfbert-tmp-...-shard: File name too long', after the work.
      "create_pretraining_data: an --output_prefix too long for the file system": (
          ["create_pretraining_data", f"--input_file={corpus}", f"--vocab_file={vocab}",
           f"--output_dir={d / 'data_long'}", "--output_prefix=" + "p" * 260],
          ["--output_prefix", "-00000-of-00001.tfrecord' is 284 bytes long, over the 255 "
           "bytes a file name may have in", "choose a shorter --output_prefix"],
          d / "data_long"),
      "create_pretraining_data: a corpus saved as UTF-16": (
          ["create_pretraining_data", f"--input_file={utf16}", f"--vocab_file={vocab}",
           f"--output_dir={d / 'data_utf16'}"],
          [f"{utf16}: UTF-16 text", "save the file as UTF-8"], d / "data_utf16"),
      "run_ner: a .keras model given as --init_checkpoint": (
          ["run_ner", "--do_train", f"--train_file={d / 'train.conll'}",
           f"--output_dir={d / 'ner_keras'}", f"--init_checkpoint={run / 'model.keras'}",
           f"--vocab_file={vocab}"],
          ["a tfbert .keras model, not a Google checkpoint", "--init_tfbert"], d / "ner_keras"),
      "run_classifier: an export given as --init_hf_dir": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           f"--output_dir={d / 'mrpc_export'}", f"--init_hf_dir={export}"],
          [f"--init_hf_dir {export}: not a Hugging Face model directory", "SavedModel export",
           "--init_tfbert"], d / "mrpc_export"),
      "run_classifier: a run directory given as --init_tfbert": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           f"--output_dir={d / 'mrpc_run'}", f"--init_tfbert={run}"],
          # As convert_checkpoint's --input says it (sweep 33, A89).
          [f"--init_tfbert {run} is a tfbert run directory, not a .keras model file: pass its "
           f"model {run / 'model.keras'}"], d / "mrpc_run"),
      "run_classifier: another vocabulary than the source's": (  # Sweep 31, A36.
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           f"--output_dir={d / 'mrpc_swapped'}", f"--init_hf_dir={minilm}",
           f"--vocab_file={d / 'swapped_vocab.txt'}"],
          [f"--vocab_file={d / 'swapped_vocab.txt'} is not the vocabulary of {minilm}",
           f"its id {a} is 'the' where the source's vocab.txt "
           f"({os.path.join(minilm, 'vocab.txt')}) has 'a'", "leave --vocab_file out"],
          d / "mrpc_swapped"),
      "run_classifier: a fresh head evaluated without training": (  # Sweep 31, A6.
          ["run_classifier", "--task_name=mrpc", f"--data_dir={scored}", "--do_eval",
           f"--output_dir={d / 'mrpc_reinit'}", f"--init_hf_dir={minilm}", "--reinit_head"],
          ["reinit_head starts a fresh task head of random weights", "no --do_train",
           "predictions would be random"], d / "mrpc_reinit"),
      "run_classifier: a missing --init_hf_dir": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           f"--output_dir={d / 'mrpc_missing'}", f"--init_hf_dir={d / 'no_such_model'}"],
          [f"--init_hf_dir {d / 'no_such_model'}: no such directory"], d / "mrpc_missing"),
      "run_ner: a Google checkpoint given as its directory": (
          ["run_ner", "--do_train", f"--train_file={d / 'train.conll'}",
           f"--output_dir={d / 'ner_dir'}", f"--init_checkpoint={no_vocab}",
           f"--vocab_file={vocab}"],
          [f"--init_checkpoint {no_vocab} is a directory",
           f"e.g. {no_vocab / 'bert_model.ckpt'}"], d / "ner_dir"),
      "convert_checkpoint: an hf output without a vocabulary": (
          ["convert_checkpoint", f"--input={no_vocab / 'bert_model.ckpt'}", "--output_format=hf",
           f"--output={d / 'hf_out'}"],
          [str(no_vocab / "bert_model.ckpt"), "--vocab_file"], d / "hf_out"),
      "align: an unknown variant, before the embedded corpus is made": (
          ["align", "--variants=graph,fast", f"--workdir={d / 'align'}"],
          ["unknown variant 'fast'"], d / "align"),
      "align: a tolerance that is not kind=value": (
          ["align", "--variants=graph,eager", "--tolerances=float32", f"--workdir={d / 'align2'}"],
          ["--tolerances item 'float32' is not kind=value"], d / "align2"),
      "run_classifier: a negative --eval_batch_size": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           f"--output_dir={d / 'mrpc_eval_batch'}", "--eval_batch_size=-1", *common],
          ["eval_batch_size (-1) must be >= 1"], d / "mrpc_eval_batch"),
      "convert_checkpoint: a corrupt safetensors file": (
          ["convert_checkpoint", "--input_format=hf", f"--input={d}",
           "--output_format=tfbert", f"--output={d.parent / 'converted' / 'model.keras'}"],
          [str(d / "model.safetensors")], d.parent / "converted"),
      # A `~` the shell left (it expands only an unquoted word's leading ~): the run went to
      # ./~/... and ended "wrote: ~/...", an input "did not exist" (sweep 6, C21, K07).
      "run_classifier: an --output_dir whose ~ the shell left": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           "--output_dir=~/tfbert-tool-errors-c21", "--max_seq_length=16", *common],
          ["--output_dir=~/tfbert-tool-errors-c21: '~' was not expanded by the shell",
           f"write --output_dir={os.path.expanduser('~/tfbert-tool-errors-c21')} (or "],
          os.path.join(os.getcwd(), "~", "tfbert-tool-errors-c21")),
      "convert_checkpoint: an --input whose ~ the shell left": (
          ["convert_checkpoint", "--input_format=tfbert", "--input=~/S01/model.keras",
           "--output_format=hf", f"--output={d / 'k07_out'}"],
          ["--input=~/S01/model.keras: '~' was not expanded by the shell",
           f"write --input={os.path.expanduser('~/S01/model.keras')} (or "], d / "k07_out"),
      # Never opened: the run trained and ended without a word (sweep 12, S2).
      "run_classifier: a dev file without --do_eval": (
          ["run_classifier", "--task_name=mrpc", f"--train_file={glue / 'train.tsv'}",
           f"--eval_file={glue / 'dev.tsv'}", "--do_train", f"--output_dir={d / 's2_c'}",
           *common],
          [f"--eval_file {glue / 'dev.tsv'} is read only with --do_eval: add --do_eval, or "
           "drop --eval_file"], d / "s2_c"),
      "run_embeddings: a retrieval set without --do_eval": (
          ["run_embeddings", f"--train_file={glue / 'train.tsv'}",
           *(f"--ir_{part}_file={d / 'train.conll'}" for part in ("queries", "corpus", "qrels")),
           "--do_train", f"--output_dir={d / 's2_m'}", *common],
          ["--ir_queries_file", "--ir_corpus_file", "--ir_qrels_file",
           "are read only with --do_eval: add --do_eval, or drop"], d / "s2_m"),
      # It named neither file (sweep 12, P3).
      "run_classifier: a vocabulary larger than the config's vocab_size": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           f"--output_dir={d / 'p3'}", f"--max_seq_length={SEQ}", f"--vocab_file={vocab}",
           "--bert_config_file=" + _write(d / "vocab_1000.json",
                                          json.dumps({**TINY, "vocab_size": 1000}))],
          [f"--vocab_file={vocab} has ", "more than the vocab_size 1000 of "
           f"--bert_config_file={d / 'vocab_1000.json'}: pass the vocabulary that config was "
           "made for, or fix vocab_size"], d / "p3"),
      # Sweep 27, A117: the refusal said "the model's config", never the flag that gave it.
      "run_classifier: a --bert_config_file that does not describe --init_checkpoint": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           f"--output_dir={d / 'mrpc_config'}", f"--max_seq_length={SEQ}",
           f"--init_checkpoint={no_vocab / 'bert_model.ckpt'}", f"--vocab_file={vocab}",
           "--bert_config_file=" + _write(d / "hidden_8.json",
                                          json.dumps({**TINY, "hidden_size": 8}))],
          [f"hidden_size 8 in --bert_config_file={d / 'hidden_8.json'}, but the checkpoint's",
           f"--bert_config_file does not describe {no_vocab / 'bert_model.ckpt'}; leave it out "
           "to take the source's own config"], d / "mrpc_config"),
      # Sweep 26, B8: align wrote WORKDIR/data, then refused the config's vocab_size.
      "align: a config's table smaller than the embedded data's vocabulary": (
          ["align", "--variants=graph,eager", f"--workdir={d / 'align_vocab'}",
           f"--bert_config_file={d / 'vocab_1000.json'}"],
          [f"the MiniLM vocabulary {vocab} (align's embedded data uses it) has 30522 entries, "
           "more than the vocab_size 1000 of the model config"], d / "align_vocab"),
      # Sweep 28, A93: absl's "Unknown command line flag 'task_name'" named neither the file
      # nor whose it was.
      "run_ner: a run_classifier run's flags.txt": (
          ["run_ner", "--flagfile=" + _write(d / "classifier_flags.txt",
                                             "# flags of run_classifier\n--do_train\n"
                                             "--task_name=mrpc\n--nodo_predict\n"),
           f"--output_dir={d / 'ner_replay'}"],
          [f"--flagfile {d / 'classifier_flags.txt'} sets --task_name, which this tool does "
           "not have: the file holds the flags of a run_classifier run (replay it with "
           "run_classifier)"], d / "ner_replay"),
      "run_ner: a flag file of unknown flags": (
          ["run_ner", "--flagfile=" + _write(d / "odd_flags.txt", "--do_train\n--labelz=a\n"
                                             "--nodo_stuff\n"),
           f"--output_dir={d / 'ner_odd'}"],
          [f"--flagfile {d / 'odd_flags.txt'} sets --labelz, --nodo_stuff, which this tool does "
           "not have (a flag file of another tool?)"], d / "ner_odd"),
      # Sweep 34, A59: one replica trained, the flag recorded and never read.
      "run_pretraining: --num_cpu_devices without a mirrored strategy": (
          ["run_pretraining", f"--bert_config_file={d / 'bert_config.json'}",
           f"--input_files={data}/*.tfrecord", f"--model_dir={d / 'a59'}",
           f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}",
           "--num_cpu_devices=2"],
          ["--num_cpu_devices=2 is read only with --distribution_strategy=mirrored, but "
           "--distribution_strategy=one_device (its default) trains on one device"],
          d / "a59"),
      "run_classifier: --num_cpu_devices with multi_worker": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           f"--output_dir={d / 'a59_c'}", "--distribution_strategy=multi_worker",
           "--num_cpu_devices=2", *common],
          ["--num_cpu_devices=2 is read only with --distribution_strategy=mirrored, but "
           "--distribution_strategy=multi_worker trains on one device per worker"],
          d / "a59_c"),
      # Sweep 34, A27: trained on the records' own masks, the flag recorded and never read.
      "run_pretraining: --masked_lm_prob on TFRecords": (
          ["run_pretraining", f"--bert_config_file={d / 'bert_config.json'}",
           f"--input_files={data}/*.tfrecord", f"--model_dir={d / 'a27'}",
           f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}",
           "--masked_lm_prob=0.3"],
          ["--masked_lm_prob=0.3: read only from raw text (--train_text_files)",
           "TFRecords (--input_files) carry the tokens and masks"], d / "a27"),
      # Sweep 26, B9: a 15-entry vocabulary beside a 30,522-row model was written silently.
      "convert_checkpoint: a vocabulary far smaller than the model's table": (
          ["convert_checkpoint", f"--input={no_vocab / 'bert_model.ckpt'}", "--output_format=hf",
           f"--output={d / 'hf_small_vocab'}", "--vocab_file=" + _write(
               d / "small_vocab.txt", "".join(f"{t}\n" for t in (
                   "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghij")))],
          [f"--vocab_file={d / 'small_vocab.txt'} has 15 entries, 30507 fewer than the "
           f"vocab_size 30522 of --input {no_vocab / 'bert_model.ckpt'}",
           "Pass the vocabulary the model was trained with"], d / "hf_small_vocab"),
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
    "run_pretraining: continued on data of another vocabulary",
    "run_pretraining: an uncased source continued on cased data",
    "run_pretraining: data of another sequence length",
    "run_pretraining: bert_config.json without a field",
    "run_squad: SQuAD 2.0 data without the v2 flag",
    "run_squad: a stride longer than the window",
    "run_pretraining: a sequence longer than the model",
    "run_squad: a window longer than the model",
    "run_ner: a zero train batch",
    "run_classifier: an empty dev file",
    "run_classifier: an evaluation without training, a trained model or a source",
    "create_pretraining_data: a vocabulary that is not UTF-8",
    "run_classifier: a vocabulary with a NUL in a token",
    "run_classifier: a cased --do_lower_case for an uncased checkpoint",
    "convert_checkpoint: an hf output without a vocabulary",
    "convert_checkpoint: a corrupt safetensors file",
    "run_classifier: a missing --init_hf_dir",
    "run_classifier: another vocabulary than the source's",
    "run_classifier: a fresh head evaluated without training",
    "run_classifier: an export given as --init_hf_dir",
    "create_pretraining_data: a corpus saved as UTF-16",
    "create_pretraining_data: an --output_prefix with a folder",
    "create_pretraining_data: an --output_prefix too long for the file system",
    "run_ner: a .keras model given as --init_checkpoint",
    "run_classifier: a run directory given as --init_tfbert",
    "run_ner: a Google checkpoint given as its directory",
    "align: an unknown variant, before the embedded corpus is made",
    "align: a tolerance that is not kind=value",
    "run_classifier: a negative --eval_batch_size",
    "run_classifier: an --output_dir whose ~ the shell left",
    "convert_checkpoint: an --input whose ~ the shell left",
    "run_classifier: a dev file without --do_eval",
    "run_embeddings: a retrieval set without --do_eval",
    "run_classifier: a vocabulary larger than the config's vocab_size",
    "align: a config's table smaller than the embedded data's vocabulary",
    "run_classifier: a --bert_config_file that does not describe --init_checkpoint",
    "convert_checkpoint: a vocabulary far smaller than the model's table",
    "run_ner: a run_classifier run's flags.txt",
    "run_ner: a flag file of unknown flags",
    "run_pretraining: --num_cpu_devices without a mirrored strategy",
    "run_classifier: --num_cpu_devices with multi_worker",
    "run_pretraining: --masked_lm_prob on TFRecords",
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


def _tree(root):
  """Every file under `root` with its size and content hash: what "untouched" compares."""
  found = {}
  for folder, _, names in os.walk(root):
    for name in names:
      path = os.path.join(folder, name)
      with open(path, "rb") as f:
        found[os.path.relpath(path, root)] = hash(f.read())
  return found


@pytest.fixture(scope="module")
def overlap_cases(tmp_path_factory):
  """{name: (argv, expected substrings of the error line)} over one folder, `root`: a
  finished-looking run, data, a Hugging Face directory, an export tfbert did not write."""
  root = tmp_path_factory.mktemp("overlaps")
  run = root / "run"
  (run / "checkpoints").mkdir(parents=True)
  _write(run / "model.keras", "weights")
  _write(run / "checkpoints" / "ckpt-3.index", "index")
  _write(run / "flags.txt", "--do_train\n")
  data = root / "data"
  data.mkdir()
  _write(data / "train.conll", "Alan B-PER\nwent O\n")
  _write(data / "train.tsv", "anchor\tpositive\na\tb\n")
  _write(data / "corpus.txt", "One sentence.\nAnother one.\n")
  _write(data / "shard-0.tfrecord", "")
  (root / "hf").mkdir()
  _write(root / "hf" / "config.json", "{}")
  (root / "notes").mkdir()
  _write(root / "notes" / "todo.txt", "not an export")
  tiny = [f"--bert_config_file={_write(root / 'bert_config.json', json.dumps(TINY))}",
          f"--vocab_file={pretrained.minilm_vocab_file()}"]
  # A replay: the old run's flags name its own directory; the command line names a new one.
  old_flags = _write(root / "old_flags.txt",
                     f"--output_dir={root / 'old_run'}\n--export_dir={root / 'new_run'}\n")
  # An MRPC classifier's export, as the run `mrpc_run` wrote it (outside that run), whose
  # flags.txt names it; data a tiny model trains on until its run directory is claimed.
  export, mrpc_run = root / "mrpc_export", root / "mrpc_run"
  (export / "variables").mkdir(parents=True)
  _write(export / "saved_model.pb", "graph")
  _write(export / "variables" / "variables.index", "index")
  atomic.write_marker(str(export), atomic.OutputRecord(
      serving_export.EXPORT_KIND, "BertClassifier", str(mrpc_run)))
  (root / "mrpc").mkdir()
  _write(root / "mrpc" / "train.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                                      "1\t1\t2\tA cat sat.\tA cat sat down.\n")
  squad = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
      "context": "Alan went home.", "qas": [{"id": "q1", "question": "Who went home?",
                                             "answers": [{"text": "Alan",
                                                          "answer_start": 0}]}]}]}]}
  _write(data / "squad.json", json.dumps(squad))
  _write(data / "pairs.tsv", "anchor\tpositive\na cat\ta kitten\nrain\twater\n")
  _write(data / "text.txt", "".join(f"Line {i} says the cat sat on the mat again.\n"
                                    for i in range(40)))
  mrpc_run.mkdir()
  _write(mrpc_run / "flags.txt", "".join(f"{flag}\n" for flag in [
      "--task_name=mrpc", f"--data_dir={root / 'mrpc'}", "--do_train", f"--output_dir={mrpc_run}",
      f"--export_dir={export}", "--max_seq_length=16", "--max_train_steps=1", *tiny]))
  another_run = ("is a SavedModel export of a BertClassifier written by the run "
                 f"{mrpc_run}, not by this run")
  return root, {
      "run_classifier: --export_dir equal to --output_dir": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={data}", "--do_train",
           f"--output_dir={run}", f"--export_dir={run}", *tiny],
          [f"output --output_dir {run} is output --export_dir {run}"]),
      "run_embeddings: --export_dir containing --output_dir": (
          ["run_embeddings", "--do_train", f"--train_file={data / 'train.tsv'}",
           f"--output_dir={run}", f"--export_dir={root}", *tiny],
          [f"output --export_dir {root} contains input --train_file"]),
      "run_ner: --output_dir containing --train_file": (
          ["run_ner", "--do_train", f"--train_file={data / 'train.conll'}",
           f"--output_dir={data}", *tiny],
          [f"output --output_dir {data} contains input --train_file {data / 'train.conll'}"]),
      "run_squad: --export_dir inside --init_hf_dir": (
          ["run_squad", "--do_train", f"--train_file={data / 'train.tsv'}",
           f"--output_dir={root / 'squad'}", f"--init_hf_dir={root / 'hf'}",
           f"--export_dir={root / 'hf' / 'export'}"],
          [f"--export_dir {root / 'hf' / 'export'} lies inside input --init_hf_dir"]),
      "run_pretraining: --model_dir equal to the data's folder": (
          ["run_pretraining", f"--input_files={data}/*.tfrecord", f"--model_dir={data}",
           tiny[0]],
          [f"output --model_dir {data} is input --input_files {data}/*.tfrecord"]),
      "run_ner: --export_dir a folder tfbert did not write": (
          ["run_ner", "--do_train", f"--train_file={data / 'train.conll'}",
           f"--output_dir={root / 'ner'}", f"--export_dir={root / 'notes'}", *tiny],
          [str(root / "notes"), "tfbert did not write", "refusing to replace it"]),
      "convert_checkpoint: --output equal to the Hugging Face --input": (
          ["convert_checkpoint", "--input_format=hf", f"--input={root / 'hf'}",
           "--output_format=hf", f"--output={root / 'hf'}"],
          [f"output --output {root / 'hf'} is input --input {root / 'hf'}"]),
      "create_pretraining_data: --output_dir containing --input_file": (
          ["create_pretraining_data", f"--input_file={data / 'corpus.txt'}",
           f"--output_dir={data}"],
          [f"output --output_dir {data} contains input --input_file"]),
      "run_classifier: a flag before the flag file it overrides": (
          ["run_classifier", f"--output_dir={root / 'new_run'}", f"--flagfile={old_flags}",
           "--task_name=mrpc", f"--data_dir={data}", "--do_train", *tiny],
          [f"output --output_dir {root / 'new_run'} is output --export_dir "
           f"{root / 'new_run'}"]),
      "export_onnx: --output inside --export_dir": (
          ["export_onnx", f"--export_dir={run}", f"--output={run / 'model.onnx'}"],
          [f"output --output {run / 'model.onnx'} lies inside input --export_dir {run}"]),
      # An export is never written into, nor replaced by another task's or run's export.
      "run_classifier: --output_dir an export": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={root / 'mrpc'}", "--do_train",
           f"--output_dir={export}", "--max_seq_length=16", "--max_train_steps=1", *tiny],
          [f"--output_dir {export} is a SavedModel export of a BertClassifier written by the "
           f"run {mrpc_run}: no other output is written into it"]),
      "create_pretraining_data: --output_dir an export": (
          ["create_pretraining_data", f"--input_file={data / 'corpus.txt'}",
           f"--output_dir={export}"],
          [f"--output_dir {export} is a SavedModel export", "choose another --output_dir"]),
      "run_pretraining: --model_dir an export": (
          ["run_pretraining", f"--train_text_files={data / 'text.txt'}", "--objective=mlm",
           f"--model_dir={export}", f"--max_seq_length={SEQ}",
           f"--max_predictions_per_seq={PRED}", "--num_train_steps=1", "--num_warmup_steps=0",
           "--train_batch_size=2", "--export_saved_model=false", *tiny],
          [f"--model_dir {export} is a SavedModel export", "choose another --model_dir"]),
      "demo: --workdir an export": (
          ["demo", f"--workdir={export}"],
          [f"--workdir {export} is a SavedModel export", "choose another --workdir"]),
      "convert_checkpoint: a Google --output in an export's variables/": (
          ["convert_checkpoint", "--input_format=tfbert", f"--input={run / 'model.keras'}",
           "--output_format=google", f"--output={export / 'variables' / 'variables'}"],
          [f"--output {export / 'variables' / 'variables'} lies inside {export}, a SavedModel "
           "export", "choose another --output outside it"]),
      "run_squad: --export_dir another run's classifier export": (
          ["run_squad", "--do_train", f"--train_file={data / 'squad.json'}",
           f"--output_dir={root / 'squad_new'}", f"--export_dir={export}",
           "--max_seq_length=32", "--max_query_length=8", "--doc_stride=8", *tiny],
          [f"export_dir {export} {another_run} {root / 'squad_new'}",
           "give --export_dir on the command line"]),
      "run_embeddings: --export_dir another run's classifier export": (
          ["run_embeddings", "--do_train", f"--train_file={data / 'pairs.tsv'}",
           f"--output_dir={root / 'emb_new'}", f"--export_dir={export}",
           "--max_seq_length=16", *tiny],
          [f"export_dir {export} {another_run} {root / 'emb_new'}"]),
      "run_classifier: a replayed flags.txt naming the old run's export": (
          ["run_classifier", f"--flagfile={mrpc_run / 'flags.txt'}",
           f"--output_dir={root / 'mrpc_new'}"],
          [f"export_dir {export} {another_run} {root / 'mrpc_new'}",
           "a flags.txt replayed with a new output directory?"]),
  }


@pytest.fixture(scope="module")
def overlap_results(overlap_cases):
  """{name: (exit status, stderr, whether `root` was left exactly as it was)}."""
  root, cases = overlap_cases
  finished = {}
  for name, (argv, _) in cases.items():
    before = _tree(root)
    run = tool_process.run_tool(argv[0], *argv[1:])
    finished[name] = (run.returncode, run.stderr, _tree(root) == before)
  return finished


@pytest.mark.parametrize("name", [
    "run_classifier: --export_dir equal to --output_dir",
    "run_embeddings: --export_dir containing --output_dir",
    "run_ner: --output_dir containing --train_file",
    "run_squad: --export_dir inside --init_hf_dir",
    "run_pretraining: --model_dir equal to the data's folder",
    "run_ner: --export_dir a folder tfbert did not write",
    "convert_checkpoint: --output equal to the Hugging Face --input",
    "create_pretraining_data: --output_dir containing --input_file",
    "export_onnx: --output inside --export_dir",
    "run_classifier: a flag before the flag file it overrides",
    "run_classifier: --output_dir an export",
    "create_pretraining_data: --output_dir an export",
    "run_pretraining: --model_dir an export",
    "demo: --workdir an export",
    "convert_checkpoint: a Google --output in an export's variables/",
    "run_squad: --export_dir another run's classifier export",
    "run_embeddings: --export_dir another run's classifier export",
    "run_classifier: a replayed flags.txt naming the old run's export",
])
def test_an_output_overlapping_an_input_or_output_is_refused_before_any_write(
    overlap_cases, overlap_results, name):
  """Outputs never destroy inputs: `--export_dir == --output_dir` once exited 0 and the
  export's directory replacement deleted the run it came from."""
  _, cases = overlap_cases
  code, err, untouched = overlap_results[name]
  tool = name.split(":")[0]
  assert code == 1, (code, err[-3000:])
  lines = err.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(f"{tool}: error: "), err[-3000:]
  for part in cases[name][1]:
    assert part in lines[0], (part, lines[0])
  assert untouched


@pytest.fixture(scope="module")
def head_cases(tmp_path_factory):
  """{name: (argv, expected substrings of the error line, output path that must not exist)}:
  Hugging Face directories whose head is another task's or names other labels."""
  from tfbert import BertClassifier, BertTokenClassifier  # pylint: disable=import-outside-toplevel
  from tfbert.checkpoints import convert  # pylint: disable=import-outside-toplevel
  d = tmp_path_factory.mktemp("heads")
  config = BertConfig(**TINY)
  tagger = BertTokenClassifier(config, ("O", "B-y", "I-y"))
  classifier = BertClassifier(config, 2, labels=("no", "yes"))
  for name, model in (("tagger", tagger), ("classifier", classifier)):
    model.build()
    convert.write_model(model, "hf", str(d / name), vocab_file=pretrained.minilm_vocab_file(),
                        do_lower_case=True)
  _write(d / "train.conll", "Alan B-x\nBee I-x\nwent O\n")
  squad = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
      "context": "Alan went home.", "qas": [{"id": "q1", "question": "Who went home?",
                                             "answers": [{"text": "Alan",
                                                          "answer_start": 0}]}]}]}]}
  _write(d / "train.json", json.dumps(squad))
  glue = d / "mrpc"
  glue.mkdir()
  _write(glue / "train.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                             "1\t1\t2\tA cat sat.\tA cat sat down.\n")
  # An SST-2 run's model: labels '0', '1' as MRPC's, but sentiment, not paraphrase.
  sst2 = BertClassifier(config, 2, labels=("0", "1"))
  sst2.build()
  convert.save_tfbert_model(sst2, str(d / "sst2_run" / "model.keras"),
                            pretrained.minilm_vocab_file(), True)
  _write(d / "sst2_run" / "run_config.json", json.dumps({"task_name": "sst-2"}))
  for name, source, id2label in (("gapped_classifier", "classifier", {"0": "0", "2": "1"}),
                                 ("gapped_tagger", "tagger", {"0": "O", "1": "B-x", "3": "I-x"})):
    shutil.copytree(d / source, d / name)
    values = json.loads((d / name / "config.json").read_text(encoding="utf-8"))
    values["id2label"] = id2label
    values["label2id"] = {label: int(i) for i, label in id2label.items()}
    _write(d / name / "config.json", json.dumps(values))
  return {
      "run_classifier: a Hugging Face classifier of other label names": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           f"--init_hf_dir={d / 'classifier'}", f"--output_dir={d / 'mrpc_renamed'}",
           "--max_seq_length=16"],
          [str(d / "classifier"), "'no', 'yes'", "--reinit_head"], d / "mrpc_renamed"),
      "run_classifier: a Hugging Face classifier whose label ids have a gap": (
          ["run_classifier", "--task_name=mrpc", f"--data_dir={glue}", "--do_train",
           f"--init_hf_dir={d / 'gapped_classifier'}", f"--output_dir={d / 'mrpc_gapped'}",
           "--max_seq_length=16"],
          [str(d / "gapped_classifier"), "id2label"], d / "mrpc_gapped"),
      "run_ner: a Hugging Face tagger whose tag ids have a gap": (
          ["run_ner", "--do_train", f"--train_file={d / 'train.conll'}",
           f"--init_hf_dir={d / 'gapped_tagger'}", f"--output_dir={d / 'ner_gapped'}",
           "--max_seq_length=16"],
          [str(d / "gapped_tagger"), "id2label"], d / "ner_gapped"),
      "run_ner: a Hugging Face tagger of other tags": (
          ["run_ner", "--do_train", f"--train_file={d / 'train.conll'}",
           f"--init_hf_dir={d / 'tagger'}", f"--output_dir={d / 'ner'}", "--max_seq_length=16"],
          [str(d / "tagger"), "its head's labels ['O', 'B-y', 'I-y'] are not this task's",
           "--reinit_head"], d / "ner"),
      "run_classifier: another GLUE task's run whose labels share names": (
          ["run_classifier", "--task_name=MRPC", f"--data_dir={glue}", "--do_train",
           f"--init_tfbert={d / 'sst2_run' / 'model.keras'}", f"--output_dir={d / 'mrpc_sst2'}",
           "--max_seq_length=16"],
          ["holds a sst-2 head", "this run's task is mrpc", "--reinit_head"], d / "mrpc_sst2"),
      "run_squad: a sequence classifier's directory": (
          ["run_squad", "--do_train", f"--train_file={d / 'train.json'}",
           f"--init_hf_dir={d / 'classifier'}", f"--output_dir={d / 'squad'}",
           "--max_seq_length=32", "--max_query_length=8", "--doc_stride=8"],
          [f"{d / 'classifier'} holds a BertForSequenceClassification head", "--reinit_head"],
          d / "squad"),
  }


@pytest.mark.parametrize("name", [
    "run_ner: a Hugging Face tagger of other tags",
    "run_squad: a sequence classifier's directory",
    "run_classifier: a Hugging Face classifier of other label names",
    "run_classifier: a Hugging Face classifier whose label ids have a gap",
    "run_ner: a Hugging Face tagger whose tag ids have a gap",
    "run_classifier: another GLUE task's run whose labels share names",  # Sweep 19, c22.
])
def test_a_source_head_of_other_labels_or_another_task_is_refused(head_cases, name):
  """Labels are matched by name, never by position, and a head is never dropped silently."""
  argv, expected, untouched = head_cases[name]
  run = tool_process.run_tool(argv[0], *argv[1:])
  assert run.returncode == 1, (run.returncode, run.stderr[-3000:])
  lines = run.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(f"{name.split(':')[0]}: error: "), lines
  for part in expected:
    assert part in lines[0], (part, lines[0])
  assert not os.path.exists(untouched)


@pytest.fixture(scope="module")
def boundary_cases(tmp_path_factory):
  """{name: (argv, expected substrings of the error line)}: every tool given a path that is
  missing, a folder where a file belongs, or a file that is not UTF-8. No case trains: each
  ends before any work, so the table grows by cases, not by minutes."""
  d = tmp_path_factory.mktemp("boundaries")
  missing, folder = d / "no_such_file", d / "a_folder"
  folder.mkdir()
  tiny = [f"--bert_config_file={_write(d / 'bert_config.json', json.dumps(TINY))}",
          f"--vocab_file={pretrained.minilm_vocab_file()}"]
  latin1 = {  # Line 2 holds "café" in Latin-1: byte 0xe9 is no UTF-8.
      "train.conll": b"Alan B-PER\ncaf\xe9 O\n",
      "pairs.tsv": b"anchor\tpositive\ncaf\xe9\tb\n",
      "train.json": b'{"version": "1.1",\n"data": [{"title": "caf\xe9", "paragraphs": []}]}\n',
      "predictions.json": b'{"q1":\n"caf\xe9"}\n'}
  for name, data in latin1.items():
    _write(d / name, data, "wb")
  glue = d / "glue"
  glue.mkdir()
  _write(glue / "train.tsv", b"Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                             b"1\t1\t2\tcaf\xe9\tA cat.\n", "wb")
  squad = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
      "context": "Alan went home.", "qas": [{"id": "q1", "question": "Who went home?",
                                             "answers": [{"text": "Alan",
                                                          "answer_start": 0}]}]}]}]}
  dev = _write(d / "dev-v1.1.json", json.dumps(squad))
  gold = _write(d / "gold.conll", "Alan B-PER\nwent O\n")
  out = str(d / "out")
  filled = d / "filled"  # A run directory holding a file where the run makes a directory.
  filled.mkdir()
  _write(filled / "train", "x")
  train = {"run_ner": ["--do_train", *tiny, f"--output_dir={out}"],
           "run_squad": ["--do_train", *tiny, f"--output_dir={out}"],
           "run_embeddings": ["--do_train", *tiny, f"--output_dir={out}"]}
  cases = {}
  for tool, flag, utf8 in (("run_ner", "--train_file", "train.conll"),
                           ("run_squad", "--train_file", "train.json"),
                           ("run_embeddings", "--train_file", "pairs.tsv")):
    cases[f"{tool}: a missing {flag}"] = ([tool, f"{flag}={missing}", *train[tool]],
                                          [str(missing)])
    cases[f"{tool}: a folder as {flag}"] = ([tool, f"{flag}={folder}", *train[tool]],
                                            [str(folder)])
    cases[f"{tool}: a {flag} that is not UTF-8"] = (
        [tool, f"{flag}={d / utf8}", *train[tool]], [f"{d / utf8}:2", "not UTF-8"])
  classify = ["run_classifier", "--task_name=mrpc", "--do_train", *tiny, f"--output_dir={out}"]
  cases.update({
      "run_classifier: a missing --data_dir": (classify + [f"--data_dir={missing}"],
                                               [str(missing)]),
      "run_classifier: a train.tsv that is not UTF-8": (
          classify + [f"--data_dir={glue}"], [f"{glue / 'train.tsv'}:2: not UTF-8"]),
      "run_classifier: a missing --vocab_file": (
          classify + [f"--data_dir={glue}", f"--vocab_file={missing}"], [str(missing)]),
      # Ignored without a word: mrpc read its own layout (sweep 7, C07).
      "run_classifier: --custom_labels with a GLUE task": (
          classify + [f"--data_dir={glue}", "--custom_labels=neg,pos"],
          ["--custom_labels: read only with --task_name=custom, and --task_name=mrpc has its "
           "own layout and labels"]),
      "run_classifier: a --group_by_length window past int32": (
          classify + [f"--data_dir={glue}", "--train_batch_size=4", "--group_by_length=1000000000"],
          ["--group_by_length (1000000000) x --train_batch_size (4) is a grouping window"]),
      "run_ner: a folder as --bert_config_file": (
          ["run_ner", "--do_train", f"--train_file={gold}", f"--bert_config_file={folder}",
           tiny[1], f"--output_dir={out}"], [str(folder)]),
      "run_pretraining: --input_files matching nothing": (
          ["run_pretraining", f"--input_files={missing}/*.tfrecord", tiny[0],
           f"--model_dir={out}", f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}"],
          [f"{missing}/*.tfrecord"]),
      "run_pretraining: a missing --bert_config_file": (
          ["run_pretraining", f"--input_files={d}/*.tfrecord", f"--bert_config_file={missing}",
           f"--model_dir={out}"], [str(missing)]),
      "create_pretraining_data: a missing --input_file": (
          ["create_pretraining_data", f"--input_file={missing}", f"--output_dir={out}"],
          [str(missing)]),
      "create_pretraining_data: a folder as --vocab_file": (
          ["create_pretraining_data", f"--input_file={gold}", f"--vocab_file={folder}",
           f"--output_dir={out}"], [str(folder)]),
      "convert_checkpoint: a missing --input": (
          ["convert_checkpoint", f"--input={missing}", "--output_format=hf",
           f"--output={out}"], [str(missing)]),
      "export_onnx: a missing --export_dir": (
          ["export_onnx", f"--export_dir={missing}", f"--output={d / 'x.onnx'}"],
          [str(missing)]),
      "export_tflite: a missing --model": (
          ["export_tflite", f"--model={missing}", f"--output={d / 'x.tflite'}"],
          [str(missing)]),
      "export_tflite: a folder as --model": (
          ["export_tflite", f"--model={folder}", f"--output={d / 'x.tflite'}"], [str(folder)]),
      "align: a --workdir that is a file": (
          ["align", "--variants=graph,eager", f"--workdir={gold}"],
          [f"--workdir {gold} is an existing file, not a directory"]),
      "demo: a --workdir that is a file": (
          ["demo", f"--workdir={gold}"], [f"--workdir {gold} is an existing file"]),
      # Exited 0 with the SQuAD part silently skipped (sweep 6, DM01).
      "demo: --squad_epochs without pretraining": (
          ["demo", "--pretrain_steps=0", "--squad_epochs=1", f"--workdir={out}"],
          ["--squad_epochs=1 fine-tunes the BERT that the pretraining part makes, and "
           "--pretrain_steps=0 skips that part"]),
      # Checked before the model is read: it failed after the whole conversion.
      "export_tflite: an --output below a file": (
          ["export_tflite", f"--model={missing}", f"--output={gold}/m.tflite"],
          [f"--output {gold}/m.tflite: its parent {gold} is a file"]),
      "evaluate_squad: a missing dataset": (
          ["evaluate_squad", str(missing), str(d / "predictions.json")], [str(missing)]),
      "evaluate_squad: predictions that are not UTF-8": (
          ["evaluate_squad", dev, str(d / "predictions.json")],
          [str(d / "predictions.json"), "UTF-8"]),
      # A RecursionError traceback (sweep 8, ES08).
      "evaluate_squad: predictions nested too deeply": (
          ["evaluate_squad", dev, _write(d / "deep.json", "[" * 100_000)],
          [str(d / "deep.json"), "nested too deeply"]),
      # TensorFlow's "Not a directory [Op:CreateSummaryFileWriter]" after the data was read,
      # naming no path (sweep 8, RE10, DF03).
      "run_classifier: a file where the run keeps its train/ directory": (
          classify + [f"--data_dir={glue}", f"--output_dir={filled}"],
          [f"--output_dir {filled}: {filled / 'train'} is a file, where the run keeps its "
           "train/ directory"]),
      "evaluate_ner: a missing predictions file": (
          ["evaluate_ner", gold, str(missing)], [str(missing)]),
      "evaluate_ner: predictions that are not UTF-8": (
          ["evaluate_ner", gold, str(d / "train.conll")], [f"{d / 'train.conll'}:2: not UTF-8"]),
      "align: a missing --bert_config_file": (
          ["align", "--variants=graph,eager", f"--bert_config_file={missing}",
           f"--input_files={d}/*.tfrecord", f"--workdir={d / 'align'}"], [str(missing)]),
      # Named the first piece only, not the flag or the split (sweep 12, P2).
      "align: a comma in an --input_files path": (
          ["align", "--variants=graph,eager", f"--input_files={d}/a,b.tfrecord",
           f"--workdir={d / 'align'}"],
          [f"--input_files: '{d}/a', 'b.tfrecord' (from splitting '{d}/a,b.tfrecord' at "
           "commas) match no file; the flag is comma-separated: match a comma in a name with "
           "'?'"]),
      # A source of another kind: its config was looked for inside it or beside it.
      "run_pretraining: a vocab.txt as --init_hf_dir": (
          ["run_pretraining", f"--init_hf_dir={pretrained.minilm_vocab_file()}",
           f"--train_text_files={gold}", "--objective=mlm", f"--model_dir={out}"],
          [f"--init_hf_dir {pretrained.minilm_vocab_file()}: a file, where a Hugging Face or "
           "sentence-transformers model directory"]),
      "run_pretraining: a Hugging Face directory as --init_checkpoint": (
          ["run_pretraining", f"--init_checkpoint={pretrained.minilm_dir()}",
           f"--train_text_files={gold}", "--objective=mlm", f"--model_dir={out}"],
          [f"--init_checkpoint {pretrained.minilm_dir()} is a sentence-transformers "
           f"directory: pass --init_hf_dir={pretrained.minilm_dir()}"]),
      "convert_checkpoint: a Hugging Face directory as a Google --input": (
          ["convert_checkpoint", f"--input={pretrained.minilm_dir()}", "--output_format=google",
           f"--output={out}/bert_model.ckpt"],
          [f"--input {pretrained.minilm_dir()} is a sentence-transformers directory: pass "
           f"--input_format=hf --input={pretrained.minilm_dir()}"]),
  })
  return d, cases


BOUNDARY_NAMES = [
    *(f"{tool}: {kind}" for tool, flag in (("run_ner", "--train_file"),
                                           ("run_squad", "--train_file"),
                                           ("run_embeddings", "--train_file"))
      for kind in (f"a missing {flag}", f"a folder as {flag}", f"a {flag} that is not UTF-8")),
    "run_classifier: a missing --data_dir",
    "run_classifier: a train.tsv that is not UTF-8",
    "run_classifier: a missing --vocab_file",
    "run_classifier: --custom_labels with a GLUE task",
    "run_classifier: a --group_by_length window past int32",
    "run_ner: a folder as --bert_config_file",
    "run_pretraining: --input_files matching nothing",
    "run_pretraining: a missing --bert_config_file",
    "create_pretraining_data: a missing --input_file",
    "create_pretraining_data: a folder as --vocab_file",
    "convert_checkpoint: a missing --input",
    "export_onnx: a missing --export_dir",
    "export_tflite: a missing --model",
    "export_tflite: a folder as --model",
    "export_tflite: an --output below a file",
    "align: a --workdir that is a file",
    "demo: a --workdir that is a file",
    "demo: --squad_epochs without pretraining",
    "evaluate_squad: a missing dataset",
    "evaluate_squad: predictions that are not UTF-8",
    "evaluate_squad: predictions nested too deeply",
    "run_classifier: a file where the run keeps its train/ directory",
    "evaluate_ner: a missing predictions file",
    "evaluate_ner: predictions that are not UTF-8",
    "align: a missing --bert_config_file",
    "align: a comma in an --input_files path",
    "run_pretraining: a vocab.txt as --init_hf_dir",
    "run_pretraining: a Hugging Face directory as --init_checkpoint",
    "convert_checkpoint: a Hugging Face directory as a Google --input",
]


@pytest.mark.parametrize("name", BOUNDARY_NAMES)
def test_a_missing_path_a_folder_for_a_file_or_bytes_not_utf8_are_named(boundary_cases, name):
  """The boundary table: one line naming the path (and for bytes, the line), exit 1, no
  traceback, nothing written where the tool would write."""
  d, cases = boundary_cases
  argv, expected = cases[name]
  run = tool_process.run_tool(argv[0], *argv[1:])
  assert run.returncode == 1, (run.returncode, run.stderr[-3000:])
  lines = run.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(f"{argv[0]}: error: "), run.stderr[-3000:]
  for part in expected:
    assert part in lines[0], (part, lines[0])
  assert not os.path.exists(d / "out")


@pytest.fixture(scope="module")
def accepted_cases(tmp_path_factory):
  """{name: (argv, the file a successful run writes)}: inputs as editors and other tools
  save them, which every tool must take (evaluation only: no training). Files start with a
  UTF-8 byte-order mark and end lines with CRLF; the Hugging Face directories are task heads
  without a pooler (as transformers writes BertForTokenClassification and
  BertForQuestionAnswering, and tfbert's own HF exports of them)."""
  from tfbert import BertEncoder, BertSpanLabeler, BertTokenClassifier  # pylint: disable=import-outside-toplevel
  from tfbert.checkpoints import convert  # pylint: disable=import-outside-toplevel
  d = tmp_path_factory.mktemp("accepted")
  bom = b"\xef\xbb\xbf"
  config = _write(d / "bert_config.json", json.dumps(TINY))
  vocab = pretrained.minilm_vocab_file()
  for name, model in (("tagger", BertTokenClassifier(BertConfig(**TINY), ("O", "B-x", "I-x"))),
                      ("qa", BertSpanLabeler(BertConfig(**TINY)))):
    model.build()
    convert.write_model(model, "hf", str(d / name), vocab_file=vocab, do_lower_case=True)
  encoder = BertEncoder(BertConfig(**TINY))  # What an evaluation without training scores.
  encoder.build()
  convert.save_tfbert_model(encoder, str(d / "encoder.keras"))
  _write(d / "pairs.tsv", bom + b"a cat sat\ta cat sits\t4.5\r\nrain\tsun\t0.5\r\n"
                                b"a dog\ta puppy\t4.0\r\n", "wb")
  _write(d / "columns.txt", bom + b"--dev_anchor_column=0\r\n--dev_positive_column=1\r\n"
                                  b"--dev_score_column=2\r\n", "wb")
  (d / "mrpc").mkdir()
  _write(d / "mrpc" / "dev.tsv", bom + b"Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n"
                                       b"1\t1\t2\tA cat sat.\tA cat sat down.\r\n"
                                       b"0\t3\t4\tRain fell.\tThe sun shone.\r\n", "wb")
  _write(d / "dev.conll", bom + b"Alan B-x\r\nwent O\r\n\r\nBee B-x\r\nCee I-x\r\n", "wb")
  squad = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
      "context": "Alan went home.", "qas": [{"id": "q1", "question": "Who went home?",
                                             "answers": [{"text": "Alan",
                                                          "answer_start": 0}]}]}]}]}
  _write(d / "dev-v1.1.json", bom + json.dumps(squad).encode() + b"\r\n", "wb")
  return {
      "run_embeddings: a headerless, BOM, CRLF dev file, columns by index in a BOM flag file": (
          ["run_embeddings", "--do_eval", f"--dev_file={d / 'pairs.tsv'}",
           f"--flagfile={d / 'columns.txt'}", f"--bert_config_file={config}",
           f"--init_tfbert={d / 'encoder.keras'}", f"--vocab_file={vocab}",
           f"--output_dir={d / 'emb'}", "--max_seq_length=16"],
          d / "emb" / "eval_results.json"),
      "run_classifier: a GLUE dev file with a BOM and CRLF": (
          ["run_classifier", "--task_name=mrpc", "--do_eval", f"--data_dir={d / 'mrpc'}",
           f"--bert_config_file={config}", f"--init_tfbert={d / 'encoder.keras'}",
           f"--vocab_file={vocab}", f"--output_dir={d / 'cls'}", "--max_seq_length=16"],
          d / "cls" / "eval_results.json"),
      "run_ner: a pooler-less tagger directory and a BOM, CRLF CoNLL file": (
          ["run_ner", "--do_eval", f"--eval_file={d / 'dev.conll'}",
           f"--init_hf_dir={d / 'tagger'}", f"--output_dir={d / 'ner'}", "--max_seq_length=16"],
          d / "ner" / "eval_results.json"),
      "run_squad: a pooler-less question-answering directory and a BOM SQuAD file": (
          ["run_squad", "--do_predict", f"--predict_file={d / 'dev-v1.1.json'}",
           f"--init_hf_dir={d / 'qa'}", f"--output_dir={d / 'squad'}", "--max_seq_length=24",
           "--max_query_length=8", "--doc_stride=8"],
          d / "squad" / "predictions.json"),
      "convert_checkpoint: a pooler-less question-answering directory": (
          ["convert_checkpoint", "--input_format=hf", f"--input={d / 'qa'}",
           "--output_format=tfbert", f"--output={d / 'qa.keras'}"], d / "qa.keras"),
  }


@pytest.mark.slow  # ~3 s each: a tiny model built, read or scored.
@pytest.mark.parametrize("name", [
    "run_embeddings: a headerless, BOM, CRLF dev file, columns by index in a BOM flag file",
    "run_classifier: a GLUE dev file with a BOM and CRLF",
    "run_ner: a pooler-less tagger directory and a BOM, CRLF CoNLL file",
    "run_squad: a pooler-less question-answering directory and a BOM SQuAD file",
    "convert_checkpoint: a pooler-less question-answering directory",
])
def test_inputs_as_other_tools_and_editors_save_them_are_taken(accepted_cases, name):
  argv, written = accepted_cases[name]
  run = tool_process.run_tool(argv[0], *argv[1:])
  assert run.returncode == 0, run.stderr[-3000:]
  assert os.path.exists(written)


def _one_error_line(run, tool):
  assert run.returncode == 1, (run.returncode, run.stderr[-3000:])
  lines = run.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(f"{tool}: error: "), run.stderr[-3000:]
  return lines[0]


@pytest.mark.parametrize("argv, expected", [
    (["align", "--optimizer=lamb", "--momentum=0.5"],
     "--momentum: not read by --optimizer=lamb (of its optimizer-specific settings it reads "
     "only --weight_decay_rate, "),
    (["align", "--optimizer=sgd", "--weight_decay_rate=0.1"],
     "--weight_decay_rate: not read by --optimizer=sgd (of its optimizer-specific settings "
     "it reads only --momentum), so it would be ignored; leave it out or choose "
     "--optimizer=adamw or lamb"),
    (["run_pretraining", "--optimizer=sgd", "--weight_decay_rate=0.05"],
     "--weight_decay_rate: not read by --optimizer=sgd"),
])
def test_an_optimizer_flag_the_optimizer_does_not_read_is_refused_before_any_work(
    tmp_path, argv, expected):
  """Sweep 9 PT10/AL02/AL04: the setting was ignored without a word."""
  out = tmp_path / "out"
  where = "--workdir" if argv[0] == "align" else "--model_dir"
  line = _one_error_line(tool_process.run_tool(argv[0], *argv[1:], f"{where}={out}"), argv[0])
  assert expected in line, line
  assert not out.exists()


@pytest.mark.parametrize("argv, expected", [
    (["--task=squad", "--optimizer=sgd"],
     "--optimizer=sgd: --task=squad trains AdamW only: pass --optimizer=adamw or leave it out "
     "(its default for this task)"),
    # adamw, the default for fine-tuning, reads --weight_decay_rate: the next check speaks.
    (["--task=classifier", "--weight_decay_rate=0.1", "--train_file=train.tsv",
      "--bert_config_file=missing/bert_config.json"], "missing/bert_config.json"),
    # Sweep 28, B125: the default --variants (graph,eager,xla) was refused for fine-tuning,
    # naming neither the flag nor its default; fine-tuning's own default reaches the file.
    (["--task=classifier", "--task_name=mrpc", "--train_file=missing/train.tsv"],
     "missing/train.tsv"),
])
def test_align_fine_tuning_defaults_to_adamw_and_names_another_optimizer(tmp_path, argv,
                                                                         expected):
  """Sweep 11 P4: align --task=classifier without --optimizer was refused for the flag's
  default, sgd ("pass optimizer adamw, got 'sgd'")."""
  line = _one_error_line(tool_process.run_tool(
      "align", *argv, f"--workdir={tmp_path / 'out'}"), "align")
  assert expected in line, line
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, expected", [
    (["--benchmark=pretraining", "--hidden_size=30", "--num_heads=4"],
     "benchmark: error: --num_heads (4) must divide --hidden_size (30)"),
    (["--benchmark=squad", "--hidden_size=30"],
     "benchmark: error: --num_heads (12, the default of --benchmark=squad) must divide "
     "--hidden_size (30)"),
    (["--benchmark=accumulation", "--seq_length=16"],
     "benchmark: error: --max_predictions (20, the default of --benchmark=accumulation) "
     "must be below --seq_length (16)"),
    # Sweep 25 C1: started its child, which failed with two tracebacks.
    (["--benchmark=accumulation", "--interleave", "--applied_steps=1"],
     "benchmark: error: --applied_steps (1) must be >= 2 with --interleave: each window's "
     "examples/s spans its applied steps after the first"),
])
def test_benchmark_a_shape_it_cannot_train_names_the_flags_and_values(argv, expected):
  """Sweep 11 P5: "StepCase: num_heads must divide hidden_size" named an internal class,
  and no flag or value."""
  assert _one_error_line(tool_process.run_tool("benchmark", *argv), "benchmark") == expected


def test_benchmark_refuses_no_warm_up_step_at_its_flag():
  """Sweep 26 B1/B2: --warmup_steps=0 (documented as >= 0) measured from index -1 (a
  traceback), and with --interleave never ended."""
  run = tool_process.run_tool("benchmark", "--benchmark=accumulation", "--warmup_steps=0")
  assert run.returncode == 1
  assert "flag --warmup_steps=0: 0 is not a positive integer" in run.stderr + run.stdout


@pytest.mark.parametrize("argv", [["demo"], ["align", "--variants=graph,eager"]])
def test_an_empty_workdir_is_refused_not_the_current_directory(tmp_path, monkeypatch, argv):
  """Sweep 14 S2: `demo --workdir=` (an unset shell variable) wrote into the current
  directory."""
  monkeypatch.chdir(tmp_path)
  assert _one_error_line(tool_process.run_tool(*argv, "--workdir="), argv[0]) == (
      f"{argv[0]}: error: --workdir is empty: name a directory to write")
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize("argv, flag", [
    (["align", "--variants=graph,accumulate2"], "--workdir"),
    (["demo"], "--workdir"),
    (["create_pretraining_data"], "--output_dir"),
    (["benchmark", "--benchmark=input_pipeline"], "--pretraining_data_dir"),
])
def test_a_model_directory_as_a_tools_workdir_is_refused_before_any_work(tmp_path, argv, flag):
  """Sweep 23 S1 (g7): `align --workdir=<a Hugging Face model directory>` wrote init/, runs/,
  report.json and alignment.png beside its model.safetensors, while an export or a run
  directory was refused: every tool's working or output directory refuses a model's."""
  model = tmp_path / "hf_model"
  model.mkdir()
  for name in ("config.json", "model.safetensors"):
    (model / name).write_text("{}")
  assert _one_error_line(tool_process.run_tool(*argv, f"{flag}={model}"), argv[0]) == (
      f"{argv[0]}: error: {flag} {model} holds a Hugging Face model (config.json + "
      f"model.safetensors): {argv[0]} would write its own files among that model's; choose "
      f"another {flag}, e.g. a new directory")
  assert sorted(os.listdir(model)) == ["config.json", "model.safetensors"]


@pytest.mark.parametrize("argv, flag, what", [
    (["create_pretraining_data"], "--output_dir", "a directory"),
    (["export_onnx", "--export_dir=model_export"], "--output", "a file"),
    (["export_tflite", "--model=model.keras"], "--output", "a file"),
    (["convert_checkpoint", "--input=model.keras", "--output_format=hf"], "--output",
     "a directory"),
])
def test_an_empty_output_is_refused_before_any_work(tmp_path, monkeypatch, argv, flag, what):
  """Sweep 14: `create_pretraining_data --output_dir=` failed on "[Errno 2] No such file or
  directory: ''" after reading its flags, and `export_onnx --output=` was not refused as
  an output at all: every required output, empty, is named before any work."""
  monkeypatch.chdir(tmp_path)
  assert _one_error_line(tool_process.run_tool(*argv, f"{flag}="), argv[0]) == (
      f"{argv[0]}: error: {flag} is empty: name {what} to write")
  assert not os.listdir(tmp_path)


def _config_a_rerun_evaluates(monkeypatch, *argv):
  """The config `run_classifier *argv` would evaluate with (its run_classifier stubbed:
  nothing is read or trained), after a returncode 0."""
  taken = []

  def evaluate_only(config, flagfile):
    taken.append(fine_tuning.evaluated_model(config)[0])
    return {"written": []}

  monkeypatch.setattr(classifier_run, "run_classifier", evaluate_only)  # The tool imports it.
  ran = tool_process.run_tool("run_classifier", *argv)
  monkeypatch.undo()
  assert ran.returncode == 0, ran.stderr
  return taken[0]


@pytest.mark.parametrize("task_flag", [[], ["--task_name=custom"]])
def test_a_predict_only_rerun_of_a_custom_task_takes_its_columns_and_labels(
    tmp_path, monkeypatch, task_flag):
  """Sweep 14 R1: `run_classifier --task_name=custom --do_predict` on a custom-task run
  asked for --custom_labels, which the run's run_config.json records; without one
  --custom_ flag, the run's own format is taken (and with them, compared as before)."""
  run = tmp_path / "run"
  custom = glue_synthetic.trained_custom_run(run)
  taken = _config_a_rerun_evaluates(monkeypatch, *task_flag, "--do_predict",
                                    f"--predict_file={tmp_path / 'p.tsv'}", f"--output_dir={run}")
  assert (taken.task_name, taken.custom) == ("custom", custom)
  # Training defines its task: --task_name=custom without labels is refused as before.
  line = _one_error_line(tool_process.run_tool(
      "run_classifier", "--task_name=custom", "--do_train", f"--data_dir={tmp_path}",
      f"--output_dir={tmp_path / 'new'}"), "run_classifier")
  assert line.startswith("run_classifier: error: a custom classification task needs "
                         "--custom_labels"), line


@pytest.mark.parametrize("task_flag", [[], ["--task_name=custom"]])
def test_a_rerun_of_a_custom_task_reads_its_files_by_the_layout_flags_with_the_runs_labels(
    tmp_path, monkeypatch, task_flag):
  """Sweep 26 A2: an eval-only rerun of a custom run given the layout of its dev file
  (--custom_delimiter, --nocustom_header: documented as describing the file read) was
  refused for want of --custom_labels, which the run records; without --task_name the same
  flags were refused as "read only with --task_name=custom, and --task_name=None"."""
  run = tmp_path / "run"
  custom = glue_synthetic.trained_custom_run(run)
  (tmp_path / "data").mkdir()
  taken = _config_a_rerun_evaluates(monkeypatch, *task_flag, "--do_eval",
                                    f"--data_dir={tmp_path / 'data'}", "--custom_delimiter=comma",
                                    "--nocustom_header", f"--output_dir={run}")
  assert (taken.task_name, taken.custom) == ("custom", dataclasses.replace(
      custom, delimiter=",", has_header=False))  # The run's labels, the file's layout.


@pytest.mark.parametrize("args, message", [
    (["--max_seq_length=16"], "--input_files is needed unless --max_seq_length=64 and "
                              "--max_predictions_per_seq=10 (the embedded data's shape)"),
    (["--task=classifier"], "--task=classifier needs --train_file (a GLUE-format TSV of "
                            "--task_name)"),
])
def test_align_refuses_a_flag_combination_in_one_line_without_the_help(tmp_path, args,
                                                                        message):
  """Sweep 15 N7: they were absl UsageErrors, 78 lines of help first and the reason last;
  now one "align: error: ..." line, as every other refusal, with nothing written."""
  workdir = tmp_path / "g05"
  run = tool_process.run_tool("align", "--variants=graph", "--steps=2",
                              f"--workdir={workdir}", *args)
  assert run.returncode == 1, run.stderr[-2000:]
  assert run.stderr.strip() == f"align: error: {message}", run.stderr[-2000:]
  assert run.stdout == ""
  assert os.listdir(tmp_path) == []


def test_align_names_a_warmup_longer_than_its_steps_by_its_flags(tmp_path):
  """Sweep 16 P1: the refusal named OptimizerConfig's fields (num_train_steps), which are
  align's --steps."""
  line = _one_error_line(tool_process.run_tool(
      "align", "--variants=graph", "--steps=20", "--num_warmup_steps=30",
      f"--workdir={tmp_path / 'w'}"), "align")
  assert line == ("align: error: --num_warmup_steps (30) must be in [0, --steps (20)]: lower "
                  "--num_warmup_steps to at most 20, or raise --steps"), line
  assert not (tmp_path / "w").exists()


def test_an_optimizer_flag_left_at_its_default_is_not_refused(tmp_path):
  """--optimizer=sgd with the default --weight_decay_rate runs on to the next check."""
  line = _one_error_line(tool_process.run_tool(
      "run_pretraining", "--optimizer=sgd", f"--model_dir={tmp_path / 'out'}"),
      "run_pretraining")
  assert "weight_decay_rate" not in line and "--bert_config_file is needed" in line, line


@pytest.mark.parametrize("tool, flag", [
    ("run_ner", "train_file"), ("run_ner", "predict_file"), ("run_squad", "train_file"),
    ("run_classifier", "data_dir"), ("run_embeddings", "ir_corpus_file"),
    ("run_embeddings", "train_file")])
def test_a_data_file_that_is_a_pipe_is_refused_before_any_work(tmp_path, tool, flag):
  """Sweep 9 PT05b: run_ner read a named pipe once, then hung hashing it for its records."""
  fifo = tmp_path / ("train.tsv" if flag == "data_dir" else "data")
  os.mkfifo(fifo)
  value = tmp_path if flag == "data_dir" else fifo
  out = tmp_path / "out"
  line = _one_error_line(tool_process.run_tool(
      tool, f"--{flag}={value}", "--do_train", f"--output_dir={out}"), tool)
  assert (f"--{flag} {fifo} is a named pipe: a run reads each input more than once (its "
          "checks and records before any work, then the run itself)") in line, line
  assert "which a stream cannot serve; write it to a regular file first" in line, line
  assert not out.exists()


@pytest.mark.parametrize("argv, expected", [
    (["run_ner", "--do_train", "--train_file=t.txt", "--max_seq_length=2"],
     "run_ner: error: --max_seq_length (2) must be >= 3"),
    (["run_classifier", "--task_name=mrpc", "--data_dir=data", "--do_train",
      "--eval_every_steps=2"],
     "run_classifier: error: --eval_every_steps (2) evaluates on the dev set: add --do_eval"),
])
def test_a_config_refusal_reads_in_the_tools_flags(tmp_path, monkeypatch, argv, expected):
  """Sweep 17: a tool's refusal by its config read "NerRunConfig: max_seq_length ...": the
  user set flags, so the refusal names them as typed, `--max_seq_length`, with no class."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / "data").mkdir()
  (tmp_path / "data" / "train.tsv").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
  assert _one_error_line(tool_process.run_tool(*argv, f"--output_dir={tmp_path}/run"),
                         argv[0]) == expected


@pytest.mark.parametrize("signum, line, status", [
    (signal.SIGTERM, "create_pretraining_data: terminated", 143),
    (signal.SIGINT, "create_pretraining_data: interrupted", 130),
])
def test_a_signal_while_shards_are_written_removes_them_and_the_new_directory(
    tmp_path, monkeypatch, signum, line, status):
  """Sweep 22 H1: SIGTERM during create_pretraining_data killed it on the spot, leaving two
  hidden `.tfbert-tmp-*-shard` files in the directory it had created, with no word; SIGINT
  removed both and said "interrupted". SIGTERM now ends it the same way, with 143."""
  corpus = pretraining_data.pydoc_corpus(str(tmp_path / "corpus.txt"), max_documents=3)
  original = pretraining_instances.instance_to_example

  def signalled(*args, **kwargs):
    os.kill(os.getpid(), signum)  # Delivered on return to the main thread's bytecode.
    return original(*args, **kwargs)

  monkeypatch.setattr(pretraining_instances, "instance_to_example", signalled)
  out = tmp_path / "out"
  # Were the tool to leave SIGTERM alone, this (not the default) would take it: a failure,
  # not the end of the test process.
  previous = signal.signal(signal.SIGTERM, lambda *_: None)
  try:
    run = tool_process.run_tool(
        "create_pretraining_data", f"--input_file={corpus}", f"--output_dir={out}",
        f"--vocab_file={pretrained.minilm_vocab_file()}", f"--max_seq_length={SEQ}",
        f"--max_predictions_per_seq={PRED}", "--dupe_factor=1", "--num_shards=2")
  finally:
    signal.signal(signal.SIGTERM, previous)
  assert (run.returncode, run.stderr.strip().splitlines()[-1]) == (status, line)
  assert not out.exists()
  assert sorted(os.listdir(tmp_path)) == ["corpus.txt"]


# Flags of align and benchmark that 0 is a valid value of (a count that may be none, a seed,
# a rate or norm that 0 switches off); every other count or duration must be positive.
_ZERO_IS_VALID = {"warmup_steps", "num_warmup_steps", "seed", "learning_rate", "momentum",
                  "weight_decay_rate", "clip_norm"}


@pytest.mark.parametrize("tool", ["align", "benchmark"])
def test_every_count_or_duration_flag_that_must_be_positive_refuses_zero_when_parsed(tool):
  """Sweep 24 S3 (h2): benchmark --pipeline_seconds=0 ran ~1.5 min and reported "0 batches
  in 0.0 s, 0x (goal >= 20x)" as a result. The bound is in every such flag's definition
  (absl's lower_bound, or a validator where the bound is exclusive): refused when parsed."""
  import importlib  # pylint: disable=import-outside-toplevel

  from absl import flags  # pylint: disable=import-outside-toplevel
  with tool_process.tool_modules():
    module = importlib.import_module(f"tfbert_flags.{tool}_flags")
    numeric = [flag for flag in flags.FLAGS.get_flags_for_module(module)
               if isinstance(flag.parser, (flags.IntegerParser, flags.FloatParser))
               or type(flag.parser).__name__ == "IntegerListParser"]
    assert numeric
    accepted = []
    for flag in numeric:
      zero = "0" if not isinstance(flag.parser, flags.ListParser) else "0,5"
      try:
        flags.FLAGS([tool, f"--{flag.name}={zero}"])
        accepted.append(flag.name)
      except flags.Error:
        pass
      finally:
        flags.FLAGS.unparse_flags()
    assert set(accepted) <= _ZERO_IS_VALID, sorted(set(accepted) - _ZERO_IS_VALID)


def test_a_refused_demo_rerun_names_what_the_demo_can_do(tmp_path, monkeypatch):
  """Sweep 24 P1 (demo's part): `demo --pretrain_steps=3` over a workdir of a 2-step demo
  was refused with "rerun with --allow_config_change", a flag the demo does not have."""
  from tfbert.runtime import run_directory  # pylint: disable=import-outside-toplevel
  from tfbert_tools.demos import pretraining_demo  # pylint: disable=import-outside-toplevel

  def refused(workdir, steps):  # What claiming the old run refuses, without its training.
    del steps
    raise run_directory.RunDirectoryError(
        f"{workdir}/pretraining_run holds a run with another configuration: ... "
        f"{run_directory._way_out('and keep the recorded files')}")

  monkeypatch.setattr(pretraining_demo, "run_pretraining_demo", refused)
  work = tmp_path / "wd"
  line = _one_error_line(tool_process.run_tool("demo", f"--workdir={work}",
                                               "--pretrain_steps=3"), "demo")
  assert line.endswith(f"choose another --workdir, or remove {work}/pretraining_run and "
                       f"{work}/squad_run to start over there"), line
  assert "allow_config_change" not in line


def test_a_text_corpus_given_to_run_pretraining_as_tfrecords_names_the_raw_text_flags(
    tmp_path):
  """Sweep 24 P2: a plain-text corpus to --input_files was "bad TFRecord ... not a TFRecord
  file", with no word of --train_text_files (the reverse mistake names --input_files)."""
  corpus = _write(tmp_path / "corpus.txt", "The first sentence.\nThe second one.\n")
  BertConfig(**TINY).to_json_file(str(tmp_path / "bert_config.json"))
  line = _one_error_line(tool_process.run_tool(
      "run_pretraining", f"--input_files={corpus}", f"--model_dir={tmp_path / 'run'}",
      f"--bert_config_file={tmp_path / 'bert_config.json'}", f"--max_seq_length={SEQ}",
      f"--max_predictions_per_seq={PRED}"), "run_pretraining")
  assert line == (f"run_pretraining: error: {corpus}: plain UTF-8 text ('The first "
                  "sentence.'), not a TFRecord file; pass raw text with --train_text_files "
                  "--objective=mlm (masked anew as batches are formed), or make TFRecords of "
                  "it with create_pretraining_data.py")
  assert not (tmp_path / "run").exists()
