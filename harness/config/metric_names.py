"""A test metric's name in parts: what :meth:`harness.config.spec.MetricSpec.names` builds, taken apart and put
together again without a regular expression, for the readers that need its parts (the rank keys of a recall, the
columns of the accuracy table). A module of its own, beside the spec and loaded by no run: the names are built by
``MetricSpec.names`` and ``tests/test_report_facts.py`` checks that every name it builds round-trips through
:func:`parse_metric` and :class:`MetricName`."""
from __future__ import annotations

from dataclasses import dataclass

from harness.config import metrics as M
from harness.config.spec import DIRECTIONS
from harness.errors import ConfigError


@dataclass(frozen=True)
class MetricName:
    """A test metric's name in parts, as :meth:`MetricSpec.names` builds it: the statistic ('R@5', 'MedR', 'mAP',
    'rsum', ...), the direction (None for rsum, which sums both), the relevance ('pair' or 'class') and the folds of
    the protocol (1: the whole split). ``str()`` gives the name ('5folds/i2t/class_R@5')."""

    stat: str
    direction: str | None = None
    relevance: str = "pair"
    folds: int = 1

    def __str__(self) -> str:
        return M.metric_name(self.stat, self.direction, self.relevance, self.folds)

    @property
    def recall_k(self) -> int | None:
        """The k of a recall R@k; None for any other statistic (the metric registry's family says which)."""
        declared = M.find(self.stat)
        return int(self.stat.partition("@")[2]) if declared is not None and declared.family == M.RECALL else None


def parse_metric(name: str) -> MetricName:
    """A name that :meth:`MetricSpec.names` builds, taken apart into its :class:`MetricName`; ConfigError for a name
    it never builds."""
    head, _, rest = name.partition("/")
    folds = 1
    if rest and head.endswith("folds") and head[:-len("folds")].isdigit():
        folds, name = int(head[:-len("folds")]), rest
    if name == "rsum":
        return MetricName("rsum", folds=folds)
    direction, _, stat = name.partition("/")
    relevance = "class" if stat.startswith("class_") else "pair"
    stat = stat[len("class_"):] if relevance == "class" else stat
    if direction not in DIRECTIONS or not stat or "/" in stat:
        raise ConfigError(f"{name!r} is not a test metric's name; valid: [<n>folds/]<direction>/[class_]<statistic> "
                          "or [<n>folds/]rsum, e.g. a2b/R@1, 5folds/i2t/class_mAP")
    return MetricName(stat, direction, relevance, folds)
