"""tfbert.embeddings.embedding_inference: batching does not change an embedding; pair scores
are the cosine similarities' correlations with the gold scores (SciPy's), in percent."""

import gc
import weakref

import keras
import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from tfbert import BertConfig
from tfbert.embeddings import embedding_inference
from tfbert.embeddings.embedding_data import TextExample
from tfbert.embeddings.sentence_encoder import BertSentenceEncoder
from tfbert.text import inputs
from tfbert.text.tokenization import WordPieceTokenizer

WORDS = ["the", "cat", "dog", "sat", "ran", "on", "a", "mat", "park", "red", "big"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
  keras.utils.set_random_seed(5)
  config = BertConfig(vocab_size=5 + len(WORDS), hidden_size=10, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=13, max_position_embeddings=11)
  model = BertSentenceEncoder(config)
  model.build()
  return model, WordPieceTokenizer(str(vocab), do_lower_case=True)


def test_embeddings_do_not_depend_on_the_batching(tiny):
  model, tokenizer = tiny
  texts = ["the cat sat", "a big red dog ran in the park", "mat", "the dog", "on a mat"]
  batched = embedding_inference.embed_texts(model, tokenizer, texts, 9, batch_size=2)
  ids = tokenizer.tokenize(tf.constant(texts))
  whole = model(inputs.pack_inputs([ids], 9, tokenizer.cls_id, tokenizer.sep_id))["embeddings"]
  # Another batch size runs other matmul shapes: float32 rounding only.
  np.testing.assert_allclose(batched, whole.numpy(), atol=1e-6)
  assert batched.shape == (5, 10)
  assert embedding_inference.embed_texts(model, tokenizer, [], 9).shape == (0, 10)


def test_similarity_scores_are_scipys_correlations_in_percent(tiny):
  model, tokenizer = tiny
  rng = np.random.default_rng(1)
  examples = [TextExample((" ".join(rng.choice(WORDS, 3)), " ".join(rng.choice(WORDS, 4))),
                          float(rng.integers(0, 6)), i + 1) for i in range(23)]
  similarities = embedding_inference.pair_similarities(model, tokenizer, examples, 9)
  first = embedding_inference.embed_texts(model, tokenizer, [e.texts[0] for e in examples], 9)
  second = embedding_inference.embed_texts(model, tokenizer, [e.texts[1] for e in examples], 9)
  np.testing.assert_allclose(similarities, np.sum(first * second, axis=1), atol=1e-6)  # Unit.
  gold = [e.score for e in examples]
  got = embedding_inference.similarity_scores(model, tokenizer, examples, 9)
  assert got["spearman"] == pytest.approx(100 * stats.spearmanr(similarities, gold)[0],
                                          rel=1e-9)
  assert got["pearson"] == pytest.approx(100 * stats.pearsonr(similarities, gold)[0], rel=1e-9)


@pytest.mark.slow
def test_the_cached_inference_function_does_not_keep_its_model_alive(tiny):
  """`embed_texts` keeps one traced function per model; once the model is gone, so is the
  entry (a function that held the model strongly would keep both for the whole process)."""
  _, tokenizer = tiny
  model = BertSentenceEncoder(tiny[0].config)
  model.build()
  embedding_inference.embed_texts(model, tokenizer, ["the cat"], 9)
  held = weakref.ref(model)
  assert held() in embedding_inference._INFERENCE
  del model
  gc.collect()
  assert held() is None
