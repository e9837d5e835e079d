"""LSMDC in the layout HowTo100M's evaluation code reads.

Files under ``root`` (HowTo100M's ``args.py`` defaults):

* ``LSMDC16_annos_training.csv`` and ``LSMDC16_challenge_1000_publictect.csv``: LSMDC's tab-separated
  annotations without a header; field 0 is the clip id and field 5 (counting from 0: the sixth, after
  the four time stamps) the sentence, which is where HowTo100M reads it (``data[5]``);
* ``LSMDC_train.pth`` and ``LSMDC_test.pth``: feature dictionaries ``{'2d': {clip id: feature}, '3d': {...}}``.

The public test has 1,000 clips, one sentence each. ``val_clips`` training clips (drawn with
``split_seed``) are held out for model selection. Clip vector and captions as in
:mod:`harness.sources.howto_msrvtt`.
"""
from __future__ import annotations

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
    read_lines,
    require,
)

ID_FIELD, SENTENCE_FIELD = 0, 5


@dataclass(frozen=True)
class HowtoLSMDCParams(WordsFields):
    root: str = ""
    train_csv: str = "LSMDC16_annos_training.csv"
    train_features: str = "LSMDC_train.pth"
    test_csv: str = "LSMDC16_challenge_1000_publictect.csv"
    test_features: str = "LSMDC_test.pth"
    val_clips: int = 1000
    split_seed: int = 0

    def check(self, where: str) -> None:
        require(bool(self.root), where, "root is required: the folder holding HowTo100M's LSMDC files")
        require(self.val_clips >= 1, where, f"val_clips must be >= 1, got {self.val_clips}")
        self.check_words(where)


def read_annotations(path: Path) -> list[tuple[str, str]]:
    """(clip id, sentence) per line of an LSMDC tab-separated annotation file."""
    try:
        lines = read_lines(path)
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"cannot read {path}: {err}") from err
    rows = []
    for number, line in enumerate(lines, 1):
        fields = line.split("\t")
        if len(fields) <= SENTENCE_FIELD or not fields[ID_FIELD].strip():
            raise DataError(f"{path}:{number}: expected at least {SENTENCE_FIELD + 1} tab-separated fields (clip id, "
                            f"4 time stamps, sentence), got {len(fields)}: {line[:60]!r}")
        rows.append((fields[ID_FIELD].strip(), fields[SENTENCE_FIELD]))
    if not rows:
        raise DataError(f"{path} holds no annotation line")
    return rows


@SOURCES.register("howto_lsmdc")
class HowtoLSMDC:
    """LSMDC movie clips with HowTo100M's features; the 1,000-clip public test."""

    Params = HowtoLSMDCParams

    @staticmethod
    def load(p: HowtoLSMDCParams) -> PairedData:
        root = expand_root(p.root)
        check_files("howto_lsmdc", root, [p.train_csv, p.train_features, p.test_csv, p.test_features],
                    HOWTO100M_PUBLISHED, p)
        rows = read_annotations(root / p.train_csv)
        keep, held = holdout([c for c, _ in rows], p.val_clips, p.split_seed)
        train_feats = read_feature_dict(root / p.train_features)
        parts = {"train": howto_parts([rows[i] for i in keep], train_feats, root / p.train_features),
                 "val": howto_parts([rows[i] for i in held], train_feats, root / p.train_features),
                 "test": howto_parts(read_annotations(root / p.test_csv), read_feature_dict(root / p.test_features),
                                     root / p.test_features)}
        info = {"source": "howto_lsmdc", "root": str(root), "val_clips": p.val_clips, "split_seed": p.split_seed}
        return assemble(parts, p, root, root / p.train_csv, info)
