"""Fine-tunes a BERT sentence encoder (in-batch negatives, CoSENT, cosine MSE); evaluates it.

  bash bootstrap.sh python tools/run_embeddings.py --init_hf_dir=minilm --do_train \
      --do_eval --train_file=glue/STS-B/train.tsv --anchor_column=sentence1 \
      --positive_column=sentence2 --score_column=score --loss=cosent \
      --dev_file=glue/STS-B/dev.tsv --output_dir=runs/stsb

See flags/run_embeddings_flags.py for every flag and tfbert/embeddings/embedding_run.py for
the run.
"""


import tfbert_tools  # noqa: F401  (first: a Ctrl-C while TensorFlow imports is one line)

# isort: split

from tfbert.embeddings.embedding_run import EmbeddingRunConfig, run_embeddings
from tfbert.runtime import cli, json_values
from tfbert.tasks import fine_tuning
from tfbert_flags import common_flags
from tfbert_flags import run_embeddings_flags as f


def main(argv):
  del argv
  common_flags.check_data_files(("train_file", "dev_file", "ir_queries_file",  # Before any work.
                                 "ir_corpus_file", "ir_qrels_file"))
  common_flags.check_strategy_flags()
  config = cli.config_from_values(EmbeddingRunConfig, common_flags.values(f),
                                  fine_tuning.FLAG_CONVERTERS,
                                  given_settings=common_flags.given(f))
  result = run_embeddings(config, common_flags.flagfile(f))
  if "eval" in result:
    print(json_values.dumps(result["eval"], sort_keys=True))
  print(cli.format_written(result["written"]), flush=True)


def run():
  """Entry point: `python tools/run_embeddings.py`, or the installed `tfbert-run-embeddings`."""
  common_flags.show_in_help(f)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
