"""SwAMP-PAR: SwAMP's swapped-assignment loss plus the contrastive hinge on PAR vectors (SwAMP paper,
image–text experiments: λ = 1.0, τ = 0.025, K = 1,000, queue 1,280)."""
from __future__ import annotations

from dataclasses import dataclass

from baselines.contrastive_par import PARFields, PARPooled
from baselines.swamp import SwAMP, SwAMPParams
from harness.api import METHODS


@dataclass(frozen=True)
class SwAMPPARParams(SwAMPParams, PARFields):
    def check(self, where: str) -> None:
        super().check(where)
        self.check_par(where)


@METHODS.register("swamp_par")
class SwAMPPAR(PARPooled, SwAMP):
    """SwAMP (prototypes and queue over p·D-wide PAR vectors) with the hinge as L_contrastive."""

    Params = SwAMPPARParams
