"""tfbert.embeddings.embedding_run: the sentence-embedding task through the one runner:
training on pairs and scored pairs, evaluation during training with the best model kept,
the export, and the refusals before any work."""

import json
import os
import re
from types import SimpleNamespace

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import helpers, tool_process
from tfbert import BertConfig, BertEncoder
from tfbert.checkpoints import convert, pretrained
from tfbert.embeddings import (
  embedding_data,
  embedding_inference,
  embedding_run,
  sentence_transformers,
)
from tfbert.embeddings.embedding_run import EmbeddingRunConfig
from tfbert.tasks import fine_tuning, runner
from tfbert.text.tokenization import WordPieceTokenizer

# Odd sizes; topics whose sentences share words: a pair is two sentences of one topic.
TOPICS = [["cat", "dog", "pet", "fur"], ["rain", "snow", "cloud", "wind"],
          ["car", "road", "wheel", "drive"], ["bread", "cheese", "soup", "apple"],
          ["song", "music", "piano", "drum"]]
SEQ = 9


def _sentence(rng, topic):
  return " ".join(rng.choice(TOPICS[topic], 4))


def _write_data(tmp_path):
  rng = np.random.default_rng(0)
  pairs = ["anchor\tpositive"]
  for i in range(60):
    topic = i % len(TOPICS)
    pairs.append(f"{_sentence(rng, topic)}\t{_sentence(rng, topic)}")
  (tmp_path / "pairs.tsv").write_text("\n".join(pairs) + "\n")
  dev = ["sentence1\tsentence2\tscore"]
  for i in range(21):
    a, b = i % len(TOPICS), (i * 3 + 1) % len(TOPICS)
    same = i % 2 == 0
    dev.append(f"{_sentence(rng, a)}\t{_sentence(rng, a if same else b)}\t"
               f"{5.0 if same else 0.0}")
  (tmp_path / "dev.tsv").write_text("\n".join(dev) + "\n")
  config = tmp_path / "bert_config.json"
  BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
             intermediate_size=19, max_position_embeddings=SEQ + 2).to_json_file(str(config))
  return config


def _config(tmp_path, output, **overrides):
  values = dict(output_dir=str(tmp_path / output), train_file=str(tmp_path / "pairs.tsv"),
                dev_file=str(tmp_path / "dev.tsv"), vocab_file=pretrained.minilm_vocab_file(),
                bert_config_file=str(tmp_path / "bert_config.json"), max_seq_length=SEQ,
                train_batch_size=10, learning_rate=3e-3, num_train_epochs=4.0, seed=3,
                verbose=0, do_train=True, do_eval=True)
  if not overrides.get("do_eval", True):  # Read only with do_eval (refused without it).
    del values["dev_file"]
  return EmbeddingRunConfig(**{**values, **overrides})


def _untrained(tmp_path):
  """`init_tfbert` of an encoder of random weights (seeded, `_write_data`'s config): what
  the evaluation-only tests score. A run that does not train needs a model to evaluate
  (`fine_tuning.evaluated_model`): random weights are never its default."""
  path = tmp_path / "untrained.keras"
  if not path.exists():
    keras.utils.set_random_seed(3)
    encoder = BertEncoder(BertConfig.from_json_file(str(tmp_path / "bert_config.json")))
    encoder.build()
    convert.save_tfbert_model(encoder, str(path))
  return {"init_tfbert": str(path)}


def _write_retrieval_set(tmp_path):
  """Three queries over one document per topic: {"ir_*_file": path}."""
  (tmp_path / "queries.tsv").write_text("q1\tcat dog\nq2\train snow\nq3\tpiano\n")
  (tmp_path / "corpus.tsv").write_text("".join(
      f"d{i}\t{' '.join(topic)}\n" for i, topic in enumerate(TOPICS)))
  (tmp_path / "qrels.tsv").write_text("q1\td0\nq2\td1\nq3\td4\n")
  return {f"ir_{part}_file": str(tmp_path / f"{part}.tsv")
          for part in ("queries", "corpus", "qrels")}


@pytest.fixture(scope="module")
def untrained_evaluation(tmp_path_factory):
  """The evaluation-only run of `_untrained`'s encoder on `_write_data`'s dev pairs and
  `_write_retrieval_set`'s retrieval set: its result ("eval": "dev" and "retrieval"). The
  baseline of the learning test and the subject of the retrieval test; both only read it."""
  folder = tmp_path_factory.mktemp("untrained_evaluation")
  _write_data(folder)
  return embedding_run.run_embeddings(_config(
      folder, "before", do_train=False, **_untrained(folder), **_write_retrieval_set(folder)))


@pytest.mark.slow  # ~30 s: 24 steps with an evaluation every 8, then the export.
def test_in_batch_negatives_learn_the_topics_and_the_best_model_and_export_are_kept(
    tmp_path, untrained_evaluation):
  _write_data(tmp_path)  # The same data as the baseline's (seeded).
  before = untrained_evaluation
  trained = embedding_run.run_embeddings(_config(
      tmp_path, "trained", eval_every_steps=8, export_dir=str(tmp_path / "export"),
      sentence_transformers_dir=str(tmp_path / "st")))
  assert trained["train"]["steps"] == 60 * 4 // 10
  spearman = trained["eval"]["dev"]["spearman"]
  # Same-topic pairs (score 5) against others (0): binary gold scores cap Spearman at 86.6
  # (a perfect ranking, the ties of the gold at their average rank); the fresh encoder
  # scored 42.5 here, the trained one 75.6 (measured).
  assert spearman > 65 and spearman > before["eval"]["dev"]["spearman"] + 20, (
      spearman, before["eval"]["dev"])
  out = tmp_path / "trained"
  rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
  assert [r["step"] for r in rows if r.get("split") == "eval"] == [8, 16, 24]
  best = json.loads((out / "best" / "eval_results.json").read_text())
  assert best["best_metric"] == "spearman"
  assert best["spearman"] == max(r["spearman"] for r in rows if r.get("split") == "eval")
  # Evaluated again without training: the run's latest checkpoint, not random weights
  # (sweep 8 IR07).
  evaluated = embedding_run.run_embeddings(_config(tmp_path, "trained", do_train=False))
  assert evaluated["eval"] == trained["eval"]
  embed = tf.saved_model.load(str(tmp_path / "export")).signatures["embed_text"]
  vectors = embed(text=tf.constant(["cat dog pet fur", "dog cat fur pet", "rain snow"]))
  vectors = vectors["embeddings"].numpy()
  assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
  # The sentence-transformers directory holds the same model: its embeddings are the
  # export's (frozen graph: float32 rewrites only).
  model, read = sentence_transformers.load_sentence_encoder(str(tmp_path / "st"))
  assert (read.pooling_mode, read.normalize, read.max_seq_length) == ("mean", True, SEQ)
  tokenizer = WordPieceTokenizer(pretrained.minilm_vocab_file(), do_lower_case=True)
  again = embedding_inference.embed_texts(
      model, tokenizer, ["cat dog pet fur", "dog cat fur pet", "rain snow"], SEQ)
  np.testing.assert_allclose(again, vectors, atol=1e-5)


@pytest.mark.slow  # 3 s or more on the Intel Xeon (profile of 2026-11-30).
def test_scored_pairs_train_with_cosent_and_report_the_held_out_loss(tmp_path):
  _write_data(tmp_path)
  result = embedding_run.run_embeddings(_config(
      tmp_path, "cosent", train_file=str(tmp_path / "dev.tsv"), anchor_column="sentence1",
      positive_column="sentence2", score_column="score", score_scale=5.0, loss="cosent",
      max_train_steps=2, train_batch_size=7))
  assert result["train"]["steps"] == 2 and np.isfinite(result["train"]["loss"])
  assert sorted(result["eval"]["dev"]) == ["file", "loss", "num_examples", "pearson",
                                           "spearman"]


@pytest.mark.parametrize("overrides, message", [
    (dict(gradient_accumulation_steps=2), r"gradient_accumulation_steps \(2\) with the "
                                          r"in_batch_negatives loss would train another"),
    (dict(loss="cosent"), r"the cosent loss trains on scored pairs: give score_column"),
    (dict(score_column="score"), r"in_batch_negatives trains on pairs or triplets"),
    (dict(do_eval=False, eval_every_steps=5), r"add do_eval"),
    # Objectives that cannot train (before: loss 0 or a constant, and a run to the end).
    (dict(train_batch_size=1), r"with train_batch_size 1 over 1 replica\(s\) each batch holds "
                               r"1, and its loss and gradient are 0"),
    (dict(train_batch_size=1, loss="cosent", score_column="score"),
     r"the cosent loss compares the examples of a batch"),
    (dict(negative_column="negative", loss="cosent", score_column="score"),
     r"negative_column 'negative' is read by in_batch_negatives only"),
    # Ignored without a word (sweep 7, E09).
    (dict(symmetric=True, loss="cosine_mse", score_column="score"),
     r"symmetric is read by in_batch_negatives only: the cosine_mse loss would ignore it"),
])
def test_bad_settings_are_refused_before_any_work(tmp_path, overrides, message):
  with pytest.raises(ValueError, match=message):
    _config(tmp_path, "refused", **overrides)
  assert not (tmp_path / "refused").exists()


def test_a_best_metric_the_evaluation_never_reports_is_refused_before_training(
    tmp_path, monkeypatch):
  """It was found at the first evaluation, after training had begun (and, without
  eval_every_steps, only after training and evaluating)."""
  _write_data(tmp_path)
  monkeypatch.setattr(runner, "build_model", _never_build)
  for overrides, names in ((dict(), "pearson, spearman"),
                           (dict(loss="cosent", score_column="score",
                                 train_file=str(tmp_path / "scored.tsv")),
                            "loss, pearson, spearman")):
    (tmp_path / "scored.tsv").write_text("anchor\tpositive\tscore\na b\tc d\t1\ne f\tg h\t0\n")
    config = _config(tmp_path, "refused", eval_every_steps=2, best_metric="accuracy",
                     **overrides)
    with pytest.raises(ValueError, match=re.escape(
        f"best_metric 'accuracy' is not among the evaluation's scalars ({names})")):
      embedding_run.run_embeddings(config)
    assert not (tmp_path / "refused").exists()
  retrieval = _config(tmp_path, "x", dev_file=None, ir_queries_file="q", ir_corpus_file="c",
                      ir_qrels_file="r")
  assert embedding_run.EmbeddingTask().evaluation_metrics(retrieval, {"retrieval": None}) == [
      "mrr@10", "ndcg@10", "recall@1", "recall@5", "recall@10"]


def test_a_correlation_best_metric_on_constant_dev_scores_is_refused_before_any_work(
    tmp_path):
  """Spearman/Pearson of dev scores that are all equal are NaN at every evaluation: with
  that best_metric (given, or the default spearman) the run kept no best model and early
  stopping ended it at its first evaluation. Refused naming the dev file and the metric."""
  task = embedding_run.EmbeddingTask()
  dev = [embedding_data.TextExample(("a", "b"), 2.0, 2),
         embedding_data.TextExample(("c", "d"), 2.0, 3)]
  for metric in ("spearman", "pearson"):
    config = _config(tmp_path, "x", eval_every_steps=2, best_metric=metric)
    with pytest.raises(ValueError, match=re.escape(
        f"{config.dev_file}: all 2 dev targets are 2, so best_metric {metric!r} (a correlation "
        "with them) is undefined at every evaluation: give a dev file whose targets vary, or "
        "pass --best_metric=<one of mrr@10")):
      task.evaluation_metrics(config, {"dev": dev, "retrieval": None})
  config = _config(tmp_path, "x", eval_every_steps=2, best_metric="ndcg@10")
  assert "ndcg@10" in task.evaluation_metrics(config, {"dev": dev, "retrieval": None})


def test_the_files_the_evaluation_scores_are_the_dev_file_and_the_retrieval_set(tmp_path):
  """What the best value is recorded with: a resume on another of them starts it over."""
  task = embedding_run.EmbeddingTask()
  config = _config(tmp_path, "x", ir_queries_file="q", ir_corpus_file="c", ir_qrels_file="r")
  assert task.eval_files(config, {"dev": [], "retrieval": None}) == [
      config.dev_file, "q", "c", "r"]
  assert task.eval_files(config, {"retrieval": None}) == ["q", "c", "r"]
  assert task.eval_files(config, {"dev": []}) == [config.dev_file]


def _never_build(*args, **kwargs):
  raise AssertionError("the model was built before the check")


@pytest.mark.parametrize("rows, overrides, message", [
    # STS-B's 0-5 scores with the default scale: cosine targets up to 5.
    (["a b\tc d\t5.0", "e f\tg h\t0.0"], dict(loss="cosine_mse"),
     r"a score of 5 with --score_scale=1 gives 5: pass --score_scale=5"),
    (["a b\tc d\t2.0", "e f\tg h\t2.0"], dict(loss="cosent"),
     r"every score is 2: cosent learns the order"),
    (["a b\ta b\t1.0", "e f\te f\t0.0"], dict(loss="cosent"),
     r"every example's texts are identical \(e.g. line 2\)"),
])
def test_training_data_an_objective_cannot_learn_from_is_refused_naming_the_file(
    tmp_path, rows, overrides, message):
  _write_data(tmp_path)
  (tmp_path / "scored.tsv").write_text("\n".join(["anchor\tpositive\tscore", *rows]) + "\n")
  config = _config(tmp_path, "refused", train_file=str(tmp_path / "scored.tsv"),
                   score_column="score", do_eval=False, **overrides)
  with pytest.raises(ValueError, match=message) as error:
    embedding_run.EmbeddingTask().read_inputs(config)
  assert str(tmp_path / "scored.tsv") in str(error.value)
  assert not (tmp_path / "refused").exists()


def test_in_batch_negatives_on_one_distinct_pair_is_refused(tmp_path):
  """Every batch held copies of the pair, each the other's "negative": it trained anyway."""
  _write_data(tmp_path)
  (tmp_path / "one.tsv").write_text("anchor\tpositive\na b\tc d\na b\tc d\n")
  config = _config(tmp_path, "refused", train_file=str(tmp_path / "one.tsv"), do_eval=False)
  with pytest.raises(ValueError, match=r"one.tsv: one distinct example \(line 2\): the "
                                       "in_batch_negatives loss"):
    embedding_run.EmbeddingTask().read_inputs(config)


def test_columns_given_by_index_read_a_headerless_file(tmp_path):
  """The documented headerless TSV: every column flag a 0-based index ("0", as flags give
  it). Read by the task's own reader, so what the run would train on."""
  _write_data(tmp_path)
  (tmp_path / "headerless.tsv").write_text("0.5\ta b\tc d\n1.0\te f\tg h\n")
  config = _config(tmp_path, "indexed", train_file=str(tmp_path / "headerless.tsv"),
                   anchor_column="1", positive_column="2", score_column="0", loss="cosent",
                   do_eval=False)
  examples = embedding_run.EmbeddingTask().read_inputs(config)["train"]
  assert [(e.texts, e.score) for e in examples] == [(("a b", "c d"), 0.5), (("e f", "g h"), 1.0)]


def test_a_score_or_negative_column_the_run_does_not_read_is_named(tmp_path, caplog):
  """Sweep 27, A129: a file of scored pairs trained as plain pairs (in-batch negatives),
  its score column unread, without a word."""
  caplog.set_level("WARNING", logger="absl")
  _write_data(tmp_path)
  (tmp_path / "scored.tsv").write_text("anchor\tpositive\tscore\tnegative\n"
                                       "a b\tc d\t0.5\te f\ng h\ti j\t4.5\tk l\n")
  (tmp_path / "scored.jsonl").write_text('{"anchor": "a b", "positive": "c d", "score": 1}\n'
                                         '{"anchor": "e f", "positive": "g h", "score": 2}\n')
  for name, unread in (("scored.tsv", ["score", "negative"]), ("scored.jsonl", ["score"])):
    caplog.clear()
    config = _config(tmp_path, "plain", train_file=str(tmp_path / name), do_eval=False)
    embedding_run.EmbeddingTask().read_inputs(config)
    for column in unread:
      assert (f"{tmp_path / name} has a column {column!r} that this run does not read (no "
              f"--{column}_column)") in caplog.text
  caplog.clear()  # Read: nothing said of it.
  embedding_run.EmbeddingTask().read_inputs(_config(
      tmp_path, "read", train_file=str(tmp_path / "scored.jsonl"), score_column="score",
      loss="cosent", do_eval=False))
  assert "does not read" not in caplog.text
  embedding_run.EmbeddingTask().read_inputs(_config(
      tmp_path, "triplets", train_file=str(tmp_path / "scored.tsv"),
      negative_column="negative", do_eval=False))
  assert "column 'negative'" not in caplog.text and "column 'score'" in caplog.text


@pytest.mark.slow  # ~10 s: the tool trains 4 steps, evaluates, exports; a replay; a refusal.
def test_the_tool_trains_evaluates_exports_and_replays(tmp_path):
  # In this process (tests/tool_process.py: each run parses its own flags from its own
  # defaults): what the tool writes, prints and replays is the subject, not a fresh
  # interpreter.
  config = _write_data(tmp_path)
  out = tmp_path / "run"
  run = tool_process.run_tool(
      "run_embeddings", f"--train_file={tmp_path / 'pairs.tsv'}", "--do_train", "--do_eval",
      f"--dev_file={tmp_path / 'dev.tsv'}", f"--bert_config_file={config}",
      f"--vocab_file={pretrained.minilm_vocab_file()}", f"--max_seq_length={SEQ}",
      "--train_batch_size=10", "--max_train_steps=4", "--symmetric", f"--output_dir={out}",
      f"--export_dir={out / 'export'}", "--verbose=0")
  assert run.returncode == 0, run.stderr[-3000:]
  scores = json.loads((out / "eval_results.json").read_text())
  assert helpers.printed_scores(scores) in run.stdout
  assert sorted(scores["dev"]) == ["file", "num_examples", "pearson", "spearman", "step"]
  assert scores["dev"]["file"] == str(tmp_path / "dev.tsv")  # Whose scores (sweep 19 S1).
  recorded = (out / "flags.txt").read_text().splitlines()
  assert "--symmetric" in recorded and "--loss=in_batch_negatives" in recorded
  assert (out / "export" / "saved_model.pb").exists()
  # A replay of the finished run trains nothing more and scores the same.
  again = tool_process.run_tool("run_embeddings", f"--flagfile={out / 'flags.txt'}")
  assert again.returncode == 0, again.stderr[-3000:]
  assert json.loads((out / "eval_results.json").read_text()) == scores
  bad = tool_process.run_tool("run_embeddings", "--do_train",
                              f"--train_file={tmp_path}/x.tsv", "--gradient_accumulation_steps=2",
                              "--train_batch_size=8", f"--output_dir={tmp_path / 'refused'}")
  assert bad.returncode == 1 and "would train another objective" in bad.stderr
  assert "Traceback" not in bad.stderr and not (tmp_path / "refused").exists()


def test_a_retrieval_set_is_scored_with_mrr_ndcg_and_recall(tmp_path, untrained_evaluation):
  """An untrained encoder's ranking, scored as embedding_metrics defines it: the run's
  figures equal the metrics recomputed from its own embeddings (percent). The run is
  `untrained_evaluation` (the dev pairs scored beside the retrieval set)."""
  _write_data(tmp_path)
  _write_retrieval_set(tmp_path)
  result = untrained_evaluation["eval"]["retrieval"]
  assert result["queries"] == 3
  assert sorted(result) == ["file", "mrr@10", "ndcg@10", "queries", "recall@1", "recall@10",
                            "recall@5"]
  assert [os.path.basename(path) for path in result["file"]] == [  # The set scored.
      "queries.tsv", "corpus.tsv", "qrels.tsv"]
  assert result["recall@5"] == 100.0  # 5 documents: every relevant one is in the top 5.
  assert 0 < result["mrr@10"] <= 100 and result["recall@1"] <= result["mrr@10"]
  with pytest.raises(ValueError, match="give all of ir_queries_file, ir_corpus_file"):
    _config(tmp_path, "partial", ir_queries_file=str(tmp_path / "queries.tsv"))


@pytest.mark.slow
def test_the_shipped_minilm_starts_a_run_with_its_own_pipeline_and_weights(tmp_path):
  """init_hf_dir=minilm (a sentence-transformers directory): every encoder weight loaded
  (the model has no head to leave fresh), its mean pooling and normalization used; the
  untrained run scores the dev pairs as the library does with the directory's model."""
  _write_data(tmp_path)
  result = embedding_run.run_embeddings(_config(
      tmp_path, "minilm", do_train=False, bert_config_file=None,
      init_hf_dir=pretrained.minilm_dir(), max_seq_length=32))
  model, _ = sentence_transformers.load_sentence_encoder(pretrained.minilm_dir())
  tokenizer = WordPieceTokenizer(pretrained.minilm_vocab_file(), do_lower_case=True)
  examples = embedding_run.embedding_data.read_examples(
      str(tmp_path / "dev.tsv"), EmbeddingRunConfig(
          output_dir="o", do_eval=True, dev_file="d").dev_columns())
  want = embedding_inference.similarity_scores(model, tokenizer, examples, 32)
  assert result["eval"]["dev"]["spearman"] == pytest.approx(want["spearman"], abs=1e-9)


def test_a_sentence_transformers_sources_pooling_is_the_one_the_run_records(tmp_path,
                                                                           caplog):
  """Sweep 27, A147: the run recorded --pooling_mode=cls --nonormalize while it trained
  with MiniLM's mean pooling, and an eval-only rerun then scored with CLS pooling."""
  caplog.set_level("WARNING", logger="absl")
  given = _config(tmp_path, "cls", bert_config_file=None, init_hf_dir=pretrained.minilm_dir(),
                  pooling_mode="cls", normalize=False)
  used = embedding_run.source_pooling(given)
  assert (used.pooling_mode, used.normalize) == ("mean", True)
  assert "its pooling (mean, normalize=True) is used and recorded, not --pooling_mode=cls" in (
      caplog.text)
  own = _config(tmp_path, "own", pooling_mode="cls", normalize=False)  # No source: as given.
  assert embedding_run.source_pooling(own) is own


def test_a_sentence_transformers_dir_another_run_wrote_is_refused_before_any_work(tmp_path):
  """`run_embeddings --flagfile=<e114>/flags.txt --output_dir=<e119>` replaced e114's
  `--sentence_transformers_dir` with the new run's model (the same replay's `--export_dir`
  was refused): the run that wrote it is recorded in it, and another run's is refused."""
  from tfbert.embeddings.sentence_encoder import BertSentenceEncoder  # pylint: disable=import-outside-toplevel
  from tfbert.runtime import atomic, run_directory  # pylint: disable=import-outside-toplevel
  from tfbert.tasks.task import RunContext  # pylint: disable=import-outside-toplevel
  _write_data(tmp_path)
  st = tmp_path / "st"
  first = _config(tmp_path, "e114", do_train=False, sentence_transformers_dir=str(st),
                  do_lower_case=True)
  model = BertSentenceEncoder(BertConfig.from_json_file(str(tmp_path / "bert_config.json")))
  model.build()
  tokenizer = WordPieceTokenizer(pretrained.minilm_vocab_file(), do_lower_case=True)
  context = RunContext(config=first, strategy=tf.distribute.get_strategy(), tokenizer=tokenizer,
                       model=model, inputs={}, work_dir=first.output_dir, chief=True)
  embedding_run.EmbeddingTask().outputs(context)
  assert atomic.read_run_record(str(st)).run == str(tmp_path / "e114")
  embedding_run.check_outputs(first)  # Its own run: rewritten as before.
  replay = _config(tmp_path, "e119", do_train=False, sentence_transformers_dir=str(st))
  with pytest.raises(run_directory.RunDirectoryError, match=re.escape(
      f"sentence_transformers_dir {st} is a sentence-transformers directory written by the "
      f"run {tmp_path / 'e114'}, not by this run {tmp_path / 'e119'} (a flags.txt replayed "
      "with a new output directory?)")):
    embedding_run.EmbeddingTask().read_inputs(replay)
  assert not (tmp_path / "e119").exists()
  # Inside the old run's directory: named as the export's would be.
  inside = _config(tmp_path, "e119", do_train=False,
                   sentence_transformers_dir=str(tmp_path / "e114" / "st"))
  (tmp_path / "e114").mkdir()
  (tmp_path / "e114" / run_directory.LOCK_FILE).write_text("")  # A run claimed it.
  with pytest.raises(run_directory.RunDirectoryError, match="lies inside another run's"):
    embedding_run.check_outputs(inside)


def test_a_relative_sentence_transformers_dir_is_reported_where_it_was_written(
    tmp_path, monkeypatch):
  """Sweep 11 S1: `--output_dir=m1 --sentence_transformers_dir=m1st` wrote ./m1st but
  listed "wrote: .../m1/m1st". It is reported absolute, where it was written."""
  from tfbert.runtime import atomic  # pylint: disable=import-outside-toplevel
  from tfbert.tasks import fine_tuning  # pylint: disable=import-outside-toplevel
  from tfbert.tasks.task import RunContext  # pylint: disable=import-outside-toplevel
  monkeypatch.chdir(tmp_path)
  saved = []
  monkeypatch.setattr(sentence_transformers, "save_sentence_transformers",
                      lambda model, path, *args: saved.append(path))
  monkeypatch.setattr(atomic, "write_run_record", lambda *args: None)
  config = EmbeddingRunConfig(output_dir="m1", do_train=True, train_file="t",
                              sentence_transformers_dir="m1st")
  context = RunContext(config=config, strategy=None, model=None, inputs={}, work_dir="m1",
                       tokenizer=SimpleNamespace(vocab_file="vocab.txt"), chief=True)
  written = embedding_run.EmbeddingTask().outputs(context).written
  assert saved == ["m1st"]
  assert fine_tuning.written_paths("m1", written) == [str(tmp_path / "m1st")]


def test_an_eval_only_rerun_of_a_scored_pairs_run_takes_its_loss_and_columns(tmp_path):
  """The loss, its score column and scale are the run's: an evaluation-only rerun that does
  not give them takes them from its run_config.json (it was refused, the cosent loss
  "needs score_column"), and one given otherwise is refused naming both values."""
  trained = _config(tmp_path, "run", loss="cosent", score_column="y", score_scale=5.0)
  recorded = json.loads(trained.to_json())
  rerun = _config(tmp_path, "run", do_train=False, train_file=None,
                  given_settings=frozenset({"output_dir", "dev_file", "do_eval"}))
  adopted = fine_tuning.run_settings(rerun, recorded)
  assert (adopted.loss, adopted.score_column, adopted.score_scale) == ("cosent", "y", 5.0)
  other = _config(tmp_path, "run", do_train=False, train_file=None, loss="cosent",
                  score_column="z", given_settings=frozenset({"loss", "score_column"}))
  with pytest.raises(ValueError, match=re.escape("score_column: y -> z")):
    fine_tuning.run_settings(other, recorded)


def test_a_dev_file_without_its_fields_names_the_flags_and_that_it_needs_scores(tmp_path):
  """Sweep 23 P1: --dev_file of unscored anchor/positive pairs listed the missing keys, not
  the --dev_*_column flags that pick them nor that a dev file needs scores. The train
  file's missing column names its own flag."""
  (tmp_path / "pairs.jsonl").write_text('{"anchor": "a b", "positive": "c d"}\n')
  config = _config(tmp_path, "refused", train_file=None, do_train=False,
                   dev_file=str(tmp_path / "pairs.jsonl"))
  with pytest.raises(ValueError, match=re.escape(
      "pairs.jsonl:1: missing anchor ('sentence1'), positive ('sentence2'), score ('score'); "
      "keys: anchor, positive: pick them with --dev_anchor_column=anchor, "
      "--dev_positive_column=positive, --dev_score_column; a --dev_file holds scored pairs, "
      "a score for each pair: the evaluation is the Pearson/Spearman correlation")):
    embedding_run.EmbeddingTask().read_inputs(config)
  (tmp_path / "pairs.tsv").write_text("query\tpositive\na b\tc d\n")
  config = _config(tmp_path, "refused", do_eval=False)
  with pytest.raises(ValueError, match=re.escape(
      "the header has no column anchor ('anchor'); columns: 'query', 'positive': pick them "
      "with --anchor_column") + "$"):
    embedding_run.EmbeddingTask().read_inputs(config)
