"""The reference table written: ``reference.json`` (the data every page and figure is made from), ``reference.md``,
the critical-difference diagram ``cd.png`` and, where :mod:`harness.report.reference_figures` exists, the forest plot
of every comparison and each set's best-so-far figure; and the entry point ``harness leaderboard --out ROOT`` calls.

``reference.json``::

    {"sets": {SET: {"task", "metric", "lower", "primary", "appendix"?, "hardware", "saturated", "floor",
                    "rows": {ROW: {"method", "role", "base", "label"}},
                    "cells": {ROW: {"method", "values": {seed: v}, "mean", "std", "ci": [lo, hi], "bold", "val_best",
                                    "val_at_best": {seed: v}, "failed_seeds": [k], "study_seed", "seed_only",
                                    "below_floor", "trials", "pruner", "trial_minutes", "step_ms", "best", "dims",
                                    "convergence": {"best_so_far": [...], "window", "gain", "tolerance",
                                                    "converged"}}},
                    "cost": {"study_hours", "run_hours"}, "strongest_contrastive": [ROW, ...],
                    "comparisons": [COMPARISON, ...], "swamp_vs_strongest": COMPARISON | null,
                    "swamp_vs_each": {ROW: {"diff", "ci", "p", "reading"}}, "missing": {ROW: why}}},
     "ranks": {...}, "bayes": {FAMILY: {"scaled": {...}, "raw": {...}}},
     "forest": [{"set", "comparison", "diff", "lo", "hi", "reading", "lower"}, ...],
     "curves": {SET: {"metric", "lower", "not_converged": [label], "curves": {label: [best-so-far per trial]}}}}

    COMPARISON = {"kind": pair|best|alone|candidate, "of", "rival", "diff", "ci", "p", "p_holm", "tests", "test",
                  "seeds", "reading", "tied_on_validation": [ROW, ...]}
"""
from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.report.reference_table import across, budgets, marks, page, verdicts
from harness.report.reference_table.boards import Board, load_boards
from harness.store.io import write_json_atomic, write_text_atomic

RECORD = "reference.json"


def comparison_json(b: Board, a: verdicts.Against) -> dict[str, Any]:
    """One comparison as ``reference.json`` records it."""
    t = a.tested
    return {"kind": a.kind, "of": a.of, "of_label": b.shown(a.of), "rival": a.rival, "rival_label": b.shown(a.rival),
            "diff": t.diff, "ci": t.ci, "p": t.p, "p_holm": a.p_holm if a.tests > 1 else None, "tests": a.tests,
            "test": t.test, "seeds": a.seeds, "reading": a.reading, "tied_on_validation": list(a.tied)}


def _cell_json(b: Board, name: str, bold: bool, reading: budgets.Reading | None) -> dict[str, Any]:
    c = b.cells[name]
    return {"method": c.method, "values": {str(k): v for k, v in sorted(c.values.items())}, "mean": c.summary.mean,
            "std": c.summary.std, "ci": c.summary.ci, "bold": bold, "val_best": c.val_best,
            "val_at_best": {str(k): v for k, v in sorted(c.val_at_best.items())},
            "failed_seeds": marks.failed_seeds(c.val_at_best, b.lower, b.items), "study_seed": c.study_seed,
            "seed_only": marks.seed_only(c.val_best, c.study_seed, c.val_at_best, b.lower, b.items),
            "below_floor": name in marks.below_floor(b),
            "trials": c.trials, "pruner": c.pruner, "trial_minutes": c.trial_minutes, "step_ms": c.step_ms,
            "best": c.best, "dims": reading.dims if reading else c.dims,
            "convergence": reading.reading.record() if reading else None}


def set_json(b: Board) -> dict[str, Any]:
    """One set's numbers."""
    try:
        rivals = verdicts.tied(b)
    except ConfigError:  # no contrastive loss tuned yet: no rival (the page says why)
        rivals = []
    bolds, readings = verdicts.bold_rows(b), budgets.readings(b)
    found = verdicts.comparisons(b)
    listed = ([found[verdicts.ALONE]] if found[verdicts.ALONE] else []) + found[verdicts.PAIR] + \
        ([found[verdicts.BEST]] if found[verdicts.BEST] else []) + found[verdicts.CANDIDATE]
    alone = found[verdicts.ALONE]
    return {"task": b.manifest.get("task"), "metric": b.metric, "lower": b.lower, "primary": b.primary,
            **({"appendix": b.appendix} if b.appendix else {}),
            "hardware": b.hardware, "saturated": marks.saturated(b), "floor": marks.floor_value(b),
            "rows": {n: r.record() | {"label": r.shown} for n, r in b.rows.items()},
            "cells": {n: _cell_json(b, n, n in bolds, readings.get(n)) for n in b.cells},
            "cost": budgets.cost(b), "strongest_contrastive": rivals,
            "comparisons": [comparison_json(b, a) for a in listed],
            "swamp_vs_strongest": comparison_json(b, alone) if alone else None,
            "swamp_vs_each": {a.rival: {"diff": a.tested.diff, "ci": a.tested.ci, "p": a.tested.p,
                                        "reading": a.reading} for a in verdicts.against_each(b)},
            "missing": b.missing}


def forest_entries(sets: dict[str, Any], boards: list[Board]) -> list[dict[str, Any]]:
    """Every comparison of every set, as the forest plot takes them."""
    labels = {b.name: b.label + (" (appendix)" if b.appendix else "") for b in boards}
    out = []
    for name, s in sets.items():
        for c in s["comparisons"]:
            lo, hi = c["ci"] if c["ci"] else (None, None)
            best = " (the best of each side)" if c["kind"] == verdicts.BEST else ""
            out.append({"set": labels.get(name, name), "comparison": f"{c['of_label']} − {c['rival_label']}{best}",
                        "kind": c["kind"], "diff": c["diff"], "lo": lo, "hi": hi, "reading": c["reading"],
                        "lower": s["lower"]})
    return out


def curves(boards: list[Board]) -> dict[str, Any]:
    """Each set's best-so-far curve per row (by its label), and the rows still rising."""
    out = {}
    for b in boards:
        readings = budgets.readings(b)
        if readings:
            out[b.name] = {"metric": b.metric, "lower": b.lower,
                           "not_converged": [b.shown(r) for r, x in readings.items() if not x.converged],
                           "curves": {b.shown(r): x.reading.curve for r, x in readings.items()}}
    return out


def summary(boards: list[Board], found: dict[str, Any], compared: dict[str, Any]) -> dict[str, Any]:
    """The numbers of the page, as ``reference.json`` holds them."""
    sets = {b.name: set_json(b) for b in boards}
    return {"sets": sets, "ranks": {k: v for k, v in found.items() if not k.startswith("_")}, "bayes": compared,
            "forest": forest_entries(sets, boards), "curves": curves(boards)}


def recorded(root: Path) -> dict[str, Any]:
    """The record :func:`write` left under ``root`` ({} where none was written)."""
    path = Path(root) / RECORD
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def kept_bayes(root: Path, primary: list[Board]) -> dict[str, Any]:
    """The Bayesian comparisons recorded under ``root`` where they are of these sets' comparisons, else why not."""
    kept = recorded(root).get("bayes") or {}
    families = across.families(primary)
    fits = set(kept) == set(families) and all(
        isinstance(v, dict) and set(v.get("scaled", {}).get("sets", [])) == {b.name for b, _, _ in
                                                                            across.entries(primary, f)}
        for f, v in kept.items())
    return kept if fits and families else {"skipped": "--no-bayes, and no record of these sets' comparisons"}


def draw(root: Path, record: dict[str, Any], found: dict[str, Any]) -> dict[str, str]:
    """The figures beside the page: the critical-difference diagram and, where the figure module exists, the forest
    plot and each set's best-so-far curves; {role: file name} of those drawn (stale ones removed)."""
    out: dict[str, str] = {}
    stale = [root / page.CD, root / page.FOREST, *root.glob(page.curve_file("*"))]
    for path in stale:
        path.unlink(missing_ok=True)
    if across.cd_diagram(found, root / page.CD):
        out["cd"] = page.CD
    try:
        figures: Any = importlib.import_module("harness.report.reference_figures")
    except ImportError:
        return out
    if hasattr(figures, "forest") and figures.forest(record["forest"], root / page.FOREST):
        out["forest"] = page.FOREST
    for name, c in record["curves"].items() if hasattr(figures, "best_so_far") else ():
        path = root / page.curve_file(name)
        if figures.best_so_far(c["curves"], path, c["metric"], c["lower"], c["not_converged"]):
            out[f"curves/{name}"] = path.name
    return out


@dataclass(frozen=True)
class Options:
    """What ``harness leaderboard --out ROOT`` asks of the table: the folder of sets, whether to sample the Bayesian
    comparisons (minutes), and the command line the page names."""

    root: Path
    bayes: bool = True
    command: str = ""


def write(root: Path, command: str, with_bayes: bool = True) -> str:
    """Compute the table from the sets under ``root``; write ``reference.json``, ``reference.md`` and the figures
    there; return the page. Without ``with_bayes`` the Bayesian comparisons recorded before are kept."""
    root = Path(root)
    boards = load_boards(root)
    primary = [b for b in boards if b.column and b.cells]
    found = across.ranks(primary)
    compared = across.bayes_all(primary) if with_bayes else kept_bayes(root, primary)
    record = summary(boards, found, compared)
    figures = draw(root, record, found)
    text = page.render(boards, found, compared, command, figures)
    write_json_atomic(root / RECORD, record)
    write_text_atomic(root / "reference.md", text)
    return text


def table(options: Options) -> str:
    """The reference table from the sets already made, written beside them; the page.

    Example: ``table(Options(Path("results/reference"), bayes=False))`` rewrites ``results/reference/reference.md``
    and ``reference.json`` keeping the Bayesian comparisons recorded there."""
    command = options.command or f"python -m harness leaderboard --out {options.root}" + \
        ("" if options.bayes else " --no-bayes")
    return write(options.root, command, with_bayes=options.bayes)
