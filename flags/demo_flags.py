"""Flags of tools/demo.py."""

from absl import flags

from tfbert_flags import common_flags

SENTENCES = flags.DEFINE_multi_string(
    "sentence", None, "A sentence to embed; repeat the flag for several (default: a built-in set).")
SEQ_LENGTH = flags.DEFINE_integer("seq_length", 64, "Tokens per sentence, [CLS]/[SEP] included.",
                                  lower_bound=3, upper_bound=512)
WORKDIR = flags.DEFINE_string("workdir", "runs/demo",
                              "Where the demo writes its data, run directory and exports.")
PRETRAIN_STEPS = flags.DEFINE_integer("pretrain_steps", 300,
                                      "Applied pretraining steps (0 skips pretraining).",
                                      lower_bound=0)
SQUAD_EPOCHS = flags.DEFINE_float(
    "squad_epochs", 24.0, "Epochs of SQuAD fine-tuning of the pretrained BERT (0 skips it; "
    "needs --pretrain_steps > 0).", lower_bound=0.0)

# Key flags: the tool's --help lists them (absl shows only the main module's key flags).
flags.adopt_module_key_flags(common_flags)
