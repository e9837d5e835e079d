"""What a table holds before any format writes it: cells that carry the number they sort by beside their text, a
table's header, rows and the lines under it, and the one cell every table writes for a value over seeds.

A :class:`Cell` is the text a table shows ('12.30 ± 0.40', '≈1.48×', '<0.001') with ``key``, the number it stands
for. The rows are built with their keys, so the site sorts a column by the numbers (:mod:`harness.report.views`) and
nothing reads a number back from a rendered cell.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.report import stats

EMPTY = "–"  # a cell without a value
# What "±" means in every table the project writes (accuracy, timing, validation, compare) and in its captions
SPREAD = "mean ± sample std over seeds"
SPREAD_NOTE = ("±: mean ± sample standard deviation over seeds (n − 1 in the denominator); a cell of one seed holds "
               "its value alone.")


class Cell(str):
    """A cell's text, with ``key``: the number it sorts by (None: it sorts as text; empty cells last)."""

    key: float | None

    def __new__(cls, text: str, key: float | None = None) -> Cell:
        cell = super().__new__(cls, text)
        cell.key = None if key is None or not math.isfinite(key) else float(key)
        return cell

    def __add__(self, other: str) -> Cell:  # a cell with a mark after it ('12.3*', '0.012 (3/3)') keeps its key
        return Cell(str(self) + other, self.key)


def number(value: float | None, spec: str = ".2f", before: str = "", after: str = "") -> Cell:
    """``value`` written with the format ``spec`` between ``before`` and ``after`` ('≈', '×'), keyed by the value;
    '–' for None."""
    return Cell(EMPTY) if value is None else Cell(f"{before}{value:{spec}}{after}", value)


def published(value: Any) -> Cell:
    """A number as a task file's published block gives it: a float to 2 decimals, anything else as written, '–' for
    None; keyed by the number."""
    if value is None:
        return Cell(EMPTY)
    text = f"{value:.2f}" if isinstance(value, float) else str(value)
    return Cell(text, value if isinstance(value, (int, float)) and not isinstance(value, bool) else None)


def mean_std(values: Sequence[float], digits: int = 2) -> Cell:
    """The cell of a value over seeds: mean ± sample std (:func:`harness.report.stats.summarize`), the value alone
    for one seed, '–' for none; keyed by the mean."""
    if not values:
        return Cell(EMPTY)
    s = stats.summarize(values)
    text = f"{s.mean:.{digits}f}" if s.std is None else f"{s.mean:.{digits}f} ± {s.std:.{digits}f}"
    return Cell(text, s.mean)


@dataclass(frozen=True)
class Table:
    """A table's header, its rows (cells) and the lines under it, in no format yet."""

    header: list[str]
    rows: list[list[str]]
    footnote: list[str] = field(default_factory=list)


def with_spread_note(table: Table) -> Table:
    """``table`` with :data:`SPREAD_NOTE` first under it when any of its cells holds a spread over seeds."""
    if not any(" ± " in str(cell) for row in table.rows for cell in row) or SPREAD_NOTE in table.footnote:
        return table
    return Table(table.header, table.rows, [SPREAD_NOTE, *table.footnote])
