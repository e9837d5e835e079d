"""Region projection for SCAN's precomputed features: Linear(features → D), then L2 per region."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from harness.api import ENCODERS, ConfigError, require


@dataclass(frozen=True)
class RegionParams:
    dim: int = 1024
    normalize: bool = True

    def check(self, where: str) -> None:
        require(self.dim > 0, where, f"dim must be > 0, got {self.dim}")


class RegionProjection(nn.Module):
    """(B, R, F) region features → (B, R, D), each region L2-normalised (SCAN's EncoderImagePrecomp)."""

    def __init__(self, in_features: int, dim: int, normalize: bool = True):
        super().__init__()
        self.fc = nn.Linear(in_features, dim)
        bound = math.sqrt(6.0) / math.sqrt(in_features + dim)  # Xavier uniform, as SCAN initialises it
        nn.init.uniform_(self.fc.weight, -bound, bound)
        nn.init.zeros_(self.fc.bias)
        self.out_dim, self.normalize = dim, normalize

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, R, F) -> (B, R, D)
        out = self.fc(x)
        return F.normalize(out, dim=-1) if self.normalize else out


@ENCODERS.register("region_projection")
class RegionEncoder:
    Params = RegionParams

    @staticmethod
    def build(input_shape: tuple[int, ...], p: RegionParams) -> nn.Module:
        if len(input_shape) != 2:
            raise ConfigError(f"region_projection expects items of shape (regions, features), got {input_shape}; "
                              "use an encoder for this data's items, such as mlp for feature vectors")
        return RegionProjection(input_shape[-1], p.dim, p.normalize)
