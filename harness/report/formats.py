"""The tables as text: both tables of a set of results computed once (:func:`table_data`), and any table written as
GitHub Markdown, LaTeX booktabs or one of tabulate's console formats, with the lines under it."""
from __future__ import annotations

from typing import Any, Sequence

from tabulate import tabulate

from harness.config.plan import resolve_reference
from harness.report.accuracy import accuracy_table
from harness.report.cells import Table, with_spread_note
from harness.report.timing import timing_table

FORMATS = {"md": "github", "tex": "latex_booktabs"}
_TEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}", "<": r"$<$", ">": r"$>$"}


def table_data(results: list[dict[str, Any]], reference: str | None, test_stat: str | None = None
               ) -> dict[str, Table]:
    """Both tables of ``results`` (``accuracy``: :func:`harness.report.accuracy.accuracy_table`, ``timing``: a
    :class:`harness.report.timing.TimingTable`), computed once for every format; ``reference`` may name a run or
    the method of exactly one run."""
    reference = resolve_reference(reference, ((r["run_name"], r["method"]) for r in results))
    return {"accuracy": accuracy_table(results, reference, test_stat), "timing": timing_table(results, reference)}


def format_table(header: list[str], rows: Sequence[Sequence[Any]], footnote: list[str], fmt: str,
                 numbers: bool = False) -> str:
    """One table in ``fmt``, footnote lines below it (paragraphs in md, a small-print paragraph in tex); every table
    the report layer prints or writes goes through here. ``numbers``: cells that read as numbers are aligned as numbers
    (else every cell is text as given)."""
    text: str = tabulate(rows, headers=header, tablefmt=FORMATS.get(fmt, fmt), disable_numparse=not numbers)
    if not footnote:
        return text
    if fmt == "md":
        return text + "\n\n" + "\n\n".join(footnote)
    if fmt == "tex":
        escaped = ["".join(_TEX_ESCAPES.get(ch, ch) for ch in line) for line in footnote]
        return text + "\n\\par\\smallskip{\\footnotesize " + "\\newline\n".join(escaped) + "\\par}"
    return text + "\n" + "\n".join(footnote)


def text(table: Table, fmt: str) -> str:
    """:func:`format_table` of a :class:`harness.report.cells.Table`."""
    return format_table(table.header, table.rows, table.footnote, fmt)


def render(results: list[dict[str, Any]], fmt: str, reference: str | None = None,
           test_stat: str | None = None, spread_note: bool = False) -> dict[str, str]:
    """Both tables as text in ``fmt`` ('md', 'tex' or a tabulate format such as 'simple').

    ``reference`` names a run to test the others against (markers, four test columns of the
    statistic ``test_stat`` and a footnote in the accuracy table); an unknown name raises ConfigError. ``spread_note``:
    say under each table what its "±" is (:data:`harness.report.cells.SPREAD_NOTE`; the console's tables do).
    """
    tables = table_data(results, reference, test_stat)
    return {name: text(with_spread_note(table) if spread_note else table, fmt) for name, table in tables.items()}
