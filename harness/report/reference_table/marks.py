"""What a cell is marked with besides its number: a failed seed, a study optimum its other seeds do not hold, a cell
below the no-training floor, a row whose budget had not converged; and a set whose validation metric saturates, which
cannot choose among rows.

**Failed seed.** A seed whose selected validation value (``val_at_best``, what its run chose its epoch by) lies far
below its row's other seeds: more than :data:`MADS` scaled median absolute deviations (MAD × 1.4826, the normal
consistent scale) below the median of the other seeds, and at least :data:`MIN_GAP` points (ranks, for a rank metric)
or :data:`MIN_ITEMS` validation items' worth (``100 / items`` points each), whichever is larger, below it. The rule is
robust: the other seeds' median and MAD are not moved by the failed seed itself, and the floor of a few points (or
items) keeps seeds that agree to a tenth of a point, or splits of 20 items, from marking ordinary noise. It needs
three other seeds. The collapse detector (:mod:`harness.run.collapse`) does not see such runs: it looks for a loss
at its collapsed value or a validation metric at chance, and a seed that trains to a poorer optimum shows neither.

**Optimum of the study's seed only.** The mirror of a failed seed: the study trains its settings on one seed (the
study seed, recorded in ``tuning.seed``) and keeps the best of its trials, so its best validation value (``val_best``)
is the study seed's; with those settings the row's other seeds are trained and select their epochs on the same
validation split. Where the study's best lies far above them, by the failed-seed rule's distance (more than
:data:`MADS` scaled MADs and at least :func:`min_gap` above their median), the settings won on the study seed's
draw, not for the row: the search fitted its noise, the optimism every selection has, grown past what the other
seeds' spread explains.
"""
from __future__ import annotations

import math
import statistics
from typing import Any

from harness.config import metrics
from harness.report import rows as rowmodel

MADS = 3.0  # scaled MADs below the other seeds' median
MAD_SCALE = 1.4826  # the MAD's normal-consistent scale
MIN_GAP = 5.0  # points (ranks for a rank metric): the least distance marked as a failure
MIN_ITEMS = 3  # validation items: on a split of 20 items one item is 5 points, and a seed 2 items behind is noise
MIN_OTHERS = 3  # other seeds needed to judge one
FAILED = "[failed seed {}]"
SEED_ONLY = "[optimum of seed {} only]"
BELOW_FLOOR = "[below floor]"
UNINFORMATIVE = "uninformative for tuning"


def min_gap(items: int | None, lower: bool = False) -> float:
    """The least distance marked as a failure: :data:`MIN_GAP`, or :data:`MIN_ITEMS` validation items' worth of a
    recall or mAP where that is larger."""
    return MIN_GAP if lower or not items else max(MIN_GAP, MIN_ITEMS * 100.0 / items)


def _far(value: float, others: list[float], lower: bool, items: int | None, better: bool = False) -> bool:
    """Whether ``value`` is worse (``better``: better) than the median of ``others`` by more than :data:`MADS`
    scaled MADs of them and at least :func:`min_gap`; False with fewer than :data:`MIN_OTHERS` others."""
    if len(others) < MIN_OTHERS:
        return False
    centre = statistics.median(others)
    spread = MAD_SCALE * statistics.median(abs(v - centre) for v in others)
    worse_by = (value - centre) if lower else (centre - value)
    return (-worse_by if better else worse_by) > max(MADS * spread, min_gap(items, lower))


def failed_seeds(val_at_best: dict[int, float], lower: bool = False, items: int | None = None) -> list[int]:
    """The seeds whose selected validation value lies more than :data:`MADS` scaled MADs and at least
    :func:`min_gap` below (above, for a rank) the median of the row's other seeds."""
    return [seed for seed, value in sorted(val_at_best.items())
            if _far(value, [v for s, v in val_at_best.items() if s != seed], lower, items)]


def seed_only(val_best: float | None, study_seed: int | None, val_at_best: dict[int, float], lower: bool = False,
              items: int | None = None) -> bool:
    """Whether the study's best validation value (its seed's) lies more than :data:`MADS` scaled MADs and at least
    :func:`min_gap` above (below, for a rank) the median of the validation values the row's other seeds selected
    with the settings it chose."""
    if val_best is None or study_seed is None:
        return False
    others = [v for s, v in val_at_best.items() if s != study_seed]
    return _far(float(val_best), others, lower, items, better=True)


def floor_value(board: Any) -> float | None:
    """The mean test value of the set's no-training row; None without one."""
    floors = board.named(rowmodel.FLOOR)
    return board.cells[floors[0]].summary.mean if floors else None


def below_floor(board: Any) -> list[str]:
    """The trained rows whose mean test value is worse than the no-training row's."""
    floor = floor_value(board)
    if floor is None:
        return []
    return [n for n, c in board.cells.items()
            if board.role(n) != rowmodel.FLOOR and board.better(floor, c.summary.mean)]


def ceiling(metric: str) -> float | None:
    """The best value ``metric`` can take, by its family in the metric registry: 1 for a rank statistic, 100 for a
    recall, a precision or a mean average precision; None for rsum, whose ceiling (100 times the recalls it sums)
    its name does not tell."""
    found = metrics.family(metric)
    if found == metrics.RSUM:
        return None
    return 1.0 if found == metrics.RANK else 100.0


def saturated(board: Any) -> bool:
    """Whether every trained row's best validation value sits at the metric's ceiling: validation cannot choose
    among the rows, and a verdict that rests on a choice (the strongest loss, the best row) is uninformative."""
    top = ceiling(board.metric)
    if top is None:
        return False
    values = [c.val_best for n, c in board.cells.items() if board.role(n) != rowmodel.FLOOR]
    return bool(values) and all(v is not None and math.isclose(float(v), top, abs_tol=1e-6) for v in values)


def seed_marks(board: Any, name: str) -> list[str]:
    """The marks of a cell's seeds: ``["[failed seed 3]", "[optimum of seed 0 only]"]`` (empty when none); the
    claims ledger names them beside a tuned verdict that compares the cell."""
    cell = board.cells[name]
    out = [FAILED.format(s) for s in failed_seeds(cell.val_at_best, board.lower, board.items)]
    if seed_only(cell.val_best, cell.study_seed, cell.val_at_best, board.lower, board.items):
        out.append(SEED_ONLY.format(cell.study_seed))
    return out


def cell_marks(board: Any, name: str, not_converged: bool = False) -> str:
    """A cell's marks: ' [failed seed 3] [below floor] [budget not converged]' ('' when none)."""
    out = seed_marks(board, name)
    if name in below_floor(board):
        out.append(BELOW_FLOOR)
    if not_converged:
        from harness.report.convergence import NOT_CONVERGED

        out.append(NOT_CONVERGED)
    return "".join(f" {m}" for m in out)
