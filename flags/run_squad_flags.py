"""Flags of tools/run_squad.py (google-research/bert `run_squad.py`'s names where it has them).

All flags are optional; `--flagfile=FILE` reads flags from a file. The tool checks that
they fit together (e.g. `--do_train` needs `--train_file`) and says which do not.
"""

from absl import flags

from tfbert_flags import common_flags, export_flags, fine_tuning_flags, run_directory_flags

# What to do, on which data.
DO_TRAIN = flags.DEFINE_bool("do_train", False, "Fine-tune on --train_file.")
DO_PREDICT = flags.DEFINE_bool("do_predict", False,
                               "Answer --predict_file; write predictions.json, "
                               "nbest_predictions.json (v2.0: null_odds.json) and print EM/F1.")
TRAIN_FILE = flags.DEFINE_string("train_file", None,
                                 "SQuAD v1.1/v2.0 JSON (optionally .gz) to train on; read and "
                                 "checked before the model is built.")
PREDICT_FILE = flags.DEFINE_string("predict_file", None,
                                   "SQuAD v1.1/v2.0 JSON (optionally .gz) to predict, and score "
                                   "when its questions have answers (a file of questions "
                                   "without any is predicted only); read and checked before "
                                   "the model is built. Read only with --do_predict (refused "
                                   "without it).")
TRAIN_ARTICLES = flags.DEFINE_string(
    "train_articles", None, "START:END: train on these articles of --train_file only, in "
    "file order with Python slice semantics (e.g. 0:38; -10: is the last 10). Default: all.")
PREDICT_ARTICLES = flags.DEFINE_string(
    "predict_articles", None, "START:END: predict and score these articles of "
    "--predict_file only (e.g. 38:48); with --do_predict only (refused without it). Default: "
    "all.")
OUTPUT_DIR = flags.DEFINE_string("output_dir", "squad_output",
                                 "Run directory: configs, feature caches, TensorBoard events "
                                 "(train/), model.keras, predictions, eval_results.json.")
EXPORT_DIR = flags.DEFINE_string("export_dir", None,
                                 "If set, also export a SavedModel here (feature and raw-text "
                                 "question/context signatures). With "
                                 "--version_2_with_negative its answer_question may answer "
                                 "\"\" and applies --null_score_diff_threshold, recorded in "
                                 "its answer_question.json.")

# Windowing (tfbert.squad.squad_features) and postprocessing (tfbert.squad.squad_postprocess).
MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 384, "Wordpieces per window.")
DOC_STRIDE = flags.DEFINE_integer("doc_stride", 128,
                                  "Wordpieces between window starts; at most "
                                  "max_seq_length - max_query_length - 3, so windows overlap.")
MAX_QUERY_LENGTH = flags.DEFINE_integer("max_query_length", 64,
                                        "Question wordpieces kept (the rest is cut); "
                                        "max_seq_length must exceed it by more than 3.")
N_BEST_SIZE = flags.DEFINE_integer("n_best_size", 20,
                                   "Start and end candidates per window, and n-best answers "
                                   "(>= 1).")
MAX_ANSWER_LENGTH = flags.DEFINE_integer("max_answer_length", 30,
                                         "Longest answer in wordpieces (>= 1).")
VERSION_2_WITH_NEGATIVE = flags.DEFINE_bool("version_2_with_negative", False,
                              "SQuAD 2.0 postprocessing: may answer \"\" (no answer). Needed "
                              "for SQuAD 2.0 files (\"version\": \"v2.0\" or any "
                              "is_impossible question); with a 1.1 file it is allowed (a note "
                              "says so).")
NULL_SCORE_DIFF_THRESHOLD = flags.DEFINE_float(
    "null_score_diff_threshold", 0.0, "v2.0: answer \"\" when null score - best span score "
    "exceeds this, in the predictions and in the --export_dir SavedModel (this value in both, "
    "also when the same run evaluates). A v2.0 prediction writes "
    "null_score_diff_threshold.json to --output_dir with the threshold of the best F1 on "
    "--predict_file and the flag to pass (how_to_apply); rerun the same command with it (a "
    "finished run trains no more, predicts and exports again) to apply it.")

# Optimization.
PREDICT_BATCH_SIZE = flags.DEFINE_integer("predict_batch_size", 64, "Windows per predict batch.")

# Key flags: the tool's --help lists them (absl shows only the main module's key flags).
flags.adopt_module_key_flags(common_flags)
flags.adopt_module_key_flags(export_flags)
flags.adopt_module_key_flags(fine_tuning_flags)
flags.adopt_module_key_flags(run_directory_flags)

# Batches padded to max_seq_length unless asked: the span softmax runs over every position,
# padding included (google-research/bert), so a batch cut to its length bucket would change
# the loss (tfbert.tasks.length_buckets).
flags.FLAGS.set_default("length_bucket", 0)
