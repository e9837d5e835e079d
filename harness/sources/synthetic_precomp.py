"""Random data in the shapes of SCAN's precomputed features, for timing on any machine.

Images: ``regions`` × ``feature_dim`` non-negative features (ReLU of Gaussians, like the
post-ReLU bottom-up-attention features); captions: ``captions_per_image`` per image, token
ids uniform over a synthetic vocabulary (ids 4.. after SCAN's four specials), framed by
``<start>`` and ``<end>``. Word counts are log-normal, median ``median_words`` and log-spread
``sigma``, clipped to [min_words, max_words]: the defaults (10.5, 0.3, 3, 50) average about
11 words, between MS-COCO's (about 10.5) and Flickr30K's (about 12.3). Images and captions
are unrelated, so accuracy on this source is meaningless: results carry ``timing_only``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from harness.api import END, SOURCES, SPECIALS, SPLITS, START, PairedData, Split, TokenCaptions, bounded, require


@dataclass(frozen=True)
class SyntheticPrecompParams:
    seed: int = bounded(0, ge=0)
    images: tuple[int, ...] = (640, 100, 1000)
    captions_per_image: int = 5
    regions: int = 36
    feature_dim: int = 2048
    vocab_size: int = 10000
    median_words: float = 10.5
    sigma: float = 0.3
    min_words: int = 3
    max_words: int = 50

    def check(self, where: str) -> None:
        require(len(self.images) == 3 and min(self.images) >= 1, where,
                f"images needs three positive counts ({', '.join(SPLITS)}), got {list(self.images)}")
        require(self.captions_per_image >= 1 and self.regions >= 1 and self.feature_dim >= 1, where,
                "captions_per_image, regions and feature_dim must be >= 1")
        require(self.vocab_size > len(SPECIALS), where, f"vocab_size must exceed the {len(SPECIALS)} special tokens")
        require(1 <= self.min_words <= self.max_words, where, "need 1 <= min_words <= max_words")
        require(self.median_words > 0 and self.sigma >= 0, where, "median_words must be > 0 and sigma >= 0")


def word_counts(rng: np.random.Generator, n: int, *, median: float, sigma: float, lo: int, hi: int) -> np.ndarray:
    """Log-normal caption word counts, rounded and clipped to [lo, hi] (int64, (n,))."""
    return np.clip(np.rint(median * np.exp(sigma * rng.standard_normal(n))), lo, hi).astype(np.int64)


def random_captions(rng: np.random.Generator, n: int, p: SyntheticPrecompParams) -> TokenCaptions:
    """``n`` captions ``<start> w_1 … w_k <end>`` with uniform word ids."""
    words = word_counts(rng, n, median=p.median_words, sigma=p.sigma, lo=p.min_words, hi=p.max_words)
    lengths = torch.from_numpy(words + 2)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    tokens = torch.from_numpy(rng.integers(len(SPECIALS), p.vocab_size, int(offsets[-1])).astype(np.int32))
    tokens[offsets[:-1]] = START
    tokens[offsets[1:] - 1] = END
    return TokenCaptions(tokens, offsets, p.vocab_size)


def random_regions(seed: int, n: int, p: SyntheticPrecompParams) -> torch.Tensor:
    """(n, regions, feature_dim) float32, ReLU of standard normals."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, p.regions, p.feature_dim, generator=g).clamp_min_(0)


@SOURCES.register("synthetic_precomp")
class SyntheticPrecomp:
    """Shape-faithful random stand-in for SCAN's precomputed features (timing only)."""

    Params = SyntheticPrecompParams

    @staticmethod
    def estimate_bytes(p: SyntheticPrecompParams) -> list[tuple[str, int, str]]:
        """Region features (float32, regions x feature_dim per image) and captions (int64, max_words each)."""
        images = sum(p.images)
        return [("region features", 2 * 4 * images * p.regions * p.feature_dim,
                 "dataset.images, dataset.regions or dataset.feature_dim"),
                ("captions", 8 * images * p.captions_per_image * p.max_words,
                 "dataset.max_words or dataset.captions_per_image")]

    @staticmethod
    def load(p: SyntheticPrecompParams) -> PairedData:
        rng = np.random.default_rng(p.seed)
        splits = {}
        for i, (name, n) in enumerate(zip(SPLITS, p.images)):
            captions = random_captions(rng, n * p.captions_per_image, p)
            b_to_a = torch.arange(len(captions)) // p.captions_per_image
            splits[name] = Split(random_regions(p.seed * 3 + i, n, p), captions, b_to_a=b_to_a)
        words = float((splits["test"].b.lengths - 2).double().mean())
        return PairedData(splits, {"source": "synthetic_precomp", "timing_only": True, "images": list(p.images),
                                   "captions": [s.n_pairs for s in splits.values()],
                                   "mean_words_test": round(words, 2)})
