"""The contrastive loss family as pure functions of a (B, B) score matrix whose diagonal holds the
positive pairs (row i: query a_i against every b_j; column j: query b_j against every a_i).

Every loss is a sum over the batch (of both retrieval directions, or, for SigLIP's sigmoid loss, of every
pair), so that the four are interchangeable behind one ``contrastive_weight`` and scale alike under
multi-process training (:func:`harness.run.distributed.global_batch_sum`). Each has a *collapsed value*:
what it returns when every score is equal, i.e. when the embedding has collapsed to a point (for SigLIP, at
the bias that suits such an embedding best, where its learned bias moves). The harness's collapse monitor
compares the logged loss with it (:mod:`harness.run.collapse`).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

LOSSES = ("max_violation", "sum", "infonce", "siglip")
PLATEAU_SUFFIX = "@collapsed"


def plateau_key(term: str) -> str:
    """Key under which a method logs, beside its loss term ``term``, the value that term takes on a collapsed
    embedding (every item mapped to one point); the collapse detector compares the two."""
    return f"{term}{PLATEAU_SUFFIX}"


def _violations(sims: torch.Tensor, margin: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Hinge costs (B, B) of every negative, diagonal zeroed: [margin + s(i,j) − s(i,i)]_+ for query a_i
    (rows), [margin + s(i,j) − s(j,j)]_+ for query b_j (columns)."""
    pos = sims.diagonal()
    eye = torch.eye(len(sims), dtype=torch.bool, device=sims.device)
    cost_b = (margin + sims - pos[:, None]).clamp_min(0).masked_fill(eye, 0)  # a query, b negatives
    cost_a = (margin + sims - pos[None, :]).clamp_min(0).masked_fill(eye, 0)  # b query, a negatives
    return cost_b, cost_a


def max_violation_loss(sims: torch.Tensor, margin: float) -> torch.Tensor:
    """VSE++ hinge with the hardest negative (Faghri et al. 2018, Eq. 5), summed over the batch:
    Σ_i [m − s(i,i) + max_{j≠i} s(i,j)]_+ + Σ_j [m − s(j,j) + max_{i≠j} s(i,j)]_+.
    Collapsed value 2·B·m. Any similarity works (SCAN trains its cross-attention scores with it)."""
    cost_b, cost_a = _violations(sims, margin)
    return cost_b.amax(1).sum() + cost_a.amax(0).sum()


def sum_violation_loss(sims: torch.Tensor, margin: float) -> torch.Tensor:
    """Hinge summed over every negative (VSE0, Faghri et al. 2018, Eq. 3), summed over the batch:
    Σ_i Σ_{j≠i} [m − s(i,i) + s(i,j)]_+ + Σ_j Σ_{i≠j} [m − s(j,j) + s(i,j)]_+. Collapsed value 2·B·(B−1)·m."""
    cost_b, cost_a = _violations(sims, margin)
    return cost_b.sum() + cost_a.sum()


def infonce_loss(sims: torch.Tensor, temperature: torch.Tensor | float) -> torch.Tensor:
    """Symmetric InfoNCE (CLIP's loss, summed rather than averaged over the batch): cross-entropy of
    softmax(s(i,·)/τ) against i plus that of softmax(s(·,j)/τ) against j. Collapsed value 2·B·log B."""
    logits = sims / temperature  # (B, B)
    target = torch.arange(len(sims), device=sims.device)
    return F.cross_entropy(logits, target, reduction="sum") + F.cross_entropy(logits.T, target, reduction="sum")


def siglip_loss(sims: torch.Tensor, scale: torch.Tensor | float, bias: torch.Tensor | float) -> torch.Tensor:
    """SigLIP's pairwise sigmoid loss (Zhai et al. 2023, Alg. 1), summed over the batch rather than divided by
    it: −Σ_i Σ_j log σ(z_ij·(t·s(i,j) + b)), z_ij = 1 on the diagonal and −1 elsewhere, with the logit scale t
    and the bias b (floats or learned 0-d tensors). Every pair is its own binary problem, so both directions
    are one sum. Collapsed value B·log B + B·(B−1)·log(B/(B−1)) (0 for B = 1): with c = t·s + b for every
    score, the loss B·softplus(−c) + B·(B−1)·softplus(c) is least at σ(c) = 1/B, the bias a learned bias
    moves to on a collapsed embedding; any other bias gives more. Computed in float32 at least (a bfloat16 score
    matrix under autocast is widened first, as autocast does for InfoNCE's cross-entropy)."""
    logits = sims.to(torch.promote_types(sims.dtype, torch.float32)) * scale + bias  # (B, B)
    signs = 2.0 * torch.eye(len(sims), dtype=logits.dtype, device=logits.device) - 1.0  # z: 1 positive, −1 negative
    return -F.logsigmoid(signs * logits).sum()


def collapsed_value(loss: str, batch: int, margin: float) -> float:
    """The value of ``loss`` ('max_violation', 'sum', 'infonce' or 'siglip') on a batch of ``batch`` pairs whose
    scores are all equal (the temperature does not matter: every softmax is uniform; for 'siglip' the least
    value over its bias, which its scale does not change)."""
    if loss == "max_violation":
        return 2.0 * batch * margin if batch > 1 else 0.0
    if loss == "sum":
        return 2.0 * batch * (batch - 1) * margin
    if loss == "infonce":
        return 2.0 * batch * math.log(batch)
    if loss == "siglip":
        return batch * math.log(batch) + batch * (batch - 1) * math.log(batch / (batch - 1)) if batch > 1 else 0.0
    raise ValueError(f"unknown loss {loss!r}; valid: {', '.join(LOSSES)}")
