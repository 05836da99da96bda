"""Runs an `AlignmentConfig`: the initial checkpoint, every variant, the comparison, the report.

  workdir/
    init/bert_model.ckpt*, bert_config.json   the shared initial weights (Google format; the
                                               task head too when fine-tuning)
    init/made_by.json                          what decided them (`initial_weights_record`):
                                               a rerun with other values rebuilds init/ when
                                               runs/ is empty, and is refused otherwise
    runs/<variant>/                            each variant's run directory (pretraining:
                                               metrics.jsonl, TensorBoard train/, export/google/;
                                               fine-tuning: its tool's output directory,
                                               metrics.jsonl and model.keras)
    report.json, alignment.png                 the comparison

Fine-tuning variants train `steps` applied steps (`max_train_steps`) of a schedule that
spans `FINE_TUNING_EPOCHS` epochs without warmup: the learning rate is the same function of
the step in every variant and, over an alignment's few steps, close to constant.

`tensorboard --logdir workdir/runs` shows the variants side by side.
"""

import dataclasses
import json
import os
from typing import Callable, Optional, Sequence

import keras

from tfbert.alignment import alignment
from tfbert.alignment.alignment import AlignmentConfig, PairReport, Variant
from tfbert.checkpoints import convert, google_checkpoint, model_paths, pretrained
from tfbert.classifier import classifier_run
from tfbert.models import BertClassifier, BertPretrainer, BertSpanLabeler
from tfbert.pretraining import data_checks
from tfbert.pretraining.pretraining_run import PretrainingRunConfig, run_pretraining
from tfbert.runtime import atomic, files, json_values, run_directory, validation
from tfbert.serving import export
from tfbert.squad import squad_features, squad_run
from tfbert.tasks import fine_tuning
from tfbert.text import tokenization
from tfbert.training import distribution, workers

SPEC_FILE = "alignment_spec.json"
INIT_RECORD = "made_by.json"
FINE_TUNING_EPOCHS = 1000.0


def without_dropout(config):
  return dataclasses.replace(config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def initial_checkpoint_prefix(workdir: str) -> str:
  """Where the initial checkpoint every variant starts from is (to be) written."""
  return os.path.join(workdir, "init", "bert_model.ckpt")


def initial_model(config: AlignmentConfig) -> keras.Model:
  """The model every variant starts from, built from `config.seed` (nothing written)."""
  keras.utils.set_random_seed(config.seed)
  bert_config = without_dropout(config.bert_config)
  if config.task == "squad":
    model = BertSpanLabeler(bert_config, dtype="float32")
  elif config.task == "classifier":
    task = classifier_run.glue_data.get_task(config.task_name)
    model = BertClassifier(bert_config, task.num_classes, 0.0, dtype="float32")
  else:
    model = BertPretrainer(bert_config, dtype="float32")
  model.build()
  return model


def initial_weights_record(config: AlignmentConfig) -> dict:
  """What decides the initial weights (`initial_model`), by the flag that sets it: the seed,
  the task (its head) and the model config."""
  record = {"--seed": config.seed, "--task": config.task,
            "--bert_config_file": without_dropout(config.bert_config).to_dict()}
  if config.task == "classifier":
    record["--task_name"] = config.task_name
  return record


def way_out(workdir: str) -> str:
  """What align says to do about a workdir of runs made with other values (align has no
  --allow_config_change)."""
  return (f"choose another --workdir, or remove {os.path.join(workdir, 'runs')} (its old "
          "runs) to start over there")


def _has_runs(workdir: str) -> bool:
  runs = os.path.join(workdir, "runs")
  return files.isdir(runs) and bool(files.listdir(runs))


def reuses_initial_checkpoint(config: AlignmentConfig, workdir: str) -> bool:
  """Whether `workdir`'s initial checkpoint is this alignment's (made from the same
  `initial_weights_record`), so it is reused; False: none, or made from other values with
  no run in `workdir/runs` started from it (it is rebuilt). Writes nothing.

  Raises:
    ValueError: init/ was made from other values and runs/ holds runs started from it,
      naming both values and what to do.
  """
  prefix = initial_checkpoint_prefix(workdir)
  if not files.exists(prefix + ".index"):
    return False
  path = os.path.join(os.path.dirname(prefix), INIT_RECORD)
  recorded = json.loads(files.read_text(path)) if files.exists(path) else None
  wanted = initial_weights_record(config)
  if recorded == json.loads(json.dumps(wanted)):
    return True
  if not _has_runs(workdir):
    return False  # Nothing started from it: rebuilt from this command's values.
  if recorded is None:  # Written before init/ recorded its values: the runs' records judge.
    return True
  found = run_directory.differences(recorded, wanted)
  raise ValueError(
      f"{prefix} holds the initial weights made with other values than this command's "
      f"({'; '.join(found)}), and {os.path.join(workdir, 'runs')} holds runs started from "
      f"them: {way_out(workdir)} (init/ is then rebuilt)")


def write_initial_checkpoint(config: AlignmentConfig, workdir: str,
                             model: Optional[keras.Model] = None) -> str:
  """Builds the model from `config.seed` once and writes it, with what made it
  (`INIT_RECORD`, `initial_weights_record`); returns the checkpoint prefix. An initial
  checkpoint made from other values is rebuilt, or refused when runs started from it
  (`reuses_initial_checkpoint`).

  Args:
    config: the alignment.
    workdir: where the checkpoint goes (`initial_checkpoint_prefix`).
    model: `initial_model(config)` when the caller built it already (`check_variants`
      returns it for fine-tuning), so the same model is not built twice; None builds it.

  Raises:
    FileNotFoundError: the checkpoint's `.index` is a symbolic link to nothing, named.
    ValueError: made from other values, with runs started from it (named).
  """
  prefix = initial_checkpoint_prefix(workdir)
  index = prefix + ".index"
  if files.dangling_link(index) is not None:  # Neither a checkpoint nor a place to write.
    raise FileNotFoundError(files.missing_file_message(index, "initial checkpoint index")
                            + ": remove it, and tfbert writes the initial checkpoint there")
  if not reuses_initial_checkpoint(config, workdir):
    record = os.path.join(os.path.dirname(prefix), INIT_RECORD)
    # The old checkpoint's files go first (its record first of all: a half-rebuilt init/
    # is never taken as made), so none of its tensors outlives the rebuild.
    old = ([record] if files.exists(record) else []) + files.glob(prefix + ".*")
    for path in old:
      files.remove(path)
    google_checkpoint.export_google_checkpoint(
        model if model is not None else initial_model(config), prefix)
    atomic.write_json(record, initial_weights_record(config))
  return prefix


def _fine_tuning_task(config: AlignmentConfig):
  """The `tfbert.tasks.task.Task` hooks a fine-tuning variant's tool runs with."""
  return squad_run.SquadTask() if config.task == "squad" else classifier_run.ClassifierTask()


def check_minilm_vocab_fits(config: AlignmentConfig, embedded_data: bool) -> None:
  """The MiniLM vocabulary fits the model config's embedding table where align uses it:
  every fine-tuning variant tokenizes with it, and the embedded pretraining records
  (`embedded_data`) were made with it. `tools/align.py` checks it before it writes that
  data (it wrote WORKDIR/data, then refused the config's vocab_size: sweep 26, B8).

  Raises:
    ValueError: naming the vocabulary, both sizes and the config.
  """
  if not (config.fine_tuning or embedded_data):
    return
  vocab_file = pretrained.minilm_vocab_file()
  use = "align tokenizes with it" if config.fine_tuning else "align's embedded data uses it"
  tokenization.check_vocab_fits(
      tokenization.vocab_entries(vocab_file), config.bert_config.vocab_size,
      f"the MiniLM vocabulary {vocab_file} ({use})",
      "the model config (--bert_config_file, or align's default)")


def check_variants(config: AlignmentConfig, workdir: str) -> Optional[keras.Model]:
  """Reads and checks what every variant's run will read, as the run itself checks it,
  before anything is written in `workdir`: a refusal leaves nothing behind (the initial
  checkpoint was written before the first run found its data unfit).

  Pretraining: the record files against the run's shapes (`data_checks`), and each
  variant's `PretrainingRunConfig`. Fine-tuning: each variant's run config, the task's
  `read_inputs` (the train file: a GLUE file of another task, a malformed SQuAD file; read
  once, as every variant reads the same file with the same settings) and the model's fit
  to the vocabulary, segments and sequence length (the checks the tool makes after building
  the model, before its run directory).

  Returns:
    fine-tuning: the initial model the checks read (`initial_model`), which
    `write_initial_checkpoint` writes instead of building it again; pretraining: None.

  Raises:
    ValueError (tfbert.pretraining.data_checks.DataFileError among them),
    FileNotFoundError: naming the file, field or setting that does not fit.
  """
  init = initial_checkpoint_prefix(workdir)
  if not config.fine_tuning:
    data_checks.check_pretraining_files(list(config.input_files), config.max_seq_length,
                                        config.max_predictions_per_seq,
                                        config.bert_config.vocab_size)
    for variant in config.variants:
      validation.validate(run_config(config, variant, workdir, init),
                          num_replicas=variant.replicas * variant.workers)
    return None
  model = initial_model(config)
  task = _fine_tuning_task(config)
  runs = [fine_tuning_config(config, variant, workdir, init) for variant in config.variants]
  for variant, run in zip(config.variants, runs):
    validation.validate(run, num_replicas=variant.replicas * variant.workers)
  task.read_inputs(runs[0])
  check_minilm_vocab_fits(config, embedded_data=False)
  fine_tuning.check_segments_fit(model, task.segments(runs[0]))
  export.check_seq_length(model, task.max_seq_length(runs[0]))
  return model


def _strategy(variant: Variant) -> tuple[str, int]:
  """(distribution_strategy, num_cpu_devices) of a variant."""
  if variant.workers > 1:
    return "multi_worker", 1
  return ("mirrored" if variant.replicas > 1 else "one_device"), variant.replicas


def fine_tuning_config(config: AlignmentConfig, variant: Variant, workdir: str,
                       init_checkpoint: str):
  """The `SquadRunConfig` or `ClassifierRunConfig` of one fine-tuning variant."""
  strategy, devices = _strategy(variant)
  common = dict(
      output_dir=os.path.join(workdir, "runs", variant.name), do_train=True,
      vocab_file=pretrained.minilm_vocab_file(), init_checkpoint=init_checkpoint,
      train_file=config.train_file, train_batch_size=config.train_batch_size,
      learning_rate=config.optimizer.learning_rate, num_train_epochs=FINE_TUNING_EPOCHS,
      max_train_steps=config.steps, warmup_proportion=0.0,
      weight_decay_rate=config.optimizer.weight_decay_rate,
      clip_norm=config.optimizer.clip_norm,
      gradient_accumulation_steps=variant.gradient_accumulation_steps, dtype=variant.dtype,
      distribution_strategy=strategy, num_cpu_devices=devices, seed=config.seed, log_steps=1,
      save_checkpoints_steps=10**9, verbose=0)
  if config.task == "squad":
    length = config.max_seq_length
    return squad_run.SquadRunConfig(
        features=squad_features.FeatureConfig(length, doc_stride=length // 2,
                                              max_query_length=min(64, length // 4)),
        **common)
  return classifier_run.ClassifierRunConfig(
      task_name=config.task_name, max_seq_length=config.max_seq_length,
      classifier_dropout=0.0, **common)


def _run_fine_tuning(run) -> None:
  if isinstance(run, squad_run.SquadRunConfig):
    squad_run.run_squad(run)
  else:
    classifier_run.run_classifier(run)



def run_config(config: AlignmentConfig, variant: Variant, workdir: str,
               init_checkpoint: str) -> PretrainingRunConfig:
  """The pretraining run of one variant."""
  strategy, devices = _strategy(variant)
  return PretrainingRunConfig(
      bert_config=without_dropout(config.bert_config), input_files=list(config.input_files),
      model_dir=os.path.join(workdir, "runs", variant.name),
      optimizer=dataclasses.replace(config.optimizer, num_train_steps=config.steps,
                                    gradient_accumulation_steps=variant.gradient_accumulation_steps),
      train_batch_size=config.train_batch_size, max_seq_length=config.max_seq_length,
      max_predictions_per_seq=config.max_predictions_per_seq,
      init_checkpoint=init_checkpoint, dtype=variant.dtype, distribution_strategy=strategy,
      num_cpu_devices=devices, jit_compile=variant.execution == "xla",
      run_eagerly=variant.execution == "eager", seed=config.seed, deterministic=True,
      save_checkpoints_steps=10**9,  # Only at the end (or at resume_at).
      log_steps=1, window_normalization=variant.loss_normalization == "window",
      export_saved_model=False)  # The comparison reads the Google checkpoint alone.


def run_variant(config: AlignmentConfig, variant: Variant, workdir: str, init_checkpoint: str,
                timeout: float = 3600.0) -> list[float]:
  """Trains one variant (both halves when it resumes); returns its per-step losses.

  Raises:
    RuntimeError: when a worker process fails (its output tail included).
  """
  if config.fine_tuning:
    run = fine_tuning_config(config, variant, workdir, init_checkpoint)
    directory, train = run.output_dir, _run_fine_tuning
  else:
    run = run_config(config, variant, workdir, init_checkpoint)
    directory, train = run.model_dir, run_pretraining
  legs = [dataclasses.replace(run, stop_at_step=variant.resume_at), run] \
      if variant.resume_at else [run]
  for leg in legs:
    if variant.workers > 1:
      _run_workers(leg, directory, config.task, variant.workers, timeout, way_out(workdir))
    else:
      with run_directory.way_out(way_out(workdir)):  # align has no --allow_config_change.
        train(leg)
  return read_losses(directory)


def _run_workers(run, directory: str, task: str, num_workers: int, timeout: float,
                 refusal_way_out: Optional[str] = None) -> None:
  files.makedirs(directory)
  spec = os.path.join(directory, SPEC_FILE)
  with files.open_file(spec, "w") as f:
    json.dump({"task": task, "config": json.loads(run.to_json()),
               "way_out": refusal_way_out}, f, indent=1)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  results = workers.launch_workers(alignment.python_command(spec), num_workers, timeout,
                                   cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                   env=env)
  failed = [(i, r) for i, r in enumerate(results) if r.returncode != 0]
  if failed:
    index, result = failed[0]
    raise RuntimeError(f"worker {index} of {directory} exited with {result.returncode}:\n"
                       f"{result.stdout[-3000:]}")


def read_losses(model_dir: str) -> list[float]:
  """The per-step `loss` of a run's metrics.jsonl (logged every step; evaluations aside)."""
  with files.open_file(os.path.join(model_dir, "metrics.jsonl")) as f:
    rows = [row for row in map(json.loads, f) if "split" not in row]
  steps = [r["step"] for r in rows]
  if steps != list(range(1, len(rows) + 1)):
    raise ValueError(f"{model_dir}/metrics.jsonl does not log every step: {steps[:10]}...")
  return [json_values.number(r["loss"]) for r in rows]


def run_alignment(config: AlignmentConfig, workdir: str, plot: bool = True,
                  log: Callable[[str], None] = print) -> dict:
  """Runs every variant, compares each with the reference, writes report.json (+ PNG).

  What every variant's run reads is read and checked first (`check_variants`: the
  pretraining data against the run's shapes, a fine-tuning task's train file), before
  anything is written in `workdir`.

  Returns:
    the report dict (`alignment.report_json`); its "passed" says whether every pair is within
    its tolerance.

  Raises:
    ValueError, FileNotFoundError: `workdir` holds a model (a Hugging Face directory, ...:
      `model_paths.check_not_a_model_directory`); data or settings that do not fit the
      config, named (`check_variants`; `tfbert.pretraining.data_checks.DataFileError` for
      pretraining data).
  """
  # Before any work: a model's directory never gets init/, runs/ and report.json beside it.
  model_paths.check_not_a_model_directory({"workdir": workdir}, "run_alignment")
  distribution.configure_cpu_devices(config.replicas_needed)
  reuses_initial_checkpoint(config, workdir)  # Refused before any work (named).
  model = check_variants(config, workdir)  # Before the initial checkpoint: nothing left behind.
  files.makedirs(workdir)
  init = write_initial_checkpoint(config, workdir, model)
  del model  # The runs build their own.
  curves, final_weights = {}, {}
  for variant in config.variants:
    log(f"variant {variant.name}: {variant}")
    curves[variant.name] = run_variant(config, variant, workdir, init)
    if config.compare_weights:
      final_weights[variant.name] = final_weights_of(config, os.path.join(
          workdir, "runs", variant.name))
  reference = config.variants[0]
  not_compared = _not_compared(config, final_weights)
  pairs = [compare_pair(config, reference, v, curves, final_weights, not_compared)
           for v in config.variants[1:]]
  report = alignment.report_json(config, curves, pairs, not_compared)
  alignment.write_report(os.path.join(workdir, "report.json"), report)
  if plot:
    _plot(report, os.path.join(workdir, "alignment.png"), log)
  log(alignment.format_table(pairs))
  return report


def final_weights_of(config: AlignmentConfig, run_dir: str) -> dict:
  """A variant's final weights by Google name (pretraining: its export; fine-tuning: its
  model.keras)."""
  if config.fine_tuning:
    return google_checkpoint.google_weights(
        convert.read_tfbert_model(os.path.join(run_dir, "model.keras")))
  return google_checkpoint.read_google_checkpoint(
      os.path.join(run_dir, "export", "google", "bert_model.ckpt"))


def _plot(report: dict, path: str, log: Callable[[str], None]) -> None:
  """The report's PNG, when matplotlib (the optional `plots` extra) is installed."""
  try:
    from tfbert.alignment import alignment_plot  # pylint: disable=import-outside-toplevel
  except ImportError as error:
    log(f"no plot ({error}; pip install 'tfbert[plots]' for {path})")
    return
  alignment_plot.plot_curves(report, path)


def _not_compared(config: AlignmentConfig, final_weights: dict) -> list[str]:
  """The final weights the loss does not depend on (`alignment.loss_invariant_weights`)."""
  if not final_weights:
    return []
  return alignment.loss_invariant_weights(config.task, config.bert_config.num_hidden_layers,
                                          next(iter(final_weights.values())))


def compare_pair(config: AlignmentConfig, reference: Variant, variant: Variant, curves: dict,
                 final_weights: dict, not_compared: Sequence[str] = ()) -> PairReport:
  """`variant` against `reference`: their curves, and their final weights but
  `not_compared` (`_not_compared`) when `final_weights` holds them."""
  tolerance = config.tolerance(reference, variant)
  max_abs, max_rel, first = alignment.compare_curves(curves[reference.name],
                                                     curves[variant.name], tolerance)
  weights: tuple[Optional[float], Optional[float], Optional[str]] = (None, None, None)
  if final_weights:
    weights = alignment.compare_weights(final_weights[reference.name],
                                        final_weights[variant.name], not_compared)
  return PairReport(variant.name, reference.name, tolerance, max_abs, max_rel, first, *weights)
