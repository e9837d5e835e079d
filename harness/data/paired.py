"""The in-memory form every data source produces: splits of paired items of two modalities.

Modality ``a`` holds ``n_a`` items and modality ``b`` holds ``n_b`` items; ``b_to_a[j]``
names the ``a`` item that ``b`` item ``j`` is paired with (identity when one to one;
``j // 5`` for five captions per image). A training pair is ``(a[b_to_a[j]], b[j])``.
Hidden class labels, when a source has them, serve the class-based metrics only.

A *class-only* split (``paired=False``: zero-shot sketch→photo test classes, where no sketch
belongs to one photo) has labels and no pairing at all: it supports class-based metrics,
and asking it for pairs is an error rather than a made-up identity pairing.
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.errors import ConfigError, DataError

SPLITS = ("train", "val", "test")
_VAR = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


def expand_root(text: str) -> Path:
    """A dataset folder named in a task file: ``~`` and ``${NAME}`` / ``${NAME:-default}`` expanded; an
    unset variable without default is an error. Relative paths stay relative to the working directory."""
    def var(match: re.Match[str]) -> str:
        name: str = match.group(1)
        default: str | None = match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is None:
            raise DataError(f"dataset root {text!r} uses ${{{name}}}, which is not set; "
                            "set it or pass --data-root PATH")
        return default

    return Path(_VAR.sub(var, text)).expanduser()


def require_files(source: str, root: Path, expected: list[Path], advice: str) -> None:
    """Stop with every expected file, the missing ones marked, and ``advice`` when any is missing."""
    missing = [f for f in expected if not f.exists()]
    if missing:
        listing = "\n  ".join(f"{f}{'  (missing)' if f in missing else ''}" for f in expected)
        raise DataError(f"{source}: {len(missing)} file(s) missing under {root}. Expected:\n  {listing}\n{advice}")


def standardize(x: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Per-feature z-score of ``x`` using the mean and std of ``reference`` (the training split), float32;
    a feature constant in ``reference`` is only centred."""
    mean, std = reference.mean(0), reference.std(0)
    out: np.ndarray = ((x - mean) / np.where(std > 0, std, 1.0)).astype(np.float32)
    return out


def take(features: Any, index: torch.Tensor) -> Any:
    """Rows ``index`` of a modality's features: a tensor, a tuple/list of tensors indexed alike
    (e.g. word features and lengths), or any object with ``take(index)``."""
    if isinstance(features, torch.Tensor):
        return features[index]
    if isinstance(features, (tuple, list)):
        return type(features)(take(f, index) for f in features)
    return features.take(index)


def concat(chunks: list[Any]) -> Any:
    """Per-batch outputs joined along dim 0: tensors zero-padded to the largest size in every other
    dim (e.g. word features of batches with different longest captions), or tuples/lists of
    tensors joined element by element. Empties ``chunks`` as it copies, so that the peak is
    about one copy of the result (SCAN's MS-COCO test captions: 25,000 × L × 1024 floats)."""
    first = chunks[0]
    if isinstance(first, (tuple, list)):
        parts = [list(p) for p in zip(*chunks)]
        chunks.clear()
        return type(first)(concat(p) for p in parts)
    shape = [max(c.shape[d] for c in chunks) for d in range(1, first.ndim)]
    out = first.new_zeros(sum(len(c) for c in chunks), *shape)
    row = 0
    for i, c in enumerate(chunks):
        out[(slice(row, row + len(c)), *(slice(0, n) for n in c.shape[1:]))] = c
        row, chunks[i] = row + len(c), None
    chunks.clear()
    return out


class ArrayRows:
    """Rows of a numpy array, usually memory-mapped, read on demand as float32 tensors.

    SCAN's MS-COCO training features are about 33 GB: they stay on disk and only the
    rows of a batch are read.
    """

    def __init__(self, array: Any):
        self.array = array

    def __len__(self) -> int:
        return len(self.array)

    @property
    def item_shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape[1:])

    def take(self, index: torch.Tensor, pin: bool = False) -> torch.Tensor:
        """(B, *item_shape) float32 copy of rows ``index``, read in ascending order, returned in ``index``'s order;
        ``pin``: written straight into page-locked memory (see :class:`PinnedRows`)."""
        idx = index.numpy()
        order = np.argsort(idx, kind="stable")
        rows = torch.empty((len(idx), *self.item_shape), dtype=torch.float32, pin_memory=pin)
        rows.numpy()[order] = self.array[idx[order]]
        return rows

    def head(self, n: int) -> "ArrayRows":
        """The first ``n`` rows (still memory-mapped)."""
        return ArrayRows(self.array[:n])


class PinnedRows:
    """A modality's dense features (a tensor or :class:`ArrayRows`) whose ``take`` gathers a batch straight
    into page-locked (pinned) host memory. :func:`to_device` copies such a batch to the GPU asynchronously
    at full DMA speed, where a pageable batch is staged and copied synchronously. Pinned blocks come from
    PyTorch's caching host allocator, so steps reuse them. Needs CUDA."""

    def __init__(self, features: torch.Tensor | ArrayRows):
        self.features = features

    def __len__(self) -> int:
        return len(self.features)

    @property
    def item_shape(self) -> tuple[int, ...]:
        return input_shape(self.features)

    def take(self, index: torch.Tensor) -> torch.Tensor:
        """(B, *item_shape) rows ``index`` in pinned memory."""
        if isinstance(self.features, ArrayRows):
            return self.features.take(index, pin=True)
        out = torch.empty((len(index), *self.item_shape), dtype=self.features.dtype, pin_memory=True)
        return torch.index_select(self.features, 0, index, out=out)


def for_device(split: "Split", device: torch.device) -> "Split":
    """``split`` as batches for ``device`` should be drawn from it: on CUDA its dense features (region
    features, vectors) are gathered into pinned memory (:class:`PinnedRows`); unchanged elsewhere."""
    if device.type != "cuda":
        return split
    def wrap(f: Any) -> Any:
        return PinnedRows(f) if isinstance(f, (torch.Tensor, ArrayRows)) else f

    return dataclasses.replace(split, a=wrap(split.a), b=wrap(split.b))


def to_device(batch: Any, device: torch.device) -> Any:
    """Move a batch (tensor, or tuple/list of tensors) to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(b, device) for b in batch)
    return batch


def input_shape(features: Any) -> tuple[int, ...]:
    """Shape of one item of a modality (encoders size their input layer from it)."""
    if isinstance(features, torch.Tensor):
        return tuple(features.shape[1:])
    return tuple(features.item_shape)


@dataclass
class Split:
    """One split: the two modalities, the pairing (absent when ``paired`` is False), and optional
    hidden labels."""

    a: Any
    b: Any
    b_to_a: torch.Tensor | None = None
    labels_a: torch.Tensor | None = None
    labels_b: torch.Tensor | None = None
    paired: bool = True

    def __post_init__(self) -> None:
        n_a, n_b = len(self.a), len(self.b)
        self._check_labels(n_a, n_b)
        if not self.paired:
            if self.b_to_a is not None or not self.has_labels:
                raise ConfigError("a split without pairing (paired=False) takes no b_to_a and needs labels_a and "
                                  "labels_b: its only relevance is the class")
            return
        if self.b_to_a is None:
            if n_a != n_b:
                raise ConfigError(f"split has {n_a} a-items and {n_b} b-items but no pairing")
            self.b_to_a = torch.arange(n_b)
        if len(self.b_to_a) != n_b:
            raise ConfigError("b_to_a must have one entry per b item")

    def _check_labels(self, n_a: int, n_b: int) -> None:
        for name, labels, n in (("labels_a", self.labels_a, n_a), ("labels_b", self.labels_b, n_b)):
            if labels is not None and len(labels) != n:
                raise ConfigError(f"{name} has {len(labels)} entries for {n} items")

    @property
    def n_pairs(self) -> int:
        """Number of training pairs (one per b item); a class-only split has none."""
        return len(self.b) if self.paired else 0

    @property
    def has_labels(self) -> bool:
        """Whether class-based metrics can be computed."""
        return self.labels_a is not None and self.labels_b is not None

    def pair_batch(self, index: torch.Tensor) -> tuple[Any, Any]:
        """The a- and b-features of pairs ``index`` (indices into b items)."""
        if self.b_to_a is None:
            raise ConfigError("this split has no pairing (class-only), so it cannot give training pairs")
        return take(self.a, self.b_to_a[index]), take(self.b, index)


@dataclass
class PairedData:
    """All splits of a task's dataset plus a description for result files.

    ``fixed_weights`` holds weights that come with the data rather than from training, by
    modality, as state-dict entries of that modality's encoder (word2vec vectors of the
    caption vocabulary: ``{"b": {"embed.weight": (V, D)}}``); the encoders are built, then
    these are copied in and frozen (:func:`harness.run.runner.build_method`).
    """

    splits: dict[str, Split]
    info: dict[str, Any] = field(default_factory=dict)
    fixed_weights: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Split:
        if name not in self.splits:
            raise ConfigError(f"dataset has no split {name!r}; it has {sorted(self.splits)}")
        return self.splits[name]

    def for_device(self, device: torch.device) -> "PairedData":
        """Every split prepared for ``device`` by :func:`for_device` (pinned batches on CUDA)."""
        if device.type != "cuda":
            return self
        return dataclasses.replace(self, splits={name: for_device(split, device)
                                                 for name, split in self.splits.items()})

    def input_shapes(self) -> dict[str, tuple[int, ...]]:
        """Item shape per modality, read from the training split."""
        train = self["train"]
        return {"a": input_shape(train.a), "b": input_shape(train.b)}


def standardize_splits(splits: dict[str, Split]) -> dict[str, Split]:
    """Every split with each modality's features z-scored per feature by the training split's mean and
    std (:func:`standardize`); pairing and labels unchanged. Features must be in-memory tensors."""
    train = splits["train"]
    out = {}
    for name, split in splits.items():
        a = torch.from_numpy(standardize(split.a.numpy(), train.a.numpy()))
        b = torch.from_numpy(standardize(split.b.numpy(), train.b.numpy()))
        out[name] = replace(split, a=a, b=b)
    return out
