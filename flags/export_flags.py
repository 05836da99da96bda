"""The export flag of every training tool that exports (--export_dir is each tool's own)."""

from absl import flags

from tfbert.serving.serving_dtype import EXPORT_DTYPES

EXPORT_DTYPE = flags.DEFINE_enum(
    "export_dtype", "model", EXPORT_DTYPES,
    "How the export computes: model (the policy it was trained in), float32, bfloat16, or auto "
    "(the faster of the two on this CPU, measured at export). Outputs are float32 either way; "
    "the export's serving.json records the choice and why.")
