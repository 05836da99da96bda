"""tfbert.runtime.paths: an output that is, contains or lies inside an input, or another
output, is refused naming both; an output that cannot be written where it is named is refused
naming its flag."""

import os

import pytest

from tfbert.checkpoints import convert
from tfbert.classifier.classifier_run import ClassifierRunConfig
from tfbert.config import BertConfig
from tfbert.pretraining import pretraining_data
from tfbert.pretraining.pretraining_run import PretrainingRunConfig
from tfbert.runtime import atomic, paths
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


def test_a_required_output_given_empty_is_refused_not_skipped(tmp_path, monkeypatch):
  """Sweep 14 S2: `demo --workdir=` (an unset shell variable) wrote into the current
  directory; an output the tool requires, given empty, is refused naming its flag."""
  monkeypatch.chdir(tmp_path)
  for kind, what in [("directory", "a directory"), ("file", "a file")]:
    for empty in ("", None, []):
      assert paths.output_problems({"--workdir": empty}, kind, required=True) == [
          f"--workdir is empty: name {what} to write"]
  with pytest.raises(ValueError, match=r"^--workdir is empty: name a directory to write$"):
    paths.check_outputs({"--workdir": ""}, required=True)
  assert paths.output_problems({"--workdir": "runs/demo"}, required=True) == []
  assert paths.output_problems({"--pretraining_data_dir": ""}) == []  # Optional: unset.
  assert not os.listdir(tmp_path)


def test_a_device_a_pipe_or_a_dangling_link_is_no_output(tmp_path):
  """`export_onnx --output=/dev/null` replaced the device with a regular file (as root);
  a dangling link was called "an existing file" (sweep 7)."""
  assert paths.output_problems({"--output": "/dev/null"}, "file") == [
      "--output /dev/null is a character device, not a file tfbert may replace (writing "
      "replaces the path whole): choose a regular file's path for --output"]
  os.mkfifo(tmp_path / "pipe")
  assert paths.output_problems({"--output_dir": str(tmp_path / "pipe")}) == [
      f"--output_dir {tmp_path / 'pipe'} is a named pipe, not a file tfbert may replace "
      "(writing replaces the path whole): choose a regular file's path for --output_dir"]
  os.symlink(tmp_path / "gone", tmp_path / "link")
  assert paths.output_problems({"--output": str(tmp_path / "link")}, "file") == [
      f"--output {tmp_path / 'link'} is a symbolic link to {tmp_path / 'gone'}, which does "
      "not exist: remove the link or choose another --output"]
  assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


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


def _refused_as_run_directories(tmp_path, path, what):
  """A fine-tuning `--output_dir` and a pretraining `--model_dir` at `path` are refused,
  naming the flag, the path and `what` it is."""
  config = ClassifierRunConfig(output_dir=str(path), task_name="mrpc", do_train=True,
                               data_dir=str(tmp_path / "glue"))
  with pytest.raises(ValueError, match=f"^--output_dir {path} {what}"):
    fine_tuning.check_sources(config)
  bert_config = BertConfig(vocab_size=11, hidden_size=6, num_hidden_layers=1,
                           num_attention_heads=2, intermediate_size=7)
  with pytest.raises(ValueError, match=f"--model_dir {path} {what}"):
    PretrainingRunConfig(bert_config, ["x"], str(path),
                         OptimizerConfig(learning_rate=1e-3, num_train_steps=10))


def test_every_tool_checks_its_outputs_before_any_work(tmp_path):
  """Fine-tuning (`fine_tuning.check_sources`, the runner's first check), pretraining (a
  config check) and the converter refuse an output that is a file or lies below one, naming
  the flag, before anything is read: the inputs here do not exist."""
  afile = tmp_path / "afile"
  afile.write_text("x")
  (tmp_path / "adir").mkdir()
  _refused_as_run_directories(tmp_path, afile, "is an existing file")
  for fmt, output, message in [
      ("hf", afile / "hf", f"--output {afile}/hf: its parent {afile} is a file"),
      ("tfbert", tmp_path / "adir", "--output .*/adir is an existing directory, not a file"),
      ("google", afile / "bert_model.ckpt", f"its parent {afile} is a file")]:
    with pytest.raises(ValueError, match=message):
      convert.convert_checkpoint("hf", str(tmp_path / "no_input"), fmt, str(output))


def _saved_model(folder, marker=None):
  """A planted SavedModel (`saved_model.pb`, `variables/`), with a tfbert marker if given."""
  (folder / "variables").mkdir(parents=True)
  (folder / "saved_model.pb").write_text("graph")
  (folder / "variables" / "variables.index").write_text("index")
  if marker is not None:
    atomic.write_marker(str(folder), marker)
  return folder


def test_nothing_is_written_into_an_output_tfbert_wrote_or_a_saved_model(tmp_path):
  """`--output_dir`, `--model_dir`, `--workdir` (a directory written into) naming an export
  wrote a run, data or a demo into it; a Google checkpoint at `<export>/variables/variables`
  replaced its weights. Only the same output replaces it whole (`--export_dir`)."""
  export = _saved_model(tmp_path / "export", atomic.OutputRecord(
      "SavedModel export", "BertClassifier", str(tmp_path / "run")))
  plain = _saved_model(tmp_path / "plain")
  what = f"a SavedModel export of a BertClassifier written by the run {tmp_path / 'run'}"
  before = sorted(os.walk(tmp_path))
  assert paths.output_problems({"--output_dir": str(export), "--workdir": str(plain),
                                "--model_dir": str(export / "run")}) == [
      f"--output_dir {export} is {what}: no other output is written into it (its files would "
      "mix with that model's); choose another --output_dir, e.g. a new directory",
      f"--workdir {plain} is a SavedModel (it holds saved_model.pb): no other output is "
      "written into it (its files would mix with that model's); choose another --workdir, "
      "e.g. a new directory",
      f"--model_dir {export / 'run'} lies inside {export}, {what}: writing there would change "
      "that model's files; choose another --model_dir outside it"]
  prefix = str(plain / "variables" / "variables")
  assert paths.output_problems({"--output": prefix}, "prefix") == [
      f"--output {prefix} lies inside {plain}, a SavedModel (it holds saved_model.pb): writing "
      "there would change that model's files; choose another --output outside it"]
  assert paths.output_problems({"--output": str(export / "model.tflite")}, "file")
  # The export itself is replaced whole (atomic.check_replaceable decides at the write); an
  # export nested in another is not.
  assert paths.output_problems({"--export_dir": str(export)}) == []
  assert paths.output_problems({"--export_dir": str(plain / "inner")})[0].startswith(
      f"--export_dir {plain / 'inner'} lies inside {plain}, a SavedModel")
  assert sorted(os.walk(tmp_path)) == before  # Nothing created.


def test_every_tool_refuses_an_export_as_its_output_directory_before_any_work(tmp_path):
  export = _saved_model(tmp_path / "export", atomic.OutputRecord("SavedModel export",
                                                                 "BertClassifier"))
  _refused_as_run_directories(tmp_path, export, "is a SavedModel export")
  with pytest.raises(ValueError, match=f"--output_dir {export} is a SavedModel export"):
    pretraining_data.create_pretraining_data([str(tmp_path / "corpus.txt")], str(export),
                                             pretraining_data.PretrainingDataConfig(
                                                 vocab_file=str(tmp_path / "vocab.txt")))
  with pytest.raises(ValueError, match=f"--output {export}/variables/variables lies inside "
                     f"{export}, a SavedModel export"):
    convert.convert_checkpoint("hf", str(tmp_path / "no_input"), "google",
                               str(export / "variables" / "variables"))
  assert sorted(os.listdir(export)) == [atomic.OUTPUT_MARKER, "saved_model.pb", "variables"]


def test_a_dangling_link_above_an_output_is_named_as_one(tmp_path):
  """A link to nothing above an output read as "its parent ... is not a directory"."""
  os.symlink(tmp_path / "gone", tmp_path / "link")
  for kind in paths.OUTPUT_KINDS:
    assert paths.output_problems({"--output": str(tmp_path / "link" / "out")}, kind) == [
        f"--output {tmp_path}/link/out: {tmp_path}/link is a symbolic link to "
        f"{tmp_path}/gone, which does not exist: remove the link or choose another --output"]
  assert paths.output_problems({"--output_dir": str(tmp_path / "link")}) == [
      f"--output_dir {tmp_path}/link is a symbolic link to {tmp_path}/gone, which does not "
      "exist: remove the link or choose another --output_dir"]


def test_a_name_longer_than_the_file_system_allows_is_refused_naming_the_flag(tmp_path):
  """`--output_dir=<300 characters>` and `--output_prefix` of 260 failed with "File name too
  long" after the work, naming the path or a staging path (sweep 7, C14 and D02)."""
  limit = os.pathconf(tmp_path, "PC_NAME_MAX")
  fits, over, short = "d" * limit, "d" * (limit + 1), "d" * 28 + "..." + "d" * 28
  assert paths.output_problems({"--output_dir": str(tmp_path / fits)}) == []
  assert paths.output_problems({"--output": str(tmp_path / fits)}, "file") == []
  assert paths.output_problems({"--output_dir": str(tmp_path / over / "run")}) == [
      f"--output_dir {tmp_path}/{short}/run: the directory name '{short}' in "
      f"it is {limit + 1} bytes long, over the {limit} bytes a file name may have in "
      f"{tmp_path}: choose a shorter --output_dir"]
  # A prefix's files are longer than the prefix: `<prefix>.data-00000-of-00001`.
  prefix = "p" * (limit - len(paths.PREFIX_SUFFIX) + 1)
  [problem] = paths.output_problems({"--output": str(tmp_path / prefix)}, "prefix")
  assert f"is {limit + 1} bytes long, over the {limit} bytes" in problem
  assert paths.output_problems({"--output": str(tmp_path / prefix[1:])}, "prefix") == []
  # Bytes, not characters: 128 two-byte letters are 256 bytes.
  assert "is 256 bytes long" in paths.output_problems({"--output": str(tmp_path / ("é" * 128))},
                                                     "file")[0]
  assert not os.listdir(tmp_path)


def test_a_glob_input_conflicts_only_with_what_it_matches_or_would_match(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  (tmp_path / "t1a.txt").write_text("x")
  (tmp_path / "d").mkdir()
  (tmp_path / "d" / "a.txt").write_text("x")
  inputs = {"--train_text_files": "t1*.txt"}
  # Beside the matched files: apart (it was refused as "lies inside input t1*.txt").
  assert paths.overlap_problems(inputs, {"--model_dir": "runs/p"}) == []
  assert paths.overlap_problems({"--f": "*/a.txt"}, {"--model_dir": "runs/p"}) == []
  # A matched file, a directory holding one, a path the pattern would match, or one below it.
  for inputs_, output, relation in [(inputs, "t1a.txt", "is"),
                                    ({"--f": "*/a.txt"}, "d", "contains"),
                                    (inputs, "t1b.txt", "would match"),
                                    (inputs, "t1dir.txt/run", "lies inside a path matching")]:
    problems = paths.overlap_problems(inputs_, {"--model_dir": output})
    assert len(problems) == 1 and f"{output} {relation} input" in problems[0], problems


def test_a_file_or_prefix_output_ending_in_a_separator_names_a_directory(tmp_path):
  """`--output o13/` for a file was refused backwards ("a file, where a directory is
  expected") and a prefix `v13/` wrote hidden `.index` files into the parent (sweep 15,
  N6/N9): one rule names the flag and a path inside it."""
  out = f"{tmp_path}/o13/"
  assert paths.output_problems({"--output": out}, "file", example="model.onnx") == [
      f"--output {out} names a directory: name the file to write inside it, "
      f"e.g. {out}model.onnx"]
  assert paths.directory_named_problem("--output", out, "prefix") == (
      f"--output {out} names a directory: name the path prefix (its files <prefix>.* go "
      f"beside it) to write inside it, e.g. {out}bert_model.ckpt")
  assert paths.directory_named_problem("--output", out, "directory") is None
  assert paths.output_problems({"--output": "gs://b/o13/"}, "file") == [
      "--output gs://b/o13/ names a directory: name the file to write inside it"]
  assert paths.output_problems({"--output_dir": out}) == []  # A directory output may.
  assert not os.path.exists(out)


def test_an_input_inside_the_output_directory_is_told_to_move_out(layout, monkeypatch):
  """An eval/predict-only rerun's model lives in its --output_dir: "choose another
  --output_dir" could not work there (sweep 15, R1); moving the input out can."""
  monkeypatch.chdir(layout)
  assert paths.overlap_problems({"--predict_file": "data/train.tsv"},
                                {"--output_dir": "data"}, container="--output_dir") == [
      "output --output_dir data contains input --predict_file data/train.tsv: the run "
      "replaces files there: move the input out, or choose another --output_dir"]
