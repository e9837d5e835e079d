"""User-supplied paired features: ``<root>/<split>_a.npy``, ``<split>_b.npy``, optional ``<split>_labels.npy``.

Row i of ``a`` is paired with row i of ``b``; any number of rows and any feature
size work, since encoders size themselves from the arrays. ``standardize: true`` z-scores
every feature of both modalities with the training split's mean and std (recommended for
features of small variance, such as histograms or topic proportions: see docs/datasets/own-features.md).
``root`` may use ``~`` and ``${NAME:-default}`` (:func:`harness.data.paired.expand_root`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from harness.api import SOURCES, SPLITS, DataError, PairedData, Split, expand_root, npy, require, standardize_splits


@dataclass(frozen=True)
class PairedArraysParams:
    root: str = ""
    splits: tuple[str, ...] = SPLITS
    standardize: bool = False

    def check(self, where: str) -> None:
        require(bool(self.root), where, "root is required: the folder holding <split>_a.npy and <split>_b.npy")
        require(len(self.splits) == 3, where, "splits lists the file prefixes for train, val and test")


def _features(arr: np.ndarray, path: Path) -> torch.Tensor:
    """float32 copy of an N x d array of real numbers; other dtypes and NaN or infinite values are errors."""
    if arr.dtype.kind not in "biuf":
        raise DataError(f"{path} holds {arr.dtype} values; expected real numbers (save it with "
                        "numpy.save(path, array.astype(numpy.float32)))")
    with np.errstate(over="ignore"):  # values beyond float32's range become inf, reported below
        x = np.array(arr, dtype=np.float32)  # copies into RAM
    bad = ~np.isfinite(x).all(axis=tuple(range(1, x.ndim)))  # (N,)
    if bad.any():
        rows = np.flatnonzero(bad)
        raise DataError(f"{path}: {len(rows)} of {len(x)} rows hold NaN or infinite values (as float32; first row "
                        f"{rows[0]}); remove or impute those rows (in every file of the split, to keep the pairing)")
    return torch.from_numpy(x)


def load_split(root: Path, prefix: str) -> Split:
    """Load one split, checking that the two modalities (and labels) have the same length."""
    a = npy.load(root / f"{prefix}_a.npy")
    b = npy.load(root / f"{prefix}_b.npy")
    if a.ndim < 2 or b.ndim < 2 or len(a) != len(b):
        raise DataError(f"{root}/{prefix}_a.npy {a.shape} and {prefix}_b.npy {b.shape} must be N x d with equal N")
    labels = None
    if (root / f"{prefix}_labels.npy").exists():
        lab = npy.load(root / f"{prefix}_labels.npy", ndim=1)
        if len(lab) != len(a) or not np.issubdtype(lab.dtype, np.integer):
            raise DataError(f"{root}/{prefix}_labels.npy must hold {len(a)} integers, got {lab.shape} {lab.dtype}")
        labels = torch.from_numpy(np.array(lab, dtype=np.int64))
    return Split(_features(a, root / f"{prefix}_a.npy"), _features(b, root / f"{prefix}_b.npy"),
                 labels_a=labels, labels_b=labels)


def expected_files(root: Path, prefixes: tuple[str, ...]) -> list[Path]:
    """The files a paired_arrays dataset must contain."""
    return [root / f"{p}_{m}.npy" for p in prefixes for m in ("a", "b")]


@SOURCES.register("paired_arrays")
class PairedArrays:
    """Paired feature arrays brought by the user."""

    Params = PairedArraysParams

    @staticmethod
    def load(p: PairedArraysParams) -> PairedData:
        root = expand_root(p.root)
        missing = [f for f in expected_files(root, p.splits) if not f.exists()]
        if missing:
            listing = "\n  ".join(str(f) for f in expected_files(root, p.splits))
            raise DataError(
                f"paired_arrays: {len(missing)} file(s) missing under {root}. Expected:\n  {listing}\n"
                "(optional: <split>_labels.npy with one int per row). Set dataset.root in the task "
                "file or pass --data-root PATH."
            )
        splits = {name: load_split(root, prefix) for name, prefix in zip(SPLITS, p.splits)}
        if p.standardize:
            splits = standardize_splits(splits)
        return PairedData(splits, {"source": "paired_arrays", "root": str(root), "standardized": p.standardize,
                                   "sizes": [s.n_pairs for s in splits.values()]})
