"""A linear map of the features as they come (flattened): the encoder for features that are already good, such as
the embeddings of a pretrained model. With equal input and output widths it starts as the identity, so that
training starts from the features' own cosine (the task's no-training floor) and moves away only where the loss
says so; otherwise it starts as torch's default (Kaiming-uniform) initialisation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from harness.api import ENCODERS, require


@dataclass(frozen=True)
class LinearParams:
    dim: int | Literal["auto"] = "auto"  # auto: the narrower input's width (harness.run.build.auto_width)
    identity_init: bool = True  # start as the identity when the input has ``dim`` values
    bias: bool = True

    def check(self, where: str) -> None:
        require(self.dim == "auto" or self.dim > 0, where, f"dim must be a positive width or auto, got {self.dim}")


class Linear(nn.Module):
    """Flatten, then one linear layer to ``dim``."""

    def __init__(self, in_features: int, dim: int, identity_init: bool, bias: bool):
        super().__init__()
        self.proj = nn.Linear(in_features, dim, bias=bias)
        self.out_dim = dim
        if identity_init and in_features == dim:
            with torch.no_grad():
                self.proj.weight.copy_(torch.eye(dim))
                if bias:
                    self.proj.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, *in) -> (B, dim)
        out: torch.Tensor = self.proj(x.flatten(1))
        return out


@ENCODERS.register("linear")
class LinearEncoder:
    Params = LinearParams

    @staticmethod
    def build(input_shape: tuple[int, ...], p: LinearParams) -> nn.Module:
        if p.dim == "auto":
            raise ValueError("dim: auto is resolved from the data before the encoder is built")
        return Linear(math.prod(input_shape), p.dim, p.identity_init, p.bias)
