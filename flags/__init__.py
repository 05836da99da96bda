"""absl flag definitions for the tfbert tools, grouped by concern. Only tools import these.

Every tool imports this package before anything imports TensorFlow, so it is where the tools'
default for TensorFlow's C++ log level is set: INFO and WARNING lines off (errors stay), unless
TF_CPP_MIN_LOG_LEVEL is already set.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
