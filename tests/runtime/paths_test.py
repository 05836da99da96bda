"""tfbert.runtime.paths: an output that is, contains or lies inside an input, or another
output, is refused naming both; an output that cannot be written where it is named is refused
naming its flag."""

import os

import pytest

from tfbert.checkpoints import convert
from tfbert.classifier.classifier_run import ClassifierRunConfig
from tfbert.config import BertConfig
from tfbert.pretraining.pretraining_run import PretrainingRunConfig
from tfbert.runtime import paths
from tfbert.tasks import fine_tuning
from tfbert.training.optimization import OptimizerConfig


@pytest.fixture
def layout(tmp_path):
  """data/{train.tsv, shards/a.tfrecord}, hf/ (a model directory), runs/; a symlink to data."""
  (tmp_path / "data" / "shards").mkdir(parents=True)
  (tmp_path / "data" / "train.tsv").write_text("x")
  (tmp_path / "data" / "shards" / "a.tfrecord").write_text("x")
  (tmp_path / "hf").mkdir()
  (tmp_path / "runs").mkdir()
  os.symlink(tmp_path / "data", tmp_path / "data_link")
  return tmp_path


@pytest.mark.parametrize("inputs, outputs, expected", [
    # An output equal to an input.
    ({"--init_hf_dir": "hf"}, {"--export_dir": "hf"}, ["output --export_dir", "is input "
                                                       "--init_hf_dir"]),
    # An output containing an input: replacing it would delete the input.
    ({"--train_file": "data/train.tsv"}, {"--output_dir": "data"}, ["contains input "
                                                                     "--train_file"]),
    # An output inside an input directory.
    ({"--init_hf_dir": "hf"}, {"--export_dir": "hf/export"}, ["lies inside input "
                                                              "--init_hf_dir"]),
    # A glob is its fixed leading directories.
    ({"--input_files": ["data/shards/*.tfrecord"]}, {"--model_dir": "data/shards"},
     ["is input --input_files data/shards/*.tfrecord"]),
    # A symlink to an input is that input.
    ({"--train_file": "data/train.tsv"}, {"--output_dir": "data_link"},
     ["--output_dir data_link contains input --train_file"]),
    # Two outputs: equal, or one containing the other outside the run directory.
    ({}, {"--output_dir": "runs/a", "--export_dir": "runs/a"}, ["output --output_dir runs/a "
                                                                "is output --export_dir"]),
    ({}, {"--output_dir": "runs/a", "--export_dir": "runs"}, ["output --output_dir runs/a "
                                                              "lies inside output --export_dir"]),
])
def test_overlaps_are_refused_naming_both(layout, inputs, outputs, expected, monkeypatch):
  monkeypatch.chdir(layout)
  problems = paths.overlap_problems(inputs, outputs, container="--output_dir")
  assert len(problems) == 1, problems
  for part in expected:
    assert part in problems[0], (part, problems[0])
  with pytest.raises(ValueError, match="choose another|separate paths"):
    paths.check_apart(inputs, outputs, container="--output_dir")


def test_paths_apart_and_outputs_inside_the_run_directory_pass(layout, monkeypatch):
  monkeypatch.chdir(layout)
  inputs = {"--train_file": "data/train.tsv", "--init_hf_dir": "hf", "--vocab_file": None,
            "--input_files": ["data/shards/*.tfrecord"]}
  outputs = {"--output_dir": "runs/a", "--export_dir": "runs/a/export",
             "--sentence_transformers_dir": "runs/st", "--unset": ""}
  assert paths.overlap_problems(inputs, outputs, container="--output_dir") == []
  # A sibling whose name starts like the input is not inside it.
  assert paths.overlap_problems({"--init_hf_dir": "hf"}, {"--export_dir": "hf2"}) == []


def test_every_overlap_is_listed(layout, monkeypatch):
  monkeypatch.chdir(layout)
  problems = paths.overlap_problems(
      {"--train_file": "data/train.tsv", "--init_hf_dir": "hf"},
      {"--output_dir": "data", "--export_dir": "hf"}, container="--output_dir")
  assert len(problems) == 2 and "--train_file" in problems[0] and "--init_hf_dir" in problems[1]


def test_urls_compare_as_paths_of_their_filesystem():
  assert paths.overlap_problems({"--init_hf_dir": "gs://b/hf"}, {"--export_dir": "gs://b/hf/"})
  assert not paths.overlap_problems({"--init_hf_dir": "gs://b/hf"}, {"--export_dir": "/b/hf"})


def test_outputs_that_cannot_be_written_are_refused_naming_the_flag(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  (tmp_path / "afile").write_text("x")
  (tmp_path / "adir").mkdir()
  assert paths.output_problems({"--output_dir": "afile", "--model_dir": "afile/run",
                                "--export_dir": "adir/new/export"}) == [
      "--output_dir afile is an existing file, not a directory: choose another --output_dir",
      f"--model_dir afile/run: its parent {tmp_path}/afile is a file, not a directory"]
  assert paths.output_problems({"--output": "adir"}, "file") == [
      "--output adir is an existing directory, not a file: name a file to write"]
  assert paths.output_problems({"--output": "afile/bert_model.ckpt"}, "prefix") == [
      f"--output afile/bert_model.ckpt: its parent {tmp_path}/afile is a file, not a directory"]
  # Nothing can be created in /proc, even by root (whose os.access passes everywhere).
  assert paths.output_problems({"--output_dir": "/proc/tfbert_out"}) == [
      "cannot create --output_dir /proc/tfbert_out: /proc is read-only (mode 0555)"]
  with pytest.raises(ValueError, match="^--output_dir afile is an existing file"):
    paths.check_outputs({"--output_dir": "afile", "--export_dir": None})
  # Writable places, existing or not, and a file output replacing a file, pass; nothing is
  # created.
  assert paths.output_problems({"--output_dir": "adir", "--export_dir": "new/a/b",
                                "--unset": ""}) == []
  assert paths.output_problems({"--output": "afile"}, "file") == []
  assert paths.output_problems({"--output": "adir/new/bert_model.ckpt"}, "prefix") == []
  assert sorted(os.listdir(tmp_path)) == ["adir", "afile"] and not os.listdir("adir")


def test_an_output_in_a_directory_without_write_permission_is_refused(tmp_path):
  locked = tmp_path / "locked"
  locked.mkdir()
  locked.chmod(0o555)
  try:
    assert paths.output_problems({"--output_dir": str(locked / "run")}) == [
        f"cannot create --output_dir {locked}/run: {locked} is "
        + ("read-only (mode 0555)" if os.geteuid() == 0 else "not writable by this user")]
    assert paths.output_problems({"--output_dir": str(locked)})[0].startswith(
        f"cannot write into --output_dir {locked}: ")
  finally:
    locked.chmod(0o755)


def test_every_tool_checks_its_outputs_before_any_work(tmp_path):
  """Fine-tuning (`fine_tuning.check_sources`, the runner's first check), pretraining (a
  config check) and the converter refuse an output that is a file or lies below one, naming
  the flag, before anything is read: the inputs here do not exist."""
  afile = tmp_path / "afile"
  afile.write_text("x")
  (tmp_path / "adir").mkdir()
  config = ClassifierRunConfig(output_dir=str(afile), task_name="mrpc", do_train=True,
                               data_dir=str(tmp_path / "glue"))  # Read back from a record.
  with pytest.raises(ValueError, match=f"^--output_dir {afile} is an existing file"):
    fine_tuning.check_sources(config)
  bert_config = BertConfig(vocab_size=11, hidden_size=6, num_hidden_layers=1,
                           num_attention_heads=2, intermediate_size=7)
  with pytest.raises(ValueError, match=f"--model_dir {afile} is an existing file"):
    PretrainingRunConfig(bert_config, ["x"], str(afile),
                         OptimizerConfig(learning_rate=1e-3, num_train_steps=10))
  for fmt, output, message in [
      ("hf", afile / "hf", f"--output {afile}/hf: its parent {afile} is a file"),
      ("tfbert", tmp_path / "adir", "--output .*/adir is an existing directory, not a file"),
      ("google", afile / "bert_model.ckpt", f"its parent {afile} is a file")]:
    with pytest.raises(ValueError, match=message):
      convert.convert_checkpoint("hf", str(tmp_path / "no_input"), fmt, str(output))
