"""How the site's tables sort and lay out: the sort key of a cell (dates, numbers with units, natural text), the
rank of every cell in its column, and which columns are secondary (hidden on narrow screens)."""
from __future__ import annotations

import re
from typing import Any

_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?")


# a number at the start of a cell: an optional ≈/~/</>, sign, digits with optional thousands commas, decimals,
# exponent and k/M/G suffix, followed by anything that does not continue a word or a list ('12.3 ± 0.4',
# '≈356.3', '82.12×', '1.48e+04', '14.8k', '-0.15', '0.996 (2/3)'); '0, 1, 2' and '1abb22f' are not numbers
_NUMBER = re.compile(r"^[≈~<>]?\s*(?P<sign>[-+−]?)(?P<digits>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?"
                     r"(?P<exp>[eE][-+]?\d+)?(?P<suffix>[kMG])?(?![\w.]|\s*,\s*\d)")


_SUFFIX = {"k": 1e3, "M": 1e6, "G": 1e9, None: 1.0}


_MISSING = {"", "–", "-", "?", "n/a", "none"}


_CHUNK = re.compile(r"(\d+(?:\.\d+)?)")


def sort_key(text: str) -> tuple[Any, ...]:
    """How a table cell sorts: dates as dates and numbers by value (before text); text in natural order, its
    numbers by value, so that run names of a sweep sort by the swept setting ('swamp@K=20' < 'swamp@K=500' <
    'swamp@K=2000'); empty and '–' cells last."""
    text = str(text).strip()
    if text.lower() in _MISSING:
        return (2,)
    date = _DATE.match(text)
    if date:
        parts = [int(p or 0) for p in date.groups()]
        return (0, float(f"{parts[0]:04d}{parts[1]:02d}{parts[2]:02d}{parts[3]:02d}{parts[4]:02d}{parts[5]:02d}"), ())
    number = _NUMBER.match(text)
    if number:
        value = float(number["digits"].replace(",", "") + (number["frac"] or "") + (number["exp"] or ""))
        value *= _SUFFIX[number["suffix"]] * (-1 if number["sign"] in ("-", "−") else 1)
        return (0, value, _natural(text))
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
