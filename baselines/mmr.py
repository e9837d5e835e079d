"""HowTo100M's max-margin ranking loss (Miech et al., ICCV 2019, Eq. 1): the contrastive method of the
SwAMP paper's text–video experiments.

What is implemented, exactly (HowTo100M ``loss.py``, ``MaxMarginRankingLoss``, as its fine-tuning on
MSR-VTT, YouCook2 and LSMDC runs it: one clip per video in a batch, ``n_pair = 1``):

    L = mean over all (i, j) of [m + s_ij - s_ii]_+ + [m + s_ij - s_jj]_+

with s the (B, B) cosine similarities of the batch's videos and captions and margin m = 0.1
(HowTo100M's default). Every negative counts (no hardest-negative mining), and the mean runs over
all B² entries, the diagonal included: each diagonal entry adds the constant 2m, which carries no
gradient but is part of the reported value, as in HowTo100M. HowTo100M's negative weighting
(``hard_negative_rate``) only applies when its loader yields several clips of one video per batch
(``n_pair > 1``, its HowTo100M pretraining); with ``n_pair = 1`` it is off, so it is not implemented.
Under torchrun each process takes its negatives from its own shard; the loss is a mean, so DDP's
gradient average needs no rescaling.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from harness.api import METHODS, Method, bounded, require, search


def max_margin_ranking_loss(sims: torch.Tensor, margin: float) -> torch.Tensor:
    """HowTo100M's loss on a (B, B) similarity matrix whose diagonal holds the positive pairs
    (module docstring): the mean over all entries of both directions' hinges."""
    pos = sims.diagonal()  # (B,)
    rows = (margin + sims - pos[:, None]).clamp_min(0)  # a item i against b negatives j
    cols = (margin + sims - pos[None, :]).clamp_min(0)  # b item j against a negatives i
    return (rows + cols).mean()


@dataclass(frozen=True)
class MaxMarginParams:
    margin: float = bounded(0.1, tune=search(0.01, 0.5, log=True))

    def check(self, where: str) -> None:
        require(self.margin >= 0, where, f"margin must be >= 0, got {self.margin}")


@METHODS.register("mmr")
class MaxMarginRanking(Method):
    """Modality-wise embeddings trained with HowTo100M's max-margin ranking loss."""

    Params = MaxMarginParams

    def loss(self, x_a: Any, x_b: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        loss = max_margin_ranking_loss(self.encode("a", x_a) @ self.encode("b", x_b).T, self.params.margin)
        return loss, {"loss": loss.detach()}
