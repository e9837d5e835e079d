"""The reference table of cross-modal losses, read from the sets ``harness leaderboard`` made: every method tuned with
one equal budget on each data set, its best settings trained with every seed and tested on the set's metric; the
comparisons each claim makes, set by set; and across the sets, mean ranks with the Friedman test and a
critical-difference diagram (autorank) and Bayesian hierarchical comparisons (baycomp).

    <root>/<set>/leaderboard.json + <root>/<set>/<task>/<method>@tuned/seed<k>.json
        --boards-->  [Board: rows, cells]  --verdicts / across-->  --page / record-->  reference.md, .json, figures

One job per module: :mod:`.boards` (sets, rows and cells), :mod:`.budgets` (convergence, dimensions, worker-hours),
:mod:`.marks` (failed seeds, the floor, saturation), :mod:`.verdicts` (the comparisons), :mod:`.across` (ranks and
the Bayesian comparisons), :mod:`.page` (the Markdown) and :mod:`.record` (``reference.json``, the figures, the entry
point). A choice among rows (the strongest contrastive loss, the best row) is made on validation, never on test.
"""
from __future__ import annotations

from harness.report.reference_table.across import bayes, bayes_all, cd_diagram, complete_rows, ranks
from harness.report.reference_table.boards import (
    MANIFEST,
    Board,
    Cell,
    equal_budget,
    load_boards,
    load_set,
    read_manifest,
    write_manifest,
)
from harness.report.reference_table.marks import seed_marks
from harness.report.reference_table.page import across_lines, against_line, comparison_lines, each_line, render
from harness.report.reference_table.record import Options, recorded, summary, table, write
from harness.report.reference_table.verdicts import (
    Against,
    against_each,
    against_strongest,
    best_with_without,
    bold_rows,
    comparisons,
    holm,
    pairs,
    strongest,
    tied,
    validation_values,
)

__all__ = [
    "MANIFEST", "Against", "Board", "Cell", "Options", "across_lines", "against_each", "against_line",
    "against_strongest", "bayes", "bayes_all", "best_with_without", "bold_rows", "cd_diagram", "comparison_lines",
    "comparisons", "complete_rows", "each_line", "equal_budget", "holm", "load_boards", "load_set", "pairs", "ranks",
    "read_manifest", "recorded", "render", "seed_marks", "strongest", "summary", "table", "tied", "validation_values",
    "write", "write_manifest",
]
