"""Canonical correlation analysis (Hotelling 1936) as a reference without gradient training: linear
projections of the raw features of both modalities, fitted in closed form on the training split,
then retrieval by the cosine of the projected (centred) features, through the same evaluation as
every method. The task's encoders are not used: CCA works on the features as they come (flattened).

Closed form: with centred X (n, d_a), Y (n, d_b), C_aa = XᵀX/(n−1) + r_a·I, C_bb likewise and
C_ab = XᵀY/(n−1), the SVD U S Vᵀ of C_aa^{-1/2} C_ab C_bb^{-1/2} gives the projections
W_a = C_aa^{-1/2} U_k and W_b = C_bb^{-1/2} V_k and the canonical correlations S_k. The ridge
r = ``reg`` · (mean variance of the view) keeps singular covariances (topic proportions sum to 1)
invertible; eigenvalues below 1e-10 of the largest are dropped (a pseudo-inverse) when ``reg`` is 0.

``reg: auto`` chooses each view's ridge from its own training features, by the shrinkage of Ledoit & Wolf
("A well-conditioned estimator for large-dimensional covariance matrices", J. Multivariate Anal. 88, 2004):
with centred rows x_k (n, d), S = XᵀX/n and μ = trace(S)/d, the estimate (1−δ)·S + δ·μ·I takes
δ = min(1, b̄²/d̄²), d̄² = ‖S − μI‖²_F/d, b̄² = Σ_k ‖x_k x_kᵀ − S‖²_F/(n²·d) (what scikit-learn's ``ledoit_wolf``
computes). Since (1−δ)·S + δ·μ·I = (1−δ)·(S + δ/(1−δ)·μ·I), that is the ridge reg = δ/(1−δ) above, up to a
scale CCA ignores; δ = 1 (the covariance is all noise around μ·I) is an infinite ridge, whose limit keeps the
directions of the cross-covariance and regularised correlations of 0. With few pairs and wide features
(700 pairs of 768-d features) a small fixed ridge fits the training pairs exactly, correlations 1.000,
and retrieves badly; the ridges used are kept in the ``ridges`` buffer, and :meth:`CCA.fitted_warnings`
says when the training correlations reach :data:`EXACT_FIT`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from harness.api import METHODS, Method, Split, bounded, require, search, take

FITTED = ("mean_a", "mean_b", "proj_a", "proj_b", "correlations", "ridges", "n_pairs")
ADDED_LATER = ("ridges", "n_pairs")  # absent from checkpoints written before they were kept: they load empty
EXACT_FIT = 0.999  # a first training canonical correlation at least this high: the fit reproduces its pairs


@dataclass(frozen=True)
class CCAParams:
    dim: int = bounded(10, tune=search(1, 128, log=True))  # above a view's width: that width
    # relative to each view's mean variance; auto: Ledoit–Wolf (:func:`view_ridge`)
    reg: float | Literal["auto"] = bounded(1e-3, tune=search(1e-6, 1.0, log=True))

    def check(self, where: str) -> None:
        require(self.dim >= 1, where, f"dim must be >= 1, got {self.dim}")
        require(self.reg == "auto" or self.reg >= 0, where, f"reg must be >= 0 or auto, got {self.reg}")


def inverse_sqrt(cov: torch.Tensor, rel_eps: float = 1e-10) -> torch.Tensor:
    """C^{-1/2} (d, d) of a symmetric positive semi-definite matrix; eigenvalues below ``rel_eps`` times
    the largest are treated as zero (pseudo-inverse)."""
    vals, vecs = torch.linalg.eigh(cov)
    keep = vals > rel_eps * vals.max().clamp_min(torch.finfo(vals.dtype).tiny)
    inv = torch.where(keep, vals.clamp_min(torch.finfo(vals.dtype).tiny).rsqrt(), torch.zeros_like(vals))
    out: torch.Tensor = (vecs * inv) @ vecs.T
    return out


def ledoit_wolf_shrinkage(xc: torch.Tensor) -> float:
    """δ in [0, 1] of Ledoit & Wolf (2004) for centred rows ``xc`` (n, d): the weight of μ·I in the shrunk
    covariance (1−δ)·S + δ·μ·I, S = xcᵀxc/n. Σ_k ‖x_k x_kᵀ − S‖²_F is Σ_k ‖x_k‖⁴ − n·‖S‖²_F, so no (d, d)
    matrix is formed per row. 0 when S is already a multiple of I (nothing to shrink)."""
    n, d = xc.shape
    cov = xc.T @ xc / n  # (d, d)
    mu = cov.diagonal().mean()
    dist = ((cov - mu * torch.eye(d, dtype=cov.dtype, device=cov.device)) ** 2).sum() / d  # d̄²
    spread = ((xc * xc).sum(1).square().sum() - n * cov.square().sum()) / (n * n * d)  # b̄²
    if float(dist) <= 0:
        return 0.0
    return min(1.0, max(0.0, float(spread / dist)))


def view_ridge(xc: torch.Tensor, reg: float | str) -> float:
    """The ridge of one view's covariance relative to its mean variance: ``reg`` itself, or with ``auto``
    δ/(1−δ) of :func:`ledoit_wolf_shrinkage` (inf at δ = 1)."""
    if reg != "auto":
        return float(reg)
    delta = ledoit_wolf_shrinkage(xc)
    return math.inf if delta >= 1 else delta / (1 - delta)


def _ridged_cov(xc: torch.Tensor, reg: float) -> torch.Tensor:
    cov = xc.T @ xc / max(1, len(xc) - 1)  # (d, d)
    return cov + reg * cov.diagonal().mean() * torch.eye(len(cov), dtype=cov.dtype, device=cov.device)


def _whitening(xc: torch.Tensor, reg: float) -> torch.Tensor:
    """C^{-1/2} of the ridged covariance; at an infinite ridge, the identity (the limit's directions; its
    scale, which goes to 0, is applied to the correlations by :func:`cca_fit`)."""
    if math.isinf(reg):
        return torch.eye(xc.shape[1], dtype=xc.dtype, device=xc.device)
    return inverse_sqrt(_ridged_cov(xc, reg))


def cca_fit(x: torch.Tensor, y: torch.Tensor, dim: int, reg: float | str | tuple[float, float] = 0.0
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(mean_x (d_x,), mean_y (d_y,), W_x (d_x, k), W_y (d_y, k), correlations (k,)) of paired rows
    x (n, d_x), y (n, d_y), k = min(dim, d_x, d_y); computed in float64. ``reg``: one ridge for both views,
    ``auto`` (each view's :func:`view_ridge`) or the two views' ridges."""
    x, y = x.double(), y.double()
    mean_x, mean_y = x.mean(0), y.mean(0)
    xc, yc = x - mean_x, y - mean_y
    reg_x, reg_y = reg if isinstance(reg, tuple) else (view_ridge(xc, reg), view_ridge(yc, reg))
    wx, wy = _whitening(xc, reg_x), _whitening(yc, reg_y)
    cross = xc.T @ yc / max(1, len(x) - 1)  # (d_x, d_y)
    u, s, vh = torch.linalg.svd(wx @ cross @ wy)
    if math.isinf(reg_x) or math.isinf(reg_y):
        s = torch.zeros_like(s)  # a regularised correlation vanishes as a ridge grows without bound
    k = min(dim, len(s))
    return mean_x, mean_y, wx @ u[:, :k], wy @ vh[:k].T, s[:k]


@METHODS.register("cca")
class CCA(Method):
    """CCA projections of both modalities' raw features (no encoders, no gradient steps)."""

    Params = CCAParams
    trains_by_gradient = False
    params: CCAParams
    # the fitted buffers (FITTED; empty before fit_closed_form)
    mean_a: torch.Tensor
    mean_b: torch.Tensor
    proj_a: torch.Tensor
    proj_b: torch.Tensor
    correlations: torch.Tensor
    ridges: torch.Tensor
    n_pairs: torch.Tensor

    def __init__(self, encoders: dict[str, nn.Module], params: CCAParams):
        super().__init__({}, params)  # the raw features are projected; the task's encoders are not used
        for name in FITTED:
            self.register_buffer(name, torch.zeros(0, dtype=torch.float64))

    @property
    def embed_dim(self) -> int:
        """Width of the canonical variates: ``dim`` (fewer when the features have fewer dimensions)."""
        return self.params.dim

    def fit_closed_form(self, split: Split) -> None:
        """Fit on every training pair (a item ``b_to_a[j]`` with b item ``j``); keeps the two views' ridges
        (relative to their mean variance; inf: covariance replaced by its scaled identity) and the pair count."""
        device = self.proj_a.device
        if split.b_to_a is None:
            raise ValueError("CCA fits on training pairs: the split has no pairing (b_to_a)")
        x = take(split.a, split.b_to_a).flatten(1).to(device).double()  # (n, d_a)
        y = take(split.b, torch.arange(split.n_pairs)).flatten(1).to(device).double()  # (n, d_b)
        ridges = (view_ridge(x - x.mean(0), self.params.reg), view_ridge(y - y.mean(0), self.params.reg))
        fitted = cca_fit(x, y, self.params.dim, ridges)
        extra = (torch.tensor(ridges, dtype=torch.float64, device=device),
                 torch.tensor(len(x), dtype=torch.float64, device=device))
        for name, value in zip(FITTED, (*fitted, *extra)):
            setattr(self, name, value)

    def fitted_warnings(self) -> list[str]:
        """One line when the first training canonical correlation reaches :data:`EXACT_FIT`: the projections
        then reproduce the training pairs, which with fewer pairs than feature dimensions any data allow."""
        if self.correlations.numel() == 0 or float(self.correlations[0]) < EXACT_FIT:
            return []
        shown = ", ".join(f"{c:.3f}" for c in self.correlations[:3].tolist())
        shown += " ..." if len(self.correlations) > 3 else ""
        d_a, d_b = len(self.mean_a), len(self.mean_b)
        n = int(self.n_pairs) if self.n_pairs.numel() else None
        pairs = f"{n} training pairs" if n is not None else "training pairs"
        if n is not None and n <= d_a + d_b:  # the views' centred column spaces in R^(n-1) must intersect
            why = f"as any data allow with {pairs} of {d_a}-d a and {d_b}-d b features (fitting noise)"
        else:
            why = (f"with {pairs} of {d_a}-d a and {d_b}-d b features: fitting noise unless one view is a linear "
                   "function of the other")
        if self.params.reg == "auto":
            ra, rb = self.ridges.tolist() if self.ridges.numel() else (math.nan, math.nan)
            fix = f"set a reg larger than the ridges auto chose ({ra:.3g} for a, {rb:.3g} for b)"
        else:
            fix = f"set reg: auto (a ridge chosen from the data, Ledoit–Wolf) or a reg larger than {self.params.reg}"
        return [f"training canonical correlations {shown}: the projections reproduce the training pairs exactly, "
                f"{why}; {fix}"]

    def encode(self, modality: str, x: Any) -> torch.Tensor:
        """(B, k) unit-norm canonical variates of a batch of raw features (float32)."""
        if self.proj_a.numel() == 0:
            raise RuntimeError("CCA is not fitted: call fit_closed_form on the training split first")
        mean, proj = (self.mean_a, self.proj_a) if modality == "a" else (self.mean_b, self.proj_b)
        return F.normalize((x.flatten(1).double() - mean) @ proj, dim=-1).float()

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, local_metadata: Any, strict: bool,
                              missing_keys: list[str], *args: Any, **kwargs: Any) -> None:
        for name in FITTED:  # fitted buffers take the checkpoint's shapes (an unfitted CCA holds empty ones)
            if prefix + name in state_dict:
                setattr(self, name, torch.empty_like(state_dict[prefix + name], device=getattr(self, name).device))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, *args, **kwargs)
        for name in ADDED_LATER:
            if prefix + name in missing_keys:
                missing_keys.remove(prefix + name)
                setattr(self, name, torch.zeros(0, dtype=torch.float64, device=getattr(self, name).device))
