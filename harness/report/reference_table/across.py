"""Across the sets: mean ranks with the Friedman test, Nemenyi's critical difference and its diagram (autorank); and
the Bayesian hierarchical comparison over sets with seeds as replicates (baycomp), run separately for each
comparison that names one method: SwAMP alone against each set's strongest contrastive loss, and X + SwAMP against X
for each X that has the pair on two sets or more (never three methods pooled under one name).

The seeds are replicates on one test split, not cross-validation folds: the hierarchical model's correlation between
replicates is set to 1 / (number of seeds), its default for repeated runs (Corani et al. 2017), and the test split is
the same for every seed. The model is run twice: on raw points (region of practical equivalence ±:data:`ROPE`
points, where a rank metric's difference is negated so that a gain is positive), and on a common scale, each set's
differences divided by that set's pooled seed-to-seed standard deviation (the root mean of the per-row sample
variances over seeds, failed seeds left out), with a region of practical equivalence of ±:data:`ROPE_SD` of it: a
difference smaller than half of what reseeding moves a row is practically none, whatever the set's metric or spread.
"""
from __future__ import annotations

import contextlib
import functools
import io
import math
import statistics
import tempfile
import warnings
from pathlib import Path
from typing import Any

from harness.report import rows as rowmodel
from harness.report import stats
from harness.report.reference_table import verdicts
from harness.report.reference_table.boards import Board
from harness.report.reference_table.marks import failed_seeds

MIN_SETS = 5  # autorank ranks at least five sets
ROPE = 1.0  # points: the raw comparison's region of practical equivalence
ROPE_SD = 0.5  # pooled seed-to-seed standard deviations: the scaled comparison's region
RAW, SCALED = "raw points", "pooled seed SD"


def complete_rows(boards: list[Board]) -> list[str]:
    """The rows that every set has a cell for (a rank test needs every method on every set), in the first set's
    order."""
    if not boards:
        return []
    return [r for r in boards[0].rows if all(r in b.cells for b in boards)]


def ranks(boards: list[Board], alpha: float = stats.ALPHA) -> dict[str, Any]:
    """Mean ranks of the rows every set has, by set means (rank 1: the best), the Friedman test and the Nemenyi
    critical difference, from autorank; {'skipped': why} with fewer than :data:`MIN_SETS` sets or 2 rows."""
    rows = complete_rows(boards)
    if len(boards) < MIN_SETS or len(rows) < 2:
        return {"skipped": f"{len(boards)} set(s) with {len(rows)} row(s) in common: the rank test needs at least "
                           f"{MIN_SETS} sets (autorank's minimum) and 2 rows"}
    try:
        import pandas as pd
        from autorank import autorank
    except ImportError:
        return {"skipped": "autorank is not installed: pip install 'swamp-bench[stats]'"}
    shown = {r: boards[0].shown(r) for r in rows}
    data = pd.DataFrame({shown[r]: [(-1 if b.lower else 1) * b.cells[r].summary.mean for b in boards] for r in rows},
                        index=[b.label for b in boards])
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        result = autorank(data, alpha=alpha, verbose=False, order="descending", force_mode="nonparametric")
    mean_ranks = {r: float(result.rankdf.loc[shown[r], "meanrank"]) for r in rows}
    return {"rows": rows, "labels": shown, "sets": [b.name for b in boards], "mean_ranks": mean_ranks,
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


def pooled_sd(board: Board) -> float | None:
    """The set's pooled seed-to-seed standard deviation: the root mean of its trained rows' sample variances over
    seeds, each row's failed seeds left out; None where no row has two seeds or the spread is zero."""
    variances = []
    for name, cell in board.cells.items():
        if board.role(name) == rowmodel.FLOOR:
            continue
        failed = set(failed_seeds(cell.val_at_best, board.lower, board.items))
        kept = [v for s, v in cell.values.items() if s not in failed]
        if len(kept) >= 2:
            variances.append(statistics.variance(kept))
    sd = math.sqrt(statistics.mean(variances)) if variances else 0.0
    return sd if sd > 0 else None


def entries(boards: list[Board], which: str) -> list[tuple[Board, str, str]]:
    """The (set, of, rival) of one comparison across sets: ``alone`` (SwAMP alone against the strongest contrastive
    loss, the least favourable where validation tied) or a contrastive row's name X (X + SwAMP against X)."""
    out = []
    for b in boards:
        if which == verdicts.ALONE:
            found = verdicts.against_strongest(b)
            if found is not None:
                out.append((b, found.of, found.rival))
            continue
        out += [(b, w.name, x.name) for w, x in rowmodel.pairs(b.rows)
                if x.name == which and w.name in b.cells and x.name in b.cells]
    return out


def families(boards: list[Board]) -> list[str]:
    """The comparisons across sets that have two sets or more: ``alone``, then each X of an X + SwAMP pair."""
    xs = [x.name for b in boards for _, x in rowmodel.pairs(b.rows)]
    return [f for f in (verdicts.ALONE, *dict.fromkeys(xs)) if len(entries(boards, f)) >= 2]


def bayes(boards: list[Board], which: str = verdicts.ALONE, scale: str = RAW, seed: int = 0, samples: int = 10_000,
          chains: int = 4) -> dict[str, Any]:
    """One comparison across sets (:func:`entries`) by baycomp's hierarchical correlated t-test (Benavoli et al.
    2017) on ``scale`` (:data:`RAW` or :data:`SCALED`); {'skipped': why} when fewer than 2 sets have it, the seeds
    differ, or baycomp's sampler (pystan) is not installed. The sampler is seeded."""
    found = entries(boards, which)
    if len(found) < 2:
        return {"skipped": f"{len(found)} set(s) with the comparison: it needs 2 or more"}
    pairs, seeds = [], None
    for b, of, rival in found:
        common = sorted(set(b.cells[of].values) & set(b.cells[rival].values))
        seeds = common if seeds is None else seeds
        if common != seeds or len(common) < 2:
            return {"skipped": f"{b.name}: {of} and {rival} share seeds {common}, other sets {seeds}: the "
                               "hierarchical model needs the same seeds on every set"}
        unit = pooled_sd(b) if scale == SCALED else 1.0
        if unit is None:
            return {"skipped": f"{b.name}: no seed-to-seed spread to scale by"}
        sign = (-1.0 if b.lower else 1.0) / unit
        pairs.append(([sign * b.cells[of].values[s] for s in common],
                      [sign * b.cells[rival].values[s] for s in common]))
    rope = ROPE if scale == RAW else ROPE_SD
    probs = _sample(pairs, rope, seed, samples, chains)
    if isinstance(probs, str):
        return {"skipped": probs}
    return {"comparison": which, "scale": scale, "rope": rope, "sets": [b.name for b, _, _ in found],
            "pairs": {b.name: [of, rival] for b, of, rival in found},
            "units": {b.name: (pooled_sd(b) if scale == SCALED else 1.0) for b, _, _ in found}, "seeds": seeds,
            "p_better": round(probs[0], 4), "p_equivalent": round(probs[1], 4), "p_worse": round(probs[2], 4),
            "model": "baycomp HierarchicalTest (correlated t, rho = 1/seeds)", "samples": samples, "chains": chains,
            "seed": seed}


def _sample(pairs: list[tuple[list[float], list[float]]], rope: float, seed: int, samples: int,
            chains: int) -> tuple[float, float, float] | str:
    """baycomp's two_on_multiple on the (x, y) per set, seeded; or why it cannot run."""
    try:
        import baycomp
        import numpy as np
        import stan
    except ImportError as err:
        return (f"{err.name or 'baycomp'} is not installed (the hierarchical model samples with pystan): pip install "
                "'swamp-bench[stats]'")
    x, y = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
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
    return float(p_better), float(p_rope), float(p_worse)


def bayes_all(boards: list[Board], seed: int = 0, samples: int = 10_000, chains: int = 4) -> dict[str, Any]:
    """Every comparison of :func:`families` on both scales: {comparison: {'scaled': ..., 'raw': ...}}."""
    return {f: {"scaled": bayes(boards, f, SCALED, seed, samples, chains),
                "raw": bayes(boards, f, RAW, seed, samples, chains)} for f in families(boards)}
