"""Whether a study's budget was enough: its best-so-far validation value against trials, and the rule that says a
row has converged.

A row has **converged** when its best-so-far value improved by no more than the set's tolerance over the last
quarter of its trials (at least one trial): ``max(one validation item's worth, 0.5 points)`` for a metric in points
(a recall or a mean average precision over ``n`` validation items: one item is ``100 / n`` points), one rank for a
rank statistic. A set has converged when every row has; where one has not, every row of the set gets more trials,
equally, up to a stated cap, and a row still rising at the cap is marked ``[budget not converged]``. Failed and
pruned trials carry no value and leave the best where it was.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MIN_POINTS = 0.5  # points: the smallest improvement counted as still rising, whatever the split's size
RANK_STEP = 1.0  # ranks: the tolerance of a median or mean rank
NOT_CONVERGED = "[budget not converged]"


def best_so_far(values: Sequence[float | None], lower: bool) -> list[float | None]:
    """The best value among the first ``i + 1`` trials, for each ``i`` (None until a trial has a value)."""
    out: list[float | None] = []
    best: float | None = None
    for v in values:
        if v is not None and not math.isnan(v) and (best is None or (v < best if lower else v > best)):
            best = float(v)
        out.append(best)
    return out


def tolerance(items: int | None, rank_metric: bool) -> float:
    """The improvement a row may still make over its last quarter of trials and count as converged: one rank for a
    rank statistic; else one validation item's worth in points (``100 / items``), at least :data:`MIN_POINTS`."""
    if rank_metric:
        return RANK_STEP
    if not items or items <= 0:
        return MIN_POINTS
    return max(100.0 / items, MIN_POINTS)


@dataclass(frozen=True)
class Convergence:
    """One row's reading: the best-so-far curve, the improvement over its last quarter, and whether it converged."""

    curve: list[float | None]
    window: int  # trials in the last quarter
    gain: float | None  # how much the best improved over them (in the metric's better direction); None: no value
    tolerance: float

    @property
    def converged(self) -> bool:
        return self.gain is not None and self.gain <= self.tolerance + 1e-12

    def record(self) -> dict[str, object]:
        return {"best_so_far": self.curve, "window": self.window, "gain": self.gain, "tolerance": self.tolerance,
                "converged": self.converged}


def window_of(trials: int) -> int:
    """The last quarter of ``trials`` trials (rounded up; at least one)."""
    return max(1, math.ceil(trials / 4))


def read(values: Sequence[float | None], lower: bool, tol: float) -> Convergence:
    """The convergence of one row whose trials, in the order they ran, scored ``values`` on validation."""
    curve = best_so_far(values, lower)
    window = window_of(len(curve))
    if not curve or curve[-1] is None:
        return Convergence(curve, window, None, tol)
    before = curve[-window - 1] if len(curve) > window else None
    if before is None:  # a single trial, or no value before the last quarter: the row found all it found in it
        return Convergence(curve, window, math.inf, tol)
    gain = (before - curve[-1]) if lower else (curve[-1] - before)
    return Convergence(curve, window, float(gain), tol)


def more_trials(readings: dict[str, Convergence], trials: int, cap: int, step: int | None = None) -> int:
    """The budget every row of a set gets next: ``trials`` when every row converged or the cap is reached, else
    ``trials`` plus ``step`` (default a quarter of ``trials``, at least one), never above ``cap``."""
    if trials >= cap or all(r.converged for r in readings.values()):
        return trials
    return min(cap, trials + (step if step else window_of(trials)))
