"""A linear head on fixed features (a pretrained backbone's pooled output): ``init: identity`` starts it as the identity
(weight I, bias 0), so that training starts from the features' own cosine, the task's no-training floor, and moves
away only where the loss says so; ``init: default`` starts it as torch's default (Kaiming-uniform) initialisation,
at any width ``dim``.

The identity needs the output as wide as the input: ``dim: 0`` (the default) means the input's width, and an
identity head of another width is refused before anything trains. ``init`` is searched by ``harness tune``
(identity or default); ``dim`` is searched only where a task's ``tune: space:`` names it (both sides draw it apart,
and the two embeddings must be equally wide, so a task searches it on one side only when the other side's width
follows, or not at all).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from harness.api import ENCODERS, ConfigError, bounded, choose, require

INITS = ("identity", "default")


@dataclass(frozen=True)
class FeatureHeadParams:
    init: Literal["identity", "default"] = bounded("identity", tune=choose(*INITS))
    dim: int = bounded(0, ge=0)  # 0: the input's width (required by init: identity)
    bias: bool = True

    def check(self, where: str) -> None:
        require(self.init in INITS, f"{where}.init", f"must be one of {', '.join(INITS)}, got {self.init!r}")


class Head(nn.Module):
    """Flatten, then one linear layer ``in_features -> dim``, started as the identity or as torch's default."""

    def __init__(self, in_features: int, dim: int, init: str, bias: bool = True):
        super().__init__()
        width = dim or in_features
        if init == "identity" and width != in_features:
            raise ConfigError(f"a head with init: identity maps the input to itself, so its width must be the input's "
                              f"({in_features}), got dim {dim}; set dim: 0 (the input's width) or init: default")
        self.proj = nn.Linear(in_features, width, bias=bias)
        self.out_dim = width
        if init == "identity":
            with torch.no_grad():
                self.proj.weight.copy_(torch.eye(width))
                if bias:
                    self.proj.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, *in) -> (B, dim)
        out: torch.Tensor = self.proj(x.flatten(1))
        return out


@ENCODERS.register("feature_head")
class FeatureHead:
    Params = FeatureHeadParams

    @staticmethod
    def build(input_shape: tuple[int, ...], p: FeatureHeadParams) -> nn.Module:
        return Head(math.prod(input_shape), p.dim, p.init, p.bias)
