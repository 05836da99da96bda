"""Flags of tools/export_onnx.py (--export_dir and --output are required)."""

from absl import flags

from tfbert.serving.export import ID_SIGNATURES, SERVING_SIGNATURE
from tfbert.serving.onnx_export import MIN_OPSET, OPSET
from tfbert_flags import common_flags

EXPORT_DIR = flags.DEFINE_string(
    "export_dir", None, "Required. A tfbert export directory (run_squad / run_classifier / "
    "run_ner --export_dir, or an encoder export); its ids/ SavedModel is converted.")
OUTPUT = flags.DEFINE_string("output", None, "Required. The .onnx file to write (atomically).")
OPSET_FLAG = flags.DEFINE_integer(
    "opset", OPSET, f"ONNX opset of the output, {MIN_OPSET} or later: no earlier one can express "
    "BERT's graph (its strided slices).", lower_bound=MIN_OPSET)
SIGNATURE = flags.DEFINE_enum(
    "signature", SERVING_SIGNATURE, list(ID_SIGNATURES),
    "The id signature to convert, i.e. the ONNX model's inputs: serving_default takes "
    "google-research/bert's int32 input_ids, input_mask, segment_ids; serving_hf Hugging "
    "Face's int64 input_ids, attention_mask, token_type_ids (a Hugging Face tokenizer's "
    "return_tensors='np' output, unchanged); serving_int64 and serving_hf_int32 the other "
    "two combinations.")
CHECK = flags.DEFINE_bool(
    "check", True, "Run the ONNX model once in ONNX Runtime against the SavedModel on random "
    "features and print the largest difference of each output.")

# Key flags: the tool's --help lists them (absl shows only the main module's key flags).
flags.adopt_module_key_flags(common_flags)
