"""Choosing settings where the validation split is too small to choose by: the study's objective as the mean over
``k`` folds of the training split.

A validation split of 20 items (QMUL chairs) moves by five points per item, so that one or two items decide which
trial wins. Where a task's validation split has fewer than :data:`harness.tune.options.SMALL_VALIDATION` items, the
reference table's studies therefore score each trial by training it ``k`` times, each time on the training split
without one fold and validating on that fold, and take the mean. The folds partition the training split's ``a`` items
(each with every ``b`` item paired with it: all captions of an image fall in one fold), drawn by a seeded permutation;
the validation and test splits are never part of them, and the test split is never read.

    folds = make_folds(data["train"], k=3, seed=0)    # [array of a-item indices] * 3, disjoint, covering train
    view = fold_view(data, folds, 0)                   # train: folds 1 and 2; val: fold 0
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from harness.config.spec import DIRECTIONS
from harness.data.paired import PairedData, Split, take
from harness.errors import ConfigError


def make_folds(train: Split, k: int, seed: int) -> list[np.ndarray]:
    """``k`` disjoint sets of the training split's ``a``-item indices covering all of them (a seeded permutation cut
    into ``k`` near-equal parts, each sorted)."""
    n = len(train.a)
    if k < 3:
        raise ConfigError(f"folds: give k >= 3 folds of the training split, got {k}")
    if n < 2 * k:
        raise ConfigError(f"folds: the training split has {n} items, too few for {k} folds; give fewer folds")
    order = np.random.default_rng(seed).permutation(n)
    return [np.sort(part) for part in np.array_split(order, k)]


def _subset(split: Split, a_items: np.ndarray) -> Split:
    """The ``a`` items ``a_items`` with every ``b`` item paired with them, the pairing renumbered."""
    if split.b_to_a is None:
        raise ConfigError("folds need a paired training split (each b item paired with an a item)")
    a_index = torch.as_tensor(a_items, dtype=torch.long)
    keep_b = torch.isin(split.b_to_a, a_index).nonzero().flatten()
    new_of = torch.full((len(split.a),), -1, dtype=torch.long)
    new_of[a_index] = torch.arange(len(a_index))
    labels_a = None if split.labels_a is None else split.labels_a[a_index]
    labels_b = None if split.labels_b is None else split.labels_b[keep_b]
    return Split(a=take(split.a, a_index), b=take(split.b, keep_b), b_to_a=new_of[split.b_to_a[keep_b]],
                 labels_a=labels_a, labels_b=labels_b)


def fold_view(data: PairedData, folds: list[np.ndarray], i: int) -> PairedData:
    """The data one fold's training sees: the training split without fold ``i`` as ``train``, fold ``i`` as ``val``;
    no test split."""
    train = data["train"]
    rest = np.sort(np.concatenate([f for j, f in enumerate(folds) if j != i]))
    splits = {"train": _subset(train, rest), "val": _subset(train, folds[i])}
    return dataclasses.replace(data, splits=splits)


def record(folds: list[np.ndarray], seed: int) -> dict[str, Any]:
    """The folds as a set's manifest records them: their number, the seed of the permutation and each fold's items
    (indices of the training split's ``a`` items)."""
    return {"k": len(folds), "seed": seed, "split": "train", "items": [[int(i) for i in f] for f in folds]}


def query_items(split: Split, metric: str) -> int:
    """How many queries of ``split`` a metric of ``metric``'s direction averages over (``a`` items for a2b, i2t, ...;
    ``b`` items for b2a, t2i, ...): one of them is ``100 / n`` points of a recall or a mean average precision."""
    direction = metric.split("/", 1)[0]
    return len(split.b) if DIRECTIONS.get(direction, False) else len(split.a)
