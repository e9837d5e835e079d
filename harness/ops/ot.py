"""Entropic optimal transport (Sinkhorn–Knopp) in the log domain.

SwAMP (paper Eq. 3–4) solves min_Q <Q, C> - (1/eta) H(Q) with C = -log p(y|x),
item marginals 1/N and class marginals 1/K. The solution is
Q = diag(u) exp(eta * logits) diag(v); we keep log u and log v (dual potentials f, g)
so that nothing overflows or underflows for logits in the hundreds.

With ``distributed=True`` the N rows are spread over the processes of the default
torch.distributed group: row steps stay local, the column step sums over every process's
rows (two all_reduce calls of a (1, K) tensor per iteration).
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist

# exp() of anything below this is < 2e-35 relative to the row/column maximum it is
# added to; clamping there keeps float32 out of the (very slow) denormal range.
_EXP_FLOOR = -80.0


def _logsumexp_(t: torch.Tensor, dim: int) -> torch.Tensor:
    """log Σ exp(t) along ``dim`` (keepdim), destroying ``t``; stable and denormal-free."""
    m = t.amax(dim, keepdim=True)
    return m + t.sub_(m).clamp_min_(_EXP_FLOOR).exp_().sum(dim, keepdim=True).log_()


def _logsumexp_global_columns_(t: torch.Tensor) -> torch.Tensor:
    """Column-wise log Σ exp over the rows of every process (1, K), destroying ``t`` (n_r, K).

    The same arithmetic as ``_logsumexp_(t, 0)`` on the concatenated rows: the shift and the
    clamp use the global column maximum. A process may hold no rows.
    """
    m = t.amax(0, keepdim=True) if len(t) else t.new_full((1, t.shape[1]), -math.inf)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    s = t.sub_(m).clamp_min_(_EXP_FLOOR).exp_().sum(0, keepdim=True)
    dist.all_reduce(s, op=dist.ReduceOp.SUM)
    return m + s.log_()


def _global_rows(n: int, like: torch.Tensor) -> int:
    """Total row count over all processes."""
    total = torch.tensor([n], dtype=torch.long, device=like.device)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return int(total)


def working_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for 16-bit inputs (their 8- or 11-bit mantissa turns eta * log p in the thousands into
    garbage), the input's own dtype otherwise."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


@torch.no_grad()
def log_softmax_nograd(logits: torch.Tensor) -> torch.Tensor:
    """Row-wise log-softmax without gradient, denormal-free (same values as F.log_softmax up to 1e-35);
    computed in :func:`working_dtype`, returned in the input's dtype."""
    x = logits.to(working_dtype(logits.dtype))
    return (x - _logsumexp_(x.clone(), 1)).to(logits.dtype)


@torch.no_grad()
def sinkhorn(logits: torch.Tensor, eta: float, n_iters: int = 3, *, distributed: bool = False) -> torch.Tensor:
    """Soft class assignments q (N, K) from Sinkhorn–Knopp on Q ∝ exp(eta * logits).

    Each iteration rescales the class marginals to 1/K, then the item marginals to 1/N
    (SwAV's order); the result is q = N * Q, whose rows sum to 1. ``logits`` is usually
    log p(y|x) (N, K). No gradient flows; dtype and device follow ``logits`` (16-bit inputs are solved
    in float32 and the result rounded back).

    ``distributed=True``: ``logits`` holds this process's rows of a problem whose N rows are
    spread over every process of the initialised default group (all must call it, a process
    may hold no rows); the result is this process's rows of the single-process solution on
    the rows concatenated, up to float summation order.
    """
    if logits.ndim != 2:
        raise ValueError(f"sinkhorn expects (N, K) logits, got shape {tuple(logits.shape)}")
    if n_iters < 1:
        raise ValueError(f"n_iters must be >= 1, got {n_iters}")
    if distributed and not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("sinkhorn(distributed=True) needs an initialised torch.distributed process group; "
                           "pass distributed=False in a single process")
    m = logits.detach().to(working_dtype(logits.dtype)) * eta  # (n, K) log kernel; n = N unless distributed
    n, k = m.shape
    n_total = _global_rows(n, m) if distributed else n
    column_lse_ = _logsumexp_global_columns_ if distributed else lambda t: _logsumexp_(t, 0)
    f = m.new_zeros(n, 1)  # log u
    g = m.new_zeros(1, k)  # log v
    for i in range(n_iters):
        g = -(column_lse_(m + f) + math.log(k))  # columns sum to 1/K
        if i + 1 < n_iters:
            f = -(_logsumexp_(m + g, 1) + math.log(n_total))  # rows sum to 1/N
    return _softmax_rows_(m + g).to(logits.dtype)  # the last row step: q = N * Q, rows sum to 1


def _softmax_rows_(t: torch.Tensor) -> torch.Tensor:
    """Row-wise softmax of ``t`` (n, K), in place: rows sum to 1 up to one rounding, however large the
    entries (exp(t + f) with f = -logsumexp would lose that once |t| reaches the thousands)."""
    t = t.sub_(t.amax(1, keepdim=True)).clamp_min_(_EXP_FLOOR).exp_()
    return t.div_(t.sum(1, keepdim=True))
