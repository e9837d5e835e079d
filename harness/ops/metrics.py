"""Retrieval metrics as pure tensor functions.

Rank convention: a query's rank is 1 + the number of non-relevant gallery items that
score at least as high as its best-scoring relevant item. Ties count against the
method, so a collapsed embedding (all scores equal) ranks last, never first.
Average precision follows the same rule: every item scoring at least as high as a
relevant item counts as ranked above it (:func:`average_precisions`). NaN scores count
as -inf: never a hit.
"""
from __future__ import annotations

import math
from collections.abc import Iterator

import torch


def query_ranks(sims: torch.Tensor, relevant: torch.Tensor, chunk_elems: int = 2**22) -> torch.Tensor:
    """1-based rank (int64, shape (Q,)) of each query's best relevant item.

    Works in row chunks of about ``chunk_elems`` scores so that the temporaries stay a
    small fraction of the (Q, G) matrix. NaN scores count as -inf (never a hit).
    """
    _check_mask(sims, relevant)
    rows = max(1, chunk_elems // max(1, sims.shape[1]))
    ranks = []
    for lo in range(0, sims.shape[0], rows):
        s = sims[lo:lo + rows]
        rel = relevant[lo:lo + rows]
        if not bool(rel.any(1).all()):
            bad = lo + int((~rel.any(1)).nonzero()[0])
            raise ValueError(f"query {bad} has no relevant gallery item")
        if bool(s.isnan().any()):
            s = torch.nan_to_num(s, nan=-math.inf)
        best = s.masked_fill(~rel, -math.inf).amax(1, keepdim=True)  # (q, 1)
        beaten = (s >= best).logical_and_(~rel)  # (q, G)
        ranks.append(1 + beaten.sum(1))
    return torch.cat(ranks)


def summarize_ranks(ranks: torch.Tensor, ks: tuple[int, ...] = (1, 5, 10)) -> dict[str, float]:
    """R@k (percent of ranks <= k), MedR (floor of the median rank) and MeanR."""
    r = ranks.double()
    out = {f"R@{k}": float((r <= k).double().mean() * 100.0) for k in ks}
    out["MedR"] = float(math.floor(float(r.quantile(0.5))))
    out["MeanR"] = float(r.mean())
    return out


def rank_metrics(sims: torch.Tensor, relevant: torch.Tensor, ks: tuple[int, ...] = (1, 5, 10)) -> dict[str, float]:
    """Recall@k, MedR and MeanR of (Q, G) scores against a (Q, G) bool relevance mask."""
    return summarize_ranks(query_ranks(sims, relevant), ks)


def pair_relevance(b_to_a: torch.Tensor, n_a: int) -> torch.Tensor:
    """(n_a, n_b) mask: b item j is relevant to a item i when it is paired with it."""
    return torch.arange(n_a, device=b_to_a.device)[:, None] == b_to_a[None, :]


def class_relevance(labels_a: torch.Tensor, labels_b: torch.Tensor) -> torch.Tensor:
    """(n_a, n_b) mask: same hidden class."""
    return labels_a[:, None] == labels_b[None, :]


def recall_sum(metrics: dict[str, float], directions: tuple[str, ...], ks: tuple[int, ...] = (1, 5, 10)) -> float:
    """rsum: the sum of R@k over ``directions`` and ``ks`` (six recalls for i2t and t2i at 1, 5, 10)."""
    return sum(metrics[f"{d}/R@{k}"] for d in directions for k in ks)


def image_text_metrics(sims: torch.Tensor, captions_per_image: int = 5,
                       ks: tuple[int, ...] = (1, 5, 10)) -> dict[str, float]:
    """Image–text retrieval on an (N, captions_per_image·N) score matrix, caption j belonging to image
    j // captions_per_image (SCAN's ``i2t``/``t2i`` protocol).

    ``i2t/*``: each image's rank is that of its best-ranked true caption among all captions;
    ``t2i/*``: each caption's rank is that of its image among all images. R@k, MedR, MeanR
    per direction and ``rsum`` (sum of the recalls). Same rank and tie rule as :func:`rank_metrics`;
    beyond ``sims`` it holds one boolean mask of the same shape.
    """
    n_images, n_captions = sims.shape
    if captions_per_image < 1 or n_captions != captions_per_image * n_images:
        raise ValueError(f"sims {tuple(sims.shape)} must be (N, {captions_per_image}·N) for "
                         f"captions_per_image={captions_per_image}")
    relevant = pair_relevance(torch.arange(n_captions, device=sims.device) // captions_per_image, n_images)
    out = {f"i2t/{k}": v for k, v in rank_metrics(sims, relevant, ks).items()}
    out.update({f"t2i/{k}": v for k, v in rank_metrics(sims.T, relevant.T, ks).items()})
    out["rsum"] = recall_sum(out, ("i2t", "t2i"), ks)
    return out


def mean_over_folds(per_fold: list[dict[str, float]], directions: tuple[str, ...] = (),
                    ks: tuple[int, ...] = (1, 5, 10)) -> dict[str, float]:
    """Mean of every metric over folds (COCO 1K: five folds of 1,000 images); ``rsum``, when
    present, is recomputed from the mean recalls of ``directions``."""
    out = {k: sum(f[k] for f in per_fold) / len(per_fold) for k in per_fold[0]}
    if "rsum" in out:
        out["rsum"] = recall_sum(out, directions, ks)
    return out


def pessimistic_order(sims: torch.Tensor, relevant: torch.Tensor) -> torch.Tensor:
    """Gallery indices (Q, G) by decreasing score, non-relevant items before relevant ones among
    tied scores (ties count against the method). NaN scores count as -inf."""
    return order_of_clean(ordering_scores(sims), relevant)


def ordering_scores(sims: torch.Tensor) -> torch.Tensor:
    """The float64 scores that the ordering and average precision compare: NaN as -inf (and, as
    ``torch.nan_to_num`` does, ±inf as ±the largest finite float64, above NaN)."""
    return torch.nan_to_num(sims.double(), nan=-math.inf)


def order_of_clean(sims: torch.Tensor, relevant: torch.Tensor) -> torch.Tensor:
    """:func:`pessimistic_order` of scores already passed through :func:`ordering_scores`."""
    by_relevance = torch.sort(relevant.to(torch.int8), dim=1, stable=True).indices  # non-relevant first
    by_score = torch.sort(sims.gather(1, by_relevance), dim=1, descending=True, stable=True).indices
    return by_relevance.gather(1, by_score)


def _group_ends(sorted_sims: torch.Tensor) -> torch.Tensor:
    """(Q, G) index of the last position of each position's run of equal scores (rows sorted)."""
    q, g = sorted_sims.shape
    last = torch.ones(q, g, dtype=torch.bool, device=sorted_sims.device)
    last[:, :-1] = sorted_sims[:, :-1] != sorted_sims[:, 1:]
    position = torch.arange(g, device=sorted_sims.device).expand(q, g)
    ends = torch.where(last, position, torch.full_like(position, g))
    return ends.flip(1).cummin(1).values.flip(1)


def average_precisions(sims: torch.Tensor, relevant: torch.Tensor, *, k: int | None = None,
                       chunk_elems: int = 2**22) -> torch.Tensor:
    """Average precision (float64, shape (Q,)) of each query's ranking of the whole gallery, or of its
    top ``k`` (AP@k).

    AP = Σ over relevant items j of P(j) / (number of relevant items), where P(j) = (relevant items
    scoring at least as high as j) / (items scoring at least as high as j): every item tied with j
    counts as ranked above it, the rule of :func:`query_ranks` (it equals scikit-learn's
    ``average_precision_score``, which also pools tied scores). AP@k applies the same rule to the
    top ``k`` items of the ranking, ties broken against the method (non-relevant first) at the
    cut, and divides by the relevant items within the top k (0 when there are none), as scikit-learn
    on the truncated list. NaN scores count as -inf, so they are never ranked above anything.
    """
    _check_mask(sims, relevant)
    if k is not None and k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    out = [_ap_of_order(s, rel, order[:, :k]) for s, rel, order in _ordered_chunks(sims, relevant, chunk_elems)]
    return torch.cat(out) if out else sims.new_zeros(0, dtype=torch.float64)


def precisions_at(sims: torch.Tensor, relevant: torch.Tensor, k: int, chunk_elems: int = 2**22) -> torch.Tensor:
    """Share of each query's top ``k`` items that are relevant (float64, shape (Q,)), ties at the cut
    broken against the method; with fewer than ``k`` gallery items, the share of the whole gallery."""
    _check_mask(sims, relevant)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    out = [rel.gather(1, order[:, :k]).double().mean(1) for _, rel, order in _ordered_chunks(sims, relevant,
                                                                                            chunk_elems)]
    return torch.cat(out) if out else sims.new_zeros(0, dtype=torch.float64)


def _ordered_chunks(sims: torch.Tensor, relevant: torch.Tensor,
                    chunk_elems: int) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(scores, relevance, pessimistic order) of consecutive blocks of queries of about ``chunk_elems``."""
    rows = max(1, chunk_elems // max(1, sims.shape[1]))
    for lo in range(0, sims.shape[0], rows):
        s, rel = sims[lo:lo + rows], relevant[lo:lo + rows]
        yield s, rel, pessimistic_order(s, rel)


def _ap_of_order(s: torch.Tensor, rel: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """Average precision of each row over the items ``order`` lists (all, or the top k), ties pooled."""
    return ap_of_sorted(ordering_scores(s).gather(1, order), rel.gather(1, order).double())


def ap_of_sorted(s_sorted: torch.Tensor, hits: torch.Tensor) -> torch.Tensor:
    """Average precision of each row of float64 scores already in pessimistic order (NaN as -inf) with their
    float64 0/1 relevance, ties pooled (the top-k lists of :mod:`harness.ops.streaming` use it too)."""
    ends = _group_ends(s_sorted)
    precision = hits.cumsum(1).gather(1, ends) / (ends + 1).double()  # P at each tied run's end
    n_relevant = hits.sum(1)
    return torch.where(n_relevant > 0, (hits * precision).sum(1) / n_relevant.clamp_min(1), 0.0)


def precision_metrics(sims: torch.Tensor, relevant: torch.Tensor, *, ap: bool = True,
                      ap_ks: tuple[int, ...] = (), precision_ks: tuple[int, ...] = (),
                      per_query: dict[str, torch.Tensor] | None = None, chunk_elems: int = 2**22) -> dict[str, float]:
    """Mean average precision over queries as percentages: 'mAP' (whole gallery), 'mAP@k', 'P@k'.
    ``per_query``, when given, receives each query's average precision (0–1) under 'AP'. Every
    statistic reads one pessimistic ordering of each block of queries (one sort, not one per statistic)."""
    _check_mask(sims, relevant)
    if any(k < 1 for k in (*ap_ks, *precision_ks)):
        raise ValueError(f"every k must be >= 1, got {list(ap_ks)} and {list(precision_ks)}")
    parts: dict[str, list[torch.Tensor]] = {name: [] for name in (["mAP"] if ap else []) +
                                            [f"mAP@{k}" for k in ap_ks] + [f"P@{k}" for k in precision_ks]}
    for s, rel, order in _ordered_chunks(sims, relevant, chunk_elems):
        if ap:
            parts["mAP"].append(_ap_of_order(s, rel, order))
        for k in ap_ks:
            parts[f"mAP@{k}"].append(_ap_of_order(s, rel, order[:, :k]))
        for k in precision_ks:
            parts[f"P@{k}"].append(rel.gather(1, order[:, :k]).double().mean(1))
    values = {name: torch.cat(chunks) if chunks else sims.new_zeros(0, dtype=torch.float64)
              for name, chunks in parts.items()}
    if per_query is not None and ap:
        per_query["AP"] = values["mAP"]
    return {name: float(v.mean() * 100.0) for name, v in values.items()}


def _check_mask(sims: torch.Tensor, relevant: torch.Tensor) -> None:
    if sims.shape != relevant.shape or sims.ndim != 2:
        raise ValueError(f"sims {tuple(sims.shape)} and relevant {tuple(relevant.shape)} must be equal (Q, G)")
    if relevant.dtype != torch.bool:
        raise ValueError(f"relevant must be a bool mask, got {relevant.dtype}")
