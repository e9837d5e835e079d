"""The in-memory form every data source produces: splits of paired items of two modalities.

Modality ``a`` holds ``n_a`` items and modality ``b`` holds ``n_b`` items; ``b_to_a[j]``
names the ``a`` item that ``b`` item ``j`` is paired with (identity when one to one;
``j // 5`` for five captions per image). A training pair is ``(a[b_to_a[j]], b[j])``.
Hidden class labels, when a source has them, serve the class-based metrics only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from harness.errors import ConfigError

SPLITS = ("train", "val", "test")


def take(features: Any, index: torch.Tensor) -> Any:
    """Rows ``index`` of a modality's features: a tensor, or any object with ``take(index)``."""
    if isinstance(features, torch.Tensor):
        return features[index]
    return features.take(index)


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
    """One split: the two modalities, the pairing, and optional hidden labels."""

    a: Any
    b: Any
    b_to_a: torch.Tensor | None = None
    labels_a: torch.Tensor | None = None
    labels_b: torch.Tensor | None = None

    def __post_init__(self) -> None:
        n_a, n_b = len(self.a), len(self.b)
        if self.b_to_a is None:
            if n_a != n_b:
                raise ConfigError(f"split has {n_a} a-items and {n_b} b-items but no pairing")
            self.b_to_a = torch.arange(n_b)
        if len(self.b_to_a) != n_b:
            raise ConfigError("b_to_a must have one entry per b item")
        for name, labels, n in (("labels_a", self.labels_a, n_a), ("labels_b", self.labels_b, n_b)):
            if labels is not None and len(labels) != n:
                raise ConfigError(f"{name} has {len(labels)} entries for {n} items")

    @property
    def n_pairs(self) -> int:
        """Number of training pairs (one per b item)."""
        return len(self.b)

    @property
    def has_labels(self) -> bool:
        """Whether class-based metrics can be computed."""
        return self.labels_a is not None and self.labels_b is not None

    def pair_batch(self, index: torch.Tensor) -> tuple[Any, Any]:
        """The a- and b-features of pairs ``index`` (indices into b items)."""
        return take(self.a, self.b_to_a[index]), take(self.b, index)


@dataclass
class PairedData:
    """All splits of a task's dataset plus a description for result files."""

    splits: dict[str, Split]
    info: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Split:
        if name not in self.splits:
            raise ConfigError(f"dataset has no split {name!r}; it has {sorted(self.splits)}")
        return self.splits[name]

    def input_shapes(self) -> dict[str, tuple[int, ...]]:
        """Item shape per modality, read from the training split."""
        train = self["train"]
        return {"a": input_shape(train.a), "b": input_shape(train.b)}
