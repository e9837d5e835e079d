"""Seconds-long versions of every task file in tasks/, for the fuzzing tests: the task as the harness reads
it (``base:`` chain merged) with small sizes merged in, and, for tasks that read files, data generated in
their on-disk layout by the test fixtures. ``tests/test_fuzz.py`` mutates these mappings."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.config.spec import merge, read_yaml
from tests import sketch_fixtures
from tests import videotext_fixtures as fx
from tests.conftest import TASKS, TINY, TINY_IMAGE_TEXT, TINY_SKETCH, TINY_VIDEO_TEXT


@dataclass(frozen=True)
class Base:
    """A task file, the small settings merged into it, and the data it needs written under a folder."""

    task: str
    small: dict[str, Any]
    methods: tuple[str, ...]  # the methods the fuzzer runs (small enough to train in a second)
    data: Callable[[Path], dict[str, Any]] | None = None  # writes files; returns settings pointing at them


def _sections(tiny: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in tiny.items() if k in names}


GENERATED = _sections(TINY, "dataset", "train", "methods")
IMAGE_TEXT = _sections(TINY_IMAGE_TEXT, "dataset", "encoders", "metrics", "train", "methods")
VIDEO_TEXT = _sections(TINY_VIDEO_TEXT, "dataset", "encoders", "train", "methods")
SKETCH = _sections(TINY_SKETCH, "dataset", "encoders", "train", "methods")
SMALL_VIDEO_MODELS = {"encoders": {"a": {"dim": 8}, "b": {"dim": 8, "word_dim": 8}},
                      "train": {"batch_size": 8, "eval_batch_size": 16},
                      "methods": {"contrastive": {"method": "mmr"},
                                  "swamp": {"method": "swamp_mmr", "K": 4, "queue": 16}}}


def _precomp(layout: str) -> Callable[[Path], dict[str, Any]]:
    def setup(root: Path) -> dict[str, Any]:
        from tests.test_image_text_data import write_precomp

        data = root / layout
        data.mkdir(parents=True, exist_ok=True)
        write_precomp(data, sizes=(8, 5, 10), regions=3, features=6)
        (data / "testall_ims.npy").write_bytes((data / "test_ims.npy").read_bytes())
        (data / "testall_caps.txt").write_text((data / "test_caps.txt").read_text())
        return {"dataset": {"root": str(data), "val_images": 5, "vocab_cache": str(root / "vocab")}}
    return setup


def _video(write: Callable[[Path], Any], val: dict[str, Any]) -> Callable[[Path], dict[str, Any]]:
    def setup(root: Path) -> dict[str, Any]:
        write(root)
        fx.write_word2vec(root / "GoogleNews-vectors-negative300.bin", fx.word_vectors(dim=8))
        return {"dataset": {"root": str(root), **val}}
    return setup


def _video_npy(root: Path) -> dict[str, Any]:
    fx.video_npy(root, n_videos=20, frames=6, dim=128)
    return {"dataset": {"root": str(root), "split_sizes": [12, 4, 4]}}


def _video_sentences(root: Path) -> dict[str, Any]:
    """:func:`_video_npy`'s files, with the sentence vectors' cache beside them (not the user's)."""
    small = _video_npy(root)
    return {"dataset": {**small["dataset"], "cache": str(root / "feature_cache")}}


def _folders(random_test_classes: int = 0) -> Callable[[Path], dict[str, Any]]:
    def setup(root: Path) -> dict[str, Any]:
        sketch_fixtures.write_image_folders(root)
        small = sketch_fixtures.folder_task(root)
        if random_test_classes:  # TU-Berlin draws its zero-shot classes instead of listing them
            small["dataset"].update(test_classes=[], random_test_classes=random_test_classes, min_test_photos=1)
        return {k: small[k] for k in ("dataset", "encoders", "train", "methods") if k in small}
    return setup


def _wikipedia(root: Path) -> dict[str, Any]:
    """raw_features.mat (I_tr/T_tr/I_te/T_te: 128-d histograms, 10-d topic proportions) and the two .list
    files, for 40 training and 20 test pairs in 10 classes."""
    import numpy as np
    from scipy.io import savemat

    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for tag, n, listing in (("tr", 40, "trainset_txt_img_cat.list"), ("te", 20, "testset_txt_img_cat.list")):
        arrays[f"I_{tag}"] = rng.random((n, 128))
        arrays[f"T_{tag}"] = rng.dirichlet(np.ones(10), n)
        (root / listing).write_text("".join(f"t{tag}{i}\ti{tag}{i}\t{i % 10 + 1}\n" for i in range(n)))
    savemat(root / "raw_features.mat", arrays)
    return {"dataset": {"root": str(root), "val_pairs": 10}}


def _qmul(root: Path) -> dict[str, Any]:
    """<category>_{sketch,edge}_db_{train,test}.mat (uint8 N x 32 x 32 under 'data') for every category."""
    import numpy as np
    from scipy.io import savemat

    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    for category in ("shoes", "chairs", "handbags"):
        for split, n in (("train", 20), ("test", 10)):
            for drawing in ("sketch", "edge"):
                data = rng.integers(0, 256, (n, 32, 32), dtype=np.uint8)
                savemat(root / f"{category}_{drawing}_db_{split}.mat", {"data": data})
    return {"dataset": {"root": str(root), "image_size": 16}}


def _qmul_pretrained(root: Path) -> dict[str, Any]:
    """QMUL's files as :func:`_qmul` writes them, with the frozen features' cache beside them (not the user's)."""
    small = _qmul(root)
    return {"dataset": {"root": small["dataset"]["root"], "cache": str(root / "feature_cache")}}


def _paired_arrays(root: Path) -> dict[str, Any]:
    """{train,val,test}_{a,b,labels}.npy: 60 / 20 / 20 pairs of 16-d features in one space, 4 classes."""
    import numpy as np

    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 60), ("val", 20), ("test", 20)):
        a = rng.normal(size=(n, 16)).astype(np.float32)
        np.save(root / f"{split}_a.npy", a)
        np.save(root / f"{split}_b.npy", (a + 0.5 * rng.normal(size=a.shape)).astype(np.float32))
        np.save(root / f"{split}_labels.npy", np.arange(n) % 4)
    return {"dataset": {"root": str(root)}}


SMALL_OWN = {"train": {"batch_size": 8, "eval_batch_size": 16, "epochs": 2}}
SMALL_QMUL = {"encoders": {"a": {"widths": [4, 8], "dim": 8}, "b": {"widths": [4, 8], "dim": 8}},
              "train": {"batch_size": 8, "eval_batch_size": 16},
              "methods": {"swamp": {"K": 4, "queue": 16}}}
SMALL_QMUL_PRETRAINED = {"train": {"batch_size": 8, "eval_batch_size": 16, "epochs": 2},
                         "methods": {"swamp_infonce": {"K": 4, "queue": 16}}}
SMALL_WIKIPEDIA = {"encoders": {"a": {"hidden": [16], "dim": 8}, "b": {"hidden": [16], "dim": 8}},
                   "train": {"batch_size": 8, "eval_batch_size": 16},
                   "methods": {"swamp": {"K": 4, "queue": 16}, "swamp_plus_contrastive": {"K": 4, "queue": 16}}}

BASES: dict[str, Base] = {
    "synthetic": Base("synthetic", GENERATED, ("contrastive", "swamp", "cca")),
    "synthetic_ablations": Base("synthetic_ablations", GENERATED, ("contrastive", "swamp")),
    **{t: Base(t, IMAGE_TEXT, ("scan", "contrastive_par", "swamp_par"))
       for t in ("flickr30k_shapes", "coco_shapes", "coco_shapes_1k")},
    **{t: Base(t, VIDEO_TEXT, ("contrastive", "swamp")) for t in ("msrvtt_shapes", "youcook2_shapes", "lsmdc_shapes")},
    **{t: Base(t, SKETCH, ("doodle2search", "doodle2search_swamp"))
       for t in ("sketchy_shapes", "tuberlin_shapes", "quickdraw_shapes")},
    "coco": Base("coco", {**IMAGE_TEXT, "dataset": {}}, ("scan", "swamp_par"), _precomp("coco_precomp")),
    "flickr30k": Base("flickr30k", {**IMAGE_TEXT, "dataset": {}}, ("scan", "swamp_par"), _precomp("f30k_precomp")),
    "msrvtt": Base("msrvtt", SMALL_VIDEO_MODELS, ("contrastive", "swamp"), _video(fx.msrvtt, {"val_videos": 3})),
    "youcook2": Base("youcook2", SMALL_VIDEO_MODELS, ("contrastive", "swamp"), _video(fx.youcook2, {"val_videos": 2})),
    "lsmdc": Base("lsmdc", SMALL_VIDEO_MODELS, ("contrastive", "swamp"), _video(fx.lsmdc, {"val_clips": 3})),
    "msrvtt_vgg128": Base("msrvtt_vgg128", {"train": {"batch_size": 4, "eval_batch_size": 8}},
                          ("contrastive",), _video_npy),
    "msrvtt_vgg128_minilm": Base("msrvtt_vgg128_minilm", {"train": {"batch_size": 4, "eval_batch_size": 8}},
                                 ("contrastive",), _video_sentences),
    "sketchy": Base("sketchy", {}, ("doodle2search",), _folders()),
    "tuberlin": Base("tuberlin", {}, ("doodle2search",), _folders(random_test_classes=2)),
    "quickdraw": Base("quickdraw", {}, ("doodle2search",), _folders()),
    "wikipedia": Base("wikipedia", SMALL_WIKIPEDIA, ("cca", "contrastive", "swamp"), _wikipedia),
    **{t: Base(t, SMALL_QMUL, ("contrastive", "swamp"), _qmul) for t in ("qmul_shoes", "qmul_chairs", "qmul_handbags")},
    **{t: Base(t, SMALL_QMUL_PRETRAINED, ("identity", "contrastive", "swamp_infonce"), _qmul_pretrained)
       for t in ("qmul_shoes_pretrained", "qmul_chairs_pretrained")},
    **{t: Base(t, SMALL_OWN, ("identity", "cca", "contrastive", "swamp"), _paired_arrays)
       for t in ("own_features", "own_features_labels")},
}
WITHOUT_FIXTURE: tuple[str, ...] = ()  # task files no fixture can give data to (none today)


def small_task(name: str, root: Path) -> dict[str, Any]:
    """The task ``name`` as one mapping (no ``base:``), with its small settings and data under ``root``."""
    base = BASES[name]
    raw = read_yaml(TASKS / f"{base.task}.yaml")
    raw = merge(raw, base.small)
    if base.data is not None:
        raw = merge(raw, base.data(root))
    raw["name"] = f"fuzz_{name}"
    return raw
