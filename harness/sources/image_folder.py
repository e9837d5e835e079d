"""Zero-shot sketch -> photo data in image folders: ``<root>/<sketch_dir>/<class>/*`` and
``<root>/<photo_dir>/<class>/*`` (png, jpg and torchvision's other image extensions), read with
torchvision's folder scanning and loader, resized and normalised by torchvision transforms.

Classes are split, never items (the zero-shot protocol): ``test_classes`` names the unseen
classes (Sketchy, QuickDraw: the lists Doodle2Search uses, in the task files), or
``random_test_classes`` draws that many with ``split_seed`` among the classes with at least
``min_test_photos`` photos (TU-Berlin: 30 among those with 400 or more). Of the remaining
(seen) classes, a seeded ``val_fraction`` validates (Doodle2Search keeps int(0.9·n) for
training) and the rest train. Modality ``a`` holds sketches, ``b`` photos.

Training split: every training sketch with a sampled positive and semantically sampled negative
photo and its class word vector (:class:`harness.data.images.SemanticTriplets`). Validation and test
splits are class-only (no sketch is paired with a photo): their relevance is the class.
Class word vectors come from ``word_vectors``, a file the user provides (:mod:`harness.data.word_vectors`:
a word2vec/GloVe text file, or a ``.npy`` array with its row names in ``word_vocab``, as Doodle2Search
ships them; relative paths are read under ``root``); without it the negatives are drawn uniformly and
methods that regress word vectors refuse to start.

``sketch_dir`` may list several folders holding the same files (Sketchy's augmented versions of each
sketch, ``tx_000000000000`` …): training draws one version per sketch and epoch
(:class:`harness.data.images.ImageChoices`); validation and test read the first folder's.
``normalize``: ``imagenet`` subtracts ``mean`` and divides by ``std`` (ImageNet's by default), ``none``
leaves pixels in [0, 1] as Doodle2Search's ``ToTensor()`` does.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torchvision.datasets.folder import IMG_EXTENSIONS, find_classes, make_dataset

from harness.api import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    SOURCES,
    DataError,
    ImageChoices,
    ImageFiles,
    PairedData,
    SemanticTriplets,
    Split,
    check_readable,
    class_vectors,
    expand_root,
    image_transform,
    require,
    unknown,
)

Files = list[tuple[str, int]]  # (path, class id)


@dataclass(frozen=True)
class ImageFolderParams:
    root: str = ""
    sketch_dir: str | tuple[str, ...] = "sketch"  # several: versions of the same sketches, one drawn per epoch
    photo_dir: str = "photo"
    test_classes: tuple[str, ...] = ()
    random_test_classes: int = 0
    min_test_photos: int = 0
    split_seed: int = 0
    val_fraction: float = 0.1
    image_size: int = 224
    channels: int = 3
    normalize: Literal["none", "imagenet"] = "imagenet"
    mean: tuple[float, ...] = IMAGENET_MEAN  # with normalize: imagenet
    std: tuple[float, ...] = IMAGENET_STD
    word_vectors: str = ""
    word_vocab: str = ""  # with a .npy word_vectors: the names of its rows (a pickled list or one a line)
    negative_temperature: float = 0.1
    workers: int = 0
    verify: bool = True

    def check(self, where: str) -> None:
        require(bool(self.root), where, "root is required: the folder holding the sketch and photo folders")
        require(bool(self.sketch_dirs) and all(self.sketch_dirs), where, "sketch_dir must name a folder, or a list "
                "of folders holding versions of the same sketch files")
        require(bool(self.test_classes) != (self.random_test_classes > 0), where,
                "give either test_classes (a list) or random_test_classes (a count), not both or neither")
        require(0 < self.val_fraction < 1, where, f"val_fraction must be in (0, 1), got {self.val_fraction}")
        require(self.image_size >= 8 and self.channels in (1, 3), where, "image_size >= 8 and channels 1 or 3")
        require(len(self.mean) == len(self.std) == self.channels, where, "mean and std need one value a channel")
        require(self.negative_temperature > 0 and self.workers >= 0, where, "negative_temperature > 0, workers >= 0")


    @property
    def sketch_dirs(self) -> tuple[str, ...]:
        """The sketch folders, the first one read for validation and test."""
        return (self.sketch_dir,) if isinstance(self.sketch_dir, str) else tuple(self.sketch_dir)


def scan(folder: Path, what: str) -> tuple[list[str], Files]:
    """(class names, (path, class index) per image) of an image folder; DataError when a class folder holds
    no image or the folder is missing."""
    if not folder.is_dir():
        raise DataError(f"{what} folder {folder} does not exist; expected <root>/<{what}_dir>/<class>/<images> "
                        f"(set dataset.{what}_dir or --data-root)")
    try:
        classes, index = find_classes(folder)
    except FileNotFoundError as err:
        raise DataError(f"{what} folder {folder} has no class folders: {err}") from err
    files = make_dataset(folder, index, extensions=IMG_EXTENSIONS, allow_empty=True)
    empty = sorted(set(classes) - {classes[c] for _, c in files})
    if empty:
        raise DataError(f"{len(empty)} {what} class folder(s) under {folder} hold no image "
                        f"({', '.join(IMG_EXTENSIONS)}): {', '.join(empty)}; add images or remove the folders")
    return classes, files


def split_classes(classes: list[str], photos_per_class: dict[str, int], p: ImageFolderParams) -> dict[str, list[str]]:
    """Class names per split (train, val, test), sorted; seeded by ``p.split_seed``."""
    rng = np.random.default_rng(p.split_seed)
    if p.test_classes:
        for name in p.test_classes:
            if name not in photos_per_class:
                raise unknown("test class", name, classes, "dataset.test_classes")
        test = sorted(p.test_classes)
    else:
        eligible = [c for c in classes if photos_per_class[c] >= p.min_test_photos]
        if len(eligible) < p.random_test_classes:
            raise DataError(f"only {len(eligible)} classes have >= {p.min_test_photos} photos; cannot draw "
                            f"{p.random_test_classes} test classes")
        test = sorted(rng.choice(eligible, p.random_test_classes, replace=False).tolist())
    seen = [c for c in classes if c not in test]
    n_train = int((1 - p.val_fraction) * len(seen))
    if n_train < 2 or n_train == len(seen):
        raise DataError(f"{len(seen)} seen classes cannot give >= 2 training and >= 1 validation classes "
                        f"with val_fraction {p.val_fraction}")
    order = rng.permutation(len(seen))
    return {"train": sorted(seen[i] for i in order[:n_train]), "val": sorted(seen[i] for i in order[n_train:]),
            "test": test}


def sketch_versions(root: Path, folders: tuple[str, ...], files: list[str]) -> dict[str, list[str]]:
    """For each sketch file of the first folder, its versions: the file of the same class and name in each
    of ``folders`` (the first one first). DataError when a folder lacks some of them."""
    if len(folders) == 1:
        return {}
    first = root / folders[0]
    relative = [Path(f).relative_to(first) for f in files]
    out: dict[str, list[str]] = {f: [f] for f in files}
    for folder in folders[1:]:
        if not (root / folder).is_dir():
            raise DataError(f"sketch folder {root / folder} does not exist; every folder listed in dataset.sketch_dir "
                            "must hold the same <class>/<file> sketches")
        missing = [str(r) for r in relative if not (root / folder / r).is_file()]
        if missing:
            raise DataError(f"{len(missing)} training sketch(es) of {first} are missing from {root / folder} (e.g. "
                            f"{', '.join(missing[:3])}); every folder in dataset.sketch_dir must hold the same files")
        for f, r in zip(files, relative):
            out[f].append(str(root / folder / r))
    return out


def subset(files: Files, class_ids: set[int]) -> tuple[list[str], torch.Tensor]:
    """(paths, labels) of the files of the classes ``class_ids``."""
    kept = [(f, c) for f, c in files if c in class_ids]
    return [f for f, _ in kept], torch.tensor([c for _, c in kept], dtype=torch.long)


@SOURCES.register("image_folder")
class ImageFolder:
    """Sketch and photo class folders with a zero-shot class split."""

    Params = ImageFolderParams
    # Only these methods (and methods derived from them) read the training triplets; the checks before training
    # refuse any other (:func:`harness.run.preflight.check_reads_items`), whose encoder would get a tuple.
    training_methods = ("doodle2search", "doodle2search_swamp")
    training_items = "sketches, each with a (positive photo, negative photo, class word vector) triplet"

    @staticmethod
    def load(p: ImageFolderParams) -> PairedData:
        root = expand_root(p.root)
        sketch_classes, sketches = scan(root / p.sketch_dirs[0], "sketch")
        photo_classes, photos = scan(root / p.photo_dir, "photo")
        if sketch_classes != photo_classes:
            only = sorted(set(sketch_classes) ^ set(photo_classes))
            raise DataError(f"the sketch and photo folders under {root} must hold the same classes; in one only: "
                            f"{', '.join(only)}")
        counts = np.bincount([c for _, c in photos], minlength=len(photo_classes))
        names = split_classes(photo_classes, dict(zip(photo_classes, counts.tolist())), p)
        train_ids = {photo_classes.index(n) for n in names["train"]}
        versions = sketch_versions(root, p.sketch_dirs, [f for f, c in sketches if c in train_ids])
        if p.verify:
            check_readable([f for f, _ in sketches + photos] + [v for vs in versions.values() for v in vs[1:]])
        vocab = root / expand_root(p.word_vocab) if p.word_vocab else None
        vectors = class_vectors(root / expand_root(p.word_vectors), names["train"], vocab) if p.word_vectors else None
        splits = {s: ImageFolder.split(sketches, photos, photo_classes, names[s], p, vectors if s == "train" else None,
                                       train=s == "train", versions=versions) for s in names}
        info = {"source": "image_folder", "root": str(root), "sketch_dir": list(p.sketch_dirs),
                "photo_dir": p.photo_dir, "classes": names, "sketches": {s: len(x.a) for s, x in splits.items()},
                "photos": {s: len(x.b.photos) if s == "train" else len(x.b) for s, x in splits.items()},
                "word_vectors": p.word_vectors or None}
        return PairedData(splits, info)

    @staticmethod
    def split(sketches: Files, photos: Files, classes: list[str], names: list[str], p: ImageFolderParams,
              vectors: torch.Tensor | None, train: bool, versions: dict[str, list[str]] | None = None) -> Split:
        """The split of classes ``names``: training triplets (each sketch's ``versions`` drawn from, when
        several folders are given), or a class-only split."""
        ids = {classes.index(n) for n in names}
        imagenet = p.normalize == "imagenet"
        transform = image_transform(p.image_size, p.channels, p.mean if imagenet else None, p.std if imagenet else None)
        shape = (p.channels, p.image_size, p.image_size)
        sk_paths, sk_labels = subset(sketches, ids)
        ph_paths, ph_labels = subset(photos, ids)
        sk, ph = (ImageFiles(paths, transform, shape, p.workers) for paths in (sk_paths, ph_paths))
        if train and len(p.sketch_dirs) > 1 and versions:
            sk = ImageChoices([versions[f] for f in sk_paths], transform, shape, p.workers)
        if train:
            triplets = SemanticTriplets(ph, ph_labels, sk_labels, vectors, p.negative_temperature)
            return Split(sk, triplets, labels_a=sk_labels, labels_b=sk_labels)
        return Split(sk, ph, labels_a=sk_labels, labels_b=ph_labels, paired=False)
