"""The metrics, each declared once: its statistic, family, direction (whether lower is better), the digits the
accuracy tables show, and the task key that asks for it.

Every reader of a metric's properties asks here: epoch selection (:mod:`harness.run.train`), the no-training floor
(:mod:`harness.run.floor`), collapse at chance (:mod:`harness.run.collapse`), tuning and the reports through
:func:`harness.config.spec.lower_is_better`, the accuracy tables' digits (:mod:`harness.report.accuracy`), and the
names a run produces (:meth:`harness.config.spec.MetricSpec.names`, :mod:`harness.run.evaluate`,
:mod:`harness.run.search`, :mod:`harness.config.metric_names`: :func:`metric_name`). No module outside this one
tests a metric's name to decide what kind of metric it is.

A metric's full name is ``[<n>folds/]<direction>/[class_]<statistic>`` (``5folds/i2t/class_R@5``; the statistic
alone for the sums over directions, ``rsum``), with ``val/`` before it in a run's history.

Adding a metric: its computation in :mod:`harness.ops.metrics` and its wiring in :mod:`harness.run.evaluate`, then
one :class:`Metric` in :data:`METRICS` (with the field of :class:`harness.config.spec.MetricSpec` that asks for it,
when it is not always computed): its name then appears in ``MetricSpec.names()`` and every reader knows its
direction and digits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError

RECALL, RANK, MAP, PRECISION, RSUM = "recall", "rank statistic", "mAP", "precision", "rsum"
FAMILIES = (RECALL, RANK, MAP, PRECISION, RSUM)
CUT = "@k"  # a statistic declared with this suffix has one metric per cut-off k ('R@1', 'R@5', ...)


@dataclass(frozen=True)
class Metric:
    """One statistic of a retrieval: ``stat`` as it appears in names (``R@k`` for one per cut-off), its family,
    whether a lower value is better, the decimals of an accuracy-table cell, the field of
    :class:`harness.config.spec.MetricSpec` that asks for it (None: always computed; a bool field asks for it
    once, a tuple of cut-offs once per cut-off), and whether it is computed per direction and relevance (rsum sums
    over them)."""

    stat: str
    family: str
    lower_is_better: bool
    digits: int
    asked_by: str | None
    per_direction: bool = True
    meaning: str = ""

    def names(self, spec: Any) -> list[str]:
        """The statistic's names that ``spec`` (a MetricSpec) asks for: [] when it does not."""
        asked: Any = True if self.asked_by is None else getattr(spec, self.asked_by)
        if self.stat.endswith(CUT):
            return [f"{self.stat[:-len(CUT)]}@{k}" for k in asked]
        return [self.stat] if asked else []


METRICS: tuple[Metric, ...] = (
    Metric("R@k", RECALL, False, 2, "ks", meaning="percent of queries with a relevant item in the top k"),
    Metric("MedR", RANK, True, 1, None, meaning="floor of the median rank of the first relevant item"),
    Metric("MeanR", RANK, True, 2, None, meaning="mean rank of the first relevant item"),
    Metric("mAP", MAP, False, 2, "map", meaning="mean average precision over the whole gallery"),
    Metric("mAP@k", MAP, False, 2, "map_at", meaning="mean average precision of the top k"),
    Metric("P@k", PRECISION, False, 2, "precision_at", meaning="percent of the top k that is relevant"),
    Metric("rsum", RSUM, False, 2, "rsum", per_direction=False,
           meaning="sum of every direction's recalls at every k"),
)
_BY_STAT = {m.stat: m for m in METRICS}


def fold_prefix(n_folds: int) -> str:
    """Metric-name prefix of a protocol that averages over ``n_folds`` consecutive folds ('' for 1)."""
    return "" if n_folds == 1 else f"{n_folds}folds/"


def with_relevance(stat: str, relevance: str) -> str:
    """A statistic named for a relevance: 'R@5' for pairs, 'class_R@5' for classes."""
    return f"{'class_' if relevance == 'class' else ''}{stat}"


def metric_name(stat: str, direction: str | None = None, relevance: str = "pair", folds: int = 1) -> str:
    """A metric's full name from its parts: ``metric_name('R@5', 'i2t', 'class', 5)`` is '5folds/i2t/class_R@5';
    without a direction (rsum) the statistic alone, after the folds' prefix."""
    if direction is None:
        return f"{fold_prefix(folds)}{stat}"
    return f"{fold_prefix(folds)}{direction}/{with_relevance(stat, relevance)}"


def statistic(metric: str) -> str:
    """The statistic of a full metric name (``val/`` and the folds' prefix allowed): 'R@5' for '5folds/i2t/class_R@5',
    'rsum' for 'val/rsum'."""
    last = metric.rpartition("/")[2]
    return last[len("class_"):] if last.startswith("class_") else last


def find(metric: str) -> Metric | None:
    """The declaration of ``metric`` (a full name or a statistic); None when its statistic is not declared."""
    stat = statistic(metric)
    head, at, k = stat.partition("@")
    return _BY_STAT.get(f"{head}{CUT}") if at and k.isdigit() and int(k) >= 1 else _BY_STAT.get(stat)


def declared(metric: str) -> Metric:
    """The declaration of ``metric`` (a full name or a statistic); ConfigError naming the statistics declared."""
    found = find(metric)
    if found is None:
        stat = statistic(metric)
        raise ConfigError(f"{metric!r} is not a metric: its statistic {stat!r} is none of "
                          f"{', '.join(m.stat for m in METRICS)} (k a positive integer); e.g. a2b/R@1, t2v/MedR")
    return found


def lower_is_better(metric: str) -> bool:
    """Whether a lower value of ``metric`` is better (the rank statistics); every other metric is better higher."""
    return declared(metric).lower_is_better


def digits(metric: str) -> int:
    """Decimals of ``metric``'s cells in the accuracy tables."""
    return declared(metric).digits


def family(metric: str) -> str:
    """The family of ``metric``: one of :data:`FAMILIES`."""
    return declared(metric).family


def statistics(spec: Any) -> list[str]:
    """The statistics that ``spec`` (a MetricSpec) asks for per direction and relevance, in declaration order
    ('R@1', 'R@5', 'R@10', 'MedR', 'MeanR', 'mAP', ...)."""
    return [name for m in METRICS if m.per_direction for name in m.names(spec)]


def summed(spec: Any) -> list[str]:
    """The statistics over every direction that ``spec`` asks for (['rsum'] or [])."""
    return [name for m in METRICS if not m.per_direction for name in m.names(spec)]
