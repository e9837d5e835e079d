"""SwAMP with HowTo100M's max-margin ranking loss as its contrastive term (SwAMP paper, text–video
experiments: L = L_mmr + λ·L_s, λ = 0.25 (LSMDC-PT 0.1), τ = 0.25, η = 5, K = 500, queue 2,048)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch

from baselines.contrastive import PairLossFields
from baselines.mmr import max_margin_ranking_loss
from baselines.swamp import SwAMP, SwAMPParams
from harness.api import METHODS, global_batch_sum, require


@dataclass(frozen=True)
class SwAMPMMRParams(SwAMPParams):
    """HowTo100M's ranking loss is a mean (over both directions' hinges), so this method's L_c already has the
    scale of L_s: ``contrastive_reduction`` defaults to ``mean`` here; ``sum`` multiplies it by the batch
    size, the scale of the paper's Eq. 1 read as a sum over the batch."""

    margin: float = 0.1  # HowTo100M's margin
    contrastive_reduction: Literal["sum", "mean"] = "mean"

    def check(self, where: str) -> None:
        super().check(where)
        default = PairLossFields()
        changed = [k for k in ("loss", "temperature", "learn_temperature", "siglip_scale", "siglip_bias",
                               "warmup_epochs")
                   if getattr(self, k) != getattr(default, k)]
        require(not changed, where, f"{', '.join(changed)} choose SwAMP's pair loss, but swamp_mmr's contrastive "
                "term is HowTo100M's ranking loss (margin only); use method swamp for the other losses")


@METHODS.register("swamp_mmr")
class SwAMPMMR(SwAMP):
    """SwAMP's swapped-assignment loss plus ``contrastive_weight`` × HowTo100M's ranking loss."""

    Params = SwAMPMMRParams

    def contrastive_term(self, emb_a: torch.Tensor, emb_b: torch.Tensor,
                         distributed: bool) -> tuple[torch.Tensor, dict[str, Any]]:
        """The ranking loss on this process's rows: a mean, so DDP's gradient average needs no rescaling;
        ``contrastive_reduction: sum`` multiplies it by the global batch size (the logs keep the mean)."""
        l_c = max_margin_ranking_loss(emb_a @ emb_b.T, self.params.margin)
        logs = {"contrastive": l_c.detach()}
        if self.params.contrastive_reduction == "sum":
            return global_batch_sum(l_c * len(emb_a)), logs
        return l_c, logs
