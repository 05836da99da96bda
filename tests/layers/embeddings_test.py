"""Tests for tfbert.layers.embeddings."""

import numpy as np
import pytest
import tensorflow as tf

from tfbert.layers.embeddings import BertEmbeddings


def _layer():
  layer = BertEmbeddings(vocab_size=11, hidden_size=6, max_position_embeddings=5,
                         type_vocab_size=3)
  layer.build((None, None))
  return layer


def test_pad_row_trains_like_any_other_row_as_in_google_bert():
  # google-research/bert has no padding_idx: the [PAD] row (id 0) gets gradient from padded
  # positions. Hugging Face's padding_idx=0 would make this gradient exactly zero.
  layer = _layer()
  ids = tf.constant([[5, 7, 0, 0]])
  with tf.GradientTape() as tape:
    y = layer(ids, tf.zeros_like(ids))
    loss = tf.reduce_sum(y * tf.random.stateless_normal(y.shape, seed=[1, 2]))
  grad = tf.convert_to_tensor(tape.gradient(loss, layer.word_embeddings.embeddings))
  assert np.abs(grad.numpy()[0]).sum() > 1e-3
  assert np.abs(grad.numpy()[1]).sum() == 0.0  # An id that does not occur gets none.


def test_too_long_input_names_the_limit():
  with pytest.raises(ValueError, match="sequence length 6 exceeds max_position_embeddings 5"):
    _layer()(tf.zeros((1, 6), tf.int32), tf.zeros((1, 6), tf.int32))


def test_sum_of_three_tables_before_layer_norm():
  layer = _layer()
  layer.layer_norm.gamma.assign(np.ones(6))
  ids, seg = tf.constant([[3, 4]]), tf.constant([[1, 2]])
  x = (layer.word_embeddings.embeddings.numpy()[[3, 4]]
       + layer.token_type_embeddings.embeddings.numpy()[[1, 2]]
       + layer.position_embeddings.embeddings.numpy()[:2])
  want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12)
  np.testing.assert_allclose(layer(ids, seg)[0], want, atol=1e-5)


def test_get_config_round_trips():
  layer = _layer()
  assert BertEmbeddings.from_config(layer.get_config()).get_config() == layer.get_config()
