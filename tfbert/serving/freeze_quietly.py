"""Freezing a model for an export without TensorFlow's harmless `table_initializer` warning.

Once a process has created a lookup table eagerly (the in-graph tokenizer's
`tf.lookup.StaticHashTable` of constant keys and values, `tfbert.text.tokenization`), each
`convert_variables_to_constants_v2` (`tfbert.serving.export.FrozenOutputs`, run for every
export with a raw-text signature) logs, through the Python logger "tensorflow":

  Issue encountered when serializing table_initializer.
  Type is unsupported, or the types of the items don't match field type in CollectionDef.
  Note this is a warning and probably safe to ignore.
  'NoneType' object has no attribute 'name'

Why, and why it is safe to drop: an eagerly run table initializer has no graph operation, so
TensorFlow adds `None` to the process's global graph's `table_initializer` collection
(`lookup_ops.KeyValueTensorInitializer.initialize`); every graph traced later copies that
collection. Freezing exports the traced graph as a MetaGraphDef for Grappler, fails to
serialize that `None`, logs the warning and leaves the collection out of that temporary
MetaGraphDef. Nothing reads it there: Grappler optimizes the graph and its signature, and a
SavedModel's tables are constants of its graph, initialized by the SavedModel's own table
initializer functions, never through a collection. The export is the same with or without
the warning.
"""

import contextlib
import logging
from typing import Iterator

# The start of the one message dropped (TensorFlow's meta_graph.add_collection_def).
TABLE_INITIALIZER_WARNING = "Issue encountered when serializing table_initializer"


class _DropTableInitializerWarning(logging.Filter):
  """Drops the records whose message starts with `TABLE_INITIALIZER_WARNING`."""

  def filter(self, record: logging.LogRecord) -> bool:
    try:
      message = record.getMessage()
    except Exception:  # pylint: disable=broad-except  # A malformed record is not ours.
      return True
    return not message.startswith(TABLE_INITIALIZER_WARNING)


@contextlib.contextmanager
def quiet_table_initializer_warning() -> Iterator[None]:
  """Within the block, the logger "tensorflow" drops the `table_initializer` warning only.

  A filter on the logger itself, so the record reaches none of its handlers: neither
  TensorFlow's own ("WARNING:tensorflow:...") nor, by propagation, the root logger's. Every
  other record, of any level, passes. The filter is removed on leaving the block, also on an
  error. See the module docstring for why the dropped warning is harmless.

  Yields:
    None.
  """
  logger = logging.getLogger("tensorflow")
  quiet = _DropTableInitializerWarning()
  logger.addFilter(quiet)
  try:
    yield
  finally:
    logger.removeFilter(quiet)
