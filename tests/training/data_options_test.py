"""Tests for tfbert.training.data_options: every input pipeline tfbert trains, evaluates or
predicts from starts no tf.data autotuning thread, whose late release stalled the process
(the module docstring has the measurement)."""

import numpy as np
import tensorflow as tf

from tests import helpers
from tfbert.checkpoints import pretrained
from tfbert.pretraining import input_pipeline, text_pipeline
from tfbert.tasks import fine_tuning
from tfbert.text import tokenization
from tfbert.training import data_options


def test_a_plain_dataset_autotunes_and_released_promptly_turns_it_off():
  dataset = tf.data.Dataset.range(5).map(lambda x: x + 1, num_parallel_calls=tf.data.AUTOTUNE)
  assert data_options.autotunes(dataset)  # TensorFlow's default: the check can fail.
  released = data_options.released_promptly(dataset)
  assert not data_options.autotunes(released)
  assert list(released.as_numpy_iterator()) == [1, 2, 3, 4, 5]  # The same elements.


def test_fine_tuning_batches_start_no_autotuning_thread():
  examples = {"input_ids": np.arange(21, dtype=np.int32).reshape(7, 3),
              "input_mask": np.ones([7, 3], np.int32)}
  for bucket in (0, 2):
    dataset = fine_tuning.shuffled_batches(examples, 7, 2, seed=3, length_bucket=bucket)
    assert not data_options.autotunes(dataset), bucket


def test_pretraining_records_and_raw_text_start_no_autotuning_thread(tmp_path):
  (tmp_path / "records").mkdir()
  records = helpers.pydoc_records(tmp_path / "records", 16, 3, max_documents=3, num_shards=1)
  assert not data_options.autotunes(input_pipeline.pretraining_dataset(
      f"{records}/*.tfrecord", 2, seq_length=16, max_predictions=3))
  (tmp_path / "text").mkdir()
  text = helpers.pydoc_text_files(tmp_path / "text", max_documents=2, num_files=1)
  vocab = pretrained.minilm_vocab_file()
  assert not data_options.autotunes(text_pipeline.text_dataset(
      text, 2, tokenizer=tokenization.WordPieceTokenizer(vocab, True),
      masking=text_pipeline.masking_for(vocab, 3), seq_length=16))
