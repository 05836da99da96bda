"""Flags every tool has; each tool's flags module adopts them as key flags (shown by --help)."""

from absl import flags

TRACEBACK = flags.DEFINE_bool(
    "traceback", False, "On an error, show Python's whole traceback instead of the one-line "
    "message (tool: error: ...).")
