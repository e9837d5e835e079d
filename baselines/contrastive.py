"""VSE++ contrastive baseline: hinge loss with the hardest negative (max violation)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from harness.distributed import global_batch_sum
from harness.method import Method
from harness.params import require
from harness.registry import METHODS


def hinge_max_violation(emb_a: torch.Tensor, emb_b: torch.Tensor, margin: float) -> torch.Tensor:
    """VSE++ loss (Faghri et al. 2018, Eq. 5) summed over the batch.

    For each pair i: [margin - s(i,i) + max_{j≠i} s(i,j)]_+ + [margin - s(i,i) + max_{j≠i} s(j,i)]_+,
    with s the cosine similarity of unit-norm rows of ``emb_a`` and ``emb_b`` (both (B, D)).
    """
    return max_violation_loss(emb_a @ emb_b.T, margin)


def max_violation_loss(sims: torch.Tensor, margin: float) -> torch.Tensor:
    """The VSE++ hinge of :func:`hinge_max_violation` on a (B, B) score matrix whose diagonal holds the
    positive pairs; any similarity works (SCAN trains its cross-attention scores with it)."""
    pos = sims.diagonal()
    eye = torch.eye(len(sims), dtype=torch.bool, device=sims.device)
    cost_b = (margin + sims - pos[:, None]).clamp_min(0).masked_fill(eye, 0)  # a query, b negatives
    cost_a = (margin + sims - pos[None, :]).clamp_min(0).masked_fill(eye, 0)  # b query, a negatives
    return cost_b.amax(1).sum() + cost_a.amax(0).sum()


@dataclass(frozen=True)
class ContrastiveParams:
    margin: float = 0.2

    def check(self, where: str) -> None:
        require(self.margin >= 0, where, f"margin must be >= 0, got {self.margin}")


@METHODS.register("contrastive")
class Contrastive(Method):
    """Modality-wise embeddings trained with the VSE++ max-violation hinge (under torchrun each
    process takes its negatives from its own shard of the batch)."""

    Params = ContrastiveParams

    def loss(self, x_a: Any, x_b: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        loss = hinge_max_violation(self.encode("a", x_a), self.encode("b", x_b), self.params.margin)
        return global_batch_sum(loss), {"loss": loss.detach()}
