"""SCAN's own training forward and test evaluation procedure (``scorer: original`` of the SCAN methods).

Written from the behaviour of SCAN's released code (Lee et al., ECCV 2018) so that its cost
can be measured beside :func:`baselines.scan.xattn_similarity`: the scores are the same
(tests: 1e-6 in float64), only the cost differs. The SwAMP paper timed this procedure.

Training forward (:func:`per_caption_similarity`): one Python iteration per caption; its
words are repeated for every image of the batch, the attended vectors are formed explicitly
(two batched matmuls per caption), and the cosines are pooled.

Test evaluation (:func:`sharded_similarity`):

1. the test embeddings are gathered into float64 host arrays, captions zero-padded to the
   longest caption of the split;
2. the (n_images, n_captions) float64 host matrix is filled shard by shard, 128 images ×
   128 captions, each pair of shards copied to the device on its own (still float64: the
   cross attention runs in double precision, as in SCAN's evaluation);
3. inside a pair of shards, the training forward's loop over captions;
4. each block of scores is copied back into the host matrix.

On a CPU the copies of step 2 are no-ops; everything else is the same.
"""
from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F

SHARD = 128  # images and captions per shard (SCAN's shard_size)


def attend(query: torch.Tensor, context: torch.Tensor, *, lambda_softmax: float, eps: float) -> torch.Tensor:
    """Attended context vector of every query element, (n, n_query, D), from ``query`` (n, n_query, D)
    and ``context`` (n, n_context, D): logits context·query, LeakyReLU_0.1, l2-normalised over the
    query axis (norm + eps), softmax of λ·logits over the context axis, weighted sum of the context."""
    logits = F.leaky_relu(context @ query.transpose(1, 2), 0.1)  # (n, n_context, n_query)
    logits = logits / (logits.norm(dim=2, keepdim=True) + eps)
    weights = torch.softmax(lambda_softmax * logits.transpose(1, 2), dim=2)  # (n, n_query, n_context)
    return weights @ context


def cosine(x1: torch.Tensor, x2: torch.Tensor, eps: float) -> torch.Tensor:
    """Cosine along the last axis, the product of norms clamped at ``eps`` (SCAN's cosine_similarity)."""
    out: torch.Tensor = (x1 * x2).sum(-1) / (x1.norm(dim=-1) * x2.norm(dim=-1)).clamp_min(eps)
    return out


def pool_rows(sims: torch.Tensor, *, agg: str, lambda_lse: float) -> torch.Tensor:
    """(n, n_query) → (n,): mean (AVG) or log Σ exp(λ s) / λ (LSE, unshifted as in SCAN)."""
    if agg == "avg":
        return sims.mean(1)
    return torch.log(torch.exp(lambda_lse * sims).sum(1)) / lambda_lse


def per_caption_similarity(images: torch.Tensor, captions: torch.Tensor, lengths: list[int], *, direction: str,
                           agg: str, lambda_softmax: float, lambda_lse: float,
                           eps: float = 1e-8) -> torch.Tensor:
    """(n_images, n_captions) SCAN scores with one Python iteration per caption (differentiable).

    ``images`` (n_i, R, D), ``captions`` (n_c, L, D) padded, ``lengths`` n_c host ints.
    ``direction`` t2i: words attend to regions, pooled over words; i2t: regions attend to words,
    pooled over regions.
    """
    columns = []
    for j, n_words in enumerate(lengths):
        words = captions[j, :n_words].unsqueeze(0).repeat(len(images), 1, 1)  # (n_i, L_j, D)
        query, context = (words, images) if direction == "t2i" else (images, words)
        attended = attend(query, context, lambda_softmax=lambda_softmax, eps=eps)  # (n_i, n_query, D)
        columns.append(pool_rows(cosine(query, attended, eps), agg=agg, lambda_lse=lambda_lse))  # (n_i,)
    if not columns:
        return images.new_zeros(len(images), 0)
    return torch.stack(columns, 1)


def host_arrays(images: torch.Tensor, captions: torch.Tensor,
                lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Step 1: float64 CPU copies of the embeddings, captions cut to the split's longest caption."""
    lengths_host = [int(n) for n in lengths.tolist()]
    longest = max(lengths_host, default=0)
    images64 = images.detach().to("cpu", torch.float64, copy=True)  # (n_i, R, D)
    captions64 = captions.detach()[:, :longest].to("cpu", torch.float64, copy=True)  # (n_c, L_max, D)
    return images64, captions64, lengths_host


def sharded_similarity(images: torch.Tensor, captions: torch.Tensor, lengths: torch.Tensor, *, direction: str,
                       agg: str, lambda_softmax: float, lambda_lse: float, deadline: float | None = None,
                       shard: int | None = None) -> tuple[torch.Tensor, float]:
    """SCAN's test scoring (steps 1–4 of the module docstring) of every image against every caption.

    The device is that of ``images``; ``shard`` defaults to :data:`SHARD`.
    Returns the float64 CPU matrix (n_images, n_captions) and the
    fraction of its entries computed: when ``time.perf_counter()`` has passed ``deadline`` after a pair of
    shards, scoring stops and the entries not computed are NaN (the first pair always runs, so that
    there is something to extrapolate from).
    """
    device, shard = images.device, shard or SHARD
    host_images, host_captions, host_lengths = host_arrays(images, captions, lengths)
    scores = torch.full((len(host_images), len(host_captions)), torch.nan, dtype=torch.float64)
    kw: dict[str, Any] = dict(direction=direction, agg=agg, lambda_softmax=lambda_softmax, lambda_lse=lambda_lse)
    done = 0
    with torch.no_grad():
        for i in range(0, len(host_images), shard):
            for j in range(0, len(host_captions), shard):
                if deadline is not None and done and time.perf_counter() >= deadline:  # one pair at least
                    return scores, done / scores.numel()
                block = per_caption_similarity(host_images[i:i + shard].to(device),
                                               host_captions[j:j + shard].to(device),
                                               host_lengths[j:j + shard], **kw)
                scores[i:i + shard, j:j + shard] = block.cpu()
                done += block.numel()
    return scores, 1.0
