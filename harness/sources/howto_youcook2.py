"""YouCook2 in the layout HowTo100M's evaluation code reads: ``youcook_train.pkl`` and ``youcook_val.pkl``.

Each file is a pickled list of clip records ``{'2d': feature, '3d': feature, 'caption': str, 'id': str}``
with ids ``<video>_<clip number>``; one caption per clip. The validation clips are the test set
(YouCook2 publishes no test captions; the SwAMP paper: 3,350 pairs). For model selection, the clips of
``val_videos`` training videos (drawn with ``split_seed``) are held out, so no video is in both parts.
Clip vector: 2D and 3D features, each max-pooled over time (when per frame) and L2-normalised,
concatenated. Pickles are read without running code (containers and numpy arrays only).
Captions: :mod:`harness.data.words`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from harness.api import (
    HOWTO100M_PUBLISHED,
    SOURCES,
    DataError,
    PairedData,
    WordsFields,
    assemble,
    check_files,
    expand_root,
    holdout,
    howto_video,
    read_pickle,
    require,
    split_words,
    stack_videos,
)

FIELDS = ("2d", "3d", "caption", "id")


@dataclass(frozen=True)
class HowtoYouCook2Params(WordsFields):
    root: str = ""
    train: str = "youcook_train.pkl"
    test: str = "youcook_val.pkl"
    val_videos: int = 100
    split_seed: int = 0

    def check(self, where: str) -> None:
        require(bool(self.root), where, "root is required: the folder holding youcook_train.pkl and youcook_val.pkl")
        require(self.val_videos >= 1, where, f"val_videos must be >= 1, got {self.val_videos}")
        self.check_words(where)


def read_records(path: Path) -> list[dict[str, Any]]:
    """The clip records of a ``youcook_*.pkl``, each checked for its four fields."""
    records = read_pickle(path)
    if not isinstance(records, list) or not records:
        raise DataError(f"{path} must hold a non-empty list of clip records {{{', '.join(FIELDS)}}}")
    for i, r in enumerate(records):
        if not isinstance(r, dict) or any(k not in r for k in FIELDS):
            found = sorted(r) if isinstance(r, dict) else type(r).__name__
            raise DataError(f"{path}: record {i} must hold {', '.join(FIELDS)}; found {found}")
    return records


def video_of(clip_id: str) -> str:
    """'<video>_<clip number>' -> '<video>' (HowTo100M's grouping of YouCook2 clips)."""
    return clip_id.rsplit("_", 1)[0]


def clip_parts(records: list[dict[str, Any]], path: Path) -> tuple[torch.Tensor, list[list[str]], torch.Tensor]:
    """(clips (N, 4096), caption words, caption -> clip) of one-caption clip records."""
    vectors = [howto_video(r["2d"], r["3d"], f"{path} [{r['id']}]") for r in records]
    return stack_videos(vectors, str(path)), [split_words(str(r["caption"])) for r in records], \
        torch.arange(len(records))


@SOURCES.register("howto_youcook2")
class HowtoYouCook2:
    """YouCook2 clips with HowTo100M's features; its validation clips are the test set."""

    Params = HowtoYouCook2Params

    @staticmethod
    def load(p: HowtoYouCook2Params) -> PairedData:
        root = expand_root(p.root)
        check_files("howto_youcook2", root, [p.train, p.test], HOWTO100M_PUBLISHED, p)
        train = read_records(root / p.train)
        keep, held = holdout([video_of(str(r["id"])) for r in train], p.val_videos, p.split_seed)
        parts = {"train": clip_parts([train[i] for i in keep], root / p.train),
                 "val": clip_parts([train[i] for i in held], root / p.train),
                 "test": clip_parts(read_records(root / p.test), root / p.test)}
        info = {"source": "howto_youcook2", "root": str(root), "val_videos": p.val_videos, "split_seed": p.split_seed}
        return assemble(parts, p, root, root / p.train, info)
