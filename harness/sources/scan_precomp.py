"""SCAN's precomputed image–text data: bottom-up-attention region features and raw captions.

Files per split prefix p under ``root``: ``<p>_ims.npy`` (N × 36 × 2048 float32, read
memory-mapped) and ``<p>_caps.txt`` (one caption a line). With 5N captions caption j belongs
to image j // 5; with N captions the pairing is one to one. The vocabulary is built from
the training captions (``harness.data.text``) and cached under ``vocab_cache`` by input hash.

``root`` may contain ``~`` and ``${NAME}`` or ``${NAME:-default}``: the task files use
``${SCAN_DATA:-data}/f30k_precomp`` so that the environment variable ``SCAN_DATA`` names the
folder holding SCAN's ``data/`` contents; ``--data-root`` replaces the whole path.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from harness.api import (
    SOURCES,
    SPLITS,
    ArrayRows,
    DataError,
    PairedData,
    Split,
    TokenCaptions,
    cached_vocab,
    encode_captions,
    expand_root,
    npy,
    read_lines,
    require,
    require_files,
    tokenize,
)

PUBLISHED_AT = ("SCAN's precomputed features (data.zip: coco_precomp/, f30k_precomp/) are published by the SCAN "
                "authors (Lee et al., ECCV 2018) with their code, github.com/kuanghuei/SCAN, section 'Download data'.")


@dataclass(frozen=True)
class ScanPrecompParams:
    root: str = ""
    splits: tuple[str, ...] = ("train", "dev", "test")
    val_images: int = 1000
    min_word_count: int = 4
    vocab_cache: str = "results/cache"

    def check(self, where: str) -> None:
        require(bool(self.root), where, "root is required: the folder holding <split>_ims.npy and <split>_caps.txt")
        require(len(self.splits) == 3, where, f"splits lists the file prefixes for {', '.join(SPLITS)}")
        require(self.val_images >= 0, where, "val_images must be >= 0 (0: the whole validation split)")
        require(self.min_word_count >= 1, where, "min_word_count must be >= 1")


def expected_files(root: Path, prefixes: tuple[str, ...]) -> list[Path]:
    """The files a SCAN precomp dataset folder must hold."""
    return [root / f"{p}_{kind}" for p in prefixes for kind in ("ims.npy", "caps.txt")]


# The shipped task at each released folder's shapes: random data, no download, timing only.
SHAPES_TASKS = {"coco_precomp": ("MS-COCO", "tasks/coco_shapes.yaml"),
                "f30k_precomp": ("Flickr30K", "tasks/flickr30k_shapes.yaml")}


def check_files(root: Path, prefixes: tuple[str, ...]) -> None:
    """Stop with the list of expected files and where they are published when any is missing; for SCAN's own
    folders, also the task at their shapes that runs now without them."""
    require_files("scan_precomp", root, expected_files(root, prefixes),
                  f"{PUBLISHED_AT}\nSet dataset.root in the task file, the SCAN_DATA environment variable "
                  "(the folder holding coco_precomp/ and f30k_precomp/), or pass --data-root PATH."
                  + without_data(root))


def without_data(root: Path) -> str:
    """What runs right now without the features of ``root``: the shipped task at its shapes ('' for other folders)."""
    if root.name not in SHAPES_TASKS:
        return ""
    name, task = SHAPES_TASKS[root.name]
    return (f"\nWithout the features, the task at {name}'s shapes needs no data (random features, timing only; "
            f"its accuracy means nothing): python -m harness run {task} --methods scan,swamp_par")


def pairing(n_images: int, n_captions: int, where: Path) -> torch.Tensor:
    """b_to_a: caption j -> image j // 5 for 5N captions, j for N captions."""
    for per_image in (5, 1):
        if n_captions == per_image * n_images:
            return torch.arange(n_captions) // per_image
    raise DataError(f"{where}: {n_captions} captions for {n_images} images; expected {5 * n_images} (5 per image) "
                    f"or {n_images} (one to one)")


def load_images(path: Path) -> ArrayRows:
    """Memory-mapped (N, regions, features) array."""
    return ArrayRows(npy.load(path, 3, "N x regions x features; SCAN: N x 36 x 2048"))


def load_split(images: ArrayRows, captions: TokenCaptions, path: Path, max_images: int = 0) -> Split:
    """Pair images and captions; keep the first ``max_images`` images and their captions when > 0."""
    b_to_a = pairing(len(images), len(captions), path)
    if 0 < max_images < len(images):
        keep = int((b_to_a < max_images).sum())
        images, captions, b_to_a = images.head(max_images), captions.subset(keep), b_to_a[:keep]
    return Split(images, captions, b_to_a=b_to_a)


@SOURCES.register("scan_precomp")
class ScanPrecomp:
    """SCAN's released MS-COCO / Flickr30K features (``coco_precomp``, ``f30k_precomp``)."""

    Params = ScanPrecompParams

    @staticmethod
    def load(p: ScanPrecompParams) -> PairedData:
        root = expand_root(p.root)
        check_files(root, p.splits)
        tokens = {prefix: [tokenize(c) for c in read_lines(root / f"{prefix}_caps.txt")] for prefix in p.splits}
        images = {prefix: load_images(root / f"{prefix}_ims.npy") for prefix in p.splits}
        for prefix in p.splits:  # every split checked before the vocabulary cache is written
            pairing(len(images[prefix]), len(tokens[prefix]), root / prefix)
        train_caps = root / f"{p.splits[0]}_caps.txt"
        words, vocab_file = cached_vocab(train_caps, tokens[p.splits[0]], p.min_word_count, Path(p.vocab_cache))
        splits = {}
        for name, prefix in zip(SPLITS, p.splits):
            captions = encode_captions(tokens[prefix], words)
            limit = p.val_images if name == "val" else 0
            splits[name] = load_split(images[prefix], captions, root / prefix, limit)
        info = {"source": "scan_precomp", "root": str(root), "vocab_size": len(words), "vocab_file": str(vocab_file),
                "images": [len(s.a) for s in splits.values()], "captions": [s.n_pairs for s in splits.values()]}
        return PairedData(splits, info)
