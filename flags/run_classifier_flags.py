"""Flags of tools/run_classifier.py (google-research/bert `run_classifier.py`'s names).

All flags are optional; `--flagfile=FILE` reads flags from a file. The tool checks that
they fit together (e.g. `--do_train` needs `--data_dir` or `--train_file`) and says which
do not.
"""

from absl import flags

from tfbert.classifier.glue_data import CUSTOM_TASK, TASKS
from tfbert_flags import common_flags, export_flags, fine_tuning_flags, run_directory_flags

# What to do, on which data.
TASK_NAME = flags.DEFINE_enum(
    "task_name", None, sorted(TASKS) + [CUSTOM_TASK],
    "GLUE task (its standard file layout, labels and metrics), or 'custom' for a user "
    "TSV/CSV described by the --custom_* flags. Case-insensitive.", case_sensitive=False)
DATA_DIR = flags.DEFINE_string(
    "data_dir", None, "Task directory in GLUE's layout: train.tsv, dev.tsv, test.tsv (MNLI: "
    "dev_matched/dev_mismatched, test_matched/test_mismatched; custom CSV: *.csv).")
TRAIN_FILE = flags.DEFINE_string("train_file", None, "Train file instead of the one in "
                                 "--data_dir.")
EVAL_FILE = flags.DEFINE_string("eval_file", None, "Dev file instead of those in --data_dir; "
                                "read only with --do_eval (refused without it).")
PREDICT_FILE = flags.DEFINE_string("predict_file", None, "Test file instead of those in "
                                   "--data_dir; read only with --do_predict (refused without "
                                   "it).")
DO_TRAIN = flags.DEFINE_bool("do_train", False, "Fine-tune on the train file.")
DO_EVAL = flags.DEFINE_bool("do_eval", False, "Score the dev file(s); write eval_results.json "
                            "and <split>_predictions.tsv.")
DO_PREDICT = flags.DEFINE_bool("do_predict", False, "Predict the test file(s) into "
                               "<split>_predictions.tsv (GLUE's submission format).")
MAX_TRAIN_EXAMPLES = flags.DEFINE_integer("max_train_examples", None,
                                          "Train on this prefix of the train file only.")
SKIP_MALFORMED_ROWS = flags.DEFINE_bool(
    "skip_malformed_rows", False, "Report malformed rows (file:line: reason) and go on, "
    "instead of stopping at the first one.")
OUTPUT_DIR = flags.DEFINE_string("output_dir", "classifier_output",
                                 "Run directory: configs, TensorBoard events (train/), "
                                 "model.keras, train/eval results, predictions.")
EXPORT_DIR = flags.DEFINE_string("export_dir", None,
                                 "If set, also export a SavedModel here (feature and raw-text "
                                 "classify_text signatures).")

# A user task (--task_name=custom).
CUSTOM_TEXT_A_COLUMN = flags.DEFINE_integer("custom_text_a_column", 0,
                                            "0-based column of the (first) text; < 0 counts "
                                            "from the end.")
CUSTOM_TEXT_B_COLUMN = flags.DEFINE_integer("custom_text_b_column", None,
                                            "Column of the second text of a pair task.")
CUSTOM_LABEL_COLUMN = flags.DEFINE_integer("custom_label_column", 1, "Column of the label.")
CUSTOM_HEADER = flags.DEFINE_bool("custom_header", False, "Line 1 is a header (skipped).")
CUSTOM_DELIMITER = flags.DEFINE_enum("custom_delimiter", "tab", ["tab", "comma"],
                                     "tab: TSV without quoting (as GLUE); comma: CSV with "
                                     "\"...\" quoting.")
CUSTOM_LABELS = flags.DEFINE_list("custom_labels", None,
                                  "Label names in class-id order (F1 counts the second as "
                                  "positive).")
CUSTOM_REGRESSION = flags.DEFINE_bool("custom_regression", False,
                                      "A float target: one output, MSE, Pearson/Spearman.")

# The model and where its weights come from (at most one init_* flag).
MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 128,
                                      "Wordpieces per example, [CLS] and [SEP]s included.")
CLASSIFIER_DROPOUT = flags.DEFINE_float("classifier_dropout", 0.1,
                                        "Dropout on the pooled output in training.")

# Optimization.
EVAL_BATCH_SIZE = flags.DEFINE_integer("eval_batch_size", 64,
                                       "Examples per eval/predict batch.")

# Key flags: the tool's --help lists them (absl shows only the main module's key flags).
flags.adopt_module_key_flags(common_flags)
flags.adopt_module_key_flags(export_flags)
flags.adopt_module_key_flags(fine_tuning_flags)
flags.adopt_module_key_flags(run_directory_flags)
