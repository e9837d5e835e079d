"""Prototype attention representation (PAR, SwAMP paper, image–text section): a set of local features → one vector.

p learnable queries q_1..q_p, shared by both modalities, each attend over the set
{x_1..x_n} (regions or words): z_k = Σ_i softmax_i(q_k·x_i / T) x_i, padding masked;
PAR(X) = concat(z_1, …, z_p), L2-normalised, so cross-modal similarity is a dot product.
With H heads the D dimensions are split into H groups of D/H that attend separately and
are concatenated back (our reading of the paper's "multi-head extension"; it keeps the
width p·D). No key or value projections: the encoders' outputs are already learned.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from harness.errors import ConfigError


def par_pool(features: torch.Tensor, mask: torch.Tensor | None, queries: torch.Tensor, *, temperature: float,
             heads: int) -> torch.Tensor:
    """(B, n, D) features with (B, n) validity mask (None: all valid), (p, D) queries → (B, p·D) unit vectors."""
    b, n, d = features.shape
    p = len(queries)
    x = features.view(b, n, heads, d // heads)  # (B, n, H, D/H)
    logits = torch.einsum("khe,bnhe->bhkn", queries.view(p, heads, d // heads), x) / temperature  # (B, H, p, n)
    if mask is not None:
        logits = logits.masked_fill(~mask[:, None, None, :], -math.inf)
    z = torch.einsum("bhkn,bnhe->bkhe", logits.softmax(-1), x)  # (B, p, H, D/H)
    return F.normalize(z.reshape(b, p * d), dim=-1)


def as_set(encoded: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """An encoder's output as (features (B, n, D), mask (B, n) or None): regions, or (words, lengths)."""
    if isinstance(encoded, torch.Tensor):
        return encoded, None
    features, lengths = encoded
    mask = torch.arange(features.shape[1], device=features.device) < lengths.to(features.device)[:, None]
    return features, mask


class PAR(nn.Module):
    """Holds the p shared queries; ``forward(encoded)`` pools one modality's sets."""

    def __init__(self, dim: int, p: int, temperature: float, heads: int):
        super().__init__()
        if dim % heads:
            raise ConfigError(f"PAR heads H ({heads}) must divide the feature width ({dim}); choose H among the "
                              f"divisors of {dim}")
        self.queries = nn.Parameter(F.normalize(torch.randn(p, dim), dim=1))
        self.temperature, self.heads = temperature, heads
        self.out_dim = p * dim

    def forward(self, encoded: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        features, mask = as_set(encoded)
        return par_pool(features, mask, self.queries, temperature=self.temperature, heads=self.heads)
