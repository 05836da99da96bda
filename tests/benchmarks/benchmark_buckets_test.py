"""Tests for tools.benchmarks.benchmark_buckets (the runs themselves: BENCHMARKS.md)."""

import json
import os

import pytest

from tfbert_tools.benchmarks import benchmark_buckets


def _glue(tmp_path):
  for task, header in (("STS-B", "index\tgenre\tsentence1\tsentence2\tscore"),
                       ("MRPC", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String")):
    (tmp_path / task).mkdir(parents=True)
    for split in ("train", "dev"):
      rows = [header] + [f"{i}\tx\ta {i}\tb {i}\t1.0" for i in range(9)]
      (tmp_path / task / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
  return str(tmp_path)


@pytest.mark.parametrize("task, tool, length", [("stsb", "run_embeddings.py", 64),
                                                ("mrpc", "run_classifier.py", 128)])
def test_each_setting_runs_the_tool_on_the_first_train_pairs(tmp_path, task, tool, length):
  case = benchmark_buckets.BucketCase(task=task, glue_dir=_glue(tmp_path / "glue"),
                                      train_examples=5, batch_size=4)
  argv = benchmark_buckets.command(case, str(tmp_path), str(tmp_path / "out"), 8, 3)
  assert argv[1].endswith(tool)
  assert {"--length_bucket=8", "--group_by_length=3", f"--max_seq_length={length}",
          "--train_batch_size=4", "--init_hf_dir=minilm", "--dtype=float32"} <= set(argv)
  train = next(a for a in argv if a.startswith(("--train_file=", "--data_dir=")))
  path = train.split("=", 1)[1]
  path = path if task == "stsb" else f"{path}/train.tsv"
  lines = open(path, encoding="utf-8").read().splitlines()
  assert len(lines) == 1 + 5 and lines[1].startswith("0\t")  # The header and 5 pairs.


def test_wnut_runs_the_tagger_on_the_first_sentences_and_reads_entity_f1(tmp_path):
  wnut = tmp_path / "wnut"
  wnut.mkdir()
  sentences = [f"word{i}\tO\nParis\tB-location" for i in range(7)]
  (wnut / "wnut17train.conll").write_text("\n\n".join(sentences) + "\n\n", encoding="utf-8")
  (wnut / "emerging.dev.conll").write_text(sentences[0] + "\n", encoding="utf-8")
  case = benchmark_buckets.BucketCase(task="wnut", wnut_dir=str(wnut), train_examples=3,
                                      batch_size=2)
  argv = benchmark_buckets.command(case, str(tmp_path), str(tmp_path / "out"), 8, 0)
  assert argv[1].endswith("run_ner.py")
  assert {"--max_seq_length=128", "--learning_rate=0.0001", "--length_bucket=8",
          f"--eval_file={wnut / 'emerging.dev.conll'}"} <= set(argv)
  train = next(a for a in argv if a.startswith("--train_file=")).split("=", 1)[1]
  assert open(train, encoding="utf-8").read() == "\n\n".join(sentences[:3]) + "\n"
  (tmp_path / "metrics.jsonl").write_text('{"step": 10, "examples_per_second": 9.0}\n',
                                          encoding="utf-8")
  (tmp_path / "eval_results.json").write_text('{"dev": {"f1": 41.5, "accuracy": 90.0}}',
                                              encoding="utf-8")
  assert benchmark_buckets.read_run(str(tmp_path), "wnut") == {"examples_per_second": 9.0,
                                                                "metric": 41.5}
  with pytest.raises(ValueError, match="wnut_dir is needed"):
    benchmark_buckets.BucketCase(task="wnut")


def test_a_run_reads_as_the_median_training_window_and_the_dev_metric(tmp_path):
  rows = [{"step": 10, "examples_per_second": 30.0}, {"step": 20, "examples_per_second": 50.0},
          {"step": 20, "split": "dev", "examples_per_second": 900.0},
          {"step": 30, "examples_per_second": 40.0}, {"step": 30, "loss": 1.0}]
  (tmp_path / "metrics.jsonl").write_text("\n".join(map(json.dumps, rows)), encoding="utf-8")
  (tmp_path / "eval_results.json").write_text(json.dumps(
      {"dev": {"spearman": 85.0, "accuracy": 71.0}}), encoding="utf-8")
  assert benchmark_buckets.read_run(str(tmp_path), "stsb") == {
      "examples_per_second": 40.0, "metric": 85.0}
  assert benchmark_buckets.read_run(str(tmp_path), "mrpc")["metric"] == 71.0


def test_rows_give_each_setting_its_median_and_its_ratio_to_padded():
  case = benchmark_buckets.BucketCase(glue_dir="g", rounds=3)
  results = {"padded": [{"examples_per_second": v, "metric": 85.0} for v in (20, 22, 100)],
             "buckets": [{"examples_per_second": v, "metric": 84.5} for v in (60, 66, 61)],
             "grouped": [{"examples_per_second": v, "metric": 85.2} for v in (80, 90, 88)]}
  text = benchmark_buckets.format_result(case, results)
  assert "| padded (length_bucket 0, group_by_length 0) | 22.0 | 1.00x |" in text
  assert ("| buckets (length_bucket 8, group_by_length 0) | 61.0 | 2.77x | "
          "84.50, 84.50, 84.50 |") in text
  assert "| grouped (length_bucket 8, group_by_length 8) | 88.0 | 4.00x |" in text


def test_the_bucket_multiple_and_the_dtype_reach_every_run_and_the_rows():
  case = benchmark_buckets.BucketCase(glue_dir="g", multiple=1, dtype="mixed_bfloat16")
  assert case.settings == (("padded", 0, 0), ("buckets", 1, 0), ("grouped", 1, 8))
  results = {name: [{"examples_per_second": 10.0 * (i + 1), "metric": 85.0}]
             for i, (name, _, _) in enumerate(case.settings)}
  text = benchmark_buckets.format_result(case, results)
  assert "| stsb setting (mixed_bfloat16) |" in text
  assert "| grouped (length_bucket 1, group_by_length 8) | 30.0 | 3.00x |" in text
  for bad, message in ((dict(multiple=0), r"multiple \(0\) must be >= 1"),
                       (dict(dtype="float16"), "dtype must be one of")):
    with pytest.raises(ValueError, match=message):
      benchmark_buckets.BucketCase(glue_dir="g", **bad)


def test_a_case_without_glue_or_with_another_task_is_refused():
  with pytest.raises(ValueError, match="glue_dir is needed"):
    benchmark_buckets.BucketCase()
  with pytest.raises(ValueError, match="task must be one of"):
    benchmark_buckets.BucketCase(task="sst2", glue_dir="g")


@pytest.mark.parametrize("task, present, missing", [
    ("wnut", ["wnut17train.conll"], ["emerging.dev.conll"]),
    ("wnut", [], ["wnut17train.conll", "emerging.dev.conll"]),
    ("mrpc", ["MRPC/train.tsv"], ["MRPC/dev.tsv"]),
    ("stsb", ["STS-B/dev.tsv"], ["STS-B/train.tsv"]),
], ids=["wnut_dev", "wnut_both", "mrpc_dev", "stsb_train"])
def test_every_input_file_is_checked_before_any_run(tmp_path, monkeypatch, task, present,
                                                    missing):
  """A folder without WNUT's dev file failed in the first run, with its traceback."""
  for name in present:
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text("x\tO\n", encoding="utf-8")
  monkeypatch.setattr(benchmark_buckets.subprocess, "run", lambda *a, **k: pytest.fail("ran"))
  folder = "wnut_dir" if task == "wnut" else "glue_dir"
  case = benchmark_buckets.BucketCase(task=task, batch_size=1, **{folder: str(tmp_path)})
  (tmp_path / "work").mkdir()
  with pytest.raises(FileNotFoundError) as e:
    benchmark_buckets.measure(case, str(tmp_path / "work"))
  message = str(e.value)
  names = " and ".join(f"{task_folder}{split}" for task_folder, split in {
      "wnut": [("", "wnut17train.conll"), ("", "emerging.dev.conll")],
      "mrpc": [("MRPC/", "train.tsv"), ("MRPC/", "dev.tsv")],
      "stsb": [("STS-B/", "train.tsv"), ("STS-B/", "dev.tsv")]}[task])
  assert message.endswith(f": point --{folder} at the folder that holds {names}"), message
  for name in missing:
    assert f"{tmp_path / name} (" in message and ": missing)" in message
  for name in present:
    assert str(tmp_path / name) not in message
  assert not os.listdir(tmp_path / "work")  # No train subset written, no run.
