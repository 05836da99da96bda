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

import collections.abc
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from tfbert.classifier import glue_metrics
from tfbert.runtime import validation


def similarity_correlations(similarities: np.ndarray, scores: np.ndarray,
                            source: str = "") -> dict[str, float]:
  """{"pearson", "spearman"} of similarities [N] against gold scores [N] (of `source`, the
  dev file); NaN ones (constant scores or similarities) are explained once
  (`glue_metrics.warn_undefined_correlations`)."""
  return glue_metrics.compute_metrics(("pearson", "spearman"), similarities, scores, source)


def _cut_off(name: str, k: Any) -> int:
  """The cut-off argument `name` as a plain int >= 1: a k of 0 scored nothing and divided by
  an ideal DCG of 0 (sweep 34, B21).

  Raises:
    ValueError: naming `name` and the value.
  """
  return validation.plain_int(name, k, minimum=1)


def _cut_offs(mrr_k: Any, ndcg_k: Any, recall_ks: Any) -> tuple[int, int, tuple[int, ...]]:
  """(mrr_k, ndcg_k, recall_ks) checked (`_cut_off`, each recall k named by its index);
  `recall_ks` must be a sequence of them, never one int or a str read letter by letter.

  Raises:
    ValueError: naming the argument and the value.
  """
  if (isinstance(recall_ks, (str, bytes))
      or not isinstance(recall_ks, collections.abc.Sequence)):
    raise ValueError(f"recall_ks must be a sequence of ints >= 1 (e.g. (1, 5, 10)), got "
                     f"{recall_ks!r}")
  return (_cut_off("mrr_k", mrr_k), _cut_off("ndcg_k", ndcg_k),
          tuple(_cut_off(f"recall_ks[{i}]", k) for i, k in enumerate(recall_ks)))


def _finite_scores(scores: Any, query_ids: Optional[Sequence[str]] = None,
                   corpus_ids: Optional[Sequence[str]] = None) -> np.ndarray:
  """float64 [Q, D] of `scores`, refused unless real numbers, 2-D and all finite: a NaN ranks
  arbitrarily (argsort puts it last, sorting nothing), so its query's metrics were silently
  wrong (sweep 34, B20).

  Raises:
    ValueError: naming the first non-finite score by its query and document (their ids when
      given, else their indices).
  """
  array = np.asarray(scores)
  if array.dtype.kind not in "fiub" or array.ndim != 2:
    raise ValueError(f"scores must be a 2-D array of real numbers [queries, documents], got "
                     f"{array.dtype} of shape {array.shape}")
  array = array.astype(np.float64)
  bad = np.argwhere(~np.isfinite(array))
  if len(bad):
    row, column = (int(i) for i in bad[0])
    query = repr(query_ids[row]) if query_ids is not None else f"#{row}"
    document = repr(corpus_ids[column]) if corpus_ids is not None else f"#{column}"
    raise ValueError(f"scores are not all finite: query {query} (row {row}) scores document "
                     f"{document} (column {column}) {array[row, column]} ({len(bad)} "
                     "non-finite score(s) in all); a NaN or infinite score has no rank")
  return array


def _unique_ids(what: str, ids: Sequence[str]) -> None:
  """Refuses a repeated id among `ids` (the `what` ids): a document counted twice made
  recall@5 2.0 (sweep 34, B22); a query twice was averaged twice.

  Raises:
    ValueError: naming the id and its two positions.
  """
  seen: dict[Any, int] = {}
  for i, identifier in enumerate(ids):
    if identifier in seen:
      raise ValueError(f"{what} ids must be unique: {identifier!r} is at positions "
                       f"{seen[identifier]} and {i}")
    seen[identifier] = i


def _relevant_sets(qrels: Any) -> dict[Any, set]:
  """{query id: set of relevant document ids} of `qrels`, refused unless a mapping whose
  values are collections of ids: a str value ("d1") was read as its characters (sweep 34,
  B23), and a mapping value ({doc id: grade}, BEIR's form) as its keys, grade 0 included.

  Raises:
    ValueError: naming the query id, the value and the expected form.
  """
  if not isinstance(qrels, collections.abc.Mapping):
    raise ValueError(f"qrels must be a mapping {{query id: set of relevant document ids}}, "
                     f"got {type(qrels).__name__}")
  sets = {}
  for query, relevant in qrels.items():
    if (isinstance(relevant, (str, bytes, collections.abc.Mapping))
        or not isinstance(relevant, collections.abc.Collection)):
      raise ValueError(f"qrels[{query!r}] must be a set (or list, tuple) of the ids of its "
                       f"relevant documents, e.g. {{'d1', 'd7'}}, got {relevant!r}")
    sets[query] = set(relevant)
  return sets


def ranked(scores: np.ndarray, k: int) -> np.ndarray:
  """int [Q, min(k, D)]: each query's top-k document indices by score [Q, D], best first;
  equal scores keep corpus order.

  Raises:
    ValueError: `k` is not an int >= 1, or a score is not finite (`_finite_scores`).
  """
  k = _cut_off("k", k)
  order = np.argsort(-_finite_scores(scores), axis=1, kind="stable")
  return order[:, :k]


def retrieval_metric_names(mrr_k: int = 10, ndcg_k: int = 10,
                           recall_ks: Sequence[int] = (1, 5, 10)) -> list[str]:
  """The metric names of `retrieval_metrics` ("queries", a count, aside).

  Raises:
    ValueError: a cut-off is not an int >= 1 (naming the argument).
  """
  mrr_k, ndcg_k, recall_ks = _cut_offs(mrr_k, ndcg_k, recall_ks)
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
    ValueError: naming what is wrong, before anything is scored: `scores`' shape does not
      match the ids; a score is not finite (naming its query and document); a cut-off is not
      an int >= 1; a query or corpus id repeats; a qrels value is not a collection of ids;
      or no query has a relevant document.
  """
  mrr_k, ndcg_k, recall_ks = _cut_offs(mrr_k, ndcg_k, recall_ks)
  scores = np.asarray(scores)
  if scores.shape != (len(query_ids), len(corpus_ids)):
    raise ValueError(f"scores have shape {scores.shape}, but there are {len(query_ids)} "
                     f"queries and {len(corpus_ids)} corpus documents")
  scores = _finite_scores(scores, query_ids, corpus_ids)
  _unique_ids("query", query_ids)
  _unique_ids("corpus", corpus_ids)
  qrels = _relevant_sets(qrels)
  deepest = max([mrr_k, ndcg_k, *recall_ks])
  top = ranked(scores, deepest)
  totals = dict.fromkeys(retrieval_metric_names(mrr_k, ndcg_k, recall_ks), 0.0)
  counted = 0
  for row, query in enumerate(query_ids):
    relevant = qrels.get(query, set())
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
