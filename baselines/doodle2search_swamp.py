"""Doodle2Search + SwAMP (SwAMP paper, sketch-photo experiments): Doodle2Search's triplet, domain and
semantic losses plus λ·L_s, SwAMP's swapped-assignment loss on the (sketch, positive photo) pairs,
with the paper's settings λ = 0.1, K = 500, τ = 0.25, η = 5, queue 1000 (QuickDraw: 2000).

SwAMP's prototypes, queue and Sinkhorn targets come from :class:`baselines.swamp.SwappedAssignments`; its
loss sees the unit-normalised embeddings, while retrieval keeps Doodle2Search's Euclidean distance.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from baselines.doodle2search import Doodle2Search, Doodle2SearchParams, Terms
from baselines.swamp import SwAMPFields, SwappedAssignments
from harness.api import METHODS, is_distributed


@dataclass(frozen=True)
class Doodle2SearchSwAMPParams(Doodle2SearchParams, SwAMPFields):
    K: int = 500
    queue: int = 1000
    tau: float = 0.25
    eta: float = 5.0
    lam: float = field(default=0.1, metadata={"key": "lambda"})

    def check(self, where: str) -> None:
        super().check(where)
        self.check_swamp(where)


@METHODS.register("doodle2search_swamp")
class Doodle2SearchSwAMP(Doodle2Search, SwappedAssignments):
    """Doodle2Search with SwAMP's L_s added on (sketch, positive photo) pairs."""

    Params = Doodle2SearchSwAMPParams

    def terms(self, sketch: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, words: torch.Tensor) -> Terms:
        """Doodle2Search's terms plus ('swamp', (λ, L_s))."""
        terms = super().terms(sketch, pos, neg, words)
        l_s = self.swapped_loss(F.normalize(sketch, dim=1), F.normalize(pos, dim=1), is_distributed())
        return {**terms, "swamp": (self.params.lam, l_s)}
