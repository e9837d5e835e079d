"""Fully connected encoder (the synthetic benchmark's two hidden layers of 50 units)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from harness.api import ENCODERS, bounded, layer_sizes, require


@dataclass(frozen=True)
class MLPParams:
    hidden: tuple[int, ...] = bounded((50, 50), tune=layer_sizes(width=(32, 1024), depth=(1, 3)))
    dim: int | Literal["auto"] = 5  # auto: the narrower input's width (harness.run.build.auto_width)

    def check(self, where: str) -> None:
        require((self.dim == "auto" or self.dim > 0) and all(h > 0 for h in self.hidden), where,
                "dim (or auto) and hidden sizes must be positive")


class MLP(nn.Module):
    """Flatten, then Linear+ReLU for each hidden size, then a linear projection to ``dim``."""

    def __init__(self, in_features: int, hidden: tuple[int, ...], dim: int):
        super().__init__()
        sizes = [in_features, *hidden]
        layers: list[nn.Module] = [nn.Flatten()]
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
        layers.append(nn.Linear(sizes[-1], dim))
        self.net = nn.Sequential(*layers)
        self.out_dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, *in) -> (B, dim)
        out: torch.Tensor = self.net(x)
        return out


@ENCODERS.register("mlp")
class MLPEncoder:
    Params = MLPParams

    @staticmethod
    def build(input_shape: tuple[int, ...], p: MLPParams) -> nn.Module:
        if p.dim == "auto":
            raise ValueError("dim: auto is resolved from the data before the encoder is built")
        return MLP(math.prod(input_shape), p.hidden, p.dim)
