"""Flags of tools/benchmark.py."""

from absl import flags

from tfbert_flags import common_flags

BENCHMARK = flags.DEFINE_enum(
    "benchmark", "accumulation",
    ["accumulation", "pretraining", "squad", "input_pipeline", "postprocess", "matmul",
     "kernels", "resume", "fine_tuning", "inference", "buckets", "continued_pretraining"],
    "What to measure. accumulation: k micro-steps of b vs one step of k*b (examples/s, peak "
    "RSS). pretraining / squad: tfbert's training step (MLM+NSP / span labeler) against TF "
    "Model Garden's on the same config and batch, alternated --repeats times, each run in its "
    "own process (examples/s, MFU, peak RSS, ratio), then the step's matmul floor: each of "
    "tfbert's GEMMs timed alone, and the ratio ceiling peer step / floor. input_pipeline: "
    "examples/s of the pretraining input pipeline on real records against the training "
    "step of the same config. postprocess: SQuAD feature creation and postprocessing time on "
    "--squad_dev_file. matmul: this machine's measured float32 and bfloat16 matmul peaks. "
    "kernels: tfbert's fused kernels against the unfused ops they replace, alternated "
    "--repeats times in one process (ms per call, speed-up). resume: seconds from a "
    "pretraining rerun's start to its first trained step, resuming near the start and "
    "--resume_far_sequences in, with and without the checkpointed data position. "
    "fine_tuning: SQuAD fine-tuning examples/s through tfbert's training loop against Keras "
    "fit (the path it replaced), alternated --repeats times (the loop/fit ratio). "
    "inference: the exported MiniLM encoder SavedModel (float32 and bfloat16) against ONNX "
    "Runtime on the same weights: sequences/s at --batch_size and --seq_length (default 128), "
    "batch-1 latency, --repeats rounds of fresh processes. buckets: --bucket_task fine-tuned "
    "on MiniLM with batches padded to S, cut to their length bucket, and grouped by length "
    "(examples/s, the ratio to padded, the dev metric), --repeats alternating rounds of the "
    "tool in fresh processes. continued_pretraining: the shipped MiniLM continued by masked-LM "
    "training on CPython's pydoc topics (raw text, every 10th topic held out) for "
    "--continued_steps steps of --batch_size blocks of --seq_length (default 128): held-out "
    "loss and perplexity before and after, time, sequences/s.")

# Model and input shape; unset means the benchmark's default config (tools.benchmarks.benchmark.
# DEFAULT_CASES): pretraining, input_pipeline and accumulation L4/H256/A4/I1024, S128,
# P20; squad and postprocess MiniLM-L6-H384's shape, S384. Vocabulary 30522 for all.
VOCAB_SIZE = flags.DEFINE_integer("vocab_size", None, "Vocabulary size V (default 30522).",
                                  lower_bound=1)
HIDDEN_SIZE = flags.DEFINE_integer("hidden_size", None,
                                   "Model width H (default 256; squad: 384).", lower_bound=1)
NUM_LAYERS = flags.DEFINE_integer("num_layers", None,
                                  "Transformer layers L (default 4; squad: 6).", lower_bound=1)
NUM_HEADS = flags.DEFINE_integer("num_heads", None,
                                 "Attention heads A (default 4; squad: 12).", lower_bound=1)
INTERMEDIATE_SIZE = flags.DEFINE_integer("intermediate_size", None,
                                         "Feed-forward width I (default 1024; squad: 1536).",
                                         lower_bound=1)
SEQ_LENGTH = flags.DEFINE_integer(
    "seq_length", None, "Sequence length S (default 128; squad and postprocess: 384).",
    lower_bound=1)
MAX_PREDICTIONS = flags.DEFINE_integer(
    "max_predictions", None, "Masked positions P per sequence (default 20; pretraining).",
    lower_bound=1)
# The shape flags by the `tfbert_tools.benchmarks.benchmark.ModelShape` field each sets (unset: the
# benchmark's default).
FLAGS_BY_FIELD = {"vocab_size": VOCAB_SIZE, "hidden_size": HIDDEN_SIZE, "num_layers": NUM_LAYERS,
                  "num_heads": NUM_HEADS, "intermediate_size": INTERMEDIATE_SIZE,
                  "seq_length": SEQ_LENGTH, "max_predictions": MAX_PREDICTIONS}

# Training-step benchmarks (pretraining, squad, input_pipeline).
BATCH_SIZE = flags.DEFINE_integer("batch_size", 32, "Examples per training step B (also the "
                                  "input pipeline's batch).", lower_bound=1)
DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "mixed_bfloat16"],
                          "Dtype policy. MFU is taken against the measured matmul peak of "
                          "float32, or of bfloat16 for mixed_bfloat16. buckets: the tool "
                          "runs' --dtype.")
JIT_COMPILE = flags.DEFINE_boolean("jit_compile", False,
                                   "Compile the training step with XLA (tfbert and peer).")
REPEATS = flags.DEFINE_integer(
    "repeats", 2, "pretraining / squad: alternations tfbert, peer (2: tfbert, peer, tfbert, "
    "peer); the ratio is reported per pair and as their median. accumulation: alternations "
    "big batch, accumulated, likewise. postprocess: runs of the postprocessing, median "
    "reported. kernels: alternations reference, kernel; median ms per call reported.",
    lower_bound=1)
INTERLEAVE = flags.DEFINE_boolean(
    "interleave", False, "pretraining / squad: build tfbert's step and the peer's in one "
    "process and time them window by window, the order swapped every round (--windows "
    "rounds; --repeats unused), instead of alternating processes. accumulation: likewise "
    "the big batch and the accumulated run, --applied_steps per window. The ratio is "
    "reported per round and as their median; peak RSS is the process's, both models "
    "together.")
WINDOWS = flags.DEFINE_integer("windows", 5, "Timed windows per run; examples/s is their median.",
                               lower_bound=1)
STEPS_PER_WINDOW = flags.DEFINE_integer("steps_per_window", 2, "Training steps per window.",
                                        lower_bound=1)
WARMUP_STEPS = flags.DEFINE_integer(
    "warmup_steps", 2, "Unmeasured steps first (accumulation: applied steps), at least 1: the "
    "first one traces and compiles.", lower_bound=1)

# accumulation.
MICRO_BATCH_SIZE = flags.DEFINE_integer("micro_batch_size", 8,
                                        "accumulation: sequences per micro-step b.", lower_bound=1)
GRADIENT_ACCUMULATION_STEPS = flags.DEFINE_integer("gradient_accumulation_steps", 4,
                                          "accumulation: micro-steps per applied step k.",
                                          lower_bound=1)
APPLIED_STEPS = flags.DEFINE_integer(
    "applied_steps", 8, "accumulation: measured applied steps (--interleave: per window, "
    ">= 2; a window's examples/s spans its applied steps after the first).", lower_bound=1)
ACCUMULATION_LOOP = flags.DEFINE_enum(
    "accumulation_loop", "fit", ["fit", "pretraining_run"],
    "accumulation: the training loop. fit: Keras' model.fit, one call per micro-step (the "
    "fine-tuning tools' loop); pretraining_run: one tf.function per applied step running its "
    "micro-steps in a tf.range loop (tools/run_pretraining.py's loop).")

# matmul peak (also measured by pretraining and squad for MFU).
MATMUL_SIZE = flags.DEFINE_integer("matmul_size", 2048,
                                   "Side of the square matrices of the matmul peak.", lower_bound=1)

# input_pipeline.
PIPELINE_SECONDS = flags.DEFINE_float(
    "pipeline_seconds", 10.0, "input_pipeline: seconds of timed batches (> 0).",
    lower_bound=0.0)
# absl's lower_bound is inclusive: a float that must be positive says so in a validator.
flags.register_validator(PIPELINE_SECONDS.name, lambda value: value is None or value > 0,
                         message="--pipeline_seconds must be > 0 (seconds of timed batches)")
PRETRAINING_DATA_DIR = flags.DEFINE_string(
    "pretraining_data_dir", "", "input_pipeline: where the pydoc-corpus records are made "
    "once and reused (same S and P); default: a temporary directory, removed afterwards.")

# postprocess.
SQUAD_DEV_FILE = flags.DEFINE_string(
    "squad_dev_file", "", "postprocess: the SQuAD v1.1 dev file (JSON, gzip or not); "
    "unset skips the benchmark. BENCHMARKS.md names the file it used.")

# resume.
RESUME_NEAR_SEQUENCES = flags.DEFINE_integer(
    "resume_near_sequences", 10, "resume: consumed sequences at the near checkpoint.",
    lower_bound=1)
RESUME_FAR_SEQUENCES = flags.DEFINE_integer(
    "resume_far_sequences", 10_000_000, "resume: consumed sequences at the far checkpoint "
    "(reached by reading, not training: pretraining_run.fast_forward).", lower_bound=2)

# fine_tuning.


class IntegerListParser(flags.ListParser):
  """A comma-separated list of whole numbers (of `count` items, when given), each item that
  is not one named: absl's `DEFINE_list` gives strings, and `int()` of one would fail
  later without naming the flag. absl prefixes the message with `flag --name=value:`."""

  def __init__(self, count: int = None, example: str = "", lower_bound: int = None):
    super().__init__()
    self.count, self.example, self.lower_bound = count, example, lower_bound

  def parse(self, argument):
    items = super().parse(argument)
    shown = f" (e.g. {self.example})" if self.example else ""
    for item in items:
      if not str(item).strip().lstrip("+-").isdigit():
        raise ValueError(f"item {item!r} is not a whole number: give comma-separated whole "
                         f"numbers{shown}")
    if self.count is not None and len(items) != self.count:
      raise ValueError(f"takes {self.count} comma-separated whole numbers{shown}, got "
                       f"{len(items)}")
    numbers = [int(item) for item in items]
    if self.lower_bound is not None and any(n < self.lower_bound for n in numbers):
      raise ValueError(f"each number must be >= {self.lower_bound}, got {numbers}{shown}")
    return numbers

  def flag_type(self):
    return "comma separated list of whole numbers"


def define_integer_list(name: str, default: str, help_text: str, count: int = None,
                        example: str = "", lower_bound: int = None) -> flags.FlagHolder:
  """A list flag of whole numbers (`IntegerListParser`, each >= `lower_bound` when given),
  its value a list of int."""
  return flags.DEFINE(IntegerListParser(count, example, lower_bound), name, default, help_text,
                      serializer=flags.CsvListSerializer(","))


FINE_TUNING_STEPS = define_integer_list(
    "fine_tuning_steps", "5,65", "fine_tuning: the short and long run lengths (applied "
    "steps) whose time difference is the step time.", count=2, example="5,65", lower_bound=1)

# buckets.
BUCKET_TASK = flags.DEFINE_enum("bucket_task", "stsb", ["stsb", "mrpc", "wnut"],
                                "buckets: STS-B CoSENT embeddings, MRPC classification or "
                                "WNUT 2017 tagging.")
BUCKET_EPOCHS = flags.DEFINE_integer("bucket_epochs", 1, "buckets: passes over the train "
                                     "subset.", lower_bound=1)
WNUT_DIR = flags.DEFINE_string("wnut_dir", "", "buckets: the folder of WNUT 2017's "
                               "wnut17train.conll and emerging.dev.conll.")
GLUE_DIR = flags.DEFINE_string("glue_dir", "", "buckets: the folder of GLUE's STS-B/ and MRPC/.")
BUCKET_MULTIPLE = flags.DEFINE_integer(
    "bucket_multiple", 8, "buckets: the --length_bucket of the cut and grouped settings (1: "
    "each batch cut to its longest example exactly). --dtype sets the runs' dtype.",
    lower_bound=1)
TRAIN_EXAMPLES = flags.DEFINE_integer("train_examples", 1600,
                                      "buckets: the first train pairs trained on (one epoch).",
                                      lower_bound=1)

# Key flags: the tool's --help lists them (absl shows only the main module's key flags).
flags.adopt_module_key_flags(common_flags)

CONTINUED_STEPS = flags.DEFINE_integer(
    "continued_steps", 200, "continued_pretraining: applied steps of the run (>= 2: the "
    "first traces and is left out of sequences/s).", lower_bound=2)

# The flags each benchmark reads (tools/benchmark.py); one set on the command line for a
# benchmark that does not read it is refused (`tfbert.runtime.cli.check_flags_read`), not
# ignored.
_SHAPE = ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
          "seq_length")  # And max_predictions, read by the pretraining ones only.
_STEP_CASE = (*_SHAPE, "batch_size", "dtype", "jit_compile", "warmup_steps", "windows",
              "steps_per_window")
READS = {
    "accumulation": (*_SHAPE, "max_predictions", "micro_batch_size",
                     "gradient_accumulation_steps", "applied_steps", "warmup_steps", "dtype",
                     "accumulation_loop", "interleave", "windows", "repeats"),
    "pretraining": (*_STEP_CASE, "max_predictions", "matmul_size", "interleave", "repeats"),
    "squad": (*_STEP_CASE, "matmul_size", "interleave", "repeats"),
    "input_pipeline": (*_STEP_CASE, "max_predictions", "pipeline_seconds",
                       "pretraining_data_dir"),
    "postprocess": ("squad_dev_file", "seq_length", "repeats"),
    "matmul": ("matmul_size",),
    "kernels": ("repeats",),
    "resume": ("resume_near_sequences", "resume_far_sequences", "batch_size", "repeats"),
    "fine_tuning": (*_SHAPE, "batch_size", "fine_tuning_steps", "repeats", "dtype"),
    "inference": ("batch_size", "seq_length", "repeats"),
    "buckets": ("bucket_task", "glue_dir", "wnut_dir", "bucket_epochs", "train_examples",
                "repeats", "batch_size", "seq_length", "dtype", "bucket_multiple"),
    "continued_pretraining": ("continued_steps", "batch_size", "seq_length"),
}
