"""A straightforward per-caption loop for SCAN's similarity, written from the SCAN paper's equations.

It follows the original evaluation order (one caption at a time, replicated over all
images, the attended vectors formed explicitly) and serves as the reference that
``baselines.scan.xattn_similarity`` must match, and as the baseline of its speed-up.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def reference_xattn(images: torch.Tensor, captions: torch.Tensor, lengths: torch.Tensor, *, direction: str,
                    agg: str, lambda_softmax: float, lambda_lse: float, eps: float = 1e-8) -> torch.Tensor:
    """(n_images, n_captions) scores, one Python iteration per caption."""
    columns = []
    for j in range(len(captions)):
        words = captions[j, : int(lengths[j])].unsqueeze(0).expand(len(images), -1, -1)  # (n_i, L, D)
        query, context = (words, images) if direction == "t2i" else (images, words)
        attended = _attend(query, context, lambda_softmax, eps)  # (n_i, n_query, D)
        cos = (query * attended).sum(2) / (query.norm(dim=2) * attended.norm(dim=2)).clamp_min(eps)
        if agg == "avg":
            columns.append(cos.mean(1))
        else:
            columns.append(torch.log(torch.exp(lambda_lse * cos).sum(1)) / lambda_lse)
    return torch.stack(columns, 1)


def _attend(query: torch.Tensor, context: torch.Tensor, lambda_softmax: float, eps: float) -> torch.Tensor:
    """Each query element's attended context vector: LeakyReLU, l2norm over the query axis, softmax over context."""
    attn = F.leaky_relu(context @ query.transpose(1, 2), 0.1)  # (n_i, n_context, n_query)
    attn = attn / (attn.norm(dim=2, keepdim=True) + eps)  # over the query axis
    attn = torch.softmax(lambda_softmax * attn, dim=1)  # over the context axis
    return attn.transpose(1, 2) @ context  # (n_i, n_query, D)
