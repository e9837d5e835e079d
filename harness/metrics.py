"""Retrieval metrics as pure tensor functions.

Rank convention: a query's rank is 1 + the number of non-relevant gallery items that
score at least as high as its best-scoring relevant item. Ties count against the
method, so a collapsed embedding (all scores equal) ranks last, never first.
"""
from __future__ import annotations

import math

import torch


def query_ranks(sims: torch.Tensor, relevant: torch.Tensor, chunk_elems: int = 2**22) -> torch.Tensor:
    """1-based rank (int64, shape (Q,)) of each query's best relevant item.

    Works in row chunks of about ``chunk_elems`` scores so that the temporaries stay a
    small fraction of the (Q, G) matrix. NaN scores count as -inf (never a hit).
    """
    if sims.shape != relevant.shape or sims.ndim != 2:
        raise ValueError(f"sims {tuple(sims.shape)} and relevant {tuple(relevant.shape)} must be equal (Q, G)")
    if relevant.dtype != torch.bool:
        raise ValueError(f"relevant must be a bool mask, got {relevant.dtype}")
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
