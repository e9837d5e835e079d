"""Your own video features: one ``.npy`` per video plus a ``video_id|caption`` file.

Layout under ``root``::

    features/<video_id>.npy    # float array, T × d (frames × features) or d, one per video
    caption.txt                # one 'video_id|caption' per line; a video may have several lines

Each video's T × d array is averaged (``pool: mean``) or max-pooled (``pool: max``) over T and,
with ``normalize: true``, L2-normalised. Videos (in order of first appearance in the caption
file) are split by a permutation seeded with ``split_seed`` into ``split_sizes`` train / val /
test videos, each with all its captions; training draws one caption per video per epoch when
videos have several. Captions: :mod:`harness.data.words` (word2vec file or learned embeddings).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.api import (
    POOLS,
    SOURCES,
    SPLITS,
    DataError,
    PairedData,
    WordsFields,
    assemble,
    caption_owner,
    check_files,
    expand_root,
    pool_frames,
    read_lines,
    require,
    split_words,
    stack_videos,
    unit_rows,
)

LAYOUT = ("Layout: <root>/features/<video_id>.npy (T x d float array per video) and <root>/caption.txt with one "
          "'video_id|caption' line per caption (see harness/sources/video_npy.py).")


@dataclass(frozen=True)
class VideoNpyParams(WordsFields):
    root: str = ""
    features: str = "features"
    captions: str = "caption.txt"
    pool: str = "mean"
    normalize: bool = True
    split_sizes: tuple[int, ...] = (800, 100, 100)
    split_seed: int = 0

    def check(self, where: str) -> None:
        require(bool(self.root), where, "root is required: the folder holding features/ and the caption file")
        require(self.pool in POOLS, where, f"pool must be one of {', '.join(POOLS)}, got {self.pool!r}")
        require(len(self.split_sizes) == 3 and min(self.split_sizes) >= 1, where,
                f"split_sizes needs three positive video counts ({', '.join(SPLITS)}), got {list(self.split_sizes)}")
        self.check_words(where)


def read_captions(path: Path) -> list[tuple[str, str]]:
    """(video id, caption) per non-blank line of a ``video_id|caption`` file."""
    pairs = []
    for number, line in enumerate(read_lines(path), 1):
        if not line:
            continue
        video, sep, caption = line.partition("|")
        if not sep or not video.strip() or "/" in video:
            raise DataError(f"{path}:{number}: expected 'video_id|caption', got {line[:60]!r}")
        pairs.append((video.strip(), caption.strip()))
    if not pairs:
        raise DataError(f"{path} holds no 'video_id|caption' line")
    return pairs


def read_video(path: Path, p: VideoNpyParams) -> np.ndarray:
    """One video's pooled (and normalised) feature vector."""
    try:
        frames = np.load(path)
    except (OSError, ValueError) as err:
        raise DataError(f"cannot read {path}: {err}") from err
    if frames.ndim not in (1, 2) or frames.size == 0 or not np.issubdtype(frames.dtype, np.number):
        raise DataError(f"{path} has shape {frames.shape} ({frames.dtype}); expected a T x d number array")
    vector = pool_frames(frames.astype(np.float32), p.pool)
    if not np.isfinite(vector).all():
        raise DataError(f"{path} holds NaN or infinite values")
    return unit_rows(vector) if p.normalize else vector


@SOURCES.register("video_npy")
class VideoNpy:
    """Per-video feature arrays and a caption file (e.g. the MSR-VTT VGG features of tasks/msrvtt_vgg128.yaml)."""

    Params = VideoNpyParams

    @staticmethod
    def load(p: VideoNpyParams) -> PairedData:
        root = expand_root(p.root)
        check_files("video_npy", root, [p.captions, p.features], LAYOUT)
        pairs = read_captions(root / p.captions)
        videos = list(dict.fromkeys(v for v, _ in pairs))
        missing = [v for v in videos if not (root / p.features / f"{v}.npy").is_file()]
        if missing:
            raise DataError(f"{root / p.features}: no .npy for {len(missing)} of the {len(videos)} captioned videos, "
                            f"e.g. {', '.join(f'{v}.npy' for v in missing[:3])}. {LAYOUT}")
        if sum(p.split_sizes) > len(videos):
            raise DataError(f"split_sizes {list(p.split_sizes)} need {sum(p.split_sizes)} videos; "
                            f"{root / p.captions} captions {len(videos)}")
        order = np.random.default_rng(p.split_seed).permutation(len(videos))
        bounds = np.cumsum([0, *p.split_sizes])
        parts = {}
        for name, lo, hi in zip(SPLITS, bounds[:-1], bounds[1:]):
            ids = [videos[i] for i in order[lo:hi]]
            vectors = stack_videos([read_video(root / p.features / f"{v}.npy", p) for v in ids], str(root))
            chosen = set(ids)
            mine = [(v, c) for v, c in pairs if v in chosen]
            parts[name] = (vectors, [split_words(c) for _, c in mine], caption_owner(ids, [v for v, _ in mine], name))
        info = {"source": "video_npy", "root": str(root), "pool": p.pool, "normalize": p.normalize,
                "split_seed": p.split_seed, "feature_dim": int(parts["train"][0].shape[1])}
        return assemble(parts, p, root, root / p.captions, info)

