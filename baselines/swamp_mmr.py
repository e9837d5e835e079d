"""SwAMP with HowTo100M's max-margin ranking loss as its contrastive term (SwAMP paper, text–video
experiments: L = L_mmr + λ·L_s, λ = 0.25 (LSMDC-PT 0.1), τ = 0.25, η = 5, K = 500, queue 2,048)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from baselines.mmr import max_margin_ranking_loss
from baselines.swamp import SwAMP, SwAMPParams
from harness.registry import METHODS


@dataclass(frozen=True)
class SwAMPMMRParams(SwAMPParams):
    margin: float = 0.1  # HowTo100M's margin


@METHODS.register("swamp_mmr")
class SwAMPMMR(SwAMP):
    """SwAMP's swapped-assignment loss plus ``contrastive_weight`` × HowTo100M's ranking loss."""

    Params = SwAMPMMRParams

    def contrastive_term(self, emb_a: torch.Tensor, emb_b: torch.Tensor, distributed: bool) -> torch.Tensor:
        """The ranking loss on this process's rows: a mean, so DDP's gradient average needs no rescaling."""
        return max_margin_ranking_loss(emb_a @ emb_b.T, self.params.margin)
