"""The comparisons each claim makes, per set, on test, paired over seeds by the significance policy
(:func:`harness.report.stats.seed_significance`: the paired t-test over common seeds, its 95% interval):

* ``pair``: every X + SwAMP − X, SwAMP's term added to a contrastive loss X with everything else tuned alike (the form
  of the paper's add-on claims: Doodle2Search + SwAMP, HowTo100M + SwAMP);
* ``best``: the best row with SwAMP's term (X + SwAMP or SwAMP alone) minus the best row without it (a contrastive
  loss), each chosen on validation;
* ``alone``: SwAMP alone minus the strongest contrastive loss, chosen on validation;
* ``candidate``: each candidate row (a user's own method) minus the strongest contrastive loss, chosen the same way.

A choice made on validation never looks at test. Where several rows tie on validation, each is compared and Holm's
correction over those tests decides the reading (:func:`family`); the difference shown is the one least favourable
to the SwAMP side, with its Holm-adjusted p. A set whose validation metric saturates for every row
(:func:`harness.report.reference_table.marks.saturated`) is read as uninformative for tuning, not given a verdict.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError
from harness.report import rows as rowmodel
from harness.report import stats
from harness.report.reference_table.boards import Board
from harness.report.reference_table.marks import saturated

PAIR, BEST, ALONE, CANDIDATE, EACH = "pair", "best", "alone", "candidate", "each"
KINDS = {PAIR: "X + SwAMP − X", BEST: "best with SwAMP's term − best without", ALONE: "SwAMP alone − strongest",
         CANDIDATE: "candidate − strongest", EACH: "against each contrastive loss"}
READINGS = ("better", "level", "worse", "uninformative")


def validation_values(board: Board, names: list[str] | None = None) -> dict[str, float]:
    """Each of ``names``' rows (default: the contrastive rows) with a study: its best trial's validation value."""
    names = board.named(rowmodel.CONTRASTIVE) if names is None else names
    return {r: float(v) for r in names if r in board.cells and (v := board.cells[r].val_best) is not None}


def strongest(board: Board, names: list[str] | None = None) -> tuple[str, dict[str, float]]:
    """The best of ``names`` (default: the contrastive losses) on validation, never on test; and every candidate's
    validation value that chose it. ConfigError when no candidate has a study."""
    values = validation_values(board, names)
    if not values:
        raise ConfigError(f"{board.folder}: no contrastive loss of {', '.join(names or ['the set'])} has a tuned "
                          "result yet")
    pick = functools.reduce(lambda a, b: b if board.better(values[b], values[a]) else a, values)
    return pick, values


def tied(board: Board, names: list[str] | None = None) -> list[str]:
    """The rows of ``names`` whose best validation values tie with the best's: those validation cannot tell apart.
    One row when validation decides."""
    pick, values = strongest(board, names)
    return [r for r, v in values.items() if math.isclose(v, values[pick], rel_tol=1e-9, abs_tol=1e-9)]


def holm(ps: list[float]) -> list[float]:
    """Holm's step-down adjustment of ``ps`` (in their order): the i-th smallest p times (m − i + 1), made monotone
    and capped at 1."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out = [1.0] * len(ps)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        out[i] = running
    return out


@dataclass(frozen=True)
class Against:
    """One comparison on a set's test metric: ``of`` minus ``rival`` over the seeds both have, the validation values
    that chose them, and its reading. Where validation tied several rows, ``tied`` names the alternatives, the
    difference shown is the least favourable to ``of``'s side and ``p_holm`` its Holm-adjusted p over them."""

    rival: str
    chose: dict[str, float]
    tested: stats.Difference
    seeds: list[int]
    lower: bool  # the metric is a rank: a negative difference is a gain
    tied: tuple[str, ...] = ()
    of: str = "swamp"
    kind: str = ALONE
    p_holm: float | None = None
    verdict: str = ""  # the reading over the tied family ('' : from this test alone)
    tests: int = 1  # the tests Holm's correction ran over

    @property
    def p(self) -> float | None:
        """The p that decides: Holm-adjusted where several tests ran, else the test's own."""
        return self.p_holm if self.tests > 1 else self.tested.p

    @property
    def reading(self) -> str:
        """'better', 'level', 'worse' or 'uninformative'."""
        if self.verdict:
            return self.verdict
        return _side(self.tested.diff, self.tested.p, self.lower)


def _side(diff: float | None, p: float | None, lower: bool) -> str:
    if diff is None or diff == 0 or p is None or p >= stats.ALPHA:
        return "level"
    return "better" if (diff < 0) == lower else "worse"


def compare(board: Board, of: str, rival: str, chose: dict[str, float], kind: str) -> Against | None:
    """``of`` minus ``rival`` on the set's test metric over the seeds both have; None under 2 common seeds."""
    mine, theirs = board.cells[of].values, board.cells[rival].values
    seeds = sorted(set(mine) & set(theirs))
    if len(seeds) < 2:
        return None
    return Against(rival, chose, stats.seed_significance(mine, theirs), seeds, board.lower, of=of, kind=kind)


def family(board: Board, ofs: list[str], rivals: list[str], chose: dict[str, float], kind: str) -> Against | None:
    """Every ``of`` in ``ofs`` against every rival in ``rivals`` (the rows validation could not tell apart on either
    side); Holm's correction over the tests decides: worse when any is significantly worse, better when every one is
    significantly better, level otherwise; uninformative on a saturated set. The comparison least favourable to the
    ``ofs`` side is the one returned."""
    found = [a for o in ofs for r in rivals if o != r and (a := compare(board, o, r, chose, kind)) is not None]
    if not found:
        return None
    sign = -1.0 if board.lower else 1.0
    least = min(found, key=lambda a: sign * (a.tested.diff if a.tested.diff is not None else math.inf))
    alternatives = tuple(dict.fromkeys(rivals if len(rivals) > 1 else ofs)) if len(found) > 1 else ()
    tested = [(id(a), a.tested.p) for a in found if a.tested.p is not None]
    adjusted = dict(zip((i for i, _ in tested), holm([p for _, p in tested])))
    sides = [_side(a.tested.diff, adjusted.get(id(a)), board.lower) for a in found]
    reading = "worse" if "worse" in sides else "better" if all(s == "better" for s in sides) else "level"
    if saturated(board):
        reading = "uninformative"
    return Against(least.rival, chose, least.tested, least.seeds, board.lower, alternatives, least.of, kind,
                   adjusted.get(id(least)), reading, len(found))


def _strongest_contrastive(board: Board) -> tuple[list[str], dict[str, float]] | None:
    try:
        return tied(board), strongest(board)[1]
    except ConfigError:
        return None


def against_strongest(board: Board, of: str | None = None, kind: str = ALONE) -> Against | None:
    """``of`` (default: the SwAMP-alone row) minus the strongest contrastive loss, chosen on validation; None while
    either has no tuned runs or they share fewer than 2 seeds. Where validation ties several losses, each is compared
    and Holm's correction decides (:func:`family`)."""
    if of is None:
        alone = board.named(rowmodel.SWAMP)
        of = alone[0] if alone else None
    if of is None or of not in board.cells:
        return None
    found = _strongest_contrastive(board)
    if found is None:
        return None
    return family(board, [of], found[0], found[1], kind)


def candidates(board: Board) -> list[Against]:
    """Each candidate row minus the strongest contrastive loss, as SwAMP alone is compared."""
    return [a for c in board.named(rowmodel.CANDIDATE) if (a := against_strongest(board, c, CANDIDATE)) is not None]


def pairs(board: Board) -> list[Against]:
    """Every X + SwAMP − X of the set with both cells, in the family's order: no choice, so no tie; uninformative on a
    saturated set."""
    out = []
    for with_row, base in rowmodel.pairs(board.rows):
        if with_row.name in board.cells and base.name in board.cells:
            found = family(board, [with_row.name], [base.name], validation_values(board, [with_row.name, base.name]),
                           PAIR)
            if found is not None:
                out.append(found)
    return out


def best_with_without(board: Board) -> Against | None:
    """The best row with SwAMP's term (X + SwAMP or SwAMP alone) minus the best contrastive loss, each chosen on
    validation (ties on either side all compared, Holm's correction deciding)."""
    with_term = board.named(rowmodel.WITH_SWAMP, rowmodel.SWAMP)
    without = _strongest_contrastive(board)
    if not with_term or without is None:
        return None
    try:
        ours = tied(board, with_term)
    except ConfigError:
        return None
    chose = {**validation_values(board, with_term), **without[1]}
    return family(board, ours, without[0], chose, BEST)


def against_each(board: Board) -> list[Against]:
    """SwAMP alone (else the best row with SwAMP's term) minus every contrastive loss with tuned runs: how the answer
    would read had validation chosen another rival. Not a verdict."""
    alone = board.named(rowmodel.SWAMP)
    ours = alone or board.named(rowmodel.WITH_SWAMP)
    if not ours:
        return []
    of = ours[0] if alone else strongest(board, ours)[0] if validation_values(board, ours) else ours[0]
    chose = validation_values(board)
    return [a for r in board.named(rowmodel.CONTRASTIVE) if (a := compare(board, of, r, chose, EACH)) is not None]


def comparisons(board: Board) -> dict[str, Any]:
    """Every comparison of a set: {'alone': Against | None, 'pairs': [...], 'best': Against | None,
    'candidates': [...]}."""
    return {ALONE: against_strongest(board), PAIR: pairs(board), BEST: best_with_without(board),
            CANDIDATE: candidates(board)}


def bold_rows(board: Board) -> set[str]:
    """The rows not significantly worse than the set's best row (by mean): every row whose paired test over seeds
    does not put it below the best at :data:`stats.ALPHA`."""
    if not board.cells:
        return set()
    means = {r: c.summary.mean for r, c in board.cells.items()}
    best = functools.reduce(lambda a, b: b if board.better(means[b], means[a]) else a, means)
    out = {best}
    for name, cell in board.cells.items():
        if name == best:
            continue
        test = stats.seed_significance(cell.values, board.cells[best].values)
        worse = test.diff is not None and board.better(0.0, test.diff)
        if not (worse and test.significant):
            out.add(name)
    return out
