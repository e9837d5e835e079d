"""The Wikipedia image–text dataset (Rasiwasia et al., ACM MM 2010): 2,866 article sections, each an
image and its text, in 10 categories; the standard split is 2,173 training and 693 test pairs.

Files under ``root``: ``raw_features.mat`` (MATLAB v5: ``I_tr``/``I_te`` 128-d SIFT bag-of-visual-words
histograms, ``T_tr``/``T_te`` 10-d LDA topic proportions, one row per pair) and
``trainset_txt_img_cat.list`` / ``testset_txt_img_cat.list`` (``text_id<TAB>image_id<TAB>class`` per
line, classes 1–10, in row order). Modality ``a`` holds the images, ``b`` the texts, so the task's
directions i2t / t2i are a2b / b2a. Labels (0–9) feed the class-based metrics.

Validation: ``val_pairs`` training pairs chosen by ``split_seed`` (``numpy.random.default_rng``) are
held out; the rest train. ``val_pairs: 0`` trains on all 2,173 pairs and validates on them too
(for references that select nothing, such as CCA on the published protocol). ``standardize``
z-scores every feature with the training part's statistics: both feature sets are proportions
with small variance.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from harness.api import SOURCES, DataError, PairedData, Split, bounded, expand_root, require, standardize_splits

FILES = ("raw_features.mat", "trainset_txt_img_cat.list", "testset_txt_img_cat.list")
PUBLISHED_AT = ("The features and lists are published with the dataset (Rasiwasia et al. 2010) and mirrored in "
                "github.com/BMC-SDNU/Cross-Modal-Retrieval, Supervised-cross-modal-real-valued/JFSSL/wikipedia_info/.")


@dataclass(frozen=True)
class WikipediaParams:
    root: str = "${WIKIPEDIA_DATA:-data/wikipedia}"
    val_pairs: int = 173
    split_seed: int = bounded(0, ge=0)
    standardize: bool = True

    def check(self, where: str) -> None:
        require(bool(self.root), where, "root is required: the folder holding raw_features.mat and the .list files")
        require(self.val_pairs >= 0, where, f"val_pairs must be >= 0, got {self.val_pairs}")


def read_labels(path: Path, n_rows: int) -> torch.Tensor:
    """Class (0-based) of each line ``text_id<TAB>image_id<TAB>class`` of a list file with ``n_rows`` lines."""
    try:
        classes = [int(line.split("\t")[2]) - 1 for line in path.read_text().splitlines() if line.strip()]
    except (IndexError, ValueError) as err:
        raise DataError(f"{path}: expected 'text_id<TAB>image_id<TAB>class' lines: {err}") from err
    if len(classes) != n_rows or min(classes, default=0) < 0:
        raise DataError(f"{path} lists {len(classes)} pairs with classes >= 1; the features hold {n_rows} rows")
    return torch.tensor(classes, dtype=torch.int64)


def read_features(path: Path) -> dict[str, np.ndarray]:
    """``I_tr``, ``T_tr``, ``I_te``, ``T_te`` of ``raw_features.mat`` as float32 arrays."""
    from scipy.io import loadmat

    try:
        mat = loadmat(str(path))
        return {k: np.asarray(mat[k], dtype=np.float32) for k in ("I_tr", "T_tr", "I_te", "T_te")}
    except (OSError, ValueError, KeyError) as err:
        raise DataError(f"cannot read I_tr, T_tr, I_te, T_te from {path}: {err}") from err


def check_files(root: Path) -> None:
    """Stop with the expected files, where they are published and how to point at them."""
    missing = [root / f for f in FILES if not (root / f).exists()]
    if missing:
        listing = "\n  ".join(f"{root / f}{'  (missing)' if root / f in missing else ''}" for f in FILES)
        raise DataError(f"wikipedia: {len(missing)} file(s) missing under {root}. Expected:\n  {listing}\n"
                        f"{PUBLISHED_AT}\nSet the WIKIPEDIA_DATA environment variable to that folder, "
                        "dataset.root in the task file, or pass --data-root PATH.")


def hold_out(split: Split, n_val: int, seed: int) -> tuple[Split, Split]:
    """(train, val): ``n_val`` pairs drawn by ``seed`` form val (in their original order); 0 -> (split, split)."""
    if n_val == 0:
        return split, split
    if n_val >= split.n_pairs:
        raise DataError(f"val_pairs ({n_val}) must be below the {split.n_pairs} training pairs")
    val = np.zeros(split.n_pairs, dtype=bool)
    val[np.random.default_rng(seed).permutation(split.n_pairs)[:n_val]] = True

    labels_a, labels_b = split.labels_a, split.labels_b
    if labels_a is None or labels_b is None:
        raise DataError("the Wikipedia training split carries class labels for both modalities")

    def part(mask: np.ndarray) -> Split:
        index = torch.from_numpy(np.flatnonzero(mask))
        return Split(split.a[index], split.b[index], labels_a=labels_a[index], labels_b=labels_b[index])

    return part(~val), part(val)


@SOURCES.register("wikipedia")
class Wikipedia:
    """Wikipedia image (SIFT bag of words) – text (LDA topics) pairs with 10 classes."""

    Params = WikipediaParams

    @staticmethod
    def load(p: WikipediaParams) -> PairedData:
        root = expand_root(p.root)
        check_files(root)
        feats = read_features(root / FILES[0])
        full = {}
        for name, tag, listing in (("train", "tr", FILES[1]), ("test", "te", FILES[2])):
            images, texts = torch.from_numpy(feats[f"I_{tag}"]), torch.from_numpy(feats[f"T_{tag}"])
            if len(images) != len(texts):
                raise DataError(f"{root / FILES[0]}: I_{tag} has {len(images)} rows, T_{tag} {len(texts)}")
            labels = read_labels(root / listing, len(images))
            full[name] = Split(images, texts, labels_a=labels, labels_b=labels)
        train, val = hold_out(full["train"], p.val_pairs, p.split_seed)
        splits = {"train": train, "val": val, "test": full["test"]}
        if p.standardize:
            splits = standardize_splits(splits)
        return PairedData(splits, {"source": "wikipedia", "root": str(root), "standardized": p.standardize,
                                   "sizes": [s.n_pairs for s in splits.values()]})
