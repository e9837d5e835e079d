"""Generated files in every layout the text–video sources read, small enough for seconds-long tests.

Videos get 2D and 3D features (per-video vectors, or T × d frames where the layout allows it) and
captions drawn from a small word list plus a few words that the word2vec fixture lacks.
"""
from __future__ import annotations

import csv
import json
import pickle
from pathlib import Path

import numpy as np
import torch

KNOWN = ("a man is cooking pasta in the kitchen woman plays guitar on stage dog runs across park red car "
         "drives down road child sings song").split()
UNKNOWN = ("zorbly", "Quux")  # words the word2vec fixture does not hold
DIMS = (6, 4)  # 2D and 3D feature widths (the real ones: 2,048 each)


def sentence(rng: np.random.Generator, n_words: int = 6) -> str:
    """A caption of known words, sometimes with an unknown one and punctuation."""
    words = list(rng.choice(KNOWN, n_words))
    if rng.random() < 0.3:
        words.insert(1, str(rng.choice(UNKNOWN)))
    return " ".join(words) + ("." if rng.random() < 0.5 else "")


def write_word2vec(path: Path, vectors: dict[str, np.ndarray], binary: bool = True) -> Path:
    """A word2vec file (binary: word, space, float32 little-endian values, newline; text: one line each)."""
    dim = len(next(iter(vectors.values())))
    with open(path, "wb") as f:
        f.write(f"{len(vectors)} {dim}\n".encode())
        for word, vec in vectors.items():
            if binary:
                f.write(word.encode() + b" " + np.asarray(vec, dtype="<f4").tobytes() + b"\n")
            else:
                f.write((word + " " + " ".join(f"{x:.6f}" for x in vec) + "\n").encode())
    return path


def word_vectors(dim: int = 8, seed: int = 0) -> dict[str, np.ndarray]:
    """A vector for every known word (none for :data:`UNKNOWN`)."""
    rng = np.random.default_rng(seed)
    return {w: rng.standard_normal(dim).astype(np.float32) for w in dict.fromkeys(KNOWN)}


def features(rng: np.random.Generator, ids: list[str], frames: int = 0) -> dict[str, dict[str, torch.Tensor]]:
    """HowTo100M's feature dictionary {'2d': {id: tensor}, '3d': {...}}; per frame when ``frames`` > 0."""
    shape = (lambda d: (frames, d)) if frames else (lambda d: (d,))
    return {key: {v: torch.from_numpy(rng.random(shape(d)).astype(np.float32)) for v in ids}
            for key, d in zip(("2d", "3d"), DIMS)}


def msrvtt(root: Path, n_train: int = 12, n_test: int = 6, per_video: int = 3, seed: int = 0) -> dict:
    """HowTo100M's MSR-VTT files; returns the ids and captions written."""
    rng = np.random.default_rng(seed)
    train = [f"video{i}" for i in range(n_train)]
    test = [f"video{n_train + i}" for i in range(n_test)]
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "MSRVTT_train.csv", "w", newline="") as f:
        csv.writer(f).writerows([["video_id"], *[[v] for v in train]])
    sentences = [{"video_id": v, "caption": sentence(rng), "sen_id": i}
                 for i, v in enumerate(v for v in train + test for _ in range(per_video))]
    (root / "MSRVTT_data.json").write_text(json.dumps({"videos": [], "sentences": sentences}))
    test_caps = [sentence(rng) for _ in test]
    with open(root / "MSRVTT_JSFUSION_test.csv", "w", newline="") as f:
        csv.writer(f).writerows([["key", "vid_key", "video_id", "sentence"],
                                 *[[f"ret{i}", f"msr{v[5:]}", v, c] for i, (v, c) in enumerate(zip(test, test_caps))]])
    torch.save(features(rng, train), root / "MSRVTT_train.pth")
    torch.save(features(rng, test, frames=3), root / "MSRVTT_JSFUSION_test.pth")
    return {"train": train, "test": test, "test_captions": test_caps, "sentences": sentences}


def youcook2(root: Path, n_videos: int = 6, clips: int = 3, n_test: int = 5, seed: int = 0) -> dict:
    """HowTo100M's youcook_{train,val}.pkl (lists of clip records with numpy features)."""
    rng = np.random.default_rng(seed)

    def record(clip_id: str) -> dict:
        return {"2d": rng.random(DIMS[0]).astype(np.float32), "3d": rng.random(DIMS[1]).astype(np.float32),
                "caption": sentence(rng), "id": clip_id}

    train = [record(f"vid{v}_{c}") for v in range(n_videos) for c in range(clips)]
    test = [record(f"test{v}_{v % 2}") for v in range(n_test)]
    root.mkdir(parents=True, exist_ok=True)
    for name, records in (("youcook_train.pkl", train), ("youcook_val.pkl", test)):
        (root / name).write_bytes(pickle.dumps(records))
    return {"train": train, "test": test}


def lsmdc(root: Path, n_train: int = 14, n_test: int = 5, seed: int = 0) -> dict:
    """LSMDC's tab-separated annotations (clip id, 4 time stamps, sentence) and HowTo100M's features."""
    rng = np.random.default_rng(seed)
    train = [f"0001_Movie_{i:02d}.00.00-{i:02d}.00.05" for i in range(n_train)]
    test = [f"3001_Other_{i:02d}.00.00-{i:02d}.00.05" for i in range(n_test)]
    root.mkdir(parents=True, exist_ok=True)
    captions = {}
    for name, ids in (("LSMDC16_annos_training.csv", train), ("LSMDC16_challenge_1000_publictect.csv", test)):
        captions[name] = [sentence(rng) for _ in ids]
        lines = [f"{c}\t00.00.00.000\t00.00.05.000\t00.00.00.100\t00.00.05.100\t{s}"
                 for c, s in zip(ids, captions[name])]
        (root / name).write_text("\n".join(lines) + "\n")
    torch.save(features(rng, train), root / "LSMDC_train.pth")
    (root / "LSMDC_test.pth").write_bytes(pickle.dumps({k: {v: t.numpy() for v, t in d.items()}
                                                        for k, d in features(rng, test).items()}))
    return {"train": train, "test": test, "test_captions": captions["LSMDC16_challenge_1000_publictect.csv"]}


def video_npy(root: Path, n_videos: int = 20, frames: int = 5, dim: int = 8, per_video: int = 1,
              seed: int = 0) -> dict:
    """The per-video layout: features/<id>.npy (frames × dim) and caption.txt ('id|caption' lines)."""
    rng = np.random.default_rng(seed)
    ids = [f"video{i}" for i in range(n_videos)]
    (root / "features").mkdir(parents=True, exist_ok=True)
    arrays = {}
    for v in ids:
        arrays[v] = rng.standard_normal((frames, dim)).astype(np.float32)
        np.save(root / "features" / f"{v}.npy", arrays[v])
    lines = [f"{v}|{sentence(rng)}" for _ in range(per_video) for v in ids]
    (root / "caption.txt").write_text("\n".join(lines) + "\n")
    return {"ids": ids, "arrays": arrays, "lines": lines}
