"""Collapse detection, the same for every method: a pure function of the per-epoch history.

Two signals, each checked after every epoch:

* **plateau** — a logged loss term ``T`` stays within ``tolerance`` (relative) of its collapsed
  value, the value it takes when every score is equal (a method logs that value under
  ``plateau_key(T)``, e.g. the max-violation hinge's 2·B·margin; :mod:`harness.ops.losses`);
* **chance** — the validation selection metric stays at the level random scores reach: at
  most their mean + 3 std over draws (at least mean − 3 std for a rank, which is minimised).

A signal that holds for ``patience`` consecutive epochs is a collapse: the runner prints one
warning line naming the likely cause and the settings to try, and the result file records it
under ``collapse`` (tables then flag the run).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from harness.ops.losses import plateau_key
from harness.run import evaluate as ev
from harness.data.paired import Split
from harness.config.spec import MetricSpec

SUFFIX = "@collapsed"
CHANCE_SDS = 3.0


def plateau_key(term: str) -> str:
    """History key of the value the logged term ``term`` takes on a collapsed embedding."""
    return f"{term}{SUFFIX}"


@dataclass(frozen=True)
class Chance:
    """The selection metric under random scores: mean and std over draws, and whether lower is better."""

    metric: str
    mean: float
    std: float
    lower_is_better: bool = False

    def holds(self, value: float) -> bool:
        """Whether ``value`` is within chance: no better than mean + 3 std (mean − 3 std for ranks)."""
        if self.lower_is_better:
            return value >= self.mean - CHANCE_SDS * self.std
        return value <= self.mean + CHANCE_SDS * self.std


def chance_level(split: Split, metrics: MetricSpec, select: str, draws: int = 10, seed: int = 0) -> Chance:
    """Mean and std of ``select`` over ``draws`` matrices of i.i.d. uniform scores on ``split``."""
    gen = torch.Generator().manual_seed(seed)
    values = []
    for _ in range(draws):
        for n_folds in metrics.folds:
            folds = ev.make_folds(split, n_folds)
            blocks = [torch.rand(len(a), len(b), generator=gen) for a, b in folds]
            out = ev.rank_folds(blocks, folds, split, metrics)
            if select in out:
                values.append(out[select])
    x = torch.tensor(values, dtype=torch.float64)
    return Chance(select, float(x.mean()), float(x.std()) if len(x) > 1 else 0.0,
                  select.endswith(("MedR", "MeanR")))


def epoch_signals(record: dict[str, float], chance: Chance | None, tolerance: float) -> dict[str, str]:
    """{signal key: description} of the collapse signals that hold in one epoch's record."""
    out = {}
    for term, value in record.items():
        collapsed = record.get(plateau_key(term))
        if collapsed and abs(value / collapsed - 1.0) <= tolerance:
            out[f"plateau:{term}"] = (f"the loss term '{term}' sits at its collapsed value {collapsed:.4g} "
                                      f"(every pair scored alike; within {tolerance:.0%})")
    val = record.get(f"val/{chance.metric}") if chance is not None else None
    if val is not None and chance.holds(val):
        out["chance"] = (f"validation {chance.metric} stays at chance ({chance.mean:.2f} ± {chance.std:.2f} "
                         f"under random scores)")
    return out


def detect(history: list[dict[str, float]], chance: Chance | None, *, patience: int, tolerance: float,
           best_epoch: int | None = None) -> dict[str, Any] | None:
    """The first signal that held for ``patience`` consecutive epochs, or None (also when ``patience`` is 0).

    Returns the signal, its description, the epochs of that stretch (``from_epoch`` .. ``to_epoch``,
    the stretch's end or the last epoch so far), whether it still held at the last epoch and, given
    ``best_epoch``, at the selected epoch.
    """
    if patience < 1:
        return None
    signals = [epoch_signals(r, chance, tolerance) for r in history]
    for key in dict.fromkeys(k for s in signals for k in s):
        held = [key in s for s in signals]
        start = _first_run(held, patience)
        if start is None:
            continue
        end = start
        while end + 1 < len(held) and held[end + 1]:
            end += 1
        found = {"signal": key, "description": signals[start][key], "from_epoch": start + 1, "to_epoch": end + 1,
                 "at_last_epoch": held[-1], "patience": patience, "tolerance": tolerance}
        if best_epoch is not None and 1 <= best_epoch <= len(held):
            found["at_best_epoch"] = held[best_epoch - 1]
        return found
    return None


def _first_run(held: list[bool], length: int) -> int | None:
    """Index of the first of ``length`` consecutive True values."""
    count = 0
    for i, h in enumerate(held):
        count = count + 1 if h else 0
        if count == length:
            return i - length + 1
    return None


def warning_line(found: dict[str, Any], run: str, method: str) -> str:
    """One line naming what was seen, the likely cause and the settings to try."""
    cause = ("likely cause: the hardest-negative (max_violation) hinge from a random start, often on features "
             "with little variance" if found["signal"].startswith("plateau") else
             "likely cause: a collapsed or untrained embedding (features of little variance, or a learning rate "
             "that is too low or too high)")
    return (f"warning: {run}: training looks collapsed from epoch {found['from_epoch']}: {found['description']} "
            f"for {found['patience']} epochs; {cause}. Try --set dataset.standardize=true, "
            f"--set {method}.loss=infonce (or sum), --set {method}.warmup_epochs=10, or another train.lr.")
