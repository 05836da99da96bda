"""tfbert.runtime.paths: an output that is, contains or lies inside an input, or another
output, is refused naming both."""

import os

import pytest

from tfbert.runtime import paths


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
