"""Entropic optimal transport (Sinkhorn–Knopp) in the log domain.

SwAMP (paper Eq. 3–4) solves min_Q <Q, C> - (1/eta) H(Q) with C = -log p(y|x),
item marginals 1/N and class marginals 1/K. The solution is
Q = diag(u) exp(eta * logits) diag(v); we keep log u and log v (dual potentials f, g)
so that nothing overflows or underflows for logits in the hundreds.

Three implementations: the eager functions here (the reference, and the distributed solver), one compiled with
``torch.compile`` (inductor; any device) and a native C kernel for float32 on x86-64 CPUs
(:mod:`harness.ops.native`); :func:`fused_sinkhorn` picks between them.

With ``distributed=True`` the N rows are spread over the processes of the default
torch.distributed group: row steps stay local, the column step sums over every process's
rows (two all_reduce calls of a (1, K) tensor per iteration).
"""
from __future__ import annotations

import math
import os
import time
import warnings
from collections import Counter
from typing import Any

import torch
import torch.distributed as dist

from harness.errors import ConfigError
from harness.ops import native

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
    _PATHS["eager"] += 1
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


# Sinkhorn solves by implementation since reset_paths(): a result file records which path its run took
_PATHS: Counter[str] = Counter()


def reset_paths() -> None:
    """Start counting the Sinkhorn solves of a run afresh (:func:`path_counts`)."""
    _PATHS.clear()


def path_counts() -> dict[str, int]:
    """Sinkhorn problems solved since :func:`reset_paths`, by implementation: native, compiled, eager."""
    return {k: v for k, v in _PATHS.items() if v}


# ---------------------------------------------------------------- the fused (compiled) Sinkhorn

COMPILE_MODES = ("auto", "native", "on", "off")
COMPILE_ENV = "SWAMP_BENCH_SINKHORN_COMPILE"  # "off" turns compilation off wherever ``compile="auto"`` is asked


def _lse_plain(t: torch.Tensor, dim: int) -> torch.Tensor:
    """log Σ exp(t) along ``dim`` (keepdim), out of place, with the same -80 clamp as :func:`_logsumexp_`."""
    m = t.amax(dim, keepdim=True)
    return m + (t - m).clamp_min(_EXP_FLOOR).exp().sum(dim, keepdim=True).log()


def _sinkhorn_plain(x: torch.Tensor, eta: torch.Tensor, log_n: torch.Tensor, log_k: torch.Tensor, n_iters: int,
                    from_logits: bool) -> torch.Tensor:
    """:func:`sinkhorn` (or, ``from_logits``, ``sinkhorn(log_softmax_nograd(x))``) as plain out-of-place tensor
    code for ``torch.compile``: no in-place updates, ``eta``, ``log n`` and ``log K`` as 0-d tensors (one compiled
    function serves every eta and size), every exponent clamped at -80 as in the eager loop (no denormals).

    ``from_logits`` folds the log-softmax into the same kernel: log p = x - lse(x) is formed elementwise
    inside the fused passes and never written. (Starting from eta * logits with the row potential
    f = -eta * lse(logits) is the same iteration in exact arithmetic, but its different rounding of eta * x
    flips the argmax of rows whose two best classes tie to float precision; forming log p as the eager path
    does keeps hard assignments identical.)
    """
    wd = working_dtype(x.dtype)
    z = x.to(wd)
    if from_logits:  # log p exactly as log_softmax_nograd rounds it; inductor fuses it into the first passes
        z = (z - _lse_plain(z, 1)).to(x.dtype).to(wd)
    m = z * eta
    f = torch.zeros_like(m[:, :1])
    g = torch.zeros_like(m[:1])
    for i in range(n_iters):
        g = -(_lse_plain(m + f, 0) + log_k)
        if i + 1 < n_iters:
            f = -(_lse_plain(m + g, 1) + log_n)
    t = m + g
    t = (t - t.amax(1, keepdim=True)).clamp_min(_EXP_FLOOR).exp()
    return (t / t.sum(1, keepdim=True)).to(x.dtype)


class _Compiled:
    """One ``torch.compile`` of :func:`_sinkhorn_plain` per process, with the row count dynamic (a SwAMP run's
    queue fills over its first steps and an epoch may end on a smaller batch: one compilation serves them);
    K, dtype, iterations and ``from_logits`` compile apart (a run has one of each).
    ``seconds`` records each first call of a new (dtype, iterations, from_logits) signature: compilation
    plus one run, reported apart from the step times."""

    def __init__(self) -> None:
        self.fn: Any = None
        self.failed: str | None = None
        self.seconds: dict[str, float] = {}
        self.calls = 0
        self.scalars: dict[tuple[float, torch.dtype, str], torch.Tensor] = {}

    def scalar(self, value: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A 0-d tensor of ``value`` on ``device``, made once: a new one per call would copy from the host
        each step, a synchronising copy on a GPU."""
        key = (value, dtype, str(device))
        if key not in self.scalars:
            if len(self.scalars) > 256:  # a run has a handful of values; anything else is a long-lived process
                self.scalars.clear()
            self.scalars[key] = torch.tensor(value, dtype=dtype, device=device)
        return self.scalars[key]

    def __call__(self, x: torch.Tensor, eta: float, n_iters: int, from_logits: bool) -> torch.Tensor:
        if self.fn is None:  # emulate_precision_casts: keep the rounding of 16-bit log p that inductor would elide
            self.fn = torch.compile(_sinkhorn_plain, fullgraph=True, options={"emulate_precision_casts": True})
        wd = working_dtype(x.dtype)
        eta_t = self.scalar(eta, wd, x.device)
        log_n = self.scalar(math.log(x.shape[0]), wd, x.device)
        log_k = self.scalar(math.log(x.shape[1]), wd, x.device)
        if x.shape[0] > 1:  # one kernel for every N (a dynamic K ran 2.6x slower: K stays static)
            torch._dynamo.mark_dynamic(x, 0)
        key = (f"{x.device.type}/{x.dtype}/K={x.shape[1]}/iters={n_iters}/from_logits={from_logits}/"
               f"threads={torch.get_num_threads()}")
        if key in self.seconds:
            compiled: torch.Tensor = self.fn(x, eta_t, log_n, log_k, n_iters, from_logits)
            return compiled
        start = time.perf_counter()
        with torch._dynamo.config.patch(recompile_limit=max(64, torch._dynamo.config.recompile_limit)):
            out: torch.Tensor = self.fn(x, eta_t, log_n, log_k, n_iters, from_logits)
        self.seconds[key] = time.perf_counter() - start
        return out


_COMPILED = _Compiled()


def compile_seconds() -> dict[str, float]:
    """Seconds of each first call of the compiled Sinkhorn in this process (compilation, or a load from
    inductor's on-disk cache, plus one run), by signature, and of the native kernel's build or cache lookup
    (``native``); empty while neither was used."""
    seconds = dict(_COMPILED.seconds)
    native_seconds = native.build_seconds()
    if native_seconds is not None:
        seconds["native"] = native_seconds
    return seconds


def resolve_compile(mode: str) -> str:
    """``auto`` becomes ``off`` where the environment says so (``SWAMP_BENCH_SINKHORN_COMPILE=off``)."""
    if mode not in COMPILE_MODES:
        raise ValueError(f"sinkhorn compile mode must be one of {', '.join(COMPILE_MODES)}, got {mode!r}")
    env = os.environ.get(COMPILE_ENV, "").strip().lower()
    if env and env not in ("auto", "off"):
        raise ConfigError(f"{COMPILE_ENV}={env!r}: use off (eager Sinkhorn everywhere) or auto, or unset it")
    return "off" if mode == "auto" and env == "off" else mode


def _native_ready(mode: str, xs: list[torch.Tensor]) -> bool:
    """Whether ``mode`` sends these logits to the native kernel; ``native`` raises where it cannot."""
    if mode not in ("auto", "native"):
        return False
    ok = all(native.accepts(x) and len(x) > 0 for x in xs) and len({x.shape[1] for x in xs}) == 1
    if mode == "native":
        reason = native.unavailable()
        if reason is not None or not ok:
            raise RuntimeError(f"native Sinkhorn unavailable: {reason or 'it takes float32 (n, K) CPU logits'}")
        return True
    return ok and native.unavailable() is None


def _check_args(logits: torch.Tensor, n_iters: int) -> None:
    if logits.ndim != 2:
        raise ValueError(f"sinkhorn expects (N, K) logits, got shape {tuple(logits.shape)}")
    if n_iters < 1:
        raise ValueError(f"n_iters must be >= 1, got {n_iters}")


@torch.no_grad()
def fused_sinkhorn(logits: torch.Tensor, eta: float, n_iters: int = 3, *, from_logits: bool = False,
                   compile: str = "auto", rows: int | None = None) -> torch.Tensor:
    """:func:`sinkhorn` of ``logits`` (``from_logits``: of ``log_softmax_nograd(logits)``) through one fused kernel;
    the eager functions are the fallback and the reference (equal within 1e-4 in float32; argmax identical but
    in rows whose two best targets tie to within a few float roundings). ``rows``: return only the first
    ``rows`` rows (SwAMP needs the batch's, not the queue's; the native kernel then never forms the others).

    ``compile``: ``auto`` uses the native C kernel (:mod:`harness.ops.native`) for float32 CPU logits where it
    builds, else the ``torch.compile``d kernel where inductor works, falling back to eager with one warning when
    compilation fails (eager everywhere under ``SWAMP_BENCH_SINKHORN_COMPILE=off``); ``native`` the C kernel
    (raises where it is unavailable); ``on`` the compiled kernel (raises on failure); ``off`` the eager
    functions. Logits that are not all finite go to the eager functions. Single process only (the distributed
    Sinkhorn stays eager: its column step all-reduces between the passes).
    """
    return fused_sinkhorn_pair([logits], eta, n_iters, from_logits=from_logits, compile=compile, rows=rows)[0]


@torch.no_grad()
def fused_sinkhorn_pair(logits: list[torch.Tensor], eta: float, n_iters: int = 3, *, from_logits: bool = False,
                        compile: str = "auto", rows: int | None = None) -> list[torch.Tensor]:
    """:func:`fused_sinkhorn` of each tensor of ``logits`` (one or two independent problems, e.g. SwAMP's two
    modalities); the native kernel solves two on two threads when torch has two or more."""
    mode = resolve_compile(compile)
    for x in logits:
        _check_args(x, n_iters)
    def cut(q: torch.Tensor) -> torch.Tensor:
        return q if rows is None else q[:rows]

    if _native_ready(mode, logits):
        qs = native.solve(list(logits), float(eta), n_iters, from_logits=from_logits, rows=rows)
        if qs is not None:
            _PATHS["native"] += len(qs)
            return qs
        if mode == "native":  # a non-finite logit: the eager reference says what that gives
            mode = "off"
    return [cut(_fused_one(x, eta, n_iters, from_logits, mode)) for x in logits]


def _fused_one(logits: torch.Tensor, eta: float, n_iters: int, from_logits: bool, mode: str) -> torch.Tensor:
    """The compiled kernel (``auto``, ``on``) with the eager fallback, or the eager functions (``off``)."""
    if mode != "off" and len(logits) > 0 and (mode == "on" or _COMPILED.failed is None):
        try:
            solved = _COMPILED(logits.detach(), float(eta), n_iters, from_logits)
            _PATHS["compiled"] += 1
            return solved
        except Exception as exc:  # any compiler failure falls back to the reference
            if mode == "on":
                raise
            _COMPILED.failed = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            warnings.warn(f"compiled Sinkhorn unavailable ({_COMPILED.failed}); using the eager Sinkhorn "
                          f"(set {COMPILE_ENV}=off or sinkhorn_compile: off to skip the attempt)", stacklevel=3)
    return sinkhorn(log_softmax_nograd(logits) if from_logits else logits, eta, n_iters)
