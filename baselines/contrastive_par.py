"""Contrastive-PAR: the VSE++ max-violation hinge on PAR vectors of region and word sets (SwAMP paper,
image–text experiments). ``PARPooled`` is the mixin that SwAMP-PAR shares."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from baselines.contrastive import Contrastive, ContrastiveParams
from harness.api import METHODS, Method, require, unknown
from harness.encoders.par import HEAD_MODES, PAR, par_width


@dataclass(frozen=True)
class PARFields:
    """PAR settings: p queries, attention temperature T, H heads (Flickr30K: 20, 0.5, 1; MS-COCO: 10, 0.5, 2)
    and how heads combine (``concat``: H poolings side by side, H·p·D wide; ``split``: H groups of D/H)."""

    p: int = 20
    T: float = 0.5
    H: int = 1
    heads: str = "concat"

    def check_par(self, where: str) -> None:
        require(self.p >= 1 and self.H >= 1, where, f"p ({self.p}) and H ({self.H}) must be >= 1")
        require(self.T > 0, where, f"T must be > 0, got {self.T}")
        if self.heads not in HEAD_MODES:
            raise unknown("heads", self.heads, HEAD_MODES, where)


if TYPE_CHECKING:
    _MethodMixin = Method  # the mixin's methods see a Method's attributes
else:
    _MethodMixin = object


class PARPooled(_MethodMixin):
    """Mixin for a Method: both modalities' encoders yield sets, pooled by one shared :class:`PAR`."""

    def __init__(self, encoders: dict[str, nn.Module], params: Any):
        super().__init__(encoders, params)
        self.par = PAR(self.encoder_width, params.p, params.T, params.H, params.heads)

    @property
    def embed_dim(self) -> int:
        """The PAR vector's width: H·p·D (``concat`` heads) or p·D (``split``)."""
        p = self.params
        return par_width(self.encoder_width, p.p, p.H, p.heads)

    def encode(self, modality: str, x: Any) -> torch.Tensor:
        """(B, p·D) unit-norm PAR vectors of a batch of region sets or captions."""
        out: torch.Tensor = self.par(self.encoders[modality](x))
        return out


@dataclass(frozen=True)
class ContrastivePARParams(ContrastiveParams, PARFields):
    def check(self, where: str) -> None:
        super().check(where)
        self.check_par(where)


@METHODS.register("contrastive_par")
class ContrastivePAR(PARPooled, Contrastive):
    """VSE++ hinge (margin 0.2, max violation) on PAR vectors."""

    Params = ContrastivePARParams
