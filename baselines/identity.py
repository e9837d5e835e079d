"""A reference without training: each modality's features as they come (flattened), L2-normalised, scored
by cosine through the same evaluation as every method. With features that already share one space (both
modalities embedded by a pretrained aligned model), it is the row any trained method has to beat to show
that training helps. Refused when the two modalities' widths differ: their features then live in no common
space and their cosine is undefined. The task's encoders are not used.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from torch import nn

from harness.api import METHODS, FeatureCosine, NotApplicable, Split


@dataclass(frozen=True)
class IdentityParams:
    def check(self, where: str) -> None:
        pass


@METHODS.register("identity")
class Identity(FeatureCosine):
    """The raw features of both modalities, unit-normalised, compared by cosine (nothing to fit)."""

    Params = IdentityParams
    trains_by_gradient = False

    def __init__(self, encoders: dict[str, nn.Module], params: IdentityParams, width: int = 0):
        super().__init__(params)  # the raw features are compared; the task's encoders are not used
        self.width = width

    @classmethod
    def build(cls, encoders: dict[str, nn.Module], params: IdentityParams, data: Any) -> "Identity":
        """The method for ``data``; NotApplicable (a ConfigError) when an item of a and an item of b have different
        widths."""
        shapes = data.input_shapes()
        widths = {m: math.prod(shape) for m, shape in shapes.items()}
        if widths["a"] != widths["b"]:
            raise NotApplicable(
                f"method identity scores the features as they come by cosine, so both modalities need the same "
                f"width, but an a item has {widths['a']} values (shape {tuple(shapes['a'])}) and a b item "
                f"{widths['b']} (shape {tuple(shapes['b'])}); use identity only for features embedded in one "
                "space (a pretrained aligned model), and cca or a trained method otherwise")
        return cls(encoders, params, widths["a"])

    @property
    def embed_dim(self) -> int:
        """Width of the features (flattened), shared by both modalities."""
        return self.width

    def fit_closed_form(self, split: Split) -> None:
        """Nothing to fit: the features are used as they come."""
