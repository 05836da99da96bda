"""Tests for tfbert.serving.freeze_quietly: TensorFlow's `table_initializer` warning, and only
it, is dropped while freezing."""

import contextlib
import logging

import pytest
import tensorflow as tf
from tensorflow.python.framework import convert_to_constants

from tfbert.serving import freeze_quietly

WARNING = freeze_quietly.TABLE_INITIALIZER_WARNING


class _Records(logging.Handler):
  def __init__(self):
    super().__init__(logging.DEBUG)
    self.records = []

  def emit(self, record):
    self.records.append(record)

  def messages(self):
    return [record.getMessage() for record in self.records]


@contextlib.contextmanager
def tensorflow_records():
  """The records the logger "tensorflow" hands to its handlers (INFO and above) in the
  block; its level and handlers are restored after."""
  logger = logging.getLogger("tensorflow")
  records, level = _Records(), logger.level
  logger.addHandler(records)
  logger.setLevel(logging.INFO)
  try:
    yield records
  finally:
    logger.removeHandler(records)
    logger.setLevel(level)


def test_drops_the_table_initializer_warning_and_nothing_else():
  logger = logging.getLogger("tensorflow")
  others = [("Issue encountered when serializing %s.\nType is unsupported.\n%s",
             ("trainable_variables", "boom")),
            ("a real warning about table_initializer", ()),
            ("  " + WARNING, ())]  # Only a message that starts with it.
  with tensorflow_records() as seen:
    with freeze_quietly.quiet_table_initializer_warning():
      logger.warning("Issue encountered when serializing %s.\nType is unsupported, or the "
                     "types of the items don't match field type in CollectionDef. Note this is "
                     "a warning and probably safe to ignore.\n%s", "table_initializer",
                     "'NoneType' object has no attribute 'name'")
      for message, args in others:
        logger.warning(message, *args)
      logger.error(WARNING + " at ERROR level is dropped too")
      logger.info("Assets written to: /tmp/x/assets")
  assert seen.messages() == [message % args if args else message for message, args in others] + [
      "Assets written to: /tmp/x/assets"]
  assert not any(isinstance(f, freeze_quietly._DropTableInitializerWarning)
                 for f in logger.filters)


def test_the_filter_is_removed_after_an_error():
  logger = logging.getLogger("tensorflow")
  with tensorflow_records() as seen:
    with pytest.raises(RuntimeError, match="inside"):
      with freeze_quietly.quiet_table_initializer_warning():
        raise RuntimeError("inside")
    logger.warning(WARNING + ".")
  assert seen.messages() == [WARNING + "."]


def test_freezing_after_an_eager_table_is_quiet_inside_and_warns_outside():
  """The real cause: an eagerly built table puts `None` into the global graph's
  `table_initializer` collection, which a later trace copies, and freezing that trace logs
  the warning (tfbert.serving.export.FrozenOutputs freezes this way)."""
  tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer([1, 2], [10, 20]), -1)
  variable = tf.Variable(3.0)
  traced = tf.function(lambda x: x * variable).get_concrete_function(
      tf.TensorSpec([None], tf.float32))
  with tensorflow_records() as seen:
    convert_to_constants.convert_variables_to_constants_v2(traced)
  assert any(m.startswith(WARNING) for m in seen.messages()), (
      "TensorFlow no longer logs the table_initializer warning when freezing: "
      "quiet_table_initializer_warning may be unneeded")
  with tensorflow_records() as seen:
    with freeze_quietly.quiet_table_initializer_warning():
      frozen = convert_to_constants.convert_variables_to_constants_v2(traced)
  assert not any(m.startswith(WARNING) for m in seen.messages())
  assert frozen(tf.constant([1.0, 2.0]))[0].numpy().tolist() == [3.0, 6.0]
