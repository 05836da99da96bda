"""Converts a tfbert export's id signature to ONNX (needs the extra `tfbert[onnx]`).

  bash bootstrap.sh python tools/export_onnx.py --export_dir=runs/mrpc/export \
      --output=runs/mrpc/onnx/model.onnx
"""

import tfbert_tools  # noqa: F401  (first: a Ctrl-C while TensorFlow imports is one line)

# isort: split

import logging

from absl import flags

from tfbert.runtime import cli, json_values, paths
from tfbert.serving import onnx_export
from tfbert_flags import common_flags
from tfbert_flags import export_onnx_flags as f


def main(argv):
  del argv
  # tf2onnx logs its progress at INFO to stdout; the tool prints what it wrote.
  logging.getLogger("tf2onnx").setLevel(logging.WARNING)
  paths.check_apart({"--export_dir": f.EXPORT_DIR.value}, {"--output": f.OUTPUT.value})
  # The output's checks are the library's first step, worded for the flag.
  path = onnx_export.export_onnx(f.EXPORT_DIR.value, f.OUTPUT.value, opset=f.OPSET_FLAG.value,
                                 signature=f.SIGNATURE.value, output_name="--output")
  print(f"wrote {path}")
  if f.CHECK.value:
    print(json_values.dumps({"max_abs_diff": onnx_export.check_against_saved_model(
        f.EXPORT_DIR.value, path, signature=f.SIGNATURE.value)}))


def run():
  """Entry point of `python tools/export_onnx.py` and of `tfbert-export-onnx`."""
  flags.mark_flags_as_required(["export_dir", "output"])
  common_flags.show_in_help(f)
  cli.run_tool(main, common_flags.TRACEBACK)


if __name__ == "__main__":
  run()
