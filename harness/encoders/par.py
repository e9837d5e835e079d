"""Prototype attention representation (PAR, SwAMP paper, image–text section): a set of local features → one vector.

p learnable queries q_1..q_p, shared by both modalities, each attend over the set
{x_1..x_n} (regions or words): z_k = Σ_i softmax_i(q_k·x_i / T) x_i, padding masked;
PAR(X) = concat(z_1, …, z_p), L2-normalised, so cross-modal similarity is a dot product.
Two readings of the paper's H heads ("computes these features multiple times and
concatenates them"):

* ``concat`` (default, the paper's wording): H independent PAR poolings, each with its own
  p queries over all D dimensions, concatenated: H·p·D wide (MS-COCO: 2 × 10 × 1024). With
  no key or value projections this is one PAR with H·p queries, which is how it is computed.
* ``split``: the D dimensions are cut into H groups of D/H that attend separately and are
  concatenated back; the width stays p·D.

No key or value projections: the encoders' outputs are already learned.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from harness.api import ConfigError


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


HEAD_MODES = ("concat", "split")


def par_width(dim: int, p: int, heads: int, mode: str) -> int:
    """Output width of PAR: H·p·D for ``concat`` heads, p·D for ``split`` heads."""
    return (heads if mode == "concat" else 1) * p * dim


class PAR(nn.Module):
    """Holds the shared queries ((H·p, D) for ``concat`` heads, (p, D) for ``split``); ``forward(encoded)``
    pools one modality's sets."""

    def __init__(self, dim: int, p: int, temperature: float, heads: int, mode: str = "concat"):
        super().__init__()
        if mode not in HEAD_MODES:
            raise ConfigError(f"PAR head mode {mode!r} is not one of {', '.join(HEAD_MODES)}")
        if mode == "split" and dim % heads:
            raise ConfigError(f"PAR split heads H ({heads}) must divide the feature width ({dim}); choose H among "
                              f"the divisors of {dim}, or heads: concat")
        n_queries = heads * p if mode == "concat" else p
        self.queries = nn.Parameter(F.normalize(torch.randn(n_queries, dim), dim=1))
        self.temperature = temperature
        self.heads = 1 if mode == "concat" else heads  # groups of D that attend separately
        self.out_dim = par_width(dim, p, heads, mode)

    def forward(self, encoded: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        features, mask = as_set(encoded)
        return par_pool(features, mask, self.queries, temperature=self.temperature, heads=self.heads)
