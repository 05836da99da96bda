"""Fine-tunes BERT on a GLUE-format task; evaluates and predicts (run_classifier.py).

  bash bootstrap.sh python tools/run_classifier.py --task_name=mrpc --do_train --do_eval \
      --data_dir=glue/MRPC --init_hf_dir=minilm --output_dir=runs/mrpc

See flags/run_classifier_flags.py for every flag and tfbert/classifier/classifier_run.py for the run
directory.
"""


import tfbert_tools  # noqa: F401  (first: a Ctrl-C while TensorFlow imports is one line)

# isort: split

from tfbert.classifier import glue_data
from tfbert.classifier.classifier_run import ClassifierRunConfig, run_classifier
from tfbert.runtime import cli, files, json_values
from tfbert.tasks import fine_tuning
from tfbert_flags import common_flags
from tfbert_flags import run_classifier_flags as f


def main(argv):
  del argv
  common_flags.check_data_files(("train_file", "eval_file", "predict_file"),  # Before any work.
                                {"data_dir": "*.[tc]sv"})
  common_flags.check_strategy_flags()
  values = common_flags.values(f)
  given = common_flags.given(f)
  custom = None
  custom_flags = sorted(name for name in values if name.startswith("custom_"))
  # A run evaluated without training takes its task from run_config.json when
  # --task_name is left out: a custom run's --custom_* flags then describe the files read.
  run_task = _run_task(values)
  task = values["task_name"] or run_task.get("task_name")
  # Given otherwise than their defaults: a replayed flags.txt of an older run records them.
  stray = [f"--{name}" for name in custom_flags if common_flags.given_otherwise(name)]
  if stray and task != glue_data.CUSTOM_TASK:
    raise ValueError(f"{', '.join(stray)}: read only with --task_name=custom, and "
                     f"--task_name={task} has its own layout and labels: "
                     "leave them out, or describe your files with --task_name=custom")
  # Without training and without one --custom_ flag, a custom task's columns and labels are
  # the run's own (run_config.json records them, `fine_tuning.run_settings` takes them).
  recorded = not values["do_train"] and not given & set(custom_flags)
  if task == glue_data.CUSTOM_TASK and not recorded:
    # The labels a run was trained with are its own unless given again.
    kept = run_task.get("custom") or {}
    labels = (values["custom_labels"] if "custom_labels" in given or "labels" not in kept
              else kept["labels"])
    regression = (values["custom_regression"] if "custom_regression" in given
                  or "regression" not in kept else kept["regression"])
    custom = glue_data.CustomFormat(
        text_a_column=values["custom_text_a_column"],
        text_b_column=values["custom_text_b_column"],
        label_column=values["custom_label_column"], has_header=values["custom_header"],
        delimiter={"tab": "\t", "comma": ","}[values["custom_delimiter"]],
        labels=tuple(labels or ()), regression=regression)
  given |= {"custom"} if custom is not None else set()
  config = cli.config_from_values(ClassifierRunConfig, values, fine_tuning.FLAG_CONVERTERS,
                                  custom=custom, given_settings=given)
  # flags.txt without the flags this task does not read: its replay is this run.
  result = run_classifier(config, common_flags.flagfile(
      f, leave_out=() if task == glue_data.CUSTOM_TASK else custom_flags))
  if "eval" in result:
    print(json_values.dumps(result["eval"], sort_keys=True))
  print(cli.format_written(result["written"]), flush=True)


def _run_task(values) -> dict:
  """{"task_name", "custom"} as the run in --output_dir recorded them, for a run that
  evaluates or predicts without training; {} otherwise (`fine_tuning.recorded_settings`)."""
  output_dir = values["output_dir"]
  if values["do_train"] or not output_dir or not files.isdir(output_dir):
    return {}
  recorded = fine_tuning.recorded_settings(output_dir) or {}
  return {name: recorded[name] for name in ("task_name", "custom") if name in recorded}


def run():
  """Entry point: `python tools/run_classifier.py`, or the installed `tfbert-run-classifier`."""
  common_flags.show_in_help(f)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
