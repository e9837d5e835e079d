"""QMUL fine-grained sketch-based image retrieval (Yu et al., "Sketch Me That Shoe", CVPR 2016): shoes,
chairs and handbags, each sketch paired with one photo's edge map (the RGB photos are not in this release).

Files under ``root``: ``<category>_{sketch,edge}_db_{train,test}.mat`` (MATLAB v5, key ``data``,
uint8 N × 256 × 256; row i of the sketch file and row i of the edge file of a split are the same
item). Shoes: 304 train / 115 test pairs; chairs: 200 / 97; handbags: the same four files (the
release's handbag folder also holds ``handbags_triplets_train.mat``, the triplets its triplet-loss
training samples from, which the pair-based methods here do not read). Published with
yuqian1023/Deep_SBIR_tf @ 838c17c, ``data/<category>/``.

``root`` defaults to ``${QMUL_SBIR:-data/qmul_sbir}``: the environment variable
``QMUL_SBIR`` names the folder, else ``data/qmul_sbir`` (relative to the working directory).
Images are resized once to ``image_size`` and standardised with the training items' mean and std
per modality. Validation is a seeded slice (``val_fraction``) of the training items, so epochs are
chosen without the test split.
With ``crop_scale`` every training image taken is a random resized crop (light augmentation).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import scipy.io
import torch
from torchvision.transforms.v2 import functional as TF

from harness.api import SOURCES, DataError, ImageTensor, PairedData, Split, bounded, expand_root, require, require_files

ORIGIN = ("QMUL-Shoe, QMUL-Chair and QMUL-Handbag (Yu et al., Sketch Me That Shoe, CVPR 2016), as released with "
          "yuqian1023/Deep_SBIR_tf @ 838c17c, data/<category>/; sketches paired with photo edge maps")
DRAWINGS = ("sketch", "edge")  # the two kinds of .mat file per category and split


@dataclass(frozen=True)
class QMULParams:
    root: str = "${QMUL_SBIR:-data/qmul_sbir}"
    category: Literal["shoes", "chairs", "handbags"] = "shoes"
    image_size: int = 96
    val_fraction: float = 0.1
    split_seed: int = bounded(0, ge=0)
    crop_scale: tuple[float, ...] = (0.8, 1.0)  # () = no augmentation

    def check(self, where: str) -> None:
        require(bool(self.root), where, "root is required: the folder holding <category>_sketch_db_train.mat …")
        require(8 <= self.image_size <= 256, where, f"image_size must be in [8, 256], got {self.image_size}")
        require(0 < self.val_fraction < 1, where, f"val_fraction must be in (0, 1), got {self.val_fraction}")
        require(len(self.crop_scale) in (0, 2) and all(0 < s <= 1 for s in self.crop_scale), where,
                "crop_scale is [min, max] area shares in (0, 1], or [] for no augmentation")


def expected_files(root: Path, category: str) -> list[Path]:
    """The four .mat files of a category."""
    return [root / f"{category}_{m}_db_{s}.mat" for s in ("train", "test") for m in DRAWINGS]


def read_mat(path: Path) -> np.ndarray:
    """The uint8 (N, H, W) array under key 'data' of a MATLAB file."""
    try:
        array: np.ndarray = scipy.io.loadmat(path)["data"]
    except (OSError, ValueError, KeyError, NotImplementedError) as err:
        raise DataError(f"cannot read {path}: {err} (expected a MATLAB v5 file with key 'data')") from err
    if array.ndim != 3 or array.dtype != np.uint8:
        raise DataError(f"{path} holds {array.dtype} {array.shape}; expected uint8 N x H x W")
    return array


def resized(array: np.ndarray, size: int) -> torch.Tensor:
    """(N, 1, size, size) float32 in [0, 1] from uint8 (N, H, W), resized with antialiasing."""
    out: torch.Tensor = TF.resize(torch.from_numpy(array)[:, None], [size, size], antialias=True).float() / 255.0
    return out


def val_rows(n: int, fraction: float, seed: int) -> torch.Tensor:
    """Sorted indices of a seeded ``fraction`` (at least one) of ``n`` training items kept for validation."""
    n_val = max(1, round(fraction * n))
    return torch.from_numpy(np.sort(np.random.default_rng(seed).permutation(n)[:n_val]))


def standardize(x: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """``x`` minus ``reference``'s mean, over its std (one scalar each)."""
    return (x - reference.mean()) / reference.std().clamp_min(1e-6)


def load_split_arrays(root: Path, category: str, split: str, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(sketches, edges) of one split, each (N, 1, size, size); the row counts must agree."""
    sketch, edge = (read_mat(root / f"{category}_{m}_db_{split}.mat") for m in DRAWINGS)
    if len(sketch) != len(edge):
        raise DataError(f"{root}: {category} {split} has {len(sketch)} sketches but {len(edge)} edge maps; "
                        "row i of each file must be the same item")
    return resized(sketch, size), resized(edge, size)


@SOURCES.register("qmul_sbir")
class QMULSBIR:
    """QMUL-Shoe / QMUL-Chair / QMUL-Handbag: instance-level sketch -> edge-map retrieval, pair relevance."""

    Params = QMULParams

    @staticmethod
    def load(p: QMULParams) -> PairedData:
        root = expand_root(p.root)
        require_files("qmul_sbir", root, expected_files(root, p.category),
                      "Set QMUL_SBIR to the folder holding them, dataset.root, or pass --data-root PATH.")
        train_sk, train_ed = load_split_arrays(root, p.category, "train", p.image_size)
        test_sk, test_ed = load_split_arrays(root, p.category, "test", p.image_size)
        val = val_rows(len(train_sk), p.val_fraction, p.split_seed)
        fit = torch.ones(len(train_sk), dtype=torch.bool).index_fill_(0, val, False)
        ref_sk, ref_ed = train_sk[fit], train_ed[fit]  # the training pairs: they set the statistics

        def split(sketch: torch.Tensor, edge: torch.Tensor, crop: tuple[float, float] | None = None) -> Split:
            return Split(ImageTensor(standardize(sketch, ref_sk), crop), ImageTensor(standardize(edge, ref_ed), crop))

        crop = (p.crop_scale[0], p.crop_scale[1]) if p.crop_scale else None  # check(): [] or [min, max]
        splits = {"train": split(ref_sk, ref_ed, crop),
                  "val": split(train_sk[val], train_ed[val]), "test": split(test_sk, test_ed)}
        info = {"source": "qmul_sbir", "origin": ORIGIN, "root": str(root), "category": p.category,
                "pairs": {name: s.n_pairs for name, s in splits.items()}, "val_rows": val.tolist()}
        return PairedData(splits, info)
