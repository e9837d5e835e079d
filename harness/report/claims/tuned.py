"""A difference judged again under an equal tuning budget (a piece of evidence's ``tuned:``), by the comparison its
claim makes on a reference-table set (:mod:`harness.report.reference_table`):

* ``tuned: {results: SET, verdict: V}``: SwAMP alone minus the set's strongest contrastive loss, chosen on validation
  (a claim that SwAMP beats contrastive learning);
* ``tuned: {results: SET, base: X, verdict: V}``: X + SwAMP minus X, everything else tuned alike (a claim that adding
  SwAMP to X improves X), with the best row with SwAMP's term minus the best without beside it.

Where validation tied several losses, Holm's correction over the tests decides the p; a set whose validation metric
saturates for every row gives :data:`~harness.report.claims.ledger.UNINFORMATIVE`, not a verdict from a tie.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.report import freshness as fr
from harness.report import reference_table as rt
from harness.report import rows as rowmodel
from harness.report import stats
from harness.report.claims.kinds import difference_verdict
from harness.report.claims.ledger import NOT_MEASURED, UNINFORMATIVE, Tuned, flag_text


def comparison(b: rt.Board, base: str | None, where: str = "") -> rt.Against | None:
    """The comparison a ``tuned:`` asks of set ``b``: X + SwAMP − X for ``base`` X, else SwAMP alone − the strongest
    contrastive loss; ConfigError when the set has no such rows (``where``: the set as the ledger names it)."""
    where = where or str(b.folder)
    if base is None:
        if not b.named(rowmodel.SWAMP):
            raise ConfigError(f"{where} has no SwAMP-alone row (its SwAMP rows: "
                              f"{', '.join(b.named(rowmodel.WITH_SWAMP)) or 'none'}); name the contrastive loss SwAMP "
                              "was added to with tuned: base: X")
        return rt.against_strongest(b)
    found = [a for a in rt.pairs(b) if a.rival == base]
    bases = [a.rival for a in rt.pairs(b)]
    if not found and base not in bases and not any(x.name == base for _, x in rowmodel.pairs(b.rows)):
        raise ConfigError(f"{where}: no row X + SwAMP with X = {base!r}; pairs: {', '.join(bases) or 'none'}")
    return found[0] if found else None


def beside_text(b: rt.Board) -> str:
    """'best with SwAMP's term − best without: InfoNCE + SwAMP − SigLIP = +0.00 [−4.32, +4.32], level' ('' without)."""
    best = rt.best_with_without(b)
    if best is None or best.tested.diff is None:
        return ""
    interval = f" {shown}" if (shown := stats.interval_text(best.tested.ci)) else ""
    return (f"best with SwAMP's term − best without: {b.shown(best.of)} − {b.shown(best.rival)} = "
            f"{best.tested.diff:+.2f}{interval}, {best.reading}")


def judge_tuned(item: dict[str, Any], root: Path, rules: dict[str, Any], checkout: fr.Checkout) -> Tuned:
    """The difference of ``item`` judged again on its ``tuned:`` set by the comparison its claim makes, over the seeds
    both rows were trained with, by the difference rule."""
    spec, tuned = item["difference"], item["tuned"]
    folder, base_row = Path(tuned["results"]), tuned.get("base")
    metric, expect, alpha = spec["metric"], spec.get("expect", "higher"), float(rules["alpha"])
    common = dict(recorded=tuned["verdict"], evidence=str(folder), pair=base_row is not None)

    def missing(why: str) -> Tuned:
        return Tuned(verdict=NOT_MEASURED, ours="–", interval="", rival="–", budget="–", why=why, **common)

    if not (root / folder / rt.MANIFEST).is_file():
        return missing(f"{folder} holds no reference-table set yet (python -m harness leaderboard)")
    b = rt.load_set(root / folder)
    if b.metric != metric:
        raise ConfigError(f"tuned: {folder} was tuned for {b.metric}, the difference measures {metric}; name the set "
                          f"tuned for {metric} (python -m harness leaderboard TASK --metric {metric})")
    try:
        found = comparison(b, base_row, str(folder))
        names = (found.of, found.rival, *found.tied) if found is not None else ()
        trials = rt.equal_budget(b, tuple(names) or None)
    except ConfigError as err:
        return missing(str(err))
    if found is None:
        return missing(f"{folder}: the rows to compare have no tuned runs on 2 common seeds yet; the rule needs 2")
    return _judged(b, found, trials, metric, expect, alpha, checkout, common, str(tuned.get("flagged_ok", "")))


def _judged(b: rt.Board, found: rt.Against, trials: int, metric: str, expect: str, alpha: float,
            checkout: fr.Checkout, common: dict[str, Any], flagged_ok: str) -> Tuned:
    tested, mine, theirs = found.tested, b.cells[found.of], b.cells[found.rival]
    values = ", ".join(f"{b.shown(r)} {v:.2f}" for r, v in found.chose.items())
    if common["pair"]:
        which = "SwAMP's term added to it, everything else tuned alike"
    elif found.tests > 1:
        which = (f"of the losses validation tied ({values}), the least favourable to SwAMP on test, Holm's correction "
                 f"over the {found.tests} tests deciding (adjusted p {stats.p_text(found.p or 1.0, relation=True)})")
    else:
        which = f"the strongest contrastive loss on validation ({values})"
    what = (f"{metric} of {b.shown(found.of)} ({mine.method}@tuned) against {b.shown(found.rival)} "
            f"({theirs.method}@tuned), {which}")
    diff = tested.diff if tested.diff is not None else math.nan
    verdict, why = difference_verdict(diff, found.p, expect, alpha, what, tested.how)
    if found.reading == "uninformative":
        verdict = UNINFORMATIVE
        why = f"{what}: every row's best validation value sits at the metric's ceiling, so validation chose nothing"
    rows = (found.of, found.rival, *found.tied)
    minutes = {r: c.trial_minutes for r, c in b.cells.items() if r in rows and c.trial_minutes is not None}
    budget = f"{trials} trials per method" + (f", {min(minutes.values()):.1f}–{max(minutes.values()):.1f} trial-min"
                                              if minutes else "")
    why += "; trial-min: " + ", ".join(f"{b.shown(r)} {m:.1f}" for r, m in minutes.items())
    flagged = "; ".join(filter(None, [flag_text(b.shown(r), b.cells[r].results) for r in (found.of, found.rival)]
                               + [f"{b.shown(r)} {m.strip('[]')}" for r in (found.of, found.rival)
                                  for m in rt.seed_marks(b, r)]))
    return Tuned(verdict=verdict, ours=f"{diff:+.2f}", interval=stats.interval_text(tested.ci),
                 rival=b.shown(found.rival), budget=budget, why=why,
                 freshness=fr.combine(fr.judge(r, checkout) for r in mine.results + theirs.results), value=diff,
                 flags=flagged, flagged_ok=flagged_ok, of=b.shown(found.of),
                 beside=beside_text(b) if common["pair"] else "", **common)
