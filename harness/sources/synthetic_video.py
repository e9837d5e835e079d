"""Random data in the shapes of HowTo100M's text–video features, for timing on any machine.

Videos: ``feature_dim`` values, two halves (2D and 3D) of |N(0, 1)| (post-ReLU CNN features), each
L2-normalised, as the real 4,096-d vectors. Captions: word ids uniform over a vocabulary of
``vocab_size`` words, log-normal word counts (median ``median_words``, log-spread ``sigma``) clipped
to [1, ``max_words``], padded to ``max_words`` as :mod:`harness.data.words` does; ``train_captions_per_video``
captions per training video, one drawn per epoch (MSR-VTT: 20). With ``fixed_vectors`` the word table
is a fixed random ``word_dim``-d table, as with a word2vec file; otherwise the encoder learns it.
Videos and captions are unrelated, so accuracy is meaningless: results carry ``timing_only``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from harness.api import SOURCES, SPLITS, CaptionDraw, PaddedCaptions, PairedData, Split, bounded, require
from harness.sources.synthetic_precomp import word_counts


@dataclass(frozen=True)
class SyntheticVideoParams:
    seed: int = bounded(0, ge=0)
    videos: tuple[int, ...] = (6400, 100, 1000)
    train_captions_per_video: int = 1
    feature_dim: int = 4096
    vocab_size: int = 20000
    word_dim: int = 300
    fixed_vectors: bool = True
    median_words: float = 9.0
    sigma: float = 0.35
    max_words: int = 20

    def check(self, where: str) -> None:
        require(len(self.videos) == 3 and min(self.videos) >= 1, where,
                f"videos needs three positive counts ({', '.join(SPLITS)}), got {list(self.videos)}")
        require(self.train_captions_per_video >= 1 and self.max_words >= 1, where,
                "train_captions_per_video and max_words must be >= 1")
        require(self.feature_dim >= 2 and self.feature_dim % 2 == 0, where, "feature_dim must be even (2D + 3D halves)")
        require(self.vocab_size >= 2 and self.word_dim >= 1, where, "vocab_size must be >= 2 and word_dim >= 1")
        require(self.median_words > 0 and self.sigma >= 0, where, "median_words must be > 0 and sigma >= 0")


def random_videos(g: torch.Generator, n: int, dim: int) -> torch.Tensor:
    """(n, dim) float32: two |N(0, 1)| halves, each L2-normalised."""
    halves = torch.randn(n, 2, dim // 2, generator=g).abs_()
    return F.normalize(halves, dim=-1).reshape(n, dim)


def random_captions(rng: np.random.Generator, n: int, p: SyntheticVideoParams) -> PaddedCaptions:
    """``n`` captions of uniform word ids 1..vocab_size-1 (0 is the padding)."""
    counts = word_counts(rng, n, median=p.median_words, sigma=p.sigma, lo=1, hi=p.max_words)
    ids = rng.integers(1, p.vocab_size, int(counts.sum()))
    return PaddedCaptions.from_sequences([s.tolist() for s in np.split(ids, np.cumsum(counts)[:-1])],
                                         p.vocab_size, p.max_words)


@SOURCES.register("synthetic_video")
class SyntheticVideo:
    """Shape-faithful random stand-in for HowTo100M's MSR-VTT / YouCook2 / LSMDC features (timing only)."""

    Params = SyntheticVideoParams

    @staticmethod
    def estimate_bytes(p: SyntheticVideoParams) -> list[tuple[str, int, str]]:
        """Videos (float32, feature_dim each), padded captions (int64, max_words each) and the word table."""
        videos, captions = sum(p.videos), sum(p.videos) * max(p.train_captions_per_video, 1)
        return [("video features", 2 * 4 * videos * p.feature_dim, "dataset.videos or dataset.feature_dim"),
                ("padded captions", 8 * captions * p.max_words, "dataset.max_words or dataset.videos"),
                ("word vectors", 4 * p.vocab_size * p.word_dim, "dataset.vocab_size or dataset.word_dim")]

    @staticmethod
    def load(p: SyntheticVideoParams) -> PairedData:
        rng, g = np.random.default_rng(p.seed), torch.Generator().manual_seed(p.seed)
        splits = {}
        for name, n in zip(SPLITS, p.videos):
            per_video = p.train_captions_per_video if name == "train" else 1
            captions = random_captions(rng, n * per_video, p)
            b = CaptionDraw(captions, torch.arange(n).repeat_interleave(per_video), n) if per_video > 1 else captions
            splits[name] = Split(random_videos(g, n, p.feature_dim), b)
        fixed = {}
        if p.fixed_vectors:
            table = 0.1 * torch.randn(p.vocab_size, p.word_dim, generator=g)
            fixed = {"b": {"embed.weight": torch.cat([torch.zeros(1, p.word_dim), table[1:]])}}
        info = {"source": "synthetic_video", "timing_only": True, "videos": list(p.videos),
                "train_captions_per_video": p.train_captions_per_video,
                "text": f"fixed random {p.word_dim}-d word vectors" if p.fixed_vectors else "learned embeddings"}
        return PairedData(splits, info, fixed)
