"""tfbert.embeddings.embedding_metrics: correlations equal SciPy's; retrieval metrics equal
hand-worked examples."""

import numpy as np
import pytest
from scipy import stats

from tfbert.embeddings import embedding_metrics


def test_similarity_correlations_equal_scipys_on_random_data_with_ties():
  rng = np.random.default_rng(8)
  similarities = rng.normal(size=101)
  gold = rng.integers(0, 6, 101).astype(np.float64)  # STS-B-like scores: many ties.
  got = embedding_metrics.similarity_correlations(similarities, gold)
  assert got["pearson"] == pytest.approx(stats.pearsonr(similarities, gold)[0], rel=1e-12)
  assert got["spearman"] == pytest.approx(stats.spearmanr(similarities, gold)[0], rel=1e-12)


def test_retrieval_metrics_of_a_hand_worked_example():
  """Corpus d0..d4. Query q0: relevant {d1, d3}; scores rank d1, d0, d3, d2, d4.
  Query q1: relevant {d4}; rank d2, d3, d0, d1, d4 (5th). Query q2 has no relevant document
  and is left out.

  q0: MRR@10 1/1; recall@1 1/2, @2 1/2, @3 2/2; DCG@10 1/log2(2) + 1/log2(4) = 1.5,
      ideal 1 + 1/log2(3) = 1.63093, nDCG 0.91972.
  q1: MRR@10 1/5; recall@1 0, @2 0, @3 0; DCG@10 1/log2(6) = 0.38685, ideal 1.
  Means: MRR 0.6; recall@1 0.25, @2 0.25, @3 0.5; nDCG (0.91972 + 0.38685) / 2 = 0.65329.
  With MRR@3, q1's relevant document is beyond the cut-off: (1 + 0) / 2 = 0.5.
  """
  corpus = ["d0", "d1", "d2", "d3", "d4"]
  scores = np.array([[0.8, 0.9, 0.1, 0.5, 0.0],
                     [0.6, 0.2, 0.9, 0.7, 0.1],
                     [0.1, 0.2, 0.3, 0.4, 0.5]])
  qrels = {"q0": {"d1", "d3"}, "q1": {"d4"}}
  got = embedding_metrics.retrieval_metrics(scores, ["q0", "q1", "q2"], corpus, qrels,
                                            recall_ks=(1, 2, 3))
  ndcg_q0 = (1 + 1 / np.log2(4)) / (1 + 1 / np.log2(3))
  assert got == pytest.approx({"mrr@10": 0.6, "ndcg@10": (ndcg_q0 + 1 / np.log2(6)) / 2,
                               "recall@1": 0.25, "recall@2": 0.25, "recall@3": 0.5,
                               "queries": 2}, rel=1e-12)
  assert embedding_metrics.retrieval_metrics(scores, ["q0", "q1", "q2"], corpus, qrels,
                                             mrr_k=3)["mrr@3"] == pytest.approx(0.5)


def test_ties_keep_corpus_order_and_bad_input_is_named():
  assert embedding_metrics.ranked(np.array([[0.5, 0.5, 0.9]]), 3).tolist() == [[2, 0, 1]]
  with pytest.raises(ValueError, match=r"shape \(1, 3\), but there are 2 queries"):
    embedding_metrics.retrieval_metrics(np.zeros((1, 3)), ["a", "b"], ["x", "y", "z"], {})
  with pytest.raises(ValueError, match="no query has a relevant document"):
    embedding_metrics.retrieval_metrics(np.zeros((1, 3)), ["a"], ["x", "y", "z"], {"a": set()})


def test_cosine_similarity_takes_embeddings_only():
  np.testing.assert_allclose(embedding_metrics.cosine_similarity([[3.0, 4.0]], [[4.0, 3.0]]),
                             [[0.96]], rtol=1e-6)
  with pytest.raises(TypeError, match="similarity's a must be embeddings .*got <U1"):
    embedding_metrics.cosine_similarity("a", [[1.0]])
  with pytest.raises(ValueError, match="embeddings of width 2 and 3"):
    embedding_metrics.cosine_similarity([[1.0, 0.0]], [[1.0, 0.0, 0.0]])


def _scores():
  return np.array([[0.9, 0.1, 0.3], [0.2, 0.8, 0.1]])


def test_non_finite_scores_are_refused_naming_the_query_and_document():
  # Sweep 34, B20: a NaN ranked arbitrarily (argsort puts it last) and scored silently.
  scores = _scores()
  scores[1, 2] = np.nan
  with pytest.raises(ValueError, match=r"query 'q2' \(row 1\) scores document 'd3' "
                                       r"\(column 2\) nan"):
    embedding_metrics.retrieval_metrics(scores, ["q1", "q2"], ["d1", "d2", "d3"],
                                        {"q1": {"d1"}, "q2": {"d3"}})
  scores[1, 2] = np.inf
  with pytest.raises(ValueError, match=r"document #2 \(column 2\) inf"):
    embedding_metrics.ranked(scores, 2)


@pytest.mark.parametrize("argument, value", [("ndcg_k", 0), ("mrr_k", -1), ("mrr_k", 2.0),
                                             ("recall_ks", (1, 0)), ("recall_ks", 5),
                                             ("recall_ks", "15")])
def test_cut_offs_below_one_or_not_ints_are_refused_naming_the_argument(argument, value):
  # Sweep 34, B21: ndcg_k=0 divided by an ideal DCG of 0 (ZeroDivisionError).
  name = "recall_ks\\[1\\]" if value == (1, 0) else argument
  with pytest.raises(ValueError, match=f"^{name} must be"):
    embedding_metrics.retrieval_metrics(_scores(), ["q1", "q2"], ["d1", "d2", "d3"],
                                        {"q1": {"d1"}, "q2": {"d2"}}, **{argument: value})
  with pytest.raises(ValueError, match=f"^{name} must be"):
    embedding_metrics.retrieval_metric_names(**{argument: value})
  with pytest.raises(ValueError, match="^k must be an int >= 1, got 0"):
    embedding_metrics.ranked(_scores(), 0)


def test_repeated_ids_are_refused_naming_the_duplicate():
  # Sweep 34, B22: a document id twice gave recall@5 = 2.0.
  with pytest.raises(ValueError, match="corpus ids must be unique: 'd1' is at positions 0 and 1"):
    embedding_metrics.retrieval_metrics(_scores(), ["q1", "q2"], ["d1", "d1", "d3"],
                                        {"q1": {"d1"}, "q2": {"d1"}})
  with pytest.raises(ValueError, match="query ids must be unique: 'q1'"):
    embedding_metrics.retrieval_metrics(_scores(), ["q1", "q1"], ["d1", "d2", "d3"],
                                        {"q1": {"d1"}})


@pytest.mark.parametrize("value", ["d1", {"d1": 1}, 3])
def test_qrels_values_must_be_collections_of_ids(value):
  # Sweep 34, B23: a str value was read as its characters ("d1" -> {"d", "1"}).
  with pytest.raises(ValueError, match=r"qrels\['q1'\] must be a set .* of the ids of its "
                                       r"relevant documents"):
    embedding_metrics.retrieval_metrics(_scores(), ["q1", "q2"], ["d1", "d2", "d3"],
                                        {"q1": value, "q2": {"d2"}})
  # Lists and tuples of ids are read as sets.
  assert embedding_metrics.retrieval_metrics(
      _scores(), ["q1", "q2"], ["d1", "d2", "d3"], {"q1": ["d1"], "q2": ("d2",)},
      recall_ks=(1,))["recall@1"] == 1.0
