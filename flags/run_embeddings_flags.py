"""Flags of tools/run_embeddings.py (sentence embeddings; the other fine-tuning tools' names).

All flags are optional; `--flagfile=FILE` reads flags from a file. The tool checks that
they fit together (e.g. `--loss=cosent` needs `--score_column`) and says which do not.
"""

from absl import flags

from tfbert.embeddings.sentence_encoder import LOSSES
from tfbert.layers.pooling import MODES
from tfbert_flags import common_flags, export_flags, fine_tuning_flags, run_directory_flags

# What to do, on which data.
TRAIN_FILE = flags.DEFINE_string(
    "train_file", None, "Pairs, triplets or scored pairs to train on: TSV with a header "
    "(columns by name), TSV without one (every column flag a 0-based index: "
    "--anchor_column=0) or JSONL (by key); see --anchor_column and the next flags.")
DEV_FILE = flags.DEFINE_string(
    "dev_file", None, "Scored pairs to evaluate on (Spearman and Pearson of the cosine "
    "similarity against the score), e.g. GLUE's STS-B dev.tsv; read only with --do_eval "
    "(refused without it).")
DO_TRAIN = flags.DEFINE_bool("do_train", False, "Fine-tune on --train_file.")
DO_EVAL = flags.DEFINE_bool("do_eval", False, "Score --dev_file and/or the retrieval set "
                            "(--ir_*_file): eval_results.json.")
ANCHOR_COLUMN = flags.DEFINE_string("anchor_column", "anchor",
                                    "Train file: the first text (a query, a sentence).")
POSITIVE_COLUMN = flags.DEFINE_string("positive_column", "positive",
                                      "Train file: the second text (the anchor's positive).")
NEGATIVE_COLUMN = flags.DEFINE_string("negative_column", None,
                                      "Train file: a hard negative (triplets), if any.")
SCORE_COLUMN = flags.DEFINE_string("score_column", None,
                                   "Train file: the pair's gold score (for --loss=cosent or "
                                   "cosine_mse).")
DEV_ANCHOR_COLUMN = flags.DEFINE_string("dev_anchor_column", "sentence1",
                                        "Dev file: the first sentence (STS-B's name).")
DEV_POSITIVE_COLUMN = flags.DEFINE_string("dev_positive_column", "sentence2",
                                          "Dev file: the second sentence.")
DEV_SCORE_COLUMN = flags.DEFINE_string("dev_score_column", "score", "Dev file: the score.")
IR_QUERIES_FILE = flags.DEFINE_string(
    "ir_queries_file", None, "Retrieval evaluation: queries, one id<TAB>text per line (with "
    "--ir_corpus_file and --ir_qrels_file: MRR@10, nDCG@10, recall@k); the three are read "
    "only with --do_eval (refused without it).")
IR_CORPUS_FILE = flags.DEFINE_string("ir_corpus_file", None,
                                     "Retrieval evaluation: the corpus, id<TAB>text lines "
                                     "(with --do_eval).")
IR_QRELS_FILE = flags.DEFINE_string("ir_qrels_file", None,
                                    "Retrieval evaluation: query_id<TAB>doc_id lines, the "
                                    "relevant documents of each query (with --do_eval); "
                                    "BEIR's query-id<TAB>corpus-id<TAB>score lines too "
                                    "(score 0: not relevant).")
SCORE_SCALE = flags.DEFINE_float("score_scale", 1.0,
                                 "Scores are divided by this (5 for STS-B's 0-5 with "
                                 "cosine_mse, whose targets are cosines).")
MAX_TRAIN_EXAMPLES = flags.DEFINE_integer("max_train_examples", None,
                                          "Train on this prefix of the train file only.")
OUTPUT_DIR = flags.DEFINE_string("output_dir", "embeddings_output",
                                 "Run directory: configs, checkpoints, TensorBoard events, "
                                 "model.keras, results.")
SENTENCE_TRANSFORMERS_DIR = flags.DEFINE_string(
    "sentence_transformers_dir", None, "If set, also write the model here as a "
    "sentence-transformers directory (modules.json, 1_Pooling/, the transformer's "
    "config.json + model.safetensors + tokenizer files), which SentenceTransformer(dir) loads.")
EXPORT_DIR = flags.DEFINE_string("export_dir", None,
                                 "If set, also export a SavedModel here (raw-text embed_text "
                                 "and the id signatures).")

# The model and its loss.
LOSS = flags.DEFINE_enum("loss", "in_batch_negatives", list(LOSSES),
                         "in_batch_negatives: each anchor ranks its positive among every "
                         "positive and hard negative of the global batch (pairs, triplets); "
                         "cosent / cosine_mse: scored pairs.")
SCALE = flags.DEFINE_float("scale", 20.0, "Scale of the cosine similarities (ranking, CoSENT).")
SYMMETRIC = flags.DEFINE_bool("symmetric", False,
                              "in_batch_negatives: also rank each anchor for its positive.")
POOLING_MODE = flags.DEFINE_enum("pooling_mode", "mean", list(MODES),
                                 "Pooling of the token vectors (a sentence-transformers "
                                 "--init_hf_dir's own wins).")
NORMALIZE = flags.DEFINE_bool("normalize", True, "L2-normalize the sentence vectors (a "
                              "sentence-transformers --init_hf_dir's own wins).")
MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 128,
                                      "Wordpieces per text, [CLS] and [SEP] included.")
EVAL_BATCH_SIZE = flags.DEFINE_integer("eval_batch_size", 64, "Texts per embedding batch.")

# Key flags: the tool's --help lists them (absl shows only the main module's key flags).
flags.adopt_module_key_flags(common_flags)
flags.adopt_module_key_flags(export_flags)
flags.adopt_module_key_flags(fine_tuning_flags)
flags.adopt_module_key_flags(run_directory_flags)
