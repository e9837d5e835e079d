"""MSR-VTT in the layout HowTo100M's evaluation code reads (JSFusion's 1K-A test split).

Files under ``root`` (names are HowTo100M's ``args.py`` defaults, each a parameter here):

* ``MSRVTT_train.csv``: the training videos, column ``video_id``;
* ``MSRVTT_data.json``: MSR-VTT's annotation, ``{"sentences": [{"video_id": ..., "caption": ...}, ...]}``
  (20 captions per video; only those of training videos are used);
* ``MSRVTT_train.pth`` and ``MSRVTT_JSFUSION_test.pth``: feature dictionaries
  ``{'2d': {video id: feature}, '3d': {...}}`` (torch files; a pickle of numpy arrays also works);
* ``MSRVTT_JSFUSION_test.csv``: the 1K-A test, one caption per video, columns ``video_id`` and ``sentence``.

Video vector: 2D and 3D features, each max-pooled over time (when per frame) and L2-normalised,
concatenated (4,096-d). Training draws one of each video's captions per epoch; ``val_videos`` of the
training videos (seeded by ``split_seed``) are held out, with all their captions, for model selection
(HowTo100M's training script has none: it evaluates on the test set after every epoch).
Captions: :mod:`harness.data.words`.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

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
    howto_parts,
    read_feature_dict,
    require,
)


@dataclass(frozen=True)
class HowtoMSRVTTParams(WordsFields):
    root: str = ""
    train_csv: str = "MSRVTT_train.csv"
    captions_json: str = "MSRVTT_data.json"
    train_features: str = "MSRVTT_train.pth"
    test_csv: str = "MSRVTT_JSFUSION_test.csv"
    test_features: str = "MSRVTT_JSFUSION_test.pth"
    val_videos: int = 500
    split_seed: int = 0

    def check(self, where: str) -> None:
        require(bool(self.root), where, "root is required: the folder holding HowTo100M's MSR-VTT files")
        require(self.val_videos >= 1, where, f"val_videos must be >= 1, got {self.val_videos}")
        self.check_words(where)


def read_csv(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    """Rows of a CSV with a header naming at least ``columns``."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            absent = [c for c in columns if c not in (reader.fieldnames or [])]
            if absent:
                raise DataError(f"{path} has no column(s) {absent}; its header is {reader.fieldnames}")
            return list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise DataError(f"cannot read {path}: {err}") from err


def read_sentences(path: Path) -> list[tuple[str, str]]:
    """(video id, caption) of every entry of MSR-VTT's annotation JSON."""
    try:
        sentences = json.loads(path.read_text(encoding="utf-8"))["sentences"]
        return [(str(s["video_id"]), str(s["caption"])) for s in sentences]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise DataError(f"{path} is not MSR-VTT's annotation ({{'sentences': [{{'video_id', 'caption'}}, ...]}}): "
                        f"{type(err).__name__} {err}") from err


@SOURCES.register("howto_msrvtt")
class HowtoMSRVTT:
    """MSR-VTT with HowTo100M's features and JSFusion's 1K-A test (1,000 videos, one caption each)."""

    Params = HowtoMSRVTTParams

    @staticmethod
    def load(p: HowtoMSRVTTParams) -> PairedData:
        root = expand_root(p.root)
        check_files("howto_msrvtt", root, [p.train_csv, p.captions_json, p.train_features, p.test_csv,
                                           p.test_features], HOWTO100M_PUBLISHED, p)
        train_ids = [r["video_id"] for r in read_csv(root / p.train_csv, ("video_id",))]
        test_rows = [(r["video_id"], r["sentence"]) for r in read_csv(root / p.test_csv, ("video_id", "sentence"))]
        chosen = set(train_ids)
        rows = [(v, c) for v, c in read_sentences(root / p.captions_json) if v in chosen]
        without = sorted(chosen - {v for v, _ in rows})
        if without:
            raise DataError(f"{root / p.captions_json} has no caption for {len(without)} training video(s) of "
                            f"{root / p.train_csv}, e.g. {without[:3]}")
        keep, held = holdout([v for v, _ in rows], p.val_videos, p.split_seed)
        train_feats = read_feature_dict(root / p.train_features)
        parts = {"train": howto_parts([rows[i] for i in keep], train_feats, root / p.train_features),
                 "val": howto_parts([rows[i] for i in held], train_feats, root / p.train_features),
                 "test": howto_parts(test_rows, read_feature_dict(root / p.test_features), root / p.test_features)}
        info = {"source": "howto_msrvtt", "root": str(root), "val_videos": p.val_videos, "split_seed": p.split_seed}
        return assemble(parts, p, root, root / p.captions_json, info)
