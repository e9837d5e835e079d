"""Entropic optimal transport (Sinkhorn–Knopp) in the log domain.

SwAMP (paper Eq. 3–4) solves min_Q <Q, C> - (1/eta) H(Q) with C = -log p(y|x),
item marginals 1/N and class marginals 1/K. The solution is
Q = diag(u) exp(eta * logits) diag(v); we keep log u and log v (dual potentials f, g)
so that nothing overflows or underflows for logits in the hundreds.
"""
from __future__ import annotations

import math

import torch

# exp() of anything below this is < 2e-35 relative to the row/column maximum it is
# added to; clamping there keeps float32 out of the (very slow) denormal range.
_EXP_FLOOR = -80.0


def _logsumexp_(t: torch.Tensor, dim: int) -> torch.Tensor:
    """log Σ exp(t) along ``dim`` (keepdim), destroying ``t``; stable and denormal-free."""
    m = t.amax(dim, keepdim=True)
    return m + t.sub_(m).clamp_min_(_EXP_FLOOR).exp_().sum(dim, keepdim=True).log_()


@torch.no_grad()
def log_softmax_nograd(logits: torch.Tensor) -> torch.Tensor:
    """Row-wise log-softmax without gradient, denormal-free (same values as F.log_softmax up to 1e-35)."""
    return logits - _logsumexp_(logits.clone(), 1)


@torch.no_grad()
def sinkhorn(logits: torch.Tensor, eta: float, n_iters: int = 3) -> torch.Tensor:
    """Soft class assignments q (N, K) from Sinkhorn–Knopp on Q ∝ exp(eta * logits).

    Each iteration rescales the class marginals to 1/K, then the item marginals to 1/N
    (SwAV's order); the result is q = N * Q, whose rows sum to 1. ``logits`` is usually
    log p(y|x) (N, K). No gradient flows; dtype and device follow ``logits``.
    """
    if logits.ndim != 2:
        raise ValueError(f"sinkhorn expects (N, K) logits, got shape {tuple(logits.shape)}")
    if n_iters < 1:
        raise ValueError(f"n_iters must be >= 1, got {n_iters}")
    m = logits.detach() * eta  # (N, K) = log of the kernel exp(-eta * C)
    n, k = m.shape
    f = m.new_zeros(n, 1)  # log u
    g = m.new_zeros(1, k)  # log v
    for _ in range(n_iters):
        g = -(_logsumexp_(m + f, 0) + math.log(k))  # columns sum to 1/K
        f = -(_logsumexp_(m + g, 1) + math.log(n))  # rows sum to 1/N
    return (m + f + g + math.log(n)).clamp_min_(_EXP_FLOOR).exp_()
