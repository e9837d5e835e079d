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

``python -m benchmarks.own_features_sets --flickr30k DIR --wikipedia DIR --out DIR`` writes
``DIR/flickr_captions/`` and ``DIR/wikipedia/`` (each ``{train,val,test}_{a,b}.npy`` and, for Wikipedia,
``*_labels.npy``). Nothing is downloaded: the two folders are the captions and features the user has.
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


def flickr_captions(folder: Path, out: Path, seed: int = 0) -> None:
    """``out/{split}_{a,b}.npy``: captions 1 and 2 of each Flickr30K test image, embedded alike."""
    test = (folder / "test_caps.txt").read_text(encoding="utf-8").splitlines()
    dev = (folder / "dev_caps.txt").read_text(encoding="utf-8").splitlines()
    vocab, idf, projection = tfidf_projection(dev)
    a = embed(test[0::5], vocab, idf, projection)
    b = embed(test[1::5], vocab, idf, projection)
    order = np.random.default_rng(seed).permutation(len(a))
    out.mkdir(parents=True, exist_ok=True)
    start = 0
    for name, size in zip(("train", "val", "test"), SPLIT):
        rows = order[start:start + size]
        start += size
        np.save(out / f"{name}_a.npy", a[rows])
        np.save(out / f"{name}_b.npy", b[rows])


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flickr30k", type=Path, help="folder with test_caps.txt and dev_caps.txt (f30k_precomp)")
    parser.add_argument("--wikipedia", type=Path, help="folder with raw_features.mat and the *_txt_img_cat.list files")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.flickr30k:
        flickr_captions(args.flickr30k, args.out / "flickr_captions")
    if args.wikipedia:
        wikipedia(args.wikipedia, args.out / "wikipedia")


if __name__ == "__main__":
    main()
