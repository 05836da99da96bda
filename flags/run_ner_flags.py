"""Flags of tools/run_ner.py (named-entity recognition; the other fine-tuning tools' names).

All flags are optional; `--flagfile=FILE` reads flags from a file. The tool checks that
they fit together (e.g. `--do_train` needs `--train_file`) and says which do not.
"""

from absl import flags

from tfbert_flags import (
                                 common_flags,
                                 conll_flags,
                                 export_flags,
                                 fine_tuning_flags,
                                 run_directory_flags,
)
from tfbert_flags.conll_flags import TAG_COLUMN, TAG_SCHEME, TOKEN_COLUMN  # noqa: F401  (for the tool)

# What to do, on which data.
TRAIN_FILE = flags.DEFINE_string("train_file", None, "CoNLL file to fine-tune on (word and "
                                 "tag columns: --token_column, --tag_column).")
EVAL_FILE = flags.DEFINE_string("eval_file", None, "CoNLL dev file, read only with --do_eval "
                                "(refused without it): scored after training and by "
                                "--eval_every_steps.")
PREDICT_FILE = flags.DEFINE_string("predict_file", None, "CoNLL file whose words --do_predict "
                                   "tags (a tag column, if any, is not read); read only with "
                                   "--do_predict (refused without it).")
DO_TRAIN = flags.DEFINE_bool("do_train", False, "Fine-tune on --train_file.")
DO_EVAL = flags.DEFINE_bool("do_eval", False, "Tag and score --eval_file: eval_results.json "
                            "(entity precision/recall/F1 in percent, per type, token "
                            "accuracy) and dev_predictions.conll.")
DO_PREDICT = flags.DEFINE_bool("do_predict", False, "Tag --predict_file into "
                               "test_predictions.conll (word<TAB>tag lines; "
                               "tools/evaluate_ner.py scores it against a gold file).")
OUTPUT_DIR = flags.DEFINE_string("output_dir", "ner_output",
                                 "Run directory: configs, checkpoints, TensorBoard events, "
                                 "model.keras, results, predictions.")
EXPORT_DIR = flags.DEFINE_string("export_dir", None,
                                 "If set, also export a SavedModel here (feature and raw-text "
                                 "tag_text signatures).")

# The model.
MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 128,
                                      "Wordpieces per window, [CLS] and [SEP] included.")
DOC_STRIDE = flags.DEFINE_integer("doc_stride", None,
                                  "A sentence longer than a window is read in windows starting "
                                  "this many pieces apart (each word predicted where it has "
                                  "most context). Default: half of max_seq_length, so windows "
                                  "overlap by about half whatever their length.")
CLASSIFIER_DROPOUT = flags.DEFINE_float("classifier_dropout", 0.1,
                                        "Dropout on the sequence output in training.")
EVAL_BATCH_SIZE = flags.DEFINE_integer("eval_batch_size", 64, "Windows per eval/predict batch.")

# Key flags: the tool's --help lists them (absl shows only the main module's key flags).
flags.adopt_module_key_flags(common_flags)
flags.adopt_module_key_flags(export_flags)
flags.adopt_module_key_flags(conll_flags)
flags.adopt_module_key_flags(fine_tuning_flags)
flags.adopt_module_key_flags(run_directory_flags)
