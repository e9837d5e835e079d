"""Generated zero-shot sketch -> photo data in the shapes of a real dataset, for timing on any machine.

Images are seeded noise of ``channels`` × ``image_size`` × ``image_size`` (made when a batch asks
for them; nothing is held in memory and no file is decoded, so file reading and JPEG decoding are
not part of the measured time). Each split has its own classes (zero-shot), items assigned to
classes in turn; training items come as :class:`harness.data.images.SemanticTriplets` with random
``word_dim``-d class word vectors, validation and test splits are class-only. Images carry no
class signal, so accuracy on this source is meaningless: results carry ``timing_only``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.api import SOURCES, SPLITS, PairedData, RandomImages, SemanticTriplets, Split, bounded, require


@dataclass(frozen=True)
class SketchShapesParams:
    seed: int = bounded(0, ge=0)
    classes: tuple[int, ...] = (93, 11, 21)  # train, val, test
    sketches: tuple[int, ...] = (600, 200, 12694)
    photos: tuple[int, ...] = (600, 200, 12553)
    image_size: int = 224
    channels: int = 3
    word_dim: int = 300

    def check(self, where: str) -> None:
        for name in ("classes", "sketches", "photos"):
            counts = getattr(self, name)
            require(len(counts) == 3 and min(counts) >= 1, where, f"{name} needs three positive counts "
                    f"({', '.join(SPLITS)}), got {list(counts)}")
        require(self.classes[0] >= 2, where, "the training split needs at least 2 classes (negatives)")
        require(all(min(s, ph) >= c for c, s, ph in zip(self.classes, self.sketches, self.photos)), where,
                "every class needs at least one sketch and one photo: counts must be >= classes per split")
        require(self.image_size >= 8 and self.channels in (1, 3) and self.word_dim >= 1, where,
                "image_size >= 8, channels 1 or 3, word_dim >= 1")


def labels(n: int, first: int, n_classes: int) -> torch.Tensor:
    """(n,) class ids first, first+1, …, first+n_classes−1, assigned in turn."""
    return first + torch.arange(n) % n_classes


@SOURCES.register("sketch_shapes")
class SketchShapes:
    """Shape-faithful random stand-in for a zero-shot sketch -> photo dataset (timing only)."""

    Params = SketchShapesParams

    @staticmethod
    def load(p: SketchShapesParams) -> PairedData:
        shape = (p.channels, p.image_size, p.image_size)
        firsts = torch.cumsum(torch.tensor([0, *p.classes[:-1]]), 0).tolist()
        splits = {}
        for i, name in enumerate(SPLITS):
            sk = RandomImages(p.sketches[i], shape, seed=p.seed * 10 + 2 * i)
            ph = RandomImages(p.photos[i], shape, seed=p.seed * 10 + 2 * i + 1)
            lab_sk = labels(p.sketches[i], firsts[i], p.classes[i])
            lab_ph = labels(p.photos[i], firsts[i], p.classes[i])
            if name == "train":
                words = torch.randn(p.classes[0], p.word_dim, generator=torch.Generator().manual_seed(p.seed))
                splits[name] = Split(sk, SemanticTriplets(ph, lab_ph, lab_sk, words), labels_a=lab_sk, labels_b=lab_sk)
            else:
                splits[name] = Split(sk, ph, labels_a=lab_sk, labels_b=lab_ph, paired=False)
        return PairedData(splits, {"source": "sketch_shapes", "timing_only": True, "classes": list(p.classes),
                                   "sketches": list(p.sketches), "photos": list(p.photos),
                                   "image_size": p.image_size})
