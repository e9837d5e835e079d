"""Two real feature sets in the ``paired_arrays`` layout, for measuring the own-features template
(``tasks/own_features.yaml``, docs/datasets/own-features.md) on data of the two kinds users bring:

* ``flickr_captions``: strong features in one shared space. Two captions of each of the 1,000 Flickr30K test
  images (captions 1 and 2 of five), both embedded by the same text features: TF-IDF over a vocabulary and
  document frequencies from the Flickr30K dev captions, projected to 768 dimensions by one fixed Gaussian matrix
  (seed 0). Their cosine already retrieves the partner caption well, as a pretrained aligned model's would; split
  700 / 100 / 200 by a seeded permutation; no labels.
* ``wikipedia``: weak hand-made features in two spaces. The Wikipedia image-text set as ``tasks/wikipedia.yaml``
  splits it (128-d SIFT histograms against 10-d LDA topic proportions, 2,000 / 173 / 693 pairs, 10 classes as
  labels), raw (not standardised).
* ``quickdraw_halves``: the split-image two-view benchmark of deep CCA on QuickDraw doodles: the left 14 columns
  of each 28 x 28 bitmap (392 values, scaled to [0, 1]) against the right 14, 500 drawings of each of the 6
  classes (the first 500 of each ``<class>.npy``), split 2,100 / 450 / 450 by a seeded permutation, the classes as
  labels.

``python -m benchmarks.own_features_sets --flickr30k DIR --wikipedia DIR --quickdraw DIR --out DIR`` writes
``DIR/flickr_captions/``, ``DIR/wikipedia/`` and ``DIR/quickdraw_halves/`` (each ``{train,val,test}_{a,b}.npy``
and, with classes, ``*_labels.npy``). Nothing is downloaded: the folders are the captions, features and drawings
the user has.
"""
from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

import numpy as np

WIDTH = 768
SPLIT = (700, 100, 200)


def _words(line: str) -> list[str]:
    return re.findall(r"[a-z]+", line.lower())


def tfidf_projection(dev: list[str], width: int = WIDTH, seed: int = 0) -> tuple[dict[str, int], np.ndarray,
                                                                                 np.ndarray]:
    """(vocabulary, idf (V,), projection (V, width)) from the dev captions: words seen at least twice."""
    counts = Counter(w for line in dev for w in set(_words(line)))
    vocab = {w: i for i, w in enumerate(sorted(w for w, c in counts.items() if c >= 2))}
    df = np.array([counts[w] for w in sorted(vocab, key=vocab.get)], dtype=np.float64)
    idf = np.log((1 + len(dev)) / (1 + df)) + 1.0
    projection = np.random.default_rng(seed).standard_normal((len(vocab), width)) / np.sqrt(width)
    return vocab, idf, projection


def embed(lines: list[str], vocab: dict[str, int], idf: np.ndarray, projection: np.ndarray) -> np.ndarray:
    """(N, width) float32: unit-norm TF-IDF rows times the projection."""
    x = np.zeros((len(lines), len(vocab)))
    for i, line in enumerate(lines):
        for word, count in Counter(_words(line)).items():
            if word in vocab:
                x[i, vocab[word]] = count * idf[vocab[word]]
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return (x @ projection).astype(np.float32)


def write_splits(out: Path, sizes: tuple[int, int, int], seed: int, **arrays: np.ndarray) -> None:
    """``out/{train,val,test}_<name>.npy`` for each array: rows drawn by one seeded permutation, ``sizes`` each."""
    order = np.random.default_rng(seed).permutation(len(next(iter(arrays.values()))))
    out.mkdir(parents=True, exist_ok=True)
    start = 0
    for split, size in zip(("train", "val", "test"), sizes):
        rows = order[start:start + size]
        start += size
        for name, array in arrays.items():
            np.save(out / f"{split}_{name}.npy", array[rows])


def flickr_captions(folder: Path, out: Path, seed: int = 0) -> None:
    """``out/{split}_{a,b}.npy``: captions 1 and 2 of each Flickr30K test image, embedded alike."""
    test = (folder / "test_caps.txt").read_text(encoding="utf-8").splitlines()
    dev = (folder / "dev_caps.txt").read_text(encoding="utf-8").splitlines()
    vocab, idf, projection = tfidf_projection(dev)
    a = embed(test[0::5], vocab, idf, projection)
    b = embed(test[1::5], vocab, idf, projection)
    write_splits(out, SPLIT, seed, a=a, b=b)


def wikipedia(folder: Path, out: Path) -> None:
    """``out/{split}_{a,b,labels}.npy``: the Wikipedia task's splits, raw features."""
    from harness.api import load_data, load_task

    spec = load_task(Path(__file__).resolve().parents[1] / "tasks" / "wikipedia.yaml",
                     [f"dataset.root={folder}", "dataset.standardize=false"])
    data = load_data(spec)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("train", "val", "test"):
        split = data[name]
        np.save(out / f"{name}_a.npy", split.a.numpy())
        np.save(out / f"{name}_b.npy", split.b.numpy())
        np.save(out / f"{name}_labels.npy", split.labels_a.numpy())


QUICKDRAW_SPLIT = (2100, 450, 450)


def quickdraw_halves(folder: Path, out: Path, per_class: int = 500, seed: int = 0) -> None:
    """``out/{split}_{a,b,labels}.npy``: left against right halves of QuickDraw bitmaps, classes as labels."""
    files = sorted(folder.glob("*.npy"))
    if not files:
        raise SystemExit(f"{folder}: no <class>.npy files (uint8 N x 1 x 784 bitmaps) found")
    images, labels = [], []
    for label, path in enumerate(files):
        bitmaps = np.load(path)[:per_class].reshape(-1, 28, 28).astype(np.float32) / 255.0
        images.append(bitmaps)
        labels.append(np.full(len(bitmaps), label, dtype=np.int64))
    x, y = np.concatenate(images), np.concatenate(labels)
    a, b = x[:, :, :14].reshape(len(x), -1), x[:, :, 14:].reshape(len(x), -1)
    write_splits(out, QUICKDRAW_SPLIT, seed, a=a, b=b, labels=y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flickr30k", type=Path, help="folder with test_caps.txt and dev_caps.txt (f30k_precomp)")
    parser.add_argument("--wikipedia", type=Path, help="folder with raw_features.mat and the *_txt_img_cat.list files")
    parser.add_argument("--quickdraw", type=Path, help="folder with <class>.npy QuickDraw bitmaps (uint8 N x 1 x 784)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.flickr30k:
        flickr_captions(args.flickr30k, args.out / "flickr_captions")
    if args.wikipedia:
        wikipedia(args.wikipedia, args.out / "wikipedia")
    if args.quickdraw:
        quickdraw_halves(args.quickdraw, args.out / "quickdraw_halves")


if __name__ == "__main__":
    main()
