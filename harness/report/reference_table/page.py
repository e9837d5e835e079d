"""The reference table's Markdown page: the table (a row per method, a column per set; mean ± sample standard
deviation over seeds, marks), each set's budget and convergence, the comparisons each claim makes set by set, the
answer had validation chosen another loss, the statistics across sets and the costs."""
from __future__ import annotations

from typing import Any

from harness.errors import ConfigError
from harness.report import accuracy, stats
from harness.report import rows as rowmodel
from harness.report.formats import format_table
from harness.report.reference_table import budgets, marks, verdicts
from harness.report.reference_table.boards import Board, equal_budget, undeclared

CAPTION = ("Each cell: the method's best settings from its study (equal trials per method within a set, on the "
           "validation split), trained with every seed and tested; mean ± sample standard deviation over seeds "
           "((n=k): fewer than 5 seeds). Bold: not significantly below the column's best (paired t over seeds, α = "
           f"{stats.ALPHA:g}). {marks.FAILED.format('k')}: seed k's selected validation value lies more than "
           f"{marks.MADS:g} scaled MADs, and at least {marks.MIN_GAP:g} points or {marks.MIN_ITEMS} validation items' "
           f"worth, below the median of the row's other seeds; {marks.SEED_ONLY.format('k')}: the study's best "
           "validation value, trained with its seed k, lies as far above the median of the other seeds' values with "
           f"the settings it chose; {marks.BELOW_FLOOR}: below the set's no-training "
           "row; [budget not converged]: the row's best validation value still rose over the last quarter of its "
           "trials. – : the method does not apply to the set, or has no results yet.")
DIFF_NOTE = ("Differences on test, over the seeds both rows were trained with: mean of the per-seed differences and "
             "its 95% interval [lo, hi] (paired t); better or worse: p below {alpha:g} (Holm-adjusted over the tests "
             "where validation tied several rows, the least favourable shown), level otherwise; uninformative: every "
             "row's best validation value sits at the metric's ceiling, so validation could not choose.")


def row_order(boards: list[Board]) -> list[tuple[str, str]]:
    """(name, label) of every row any set has a cell for, in the table's order."""
    found: dict[str, rowmodel.Row] = {}
    for b in boards:
        for name in b.cells:
            found.setdefault(name, b.rows.get(name) or rowmodel.Row(name, name, rowmodel.CANDIDATE))
    return [(r.name, r.shown) for r in sorted(found.values(), key=rowmodel.order_key)]


def cell_text(board: Board, name: str, bold: bool, not_converged: bool = False) -> str:
    """'**25.85 ± 0.97** [failed seed 3]': mean ± sample std over seeds, bold, its marks and collapse flags."""
    cell = board.cells[name]
    s = cell.summary
    spread = f" ± {s.std:.2f}" if s.std is not None else ""
    n = f" (n={s.n})" if s.n < 5 else ""
    text = f"{s.mean:.2f}{spread}{n}"
    return (f"**{text}**" if bold else text) + accuracy.collapse_flag(cell.results) + \
        accuracy.fit_flag(cell.results) + marks.cell_marks(board, name, not_converged)


def table_rows(boards: list[Board], found: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The main table: a row per method, a column per set, the mean rank and the trial-minutes over every set."""
    bolds = {b.name: verdicts.bold_rows(b) for b in boards}
    rising = {b.name: {r for r, x in budgets.readings(b).items() if not x.converged} for b in boards}
    head = ["method"] + [f"{b.label}: {b.metric}{' (lower is better)' if b.lower else ''}" for b in boards] + \
        ["mean rank", "trial-min (all sets)"]
    rows = []
    for name, label in row_order(boards):
        cells = [cell_text(b, name, name in bolds[b.name], name in rising[b.name]) if name in b.cells else "–"
                 for b in boards]
        rank = found.get("mean_ranks", {}).get(name)
        minutes = [m for b in boards if name in b.cells and (m := b.cells[name].trial_minutes) is not None]
        rows.append([label] + cells + ["–" if rank is None else f"{rank:.2f}",
                                       f"{sum(minutes):.1f}" if minutes else "–"])
    return head, rows


def budget_lines(b: Board) -> list[str]:
    """One set's budget: trials, pruning, seeds, the strongest contrastive loss, then each row's convergence."""
    try:
        budget = f"{equal_budget(b)} trials per method"
    except ConfigError as err:
        budget = f"UNEQUAL budgets ({err})"
    pruners = sorted({c.pruner for n, c in b.cells.items() if b.role(n) != rowmodel.FLOOR})
    seeds = sorted({s for c in b.cells.values() for s in c.values})
    missing = "; ".join(f"{b.shown(r)}: {why}" for r, why in b.missing.items())
    cost = budgets.cost(b)
    absent = ", ".join(undeclared(b))
    head = (f"- **{b.label}** ({b.manifest.get('task')}, {b.metric}): {budget}, pruning {', '.join(pruners) or '–'}; "
            f"seeds {', '.join(map(str, seeds)) or '–'}; {_chosen(b)}{f'; no cell: {missing}' if missing else ''}"
            f"{f'; no row for {absent}: the task does not declare them' if absent else ''}; "
            f"{cost['study_hours']:.2f} worker-hours of studies, {cost['run_hours']:.2f} of tuned runs"
            f"{'; validation saturates for every row: ' + marks.UNINFORMATIVE if marks.saturated(b) else ''}.")
    readings = budgets.readings(b)
    rows = ", ".join(f"{b.shown(r)}: {x.text()}" for r, x in readings.items())
    return [head] + ([f"  - convergence (best-so-far on validation): {rows}."] if rows else [])


def _chosen(b: Board) -> str:
    try:
        values = verdicts.strongest(b)[1]
        ties = verdicts.tied(b)
    except ConfigError:
        return "no contrastive loss tuned yet"
    shown = ", ".join(f"{b.shown(r)} {v:.2f}" for r, v in values.items())
    if len(ties) > 1:
        return f"strongest contrastive loss (validation): a tie between {', '.join(b.shown(r) for r in ties)} ({shown})"
    return f"strongest contrastive loss (validation): {b.shown(ties[0])} ({shown})"


def difference_text(b: Board, a: verdicts.Against) -> str:
    """'InfoNCE + SwAMP − InfoNCE = +1.44 [−3.2, +6.1] (paired t over 5 seeds, p = 0.760): **level**'."""
    t = a.tested
    interval = f" {shown}" if (shown := stats.interval_text(t.ci)) else ""
    diff = "–" if t.diff is None else f"{t.diff:+.2f}"
    if a.tests > 1:
        p = "no test" if a.p is None else f"Holm-adjusted p {stats.p_text(a.p, relation=True)} over {a.tests} tests"
        others = ", ".join(b.shown(r) for r in a.tied)
        tie = f"; validation tied {others}: each compared, the least favourable to the SwAMP side shown, {p}"
        p = "raw " + ("no test" if t.p is None else f"p {stats.p_text(t.p, relation=True)}")
    else:
        p, tie = ("no test" if t.p is None else f"p {stats.p_text(t.p, relation=True)}"), ""
    return f"{b.shown(a.of)} − {b.shown(a.rival)} = {diff}{interval} ({t.how}, {p}{tie}): **{a.reading}**"


def set_head(b: Board) -> str:
    """'**qmul_shoes** (s2p/R@1)', with '(appendix: why)' for a set outside the table's columns."""
    return f"**{b.label}** ({b.metric}{', lower is better' if b.lower else ''})" + \
        (f" (appendix: {b.appendix})" if b.appendix else "")


def against_line(b: Board) -> str:
    """One set's answer to 'SwAMP alone beats the strongest contrastive loss', or why there is none."""
    head = f"- {set_head(b)}: "
    found = verdicts.against_strongest(b)
    if found is not None:
        return head + difference_text(b, found) + "."
    pairs = verdicts.pairs(b)
    if pairs:
        return head + "no SwAMP-alone row (its SwAMP row is X + SwAMP): " + "; ".join(
            difference_text(b, a) for a in pairs) + "."
    return head + "not measured yet (SwAMP or the contrastive losses have no tuned runs on common seeds)."


def comparison_lines(b: Board) -> list[str]:
    """Every comparison of a set, one line each."""
    found = verdicts.comparisons(b)
    out = [f"- {set_head(b)}{' — ' + marks.UNINFORMATIVE if marks.saturated(b) else ''}:"]
    if found[verdicts.ALONE] is not None:
        out.append(f"  - SwAMP alone − the strongest contrastive loss: {difference_text(b, found[verdicts.ALONE])}.")
    out += [f"  - X + SwAMP − X: {difference_text(b, a)}." for a in found[verdicts.PAIR]]
    if found[verdicts.BEST] is not None:
        out.append(f"  - the best row with SwAMP's term − the best without (each chosen on validation): "
                   f"{difference_text(b, found[verdicts.BEST])}.")
    out += [f"  - candidate − the strongest contrastive loss: {difference_text(b, a)}."
            for a in found[verdicts.CANDIDATE]]
    return out if len(out) > 1 else out[:1] + ["  - not measured yet."]


def each_line(b: Board) -> str | None:
    """One set's SwAMP (alone, else its best row with SwAMP's term) minus each contrastive loss on test, the loss
    chosen on validation marked; None without such a row."""
    found = verdicts.against_each(b)
    if not found:
        return None
    try:
        chosen = set(verdicts.tied(b))
    except ConfigError:
        chosen = set()
    parts = []
    for a in found:
        val = f"validation {a.chose[a.rival]:.2f}" if a.rival in a.chose else "no study"
        diff = "–" if a.tested.diff is None else f"{a.tested.diff:+.2f}"
        parts.append(f"{b.shown(a.rival)}{' (chosen)' if a.rival in chosen else ''} {diff}, {a.reading} ({val})")
    readings = {a.reading for a in found}
    robust = (f"the same reading against every loss ({found[0].reading})" if len(readings) == 1 else
              "the reading depends on the rival")
    return f"- **{b.label}** ({b.metric}, {b.shown(found[0].of)}): " + "; ".join(parts) + f": {robust}."


def rank_line(found: dict[str, Any], link_prefix: str = "") -> str:
    """The mean ranks with the Friedman test and Nemenyi's critical difference, or why not."""
    if "skipped" in found:
        return f"Ranks: not computed ({found['skipped']})."
    labels = found.get("labels", {})
    shown = ", ".join(f"{labels.get(r, r)} {found['mean_ranks'][r]:.2f}"
                      for r in sorted(found["mean_ranks"], key=lambda r: found["mean_ranks"][r]))
    cd = f"; Nemenyi critical difference {found['cd']:.2f} ranks" if found.get("cd") is not None else ""
    return (f"Mean ranks over {len(found['sets'])} sets and the {len(found['rows'])} methods every set has (1: best): "
            f"{shown}. Friedman test p {stats.p_text(found['p'], relation=True)}{cd} at α = {found['alpha']:g} "
            "(autorank); two methods whose mean ranks differ by less than the critical difference are not told apart. "
            f"The critical-difference diagram: [cd.png]({link_prefix}cd.png).")


def family_name(which: str) -> str:
    """A Bayesian comparison's name: SwAMP alone against the strongest loss, or X + SwAMP against X."""
    if which == verdicts.ALONE:
        return "SwAMP alone against each set's strongest contrastive loss"
    x = rowmodel.label_of(which, rowmodel.CONTRASTIVE)
    return f"{x} + SwAMP against {x}"


def bayes_line(which: str, found: dict[str, Any]) -> str:
    """One Bayesian comparison across sets, on both scales, or why not."""
    name = family_name(which)
    scaled, raw = found.get("scaled", {}), found.get("raw", {})
    if "skipped" in scaled:
        return f"- {name}: not computed ({scaled['skipped']})."

    def probs(r: dict[str, Any], unit: str) -> str:
        if "skipped" in r:
            return f"{unit}: not computed ({r['skipped']})"
        return (f"{unit} (equivalent within ±{r['rope']:g}): P(better) = {r['p_better']:.3f}, P(equivalent) = "
                f"{r['p_equivalent']:.3f}, P(worse) = {r['p_worse']:.3f}")

    sets = ", ".join(scaled["sets"])
    return (f"- {name} ({len(scaled['sets'])} sets: {sets}; {len(scaled['seeds'])} seeds as replicates): "
            f"{probs(scaled, 'in pooled seed SDs')}; {probs(raw, 'raw points')}.")


def across_lines(found: dict[str, Any], compared: dict[str, Any], link_prefix: str = "") -> list[str]:
    """The page's lines across sets: the ranks, a blank line, the Bayesian comparisons (or why not)."""
    out = [rank_line(found, link_prefix), ""]
    if "skipped" in compared:
        return out + [f"Bayesian comparison: not computed ({compared['skipped']})."]
    out.append("Bayesian hierarchical comparisons across sets (baycomp; Benavoli et al. 2017), each of one method "
               "against one rival, the seeds as replicates on one test split (correlation 1/seeds), a rank's "
               "difference negated so that better is positive; first in units of each set's pooled seed-to-seed "
               "standard deviation, then in raw points:")
    out += [bayes_line(which, r) for which, r in compared.items()]
    return out


def cost_rows(boards: list[Board]) -> tuple[list[str], list[list[str]]]:
    """The cost table: per method and set, the study's trial-minutes and the tuned runs' training step (ms)."""
    head = ["method"] + [f"{b.label}: trial-min / step ms" for b in boards]
    rows = []
    for name, label in row_order(boards):
        out = [label]
        for b in boards:
            c = b.cells.get(name)
            if c is None:
                out.append("–")
                continue
            minutes = "–" if c.trial_minutes is None else f"{c.trial_minutes:.1f}"
            step = "–" if c.step_ms is None else f"{c.step_ms:.1f}"
            out.append(f"{minutes} / {step}{f' [contended {c.contended}/{len(c.values)}]' if c.contended else ''}")
        rows.append(out)
    return head, rows


CD, FOREST = "cd.png", "forest.png"


def curve_file(name: str) -> str:
    """The best-so-far figure of set ``name``, beside the page."""
    return f"best_so_far-{name}.png"


def figures_beside(boards: list[Board]) -> dict[str, str]:
    """The figures the page shows that lie beside it (the sets' parent folder): {role: file name}, role 'cd',
    'forest' or 'curves/<set>'."""
    if not boards:
        return {}
    root = boards[0].folder.parent
    named = {"cd": CD, "forest": FOREST, **{f"curves/{b.name}": curve_file(b.name) for b in boards}}
    return {role: name for role, name in named.items() if (root / name).is_file()}


def render(boards: list[Board], found: dict[str, Any], compared: dict[str, Any], command: str,
           figures: dict[str, str] | None = None) -> str:
    """The reference table's Markdown page; ``figures`` maps a figure's role ('cd', 'forest', 'curves/<set>') to its
    file beside the page (default: those lying there, :func:`figures_beside`)."""
    figures = figures_beside(boards) if figures is None else figures
    primary = [b for b in boards if b.column]
    lines = [f"<!-- generated by `{command}` -->", "# The reference table of cross-modal losses", ""]
    if not primary:
        return "\n".join(lines + ["No set with tuned results yet."]) + "\n"
    head, rows = table_rows(primary, found)
    lines += [format_table(head, rows, [], "md"), "", CAPTION]
    runs = [r for b in primary for c in b.cells.values() for r in c.results]
    if any(r.get("collapse") for r in runs):
        lines += ["", accuracy.collapse_note("a cell's n tuned runs", "the cell")]
    if accuracy.fit_flag(runs):
        lines += ["", accuracy.SETTINGS_NOTE]
    lines += ["", "## Budget and convergence of each set", ""]
    lines += [line for b in primary for line in budget_lines(b)]
    lines += ["", "Convergence: a row's best-so-far validation value over its trials in the order they ran; "
              "converged when it improved by at most the tolerance (one validation item's worth, at least 0.5 "
              "points; one rank for a rank) over the last quarter of its trials. dims: the study's search-space "
              "dimensions."]
    curves = [f"![best-so-far: {name.removeprefix('curves/')}]({path})" for name, path in figures.items()
              if name.startswith("curves/")]
    lines += [""] + curves if curves else []
    lines += ["", "## The comparisons, set by set", ""]
    lines += [line for b in boards for line in comparison_lines(b)]
    lines += ["", DIFF_NOTE.format(alpha=stats.ALPHA)]
    if "forest" in figures:
        lines += ["", f"![every comparison, set by set]({figures['forest']})"]
    lines += ["", "## Had validation chosen another loss", ""]
    lines += [line for b in boards if (line := each_line(b)) is not None]
    lines += ["", "SwAMP alone (where a set has no SwAMP-alone row, its row with SwAMP's term chosen on validation, "
              "named after the metric) minus each contrastive loss of the set on test, with the loss's best validation "
              "value from its study; (chosen): the loss validation chose. Not verdicts: they say how much the answer "
              "leans on the choice.", "", "## Across sets", ""]
    lines += across_lines(found, compared)
    if "cd" in figures:
        lines += ["", f"![critical-difference diagram]({figures['cd']})"]
    head, rows = cost_rows(primary)
    lines += ["", "## Cost", "", format_table(head, rows, [], "md"), "",
              "trial-min: the summed minutes of the study's trials; step ms: the tuned runs' median training step "
              "(median over seeds). [contended j/n]: j of the n tuned runs trained while other work kept the machine "
              "busy; compare costs within one set."]
    machines = "; ".join(dict.fromkeys(b.hardware for b in primary if b.hardware))
    lines += ["", f"Hardware: {machines or 'unknown'}."]
    return "\n".join(lines + appendix_lines([b for b in boards if b.primary and b.appendix])) + "\n"


def appendix_lines(boards: list[Board]) -> list[str]:
    """The appendix: the sets kept outside the table's columns (each with why), their table and budgets; their
    comparisons stand with the others above."""
    if not boards:
        return []
    head, rows = table_rows(boards, {})
    head, rows = head[:-2], [r[:-2] for r in rows]  # no rank across the appendix's sets, no total minutes
    out = ["", "## Appendix: sets outside the table", ""]
    out += [f"- **{b.label}**: {b.appendix}." for b in boards]
    out += ["", format_table(head, rows, [], "md"), "", "Cells, bold and marks as in the table above; the sets' "
            "comparisons are listed with the others (marked appendix). They take no part in the ranks or the "
            "Bayesian comparisons.", ""]
    return out + [line for b in boards for line in budget_lines(b)]
