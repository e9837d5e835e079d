"""Canonical correlation analysis (Hotelling 1936) as a reference without gradient training: linear
projections of the raw features of both modalities, fitted in closed form on the training split,
then retrieval by the cosine of the projected (centred) features, through the same evaluation as
every method. The task's encoders are not used: CCA works on the features as they come (flattened).

Closed form: with centred X (n, d_a), Y (n, d_b), C_aa = XᵀX/(n−1) + r_a·I, C_bb likewise and
C_ab = XᵀY/(n−1), the SVD U S Vᵀ of C_aa^{-1/2} C_ab C_bb^{-1/2} gives the projections
W_a = C_aa^{-1/2} U_k and W_b = C_bb^{-1/2} V_k and the canonical correlations S_k. The ridge
r = ``reg`` · (mean variance of the view) keeps singular covariances (topic proportions sum to 1)
invertible; eigenvalues below 1e-10 of the largest are dropped (a pseudo-inverse) when ``reg`` is 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from harness.api import METHODS, Method, Split, require, take

FITTED = ("mean_a", "mean_b", "proj_a", "proj_b", "correlations")


@dataclass(frozen=True)
class CCAParams:
    dim: int = 10
    reg: float = 1e-3

    def check(self, where: str) -> None:
        require(self.dim >= 1, where, f"dim must be >= 1, got {self.dim}")
        require(self.reg >= 0, where, f"reg must be >= 0, got {self.reg}")


def inverse_sqrt(cov: torch.Tensor, rel_eps: float = 1e-10) -> torch.Tensor:
    """C^{-1/2} (d, d) of a symmetric positive semi-definite matrix; eigenvalues below ``rel_eps`` times
    the largest are treated as zero (pseudo-inverse)."""
    vals, vecs = torch.linalg.eigh(cov)
    keep = vals > rel_eps * vals.max().clamp_min(torch.finfo(vals.dtype).tiny)
    inv = torch.where(keep, vals.clamp_min(torch.finfo(vals.dtype).tiny).rsqrt(), torch.zeros_like(vals))
    return (vecs * inv) @ vecs.T


def _ridged_cov(xc: torch.Tensor, reg: float) -> torch.Tensor:
    cov = xc.T @ xc / max(1, len(xc) - 1)  # (d, d)
    return cov + reg * cov.diagonal().mean() * torch.eye(len(cov), dtype=cov.dtype, device=cov.device)


def cca_fit(x: torch.Tensor, y: torch.Tensor, dim: int, reg: float = 0.0
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(mean_x (d_x,), mean_y (d_y,), W_x (d_x, k), W_y (d_y, k), correlations (k,)) of paired rows
    x (n, d_x), y (n, d_y), k = min(dim, d_x, d_y); computed in float64."""
    x, y = x.double(), y.double()
    mean_x, mean_y = x.mean(0), y.mean(0)
    xc, yc = x - mean_x, y - mean_y
    wx, wy = inverse_sqrt(_ridged_cov(xc, reg)), inverse_sqrt(_ridged_cov(yc, reg))
    cross = xc.T @ yc / max(1, len(x) - 1)  # (d_x, d_y)
    u, s, vh = torch.linalg.svd(wx @ cross @ wy)
    k = min(dim, len(s))
    return mean_x, mean_y, wx @ u[:, :k], wy @ vh[:k].T, s[:k]


@METHODS.register("cca")
class CCA(Method):
    """CCA projections of both modalities' raw features (no encoders, no gradient steps)."""

    Params = CCAParams
    trains_by_gradient = False

    def __init__(self, encoders: dict[str, nn.Module], params: CCAParams):
        super().__init__({}, params)  # the raw features are projected; the task's encoders are not used
        for name in FITTED:
            self.register_buffer(name, torch.zeros(0, dtype=torch.float64))

    @property
    def embed_dim(self) -> int:
        """Width of the canonical variates: ``dim`` (fewer when the features have fewer dimensions)."""
        return self.params.dim

    def fit_closed_form(self, split: Split) -> None:
        """Fit on every training pair (a item ``b_to_a[j]`` with b item ``j``)."""
        x = take(split.a, split.b_to_a).flatten(1)  # (n, d_a)
        y = take(split.b, torch.arange(split.n_pairs)).flatten(1)  # (n, d_b)
        device = self.proj_a.device
        fitted = cca_fit(x.to(device), y.to(device), self.params.dim, self.params.reg)
        for name, value in zip(FITTED, fitted):
            setattr(self, name, value)

    def encode(self, modality: str, x: Any) -> torch.Tensor:
        """(B, k) unit-norm canonical variates of a batch of raw features (float32)."""
        if self.proj_a.numel() == 0:
            raise RuntimeError("CCA is not fitted: call fit_closed_form on the training split first")
        mean, proj = (self.mean_a, self.proj_a) if modality == "a" else (self.mean_b, self.proj_b)
        return F.normalize((x.flatten(1).double() - mean) @ proj, dim=-1).float()

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        for name in FITTED:  # fitted buffers take the checkpoint's shapes (an unfitted CCA holds empty ones)
            if prefix + name in state_dict:
                setattr(self, name, torch.empty_like(state_dict[prefix + name], device=getattr(self, name).device))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
