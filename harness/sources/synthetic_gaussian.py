"""The paper's synthetic benchmark (SwAMP, Appendix E), fully determined by its seed.

Hidden classes are Gaussians in R^latent_dim; each pair shares one latent z and is
pushed through two fixed random ReLU networks (two hidden layers of 50 units) to
R^100, one per modality. The random nets' outputs vary little between items
(std about 0.07 around means of about 0.1), which lets the max-violation hinge collapse
from a random start; each feature is therefore standardised with training-split
statistics (``standardize: true``). Means and spread are not stated in the paper: they are
parameters here, calibrated so that the contrastive baseline lands near the
paper's pair-based R@1 (see docs/results/synthetic.md, "Calibrating the synthetic task").
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from harness.api import SOURCES, PairedData, Split, bounded, require, standardize


@dataclass(frozen=True)
class SyntheticParams:
    seed: int = bounded(0, ge=0)
    n_classes: int = bounded(20, ge=1)
    latent_dim: int = bounded(5, ge=1)
    pairs_per_class: int = bounded(500, ge=1)
    out_dim: int = bounded(100, ge=1)
    hidden: tuple[int, ...] = bounded((50, 50), ge=1)
    mean_scale: float = 1.0
    spread: float = 0.5
    split_sizes: tuple[int, ...] = (7000, 1000, 2000)
    standardize: bool = True

    def check(self, where: str) -> None:
        total = self.n_classes * self.pairs_per_class
        require(len(self.split_sizes) == 3, where, "split_sizes needs three numbers: train, val, test")
        require(sum(self.split_sizes) == total, where,
                f"split_sizes {list(self.split_sizes)} must add up to n_classes*pairs_per_class = {total}")
        require(min(self.split_sizes) > 0, where, "every split needs at least one pair")
        require(self.spread > 0 and self.mean_scale >= 0, where, "spread must be > 0 and mean_scale >= 0")


def random_relu_net(rng: np.random.Generator, sizes: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Weights of a fully connected net, each layer U(-1/sqrt(fan_in), 1/sqrt(fan_in)) like torch's default."""
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / np.sqrt(fan_in)
        layers.append((rng.uniform(-bound, bound, (fan_in, fan_out)), rng.uniform(-bound, bound, fan_out)))
    return layers


def apply_net(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> np.ndarray:
    """ReLU between layers, linear output."""
    for i, (w, b) in enumerate(layers):
        x = x @ w + b
        if i < len(layers) - 1:
            x = np.maximum(x, 0.0)
    return x


def generate(p: SyntheticParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (x_a, x_b, labels), shuffled, as float32/float32/int64 arrays."""
    rng = np.random.default_rng(p.seed)
    means = rng.normal(0.0, p.mean_scale, (p.n_classes, p.latent_dim))
    labels = np.repeat(np.arange(p.n_classes), p.pairs_per_class)
    z = means[labels] + p.spread * rng.normal(size=(len(labels), p.latent_dim))
    sizes = [p.latent_dim, *p.hidden, p.out_dim]
    f_a, f_b = random_relu_net(rng, sizes), random_relu_net(rng, sizes)
    order = rng.permutation(len(labels))
    x_a, x_b = apply_net(f_a, z)[order], apply_net(f_b, z)[order]
    return x_a.astype(np.float32), x_b.astype(np.float32), labels[order]


@SOURCES.register("synthetic_gaussian")
class SyntheticGaussian:
    """Synthetic Gaussian-mixture pairs (paper Appendix E)."""

    Params = SyntheticParams

    @staticmethod
    def estimate_bytes(p: SyntheticParams) -> list[tuple[str, int, str]]:
        """What :func:`generate` allocates at its peak (float64 numpy): both random nets' weights, the
        activations of the widest layer (three arrays of it at once) and both float32 outputs."""
        n = p.n_classes * p.pairs_per_class
        sizes = [p.latent_dim, *p.hidden, p.out_dim]
        weights = 2 * 8 * sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))
        return [("generated features", 3 * 8 * n * max(sizes) + 2 * 2 * 4 * n * p.out_dim,
                 "dataset.pairs_per_class, dataset.out_dim or dataset.hidden"),
                ("random nets' weights", weights, "dataset.hidden, dataset.latent_dim or dataset.out_dim")]

    @staticmethod
    def load(p: SyntheticParams) -> PairedData:
        x_a, x_b, labels = generate(p)
        bounds = np.cumsum([0, *p.split_sizes])
        if p.standardize:  # z-score each feature with training-split statistics
            x_a, x_b = (standardize(x, x[: bounds[1]]) for x in (x_a, x_b))
        splits = {}
        for name, lo, hi in zip(("train", "val", "test"), bounds[:-1], bounds[1:]):
            lab = torch.from_numpy(labels[lo:hi])
            splits[name] = Split(torch.from_numpy(x_a[lo:hi]), torch.from_numpy(x_b[lo:hi]),
                                 labels_a=lab, labels_b=lab)
        return PairedData(splits, {"source": "synthetic_gaussian", "sizes": list(p.split_sizes)})
