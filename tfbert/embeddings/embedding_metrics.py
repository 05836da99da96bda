"""How good sentence embeddings are: similarity correlations and retrieval metrics.

* **Similarity** (STS-B and any scored pairs): Pearson's r and Spearman's rho between the
  cosine similarity of each pair's embeddings and its gold score (SciPy's definitions,
  through `tfbert.classifier.glue_metrics`).
* **Retrieval** (queries, a corpus, and `qrels`: the relevant documents of each query):
  each query ranks the corpus by score (ties: corpus order), and

  - MRR@k: 1 / the rank of the first relevant document among the top k (0 if none);
  - recall@k: the fraction of the query's relevant documents among the top k;
  - nDCG@k: DCG@k / ideal DCG@k, with binary relevance and DCG@k = sum over the top k ranks
    r (1-based) of rel_r / log2(r + 1); the ideal ranks every relevant document first;

  each averaged over the queries that have a relevant document (sentence-transformers'
  `InformationRetrievalEvaluator` definitions).

All are fractions here, as `glue_metrics`' are; runs report them in percent
(`docs/metrics.md`). Shape legend: N pairs, Q queries, D corpus documents.
"""

from typing import Mapping, Optional, Sequence

import numpy as np

from tfbert.classifier import glue_metrics


def similarity_correlations(similarities: np.ndarray, scores: np.ndarray,
                            source: str = "") -> dict[str, float]:
  """{"pearson", "spearman"} of similarities [N] against gold scores [N] (of `source`, the
  dev file); NaN ones (constant scores or similarities) are explained once
  (`glue_metrics.warn_undefined_correlations`)."""
  return glue_metrics.compute_metrics(("pearson", "spearman"), similarities, scores, source)


def ranked(scores: np.ndarray, k: int) -> np.ndarray:
  """int [Q, min(k, D)]: each query's top-k document indices by score [Q, D], best first;
  equal scores keep corpus order."""
  order = np.argsort(-np.asarray(scores, np.float64), axis=1, kind="stable")
  return order[:, :k]


def retrieval_metric_names(mrr_k: int = 10, ndcg_k: int = 10,
                           recall_ks: Sequence[int] = (1, 5, 10)) -> list[str]:
  """The metric names of `retrieval_metrics` ("queries", a count, aside)."""
  return [f"mrr@{mrr_k}", f"ndcg@{ndcg_k}", *(f"recall@{k}" for k in recall_ks)]


def retrieval_metrics(scores: np.ndarray, query_ids: Sequence[str], corpus_ids: Sequence[str],
                      qrels: Mapping[str, set[str]], mrr_k: int = 10, ndcg_k: int = 10,
                      recall_ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
  """MRR@mrr_k, nDCG@ndcg_k and recall@k for each k of `recall_ks`, mean over queries.

  Args:
    scores: [Q, D] similarity of each query with each corpus document.
    query_ids: the Q query ids, in `scores`' row order.
    corpus_ids: the D document ids, in `scores`' column order.
    qrels: {query id: ids of its relevant documents}; queries without any are left out.
    mrr_k, ndcg_k, recall_ks: the cut-offs.

  Returns:
    {"mrr@10": ..., "ndcg@10": ..., "recall@1": ..., ...} and "queries": the count scored.

  Raises:
    ValueError: `scores`' shape does not match the ids, or no query has a relevant document.
  """
  scores = np.asarray(scores)
  if scores.shape != (len(query_ids), len(corpus_ids)):
    raise ValueError(f"scores have shape {scores.shape}, but there are {len(query_ids)} "
                     f"queries and {len(corpus_ids)} corpus documents")
  deepest = max([mrr_k, ndcg_k, *recall_ks])
  top = ranked(scores, deepest)
  totals = dict.fromkeys(retrieval_metric_names(mrr_k, ndcg_k, recall_ks), 0.0)
  counted = 0
  for row, query in enumerate(query_ids):
    relevant = set(qrels.get(query, ()))
    if not relevant:
      continue
    counted += 1
    hits = np.array([corpus_ids[d] in relevant for d in top[row]], np.float64)  # [deepest]
    first = np.flatnonzero(hits[:mrr_k])
    totals[f"mrr@{mrr_k}"] += 1.0 / (first[0] + 1) if len(first) else 0.0
    discounts = 1.0 / np.log2(np.arange(2, ndcg_k + 2))                     # ranks 1..k
    dcg = float(hits[:ndcg_k] @ discounts[:len(hits[:ndcg_k])])
    ideal = float(np.sum(discounts[:min(len(relevant), ndcg_k)]))
    totals[f"ndcg@{ndcg_k}"] += dcg / ideal
    for k in recall_ks:
      totals[f"recall@{k}"] += float(np.sum(hits[:k])) / len(relevant)
  if not counted:
    raise ValueError("no query has a relevant document in qrels: nothing to score")
  return {**{name: total / counted for name, total in totals.items()}, "queries": counted}


def cosine_similarity(a: np.ndarray, b: Optional[np.ndarray] = None) -> np.ndarray:
  """float32 [N, M] cosine similarities of embeddings a [N, H] and b [M, H] (default: a);
  one embedding [H] counts as [1, H]."""
  def matrix(x, name):
    x = np.asarray(x)
    if x.dtype.kind not in "fiu" or x.ndim not in (1, 2):
      raise TypeError(f"similarity's {name} must be embeddings (encode()'s float [N, H] or "
                      f"[H]), got {x.dtype} of shape {x.shape}")
    return np.atleast_2d(x.astype(np.float64))
  a = matrix(a, "a")
  b = a if b is None else matrix(b, "b")
  if a.shape[1] != b.shape[1]:
    raise ValueError(f"similarity of embeddings of width {a.shape[1]} and {b.shape[1]}")
  a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
  b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
  return (a @ b.T).astype(np.float32)
