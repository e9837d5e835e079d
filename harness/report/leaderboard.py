"""The reference table of cross-modal losses, read from the sets ``harness leaderboard`` made: every dual-encoder
method tuned with one equal budget on each data set, its best settings trained with every seed and tested on the
set's primary metric; then, across the sets, mean ranks with the Friedman test and a critical-difference diagram
(autorank), and the Bayesian hierarchical comparison of SwAMP with the strongest contrastive loss (baycomp).

A set is a folder holding ``leaderboard.json`` (the manifest written before its studies start: the task, the metric,
whether it is the task's primary metric, the table's rows mapped to the task's methods, the budget, the seeds and the
command) and, below it, the tuned result files of ``harness tune`` (``<set>/<task>/<method>@tuned/seed<k>.json``),
which record their studies (``tuning``). Nothing here trains: the table is computed from those files alone.

    <root>/<set>/leaderboard.json + <root>/<set>/<task>/<method>@tuned/seed<k>.json
        --load_boards-->  [Board(set, metric, cells by row)]  --table / ranks / bayes-->  reference.md, .json, cd.png

Which contrastive loss is the strongest on a set is decided on validation, never on test: the one whose study's best
trial scored best on the validation split (:func:`strongest`).
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import math
import statistics
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from harness.config.spec import lower_is_better
from harness.errors import ConfigError
from harness.report import accuracy, model, stats
from harness.report import tuning as tuning_report
from harness.run import contention
from harness.store.io import write_json_atomic, write_text_atomic
from harness.store.schema import load_results

# the table's rows, in order: a task's leaderboard block maps each it has to one of its methods
ROLES: dict[str, str] = {
    "max_violation": "max-violation hinge (VSE++)",
    "sum": "summed hinge",
    "infonce": "InfoNCE",
    "siglip": "SigLIP",
    "swamp": "SwAMP",
    "swamp_infonce": "SwAMP + InfoNCE",
    "cca": "CCA",
    "floor": "no training (identity)",
}
CONTRASTIVE = ("max_violation", "sum", "infonce", "siglip")  # the contrastive loss family
SWAMP = "swamp"
MANIFEST = "leaderboard.json"
MIN_SETS = 5  # autorank ranks at least five sets
ROPE = 1.0  # points: the Bayesian comparison's region of practical equivalence
OUTPUTS = ("reference.md", "reference.json", "cd.png")


@dataclass(frozen=True)
class Cell:
    """One row of one set: the tuned method's test values by seed, and what its study and runs cost."""

    role: str
    method: str  # the task's method (its tuned runs: <method>@tuned)
    values: dict[int, float]  # seed -> test value of the set's metric
    val_best: float | None  # the study's best validation value (what chose the strongest contrastive loss)
    trials: dict[str, int]  # the study's trials by state
    budget: int  # the trials the study was given
    pruner: str
    trial_minutes: float | None
    step_ms: float | None  # median over seeds of the tuned runs' median training step
    contended: int  # seeds whose training was timed while other work kept the machine busy
    best: dict[str, Any]  # the best trial's settings
    results: list[dict[str, Any]] = field(default_factory=list, compare=False, repr=False)  # the tuned result dicts

    @property
    def summary(self) -> stats.Summary:
        return stats.summarize(list(self.values.values()))


@dataclass(frozen=True)
class Board:
    """One set of the table: its manifest and a cell per row that has tuned results."""

    name: str
    folder: Path
    manifest: dict[str, Any]
    cells: dict[str, Cell]
    hardware: str
    missing: dict[str, str] = field(default_factory=dict)  # row -> why it has no cell (yet)

    @property
    def metric(self) -> str:
        return str(self.manifest["metric"])

    @property
    def primary(self) -> bool:
        return bool(self.manifest.get("primary", True))

    @property
    def lower(self) -> bool:
        return lower_is_better(self.metric)

    @property
    def label(self) -> str:
        return str(self.manifest.get("label") or self.name)

    def better(self, a: float, b: float) -> bool:
        """Whether value ``a`` is better than ``b`` on this set's metric."""
        return a < b if self.lower else a > b


def read_manifest(folder: Path) -> dict[str, Any]:
    """A set's ``leaderboard.json``, checked."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise ConfigError(f"{folder} holds no {MANIFEST}: it is not a set of the reference table (make one with "
                          "python -m harness leaderboard TASK --out ROOT)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path} cannot be read ({err}); make the set again with python -m harness leaderboard") \
            from None
    for key in ("task", "metric", "rows", "trials"):
        if key not in data:
            raise ConfigError(f"{path} lacks {key!r}; make the set again with python -m harness leaderboard")
    unknown = sorted(set(data["rows"]) - set(ROLES))
    if unknown:
        raise ConfigError(f"{path}: unknown row(s) {', '.join(unknown)}; rows: {', '.join(ROLES)}")
    return dict(data)


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Write a set's manifest (atomic)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(folder) / MANIFEST, manifest)


def _step_ms(runs: list[dict[str, Any]]) -> float | None:
    steps = [float(r["profile"]["timing"]["train_step"]["median_s"]) * 1e3 for r in runs
             if ((r.get("profile") or {}).get("timing") or {}).get("train_step")]
    return statistics.median(steps) if steps else None


def load_set(folder: Path) -> Board:
    """One set: its manifest and, for each row with tuned result files, the cell they give."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    results = load_results(folder)
    by_run = model.group_runs(r for r in results if r.get("tuning"))
    metric = str(manifest["metric"])
    cells: dict[str, Cell] = {}
    missing: dict[str, str] = {}
    machines: list[str] = []
    for role, method in manifest["rows"].items():
        runs = by_run.get(f"{method}@tuned", [])
        runs = [r for r in runs if metric in r["metrics"]]
        if not runs:
            missing[role] = manifest.get("skipped", {}).get(role, "no tuned result files yet")
            continue
        machines.append(model.one_machine(runs, f"{folder}: the tuned runs of {method}"))
        tuning = runs[0]["tuning"]
        if tuning.get("metric") != metric:
            raise ConfigError(f"{folder}: {method}@tuned was tuned for {tuning.get('metric')}, the set ranks {metric}; "
                              "make the set again with python -m harness leaderboard")
        cells[role] = Cell(
            role=role, method=method, values=stats.seed_values(runs, metric), val_best=tuning.get("best_value"),
            trials={k: int(v) for k, v in tuning["trials"].items()}, budget=int(tuning["budget"]["trials"]),
            pruner=tuning_report.recorded_pruner(tuning), trial_minutes=tuning.get("trial_minutes"),
            step_ms=_step_ms(runs), contended=sum(1 for r in runs if "train" in contention.contended_phases(r)),
            best=dict(tuning.get("best") or {}), results=runs)
    hardware = "; ".join(dict.fromkeys(machines))
    return Board(folder.name, folder, manifest, cells, hardware, missing)


def load_boards(root: Path) -> list[Board]:
    """Every set under ``root`` (its sub-folders holding a manifest), by name."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"{root} is not a folder; give the folder harness leaderboard wrote its sets into (--out)")
    return [load_set(p.parent) for p in sorted(root.glob(f"*/{MANIFEST}"))]


def validation_values(board: Board, roles: tuple[str, ...] = CONTRASTIVE) -> dict[str, float]:
    """Each of ``roles``' rows with a study: its best trial's value on the validation split, in ``roles``' order."""
    return {r: float(v) for r in roles if r in board.cells and (v := board.cells[r].val_best) is not None}


def strongest(board: Board, roles: tuple[str, ...] = CONTRASTIVE) -> tuple[str, dict[str, float]]:
    """The strongest contrastive loss of a set, chosen on validation (never on test): the row among ``roles`` whose
    study's best trial scored best on the validation split; and every candidate's validation value that chose it.
    ConfigError when no candidate has a study."""
    values = validation_values(board, roles)
    if not values:
        raise ConfigError(f"{board.folder}: no contrastive loss of {', '.join(roles)} has a tuned result yet")
    pick = functools.reduce(lambda a, b: b if board.better(values[b], values[a]) else a, values)
    return pick, values


def tied(board: Board, roles: tuple[str, ...] = CONTRASTIVE) -> list[str]:
    """The contrastive losses whose studies' best validation values tie with the strongest's: the candidates that
    validation cannot tell apart (a saturated metric, 100.00 for every loss, is the common case). One row when
    validation decides."""
    pick, values = strongest(board, roles)
    return [r for r, v in values.items() if math.isclose(v, values[pick], rel_tol=1e-9, abs_tol=1e-9)]


def equal_budget(board: Board, roles: tuple[str, ...] | None = None) -> int:
    """The trials every study of the set counted; ConfigError when the rows' budgets differ."""
    cells = [c for r, c in board.cells.items() if roles is None or r in roles]
    budgets = {c.budget for c in cells if c.role != "floor"}
    counted = {c.trials.get("counted", 0) for c in cells if c.role != "floor" and c.trials.get("counted", 0) > 1}
    if len(budgets) > 1 or len(counted) > 1:
        shown = ", ".join(f"{c.role} {c.trials.get('counted', 0)}/{c.budget}" for c in cells)
        raise ConfigError(f"{board.folder}: the rows' studies got different budgets ({shown}); an equal budget is "
                          "the table's premise: run the set again with one --trials")
    return budgets.pop() if budgets else 0


@dataclass(frozen=True)
class Against:
    """SwAMP against a set's strongest contrastive loss on test: the rival chosen on validation, the validation
    values that chose it, and the difference SwAMP minus the rival over the seeds both have (the significance
    policy's test, :func:`harness.report.stats.seed_significance`)."""

    rival: str
    chose: dict[str, float]
    tested: stats.Difference
    seeds: list[int]
    lower: bool  # the metric is a rank: a negative difference is SwAMP's gain
    tied: tuple[str, ...] = ()  # the losses validation could not tell apart, where more than one

    @property
    def reading(self) -> str:
        """'better', 'level' or 'worse': SwAMP's side of the rival where the test is significant at
        :data:`stats.ALPHA`, else level."""
        diff = self.tested.diff
        if diff is None or diff == 0 or not self.tested.significant:
            return "level"
        return "better" if (diff < 0) == self.lower else "worse"


def _against(board: Board, rival: str, chose: dict[str, float], candidates: list[str]) -> Against | None:
    """SwAMP minus ``rival`` on the set's test metric over the seeds both have; None under 2 common seeds."""
    mine, theirs = board.cells[SWAMP].values, board.cells[rival].values
    seeds = sorted(set(mine) & set(theirs))
    if len(seeds) < 2:
        return None
    return Against(rival, chose, stats.seed_significance(mine, theirs), seeds, board.lower,
                   tuple(candidates) if len(candidates) > 1 else ())


def against_strongest(board: Board) -> Against | None:
    """SwAMP minus the strongest contrastive loss (chosen on validation) on the set's test metric; None while either
    has no tuned runs or they share fewer than 2 seeds. Where validation ties several losses (:func:`tied`), SwAMP
    is compared with each and the least favourable to SwAMP is the answer: a claim that SwAMP beats contrastive
    learning must hold against every loss validation could not rule out, and list order must not pick the rival."""
    if SWAMP not in board.cells:
        return None
    try:
        chose = strongest(board)[1]
        candidates = tied(board)
    except ConfigError:
        return None
    found = [a for rival in candidates if (a := _against(board, rival, chose, candidates)) is not None]
    if not found:
        return None
    sign = -1.0 if board.lower else 1.0  # SwAMP's gain: a higher value, or a lower rank
    return min(found, key=lambda a: sign * (a.tested.diff if a.tested.diff is not None else math.inf))


def against_each(board: Board) -> list[Against]:
    """SwAMP minus every contrastive loss of the set with tuned runs, in the family's order: how the answer would read
    had validation chosen another rival (on a small validation split one or two items can decide the choice). Not
    a verdict: the verdict is :func:`against_strongest`'s."""
    if SWAMP not in board.cells:
        return []
    chose = validation_values(board)
    return [a for r in CONTRASTIVE if r in board.cells and (a := _against(board, r, chose, [])) is not None]


def bold_rows(board: Board) -> set[str]:
    """The rows not significantly worse than the set's best row: the best (by mean), and every row whose test over
    seeds (the significance policy's, :func:`harness.report.stats.seed_significance`: the paired t-test over the
    seeds both have) does not put it below the best at :data:`stats.ALPHA`."""
    if not board.cells:
        return set()
    means = {r: c.summary.mean for r, c in board.cells.items()}
    best = functools.reduce(lambda a, b: b if board.better(means[b], means[a]) else a, means)
    out = {best}
    for role, cell in board.cells.items():
        if role == best:
            continue
        test = stats.seed_significance(cell.values, board.cells[best].values)
        worse = test.diff is not None and board.better(0.0, test.diff)  # this row minus the best: on the worse side
        if not (worse and test.significant):
            out.add(role)
    return out


# --- across sets ----------------------------------------------------------------------------------------------

def complete_rows(boards: list[Board]) -> list[str]:
    """The rows that every set has a cell for (a rank test needs every method on every set)."""
    return [r for r in ROLES if boards and all(r in b.cells for b in boards)]


def ranks(boards: list[Board], alpha: float = stats.ALPHA) -> dict[str, Any]:
    """Mean ranks of the rows every set has, by set means (rank 1: the best), the Friedman test and the Nemenyi
    critical difference, from autorank; {'skipped': why} with fewer than 2 sets or 2 rows."""
    rows = complete_rows(boards)
    if len(boards) < MIN_SETS or len(rows) < 2:
        return {"skipped": f"{len(boards)} set(s) with {len(rows)} row(s) in common: the rank test needs at least "
                           f"{MIN_SETS} sets (autorank's minimum) and 2 rows"}
    try:
        import pandas as pd
        from autorank import autorank
    except ImportError:
        return {"skipped": "autorank is not installed: pip install 'swamp-bench[stats]'"}
    # higher is better for autorank's descending order: a rank metric enters negated
    data = pd.DataFrame({ROLES[r]: [(-1 if b.lower else 1) * b.cells[r].summary.mean for b in boards] for r in rows},
                        index=[b.label for b in boards])
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        result = autorank(data, alpha=alpha, verbose=False, order="descending", force_mode="nonparametric")
    mean_ranks = {r: float(result.rankdf.loc[ROLES[r], "meanrank"]) for r in rows}
    return {"rows": rows, "sets": [b.name for b in boards], "mean_ranks": mean_ranks,
            "test": "Friedman", "p": float(result.pvalue), "cd": float(result.cd) if result.cd is not None else None,
            "post_hoc": "Nemenyi", "alpha": alpha, "_result": result}


def cd_diagram(found: dict[str, Any], path: Path) -> bool:
    """The critical-difference diagram of :func:`ranks`'s result (autorank's ``plot_stats``) as a PNG; False when
    there is none."""
    result = found.get("_result")
    if result is None:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from autorank import plot_stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ax = plot_stats(result, allow_insignificant=True)
    fig = ax.get_figure()
    fig.savefig(path, dpi=150, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return True


def bayes(boards: list[Board], rope: float = ROPE, seed: int = 0, samples: int = 10_000,
          chains: int = 4) -> dict[str, Any]:
    """SwAMP against each set's strongest contrastive loss (chosen on validation), over sets and seeds: baycomp's
    Bayesian hierarchical correlated t-test (Benavoli et al. 2017) with a region of practical equivalence of
    ``rope`` points. {'skipped': why} when a set lacks either row, the seeds differ, or baycomp's sampler (pystan) is
    not installed. The sampler is seeded, so that the same results give the same probabilities."""
    usable = [b for b in boards if SWAMP in b.cells and any(r in b.cells for r in CONTRASTIVE)]
    if len(usable) < 2:
        return {"skipped": f"{len(usable)} set(s) with SwAMP and a contrastive loss: the comparison needs 2 or more"}
    pairs, seeds = [], None
    for b in usable:
        found = against_strongest(b)
        rival = found.rival if found is not None else strongest(b)[0]
        common = sorted(set(b.cells[SWAMP].values) & set(b.cells[rival].values))
        seeds = common if seeds is None else seeds
        if common != seeds or len(common) < 2:
            return {"skipped": f"{b.name}: SwAMP and {rival} share seeds {common}, other sets {seeds}: the "
                               "hierarchical model needs the same seeds on every set"}
        sign = -1.0 if b.lower else 1.0
        pairs.append(([sign * b.cells[SWAMP].values[s] for s in common],
                      [sign * b.cells[rival].values[s] for s in common], rival))
    try:
        import baycomp
        import numpy as np
        import stan
    except ImportError as err:
        return {"skipped": f"{err.name or 'baycomp'} is not installed (the hierarchical model samples with pystan): "
                           "pip install 'swamp-bench[stats]'"}
    x = np.array([p[0] for p in pairs])
    y = np.array([p[1] for p in pairs])
    build = stan.build
    out = io.StringIO()
    try:  # baycomp builds its Stan model without a seed and writes a cache file into the working directory
        stan.build = functools.partial(build, random_seed=seed)
        with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(out), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p_better, p_rope, p_worse = baycomp.two_on_multiple(x, y, rope=rope, runs=1, random_state=seed,
                                                                nsamples=samples, chains=chains)
    finally:
        stan.build = build
    return {"rope": rope, "sets": [b.name for b in usable], "rivals": {b.name: p[2] for b, p in zip(usable, pairs)},
            "seeds": seeds, "p_better": round(float(p_better), 4), "p_equivalent": round(float(p_rope), 4),
            "p_worse": round(float(p_worse), 4), "model": "baycomp HierarchicalTest (correlated t, rho = 1/seeds)",
            "samples": samples, "chains": chains, "seed": seed}


# --- rendering ------------------------------------------------------------------------------------------------

def _cell_text(cell: Cell, bold: bool) -> str:
    s = cell.summary
    half = f" ± {(s.ci[1] - s.ci[0]) / 2:.2f}" if s.ci is not None else ""
    n = f" (n={s.n})" if s.n < 5 else ""
    text = f"{s.mean:.2f}{half}{n}"
    return (f"**{text}**" if bold else text) + accuracy.collapse_flag(cell.results)


def table_rows(boards: list[Board], found: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The main table: a row per method, a column per set (mean ± 95% interval over seeds, bold when not
    significantly below the column's best), the mean rank and the trial-minutes over every set."""
    bolds = {b.name: bold_rows(b) for b in boards}
    head = ["method"] + [f"{b.label}: {b.metric}{' (lower is better)' if b.lower else ''}" for b in boards] + \
        ["mean rank", "trial-min (all sets)"]
    rows = []
    for role in ROLES:
        if not any(role in b.cells for b in boards):
            continue
        cells = [_cell_text(b.cells[role], role in bolds[b.name]) if role in b.cells else "–" for b in boards]
        rank = found.get("mean_ranks", {}).get(role)
        minutes = [m for b in boards if role in b.cells and (m := b.cells[role].trial_minutes) is not None]
        rows.append([ROLES[role]] + cells + ["–" if rank is None else f"{rank:.2f}",
                                             f"{sum(minutes):.1f}" if minutes else "–"])
    return head, rows


def cost_rows(boards: list[Board]) -> tuple[list[str], list[list[str]]]:
    """The cost table: per method and set, the study's trial-minutes and the tuned runs' training step (ms)."""
    head = ["method"] + [f"{b.label}: trial-min / step ms" for b in boards]
    rows = []
    for role in ROLES:
        if not any(role in b.cells for b in boards):
            continue
        out = [ROLES[role]]
        for b in boards:
            c = b.cells.get(role)
            if c is None:
                out.append("–")
                continue
            minutes = "–" if c.trial_minutes is None else f"{c.trial_minutes:.1f}"
            step = "–" if c.step_ms is None else f"{c.step_ms:.1f}"
            out.append(f"{minutes} / {step}{f' [contended {c.contended}/{len(c.values)}]' if c.contended else ''}")
        rows.append(out)
    return head, rows


def render(boards: list[Board], found: dict[str, Any], compared: dict[str, Any], command: str) -> str:
    """The reference table's Markdown page."""
    primary = [b for b in boards if b.primary]
    lines = [f"<!-- generated by `{command}` -->", "# The reference table of cross-modal losses", ""]
    if not primary:
        return "\n".join(lines + ["No set with tuned results yet."]) + "\n"
    head, rows = table_rows(primary, found)
    lines += [tabulate(rows, head, tablefmt="github", disable_numparse=True), ""]
    lines.append(f"Each cell: the method's best settings from its study (equal trials per method within a set, on the "
                 f"validation split), trained with every seed and tested; mean ± half-width of the 95% Student-t "
                 f"interval over seeds ((n=k): fewer than 5 seeds). Bold: not significantly below the column's best "
                 f"(paired t over seeds, α = {stats.ALPHA:g}). – : the method does not apply to the set, or has no "
                 "results yet (below).")
    if any(r.get("collapse") for b in primary for c in b.cells.values() for r in c.results):
        lines += ["", accuracy.collapse_note("a cell's n tuned runs", "the cell")]
    lines += ["", "## Budget and the strongest contrastive loss of each set", ""]
    for b in primary:
        lines.append(_budget_line(b))
    lines += ["", "## SwAMP against the strongest contrastive loss, set by set", ""]
    lines += [against_line(b) for b in boards]
    lines += ["", "SwAMP minus the loss chosen on validation, on test, over the seeds both were trained with (mean "
              "and 95% interval of the per-seed differences; better or worse: the paired t-test's p is below "
              f"{stats.ALPHA:g}; level otherwise). The sets named with a metric are the claims ledger's second "
              "metrics, tuned for that metric; they are not columns of the table.", "",
              "## Had validation chosen another loss", ""]
    lines += [line for b in boards if (line := each_line(b)) is not None]
    lines += ["", "SwAMP minus each contrastive loss of the set on test, as above, with the loss's best validation "
              "value from its study; (chosen): the loss validation chose, whose difference is the verdict. The other "
              "differences are not verdicts (choosing the rival on test would favour whichever side the test split "
              "does); they say how much the answer leans on the choice.", "", "## Across sets", ""]
    lines += across_lines(found, compared)
    head, rows = cost_rows(primary)
    lines += ["", "## Cost", "", tabulate(rows, head, tablefmt="github", disable_numparse=True), "",
              "trial-min: the summed minutes of the study's trials; step ms: the tuned runs' median training step "
              "(median over seeds). [contended j/n]: j of the n tuned runs trained while other work kept the machine "
              "busy; compare costs within one set."]
    machines = "; ".join(dict.fromkeys(b.hardware for b in primary if b.hardware))
    lines += ["", f"Hardware: {machines or 'unknown'}."]
    return "\n".join(lines) + "\n"


def across_lines(found: dict[str, Any], compared: dict[str, Any], link_prefix: str = "") -> list[str]:
    """The page's lines across sets: the mean ranks with the Friedman test (or why not), a blank line, the Bayesian
    comparison (or why not); ``link_prefix`` is the table's folder as seen from the page that shows them."""
    out: list[str] = []
    if "skipped" in found:
        out.append(f"Ranks: not computed ({found['skipped']}).")
    else:
        shown = ", ".join(f"{ROLES[r]} {found['mean_ranks'][r]:.2f}"
                          for r in sorted(found["mean_ranks"], key=lambda r: found["mean_ranks"][r]))
        cd = f"; Nemenyi critical difference {found['cd']:.2f} ranks" if found.get("cd") is not None else ""
        out.append(f"Mean ranks over {len(found['sets'])} sets and the {len(found['rows'])} methods every set has "
                   f"(1: best): {shown}. Friedman test p {stats.p_text(found['p'], relation=True)}{cd} at α = "
                   f"{found['alpha']:g} (autorank); two methods whose mean ranks differ by less than the critical "
                   f"difference are not told apart. The critical-difference diagram: [cd.png]({link_prefix}cd.png).")
    out.append("")
    if "skipped" in compared:
        out.append(f"Bayesian comparison: not computed ({compared['skipped']}).")
    else:
        rivals = ", ".join(f"{k}: {ROLES[v]}" for k, v in compared["rivals"].items())
        out.append(f"SwAMP against the strongest contrastive loss of each set ({rivals}), Bayesian hierarchical "
                   f"model over {len(compared['sets'])} sets × {len(compared['seeds'])} seeds (baycomp; Benavoli et "
                   f"al. 2017), equivalent within ±{compared['rope']:g} point: P(SwAMP better) = "
                   f"{compared['p_better']:.3f}, P(equivalent) = {compared['p_equivalent']:.3f}, P(SwAMP worse) = "
                   f"{compared['p_worse']:.3f}.")
    return out


def _budget_line(b: Board) -> str:
    try:
        budget = f"{equal_budget(b)} trials per method"
    except ConfigError as err:
        budget = f"UNEQUAL budgets ({err})"
    pruners = sorted({c.pruner for c in b.cells.values() if c.role != "floor"})
    pruned = ", ".join(f"{ROLES[r]} {c.trials.get('pruned', 0)}" for r, c in b.cells.items() if c.trials.get("pruned"))
    seeds = sorted({s for c in b.cells.values() for s in c.values})
    try:
        rival, values = strongest(b)
        shown = ", ".join(f"{ROLES[r]} {v:.2f}" for r, v in values.items())
        ties = tied(b)
        if len(ties) > 1:
            found = against_strongest(b)
            least = f"; SwAMP is compared with the least favourable to it on test, {ROLES[found.rival]}" \
                if found else ""
            chosen = (f"strongest contrastive loss (validation): a tie between {', '.join(ROLES[r] for r in ties)} "
                      f"({shown}){least}")
        else:
            chosen = f"strongest contrastive loss (validation): {ROLES[rival]} ({shown})"
    except ConfigError:
        chosen = "no contrastive loss tuned yet"
    missing = "; ".join(f"{ROLES[r]}: {why}" for r, why in b.missing.items())
    undeclared = ", ".join(ROLES[r] for r in ROLES if b.primary and r not in b.manifest.get("rows", {}))
    return (f"- **{b.label}** ({b.manifest.get('task')}, {b.metric}): {budget}, pruning {', '.join(pruners) or '–'}"
            f"{f' (pruned: {pruned})' if pruned else ''}; seeds {', '.join(map(str, seeds)) or '–'}; {chosen}"
            f"{f'; no cell: {missing}' if missing else ''}"
            f"{f'; no row for {undeclared}: the task does not declare them' if undeclared else ''}.")


def against_line(b: Board) -> str:
    """One set's answer: SwAMP minus its strongest contrastive loss on test, or why there is none yet."""
    head = f"- **{b.label}** ({b.metric}{', lower is better' if b.lower else ''}): "
    found = against_strongest(b)
    if found is None:
        return head + "not measured yet (SwAMP or the contrastive losses have no tuned runs on common seeds)."
    t = found.tested
    interval = f" {shown}" if (shown := stats.interval_text(t.ci)) else ""
    p = "no test" if t.p is None else f"p {stats.p_text(t.p, relation=True)}"
    tie = (f"; validation tied {', '.join(ROLES[r] for r in found.tied)}, the least favourable to SwAMP shown"
           if found.tied else "")
    return (head + f"SwAMP − {ROLES[found.rival]} = {t.diff:+.2f}{interval} ({t.how}, {p}{tie}): "
            f"**{found.reading}**.")


def each_line(b: Board) -> str | None:
    """One set's SwAMP minus each contrastive loss on test, the rival chosen on validation marked; None without
    SwAMP's runs."""
    found = against_each(b)
    if not found:
        return None
    try:
        chosen = set(tied(b))
    except ConfigError:  # no loss has a study's validation value: none was chosen
        chosen = set()
    parts = []
    for a in found:
        t = a.tested
        val = f"validation {a.chose[a.rival]:.2f}" if a.rival in a.chose else "no study"
        diff = "–" if t.diff is None else f"{t.diff:+.2f}"
        parts.append(f"{ROLES[a.rival]}{' (chosen)' if a.rival in chosen else ''} {diff}, {a.reading} ({val})")
    readings = {a.reading for a in found}
    robust = (f"the same reading against every loss ({found[0].reading})" if len(readings) == 1 else
              "the reading depends on the rival")
    return f"- **{b.label}** ({b.metric}): " + "; ".join(parts) + f": {robust}."


def _against_json(b: Board) -> dict[str, Any] | None:
    found = against_strongest(b)
    if found is None:
        return None
    t = found.tested
    return {"rival": found.rival, "diff": t.diff, "ci": t.ci, "p": t.p, "test": t.test, "seeds": found.seeds,
            "reading": found.reading, "tied_on_validation": list(found.tied)}


def summary(boards: list[Board], found: dict[str, Any], compared: dict[str, Any]) -> dict[str, Any]:
    """The numbers of the page, as ``reference.json`` holds them."""
    sets = {}
    for b in boards:
        try:
            rivals = tied(b)  # one loss where validation decides; every tied loss where it cannot
        except ConfigError:
            rivals = []
        bolds = bold_rows(b)
        sets[b.name] = {
            "task": b.manifest.get("task"), "metric": b.metric, "primary": b.primary, "hardware": b.hardware,
            "strongest_contrastive": rivals,
            "cells": {r: {"method": c.method, "values": {str(k): v for k, v in sorted(c.values.items())},
                          "mean": c.summary.mean, "ci": c.summary.ci, "bold": r in bolds, "val_best": c.val_best,
                          "trials": c.trials, "pruner": c.pruner, "trial_minutes": c.trial_minutes,
                          "step_ms": c.step_ms, "best": c.best} for r, c in b.cells.items()},
            "missing": b.missing, "swamp_vs_strongest": _against_json(b),
            "swamp_vs_each": {a.rival: {"diff": a.tested.diff, "ci": a.tested.ci, "p": a.tested.p,
                                        "reading": a.reading} for a in against_each(b)}}
    return {"sets": sets, "ranks": {k: v for k, v in found.items() if not k.startswith("_")}, "bayes": compared}


def recorded(root: Path) -> dict[str, Any]:
    """The record ``write`` left under ``root`` (``reference.json``: the numbers of the page, the Bayesian comparison
    among them); {} where none was written."""
    path = Path(root) / "reference.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def write(root: Path, command: str, with_bayes: bool = True) -> str:
    """Compute the table from the sets under ``root``, write ``reference.md``, ``reference.json`` and the
    critical-difference diagram ``cd.png`` there, and return the page."""
    root = Path(root)
    boards = load_boards(root)
    primary = [b for b in boards if b.primary and b.cells]
    found = ranks(primary)
    compared = bayes(primary) if with_bayes else {"skipped": "--no-bayes"}
    page = render(boards, found, compared, command)
    if not cd_diagram(found, root / "cd.png"):
        (root / "cd.png").unlink(missing_ok=True)
    write_json_atomic(root / "reference.json", summary(boards, found, compared))
    write_text_atomic(root / "reference.md", page)
    return page


def cmd(args: argparse.Namespace) -> int:
    """``harness leaderboard --out ROOT`` without tasks: the table from the sets already made."""
    page = write(Path(args.out), f"python -m harness leaderboard --out {args.out}", with_bayes=not args.no_bayes)
    print(page)
    return 0
