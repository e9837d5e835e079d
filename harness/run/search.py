"""Approximate nearest-neighbour search beside the exact test retrieval (``test.search``), through faiss.

For each retrieval direction of the whole test split the gallery's embeddings go into a faiss index
(``hnsw``: ``IndexHNSWFlat``; ``ivf_flat``: ``IndexIVFFlat`` over a flat quantiser, trained on the gallery),
every query asks it for its ``k`` nearest items, and the same queries are answered exactly (the method's
scores, block by block, top k). The record holds, per direction: the index's build time, its query time for
all queries, the exact top-k time of the same queries, the index's size, the k-NN recall (share of the exact
top k that the index returns) and R@j for every cut-off j <= k of the task's metrics, from the approximate
list beside the same statistic from the exact list (a query's rank is the position of its first relevant
item in the list; beyond k it is a miss), and what the approximation lost. The method's own metrics are
those of the exact path, unchanged; this is a measurement beside them.

Only methods whose score is an inner product or a negative Euclidean distance of one vector per item
(:attr:`Method.search_metric`) can be searched this way; for the others the record says why it is absent.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Protocol

import numpy as np
import torch

from harness.config.metrics import with_relevance
from harness.config.spec import DIRECTIONS, FAISS_HINT, HNSWSearch, IVFFlatSearch, MetricSpec
from harness.data.paired import Split
from harness.errors import ConfigError
from harness.method import Method
from harness.ops import streaming
from harness.run.profiling import Profiler

MiB = 2**20


def import_faiss() -> Any:
    """The faiss module; ConfigError naming the package to install when it is missing."""
    try:
        import faiss
    except ImportError:
        raise ConfigError(f"test.search needs the faiss package, not installed here: {FAISS_HINT}") from None
    return faiss


def build_index(faiss: Any, gallery: np.ndarray, settings: HNSWSearch | IVFFlatSearch, metric: str) -> Any:
    """A faiss index of ``gallery`` (n, d) float32 for ``metric`` ('inner_product' or 'l2'), built and filled."""
    d = gallery.shape[1]
    faiss_metric = faiss.METRIC_INNER_PRODUCT if metric == "inner_product" else faiss.METRIC_L2
    if isinstance(settings, HNSWSearch):
        index = faiss.IndexHNSWFlat(d, settings.M, faiss_metric)
        index.hnsw.efConstruction = settings.ef_construction
        index.hnsw.efSearch = settings.ef_search
    else:
        if settings.nlist > len(gallery):
            raise ConfigError(f"test.search.nlist ({settings.nlist}) exceeds the {len(gallery)} gallery items it is "
                              f"trained on; set nlist at most {len(gallery)} (about sqrt(n) is usual)")
        quantizer = faiss.IndexFlatIP(d) if metric == "inner_product" else faiss.IndexFlatL2(d)
        index = faiss.IndexIVFFlat(quantizer, d, settings.nlist, faiss_metric)
        index.train(gallery)
        index.nprobe = settings.nprobe
    index.add(gallery)
    return index


def exact_top(method: Scorer, queries: torch.Tensor, gallery: torch.Tensor, k: int,
              block: int = 2048) -> torch.Tensor:
    """(n_queries, min(k, n_gallery)) gallery indices of each query's k best scores (NaN as -inf), block by block:
    memory is one block of scores."""
    k = min(k, len(gallery))
    out = []
    for q_lo, q_hi in streaming.blocks(len(queries), block):
        best_s = torch.full((q_hi - q_lo, 0), -torch.inf)
        best_i = torch.zeros(q_hi - q_lo, 0, dtype=torch.long)
        for g_lo, g_hi in streaming.blocks(len(gallery), 8 * block):
            s = torch.nan_to_num(method.score(queries[q_lo:q_hi], gallery[g_lo:g_hi]).float().cpu(), nan=-torch.inf)
            values, index = s.topk(min(k, s.shape[1]), dim=1)
            merged_s, merged_i = torch.cat([best_s, values], 1), torch.cat([best_i, index + g_lo], 1)
            order = merged_s.topk(min(k, merged_s.shape[1]), dim=1).indices
            best_s, best_i = merged_s.gather(1, order), merged_i.gather(1, order)
        out.append(best_i)
    return torch.cat(out) if out else torch.zeros(0, k, dtype=torch.long)


def list_ranks(found: torch.Tensor, relevant_of: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """1-based position of each query's first relevant item in its list ``found`` (n, k); k + 1 when none."""
    hits = relevant_of(found)  # (n, k) bool
    first = torch.where(hits.any(1), hits.float().argmax(1) + 1, torch.full((len(found),), found.shape[1] + 1))
    return first


def _relevance(split: Split, kind: str, orientation: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """Function from (n, k) gallery indices to their relevance to each query (rows in query order)."""
    if kind == "pair":
        b_to_a = split.b_to_a
        if b_to_a is None:
            raise ValueError("pair relevance needs a split with pairing (b_to_a)")
        if orientation == "a":
            return lambda idx: b_to_a[idx] == torch.arange(len(idx))[:, None]
        return lambda idx: idx == b_to_a[:, None]
    labels_q, labels_g = (split.labels_a, split.labels_b) if orientation == "a" else (split.labels_b, split.labels_a)
    if labels_q is None or labels_g is None:
        raise ValueError("class relevance needs a split with labels_a and labels_b")
    return lambda idx: labels_g[idx] == labels_q[:, None]


@torch.no_grad()
def run_search(method: Method, split: Split, metrics: MetricSpec, settings: HNSWSearch | IVFFlatSearch,
               prof: Profiler, embeddings: tuple[Any, Any]) -> None:
    """Search the whole test split approximately and exactly (module docstring); the record goes to
    ``prof.search``, peak memory to phase 'test_search'."""
    record: dict[str, Any] = {"type": settings.type, "settings": {k: v for k, v in vars(settings).items()
                                                                  if k != "type"}}
    if method.search_metric is None:
        record["skipped"] = (f"{type(method).__name__} scores pairs of item sets (no single vector per item), so no "
                             "nearest-neighbour index applies")
        prof.search = record
        return
    faiss = import_faiss()
    faiss.omp_set_num_threads(torch.get_num_threads())
    emb_a, emb_b = (e.float().cpu().contiguous() for e in embeddings)
    record.update(metric=method.search_metric, n_a=len(emb_a), n_b=len(emb_b), directions={})
    cuts = [j for j in metrics.ks if j <= settings.k]
    with prof.phase("test_search"):
        for direction in metrics.directions:
            orientation = "b" if DIRECTIONS[direction] else "a"
            queries, gallery = (emb_a, emb_b) if orientation == "a" else (emb_b, emb_a)
            k = min(settings.k, len(gallery))
            start = time.perf_counter()
            index = build_index(faiss, gallery.numpy(), settings, method.search_metric)
            build_s = time.perf_counter() - start
            start = time.perf_counter()
            _, found = index.search(queries.numpy(), k)
            query_s = time.perf_counter() - start
            index_mib = len(faiss.serialize_index(index)) / MiB
            del index
            start = time.perf_counter()
            exact = exact_top(method, queries, gallery, k) if orientation == "a" else \
                exact_top(_Transposed(method), queries, gallery, k)
            exact_s = time.perf_counter() - start
            found_t = torch.from_numpy(found).long()
            overlap = (found_t[:, :, None] == exact[:, None, :]).any(2).sum(1).double() / k
            row: dict[str, Any] = {"build_s": build_s, "query_s": query_s, "exact_top_k_s": exact_s,
                                   "index_mib": index_mib, f"knn_recall@{k}": float(overlap.mean() * 100.0)}
            for kind in metrics.relevance:
                relevant_of = _relevance(split, kind, orientation)
                approx_ranks = list_ranks(found_t.clamp_min(0), relevant_of)
                approx_ranks[found_t.lt(0).all(1)] = k + 1  # faiss pads missing neighbours with -1
                exact_ranks = list_ranks(exact, relevant_of)
                for j in cuts:
                    got = float((approx_ranks <= j).double().mean() * 100.0)
                    ref = float((exact_ranks <= j).double().mean() * 100.0)
                    recall = with_relevance(f"R@{j}", kind)
                    row[recall] = got
                    row[f"exact_{recall}"] = ref
                    row[f"lost_{recall}"] = ref - got
            record["directions"][direction] = row
    prof.search = record


class Scorer(Protocol):
    """What :func:`exact_top` needs of a method: its score matrix of two sets of embeddings."""

    def score(self, emb_a: torch.Tensor, emb_b: torch.Tensor, /) -> torch.Tensor: ...


class _Transposed:
    """A method's scores with the roles of a and b swapped (b items as queries)."""

    def __init__(self, method: Method):
        self.method = method

    def score(self, queries: torch.Tensor, gallery: torch.Tensor) -> torch.Tensor:
        return self.method.score(gallery, queries).T


def check(spec: Any, split: Split) -> None:
    """Before training: faiss imports, and an IVF index has no more cells than the smallest gallery it indexes."""
    settings = spec.test.search_settings()
    if settings is None:
        return
    import_faiss()
    if isinstance(settings, IVFFlatSearch):
        sizes = {d: len(split.b) if not DIRECTIONS[d] else len(split.a) for d in spec.metrics.directions}
        small = min(sizes.values())
        if settings.nlist > small:
            raise ConfigError(f"{spec.path}: test.search.nlist ({settings.nlist}) exceeds the {small} gallery items "
                              f"of the test split's smaller side; set nlist at most {small}")
