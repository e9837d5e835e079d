"""How the site's tables sort and lay out: the sort key of a cell (the number it carries, else its text in natural
order), the rank of every cell in its column, and which columns are secondary (hidden on narrow screens).

A cell that stands for a number carries it (:class:`harness.report.cells.Cell`, made where the rows are built);
nothing here reads a number back from a cell's text.
"""
from __future__ import annotations

import re
from typing import Any

from harness.report.cells import EMPTY, Cell

_MISSING = {"", EMPTY, "-", "?", "n/a", "none"}
_CHUNK = re.compile(r"(\d+(?:\.\d+)?)")


def sort_key(cell: str) -> tuple[Any, ...]:
    """How a table cell sorts: by the number it carries (before text); text in natural order, a run of digits
    compared as a number, so that run names of a sweep sort by the swept setting ('swamp@K=20' < 'swamp@K=500' <
    'swamp@K=2000'), seed lists by their seeds and ISO dates by date; empty and '–' cells last."""
    text = str(cell).strip()
    if isinstance(cell, Cell) and cell.key is not None:
        return (0, cell.key, _natural(text))
    if text.lower() in _MISSING:
        return (2,)
    return (1, 0.0, _natural(text))


def _natural(text: str) -> tuple[tuple[str, float], ...]:
    """Text split into (words, number) pairs, compared word by word and number by value."""
    chunks = _CHUNK.split(text.lower())
    return tuple((chunks[i], float(chunks[i + 1]) if i + 1 < len(chunks) else -1.0) for i in range(0, len(chunks), 2))


def sort_ranks(rows: list[list[str]]) -> list[list[int]]:
    """Each cell's rank in its column by :func:`sort_key` (equal cells share a rank): the ``data-sort`` attribute
    the site's script sorts a column by, so that the order is the one computed (and tested) here."""
    if not rows:
        return []
    ranks: list[list[int]] = [[0] * len(row) for row in rows]
    for column in range(max(len(row) for row in rows)):
        keys = [sort_key(row[column]) if column < len(row) else (2,) for row in rows]
        order = {key: rank for rank, key in enumerate(sorted(set(keys)))}
        for i, key in enumerate(keys):
            if column < len(rows[i]):
                ranks[i][column] = order[key]
    return ranks


# columns folded away until asked for: the timing table's spread and parts of a total, the accuracy table's
# interval and second test (the difference and the tested p stay in view)
SECONDARY = ("p90 ms", "epoch s", "encode s", "score s", "rank s", "as released: test s", "pair encode s", "loss s",
             "95% CI", "p (queries, bootstrap)")


NAME_COLUMNS = ("method", "run")


def table_view(header: list[str], rows: list[list[str]], name: str = "", ratios: dict[int, int | None] | None = None,
               published: list[int] | None = None) -> dict[str, Any]:
    """A table as the site shows it: the method (or run) column first and sticky, then the ratio columns, ours
    beside the paper's (``ratios``: our ratio column -> the paper's of the same quantity, or None), then the paper's
    other columns (``published``) and the rest in table order; the SECONDARY columns folded. Each cell carries its
    rank in its column (:func:`sort_ranks`). Which column is which comes from the table, never from its header."""
    ranks = sort_ranks(rows)
    first = [i for i, h in enumerate(header) if h in NAME_COLUMNS][:1]
    order_ratios: list[int] = []
    for ours, theirs in (ratios or {}).items():  # each of our ratios, then the paper's ratio of the same quantity
        order_ratios += [ours] + ([theirs] if theirs is not None else [])
    lead = first + order_ratios + [j for j in (published or []) if j not in order_ratios]
    order = lead + [i for i in range(len(header)) if i not in lead]

    def cls(i: int) -> str:
        return "sticky" if i in first else "more" if header[i] in SECONDARY else ""

    return {"name": name, "header": [(header[i], cls(i)) for i in order],
            "rows": [[(row[i], rank[i], cls(i)) for i in order] for row, rank in zip(rows, ranks)],
            "folded": [header[i] for i in order if cls(i) == "more"]}
