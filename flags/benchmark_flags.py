"""Flags of tools/benchmark.py."""

from absl import flags

BENCHMARK = flags.DEFINE_enum("benchmark", "accumulation", ["accumulation"],
                              "What to measure: accumulation = k micro-steps of b vs one step "
                              "of k*b (examples/s, peak RSS), each in its own process.")
HIDDEN_SIZE = flags.DEFINE_integer("hidden_size", 256, "Model width H.")
NUM_LAYERS = flags.DEFINE_integer("num_layers", 4, "Transformer layers L.")
NUM_HEADS = flags.DEFINE_integer("num_heads", 4, "Attention heads A.")
INTERMEDIATE_SIZE = flags.DEFINE_integer("intermediate_size", 1024, "Feed-forward width I.")
SEQ_LENGTH = flags.DEFINE_integer("seq_length", 128, "Sequence length S.")
MAX_PREDICTIONS = flags.DEFINE_integer("max_predictions", 20, "Masked positions P.")
MICRO_BATCH_SIZE = flags.DEFINE_integer("micro_batch_size", 8, "Sequences per micro-step b.")
ACCUMULATION_STEPS = flags.DEFINE_integer("accumulation_steps", 4, "Micro-steps per step k.")
APPLIED_STEPS = flags.DEFINE_integer("applied_steps", 8, "Measured applied steps.")
WARMUP_STEPS = flags.DEFINE_integer("warmup_steps", 2, "Unmeasured applied steps first.")
DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "mixed_bfloat16"], "Dtype policy.")
