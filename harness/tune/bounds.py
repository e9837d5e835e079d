"""A search space's bounds checked against the data its trials train on, before any trial runs.

A trial whose settings the data refuses (SwAMP's K above the training pairs a trial sees) ends as failed and counts
against its row's budget, as a diverged trial does. Where a range reaches such values, a share of one row's trials
is spent on settings that cannot run while the other rows spend all of theirs, and the rows no longer get the same
chance. With folds (:mod:`harness.tune.folds`) a trial trains on two thirds of the training split, so a range that
fits the task's own runs can reach past what a fold holds. This module tries each numeric range's two ends, one at
a time at the task's other settings, on every view a trial trains on. A range the task's ``tune.space`` writes is
refused before the search starts, naming the setting, the end and the value that fits; a range that comes from the
setting's declaration is a warning with the same words.

    warned = check(command.setup(opts), data)   # ConfigError: '... tune.space swamp.K (high end 255 on fold 0 ...'
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.data.paired import PairedData
from harness.errors import ConfigError, NotApplicable
from harness.run import preflight
from harness.tune.space import Dimension
from harness.tune.study import Study, views_of


def _ends(dim: Dimension) -> list[tuple[str, Any]]:
    """The two ends of a numeric range (none for a choice, a layer search or an encoder type's own setting)."""
    sp = dim.space
    if sp.choices or sp.layers or dim.kind is not None or sp.low is None or sp.high is None:
        return []
    cast = int if dim.integer else float
    return [("low", cast(sp.low)), ("high", cast(sp.high))]


def _where(views: int, i: int) -> str:
    return f"fold {i}'s training part (--folds {views})" if views > 1 else "the training split"


def refused_end(study: Study, dim: Dimension, views: list[PairedData]) -> tuple[str, str] | None:
    """The first end of ``dim``'s range that cannot run on one of ``views``, as (the end and where, why), or None."""
    for end, value in _ends(dim):
        try:
            spec = study.spec([dim.override(study.method, value)])
        except ConfigError:
            continue  # refused by the task's other settings (K not below the queue): a combination, not the data
        for i, view in enumerate(views):
            try:
                preflight.fit_warnings(spec, study.method, view)
            except NotApplicable:
                continue
            except ConfigError as err:
                why = str(err).removeprefix(f"{spec.path}: methods.{study.method}: ")  # preflight's prefix
                return f"{end} end {value} on {_where(len(views), i)}, {view['train'].n_pairs} training pairs", why
    return None


def _lines(by_reason: dict[str, list[str]]) -> str:
    return "; ".join(f"tune.space {', '.join(names)}: {why}" for why, names in by_reason.items())


def check(found: Sequence[Study], data: PairedData) -> list[str]:
    """Refuse a range the task's ``tune.space`` writes that reaches settings the data refuses (ConfigError, the
    ranges refused for one reason named together, then the reason once); a range that comes from a declaration
    (K up to 1,024 on a few hundred pairs, when the task leaves it) is returned as a warning line instead, as a
    search valid only in part is (:func:`harness.tune.space.dimensions`)."""
    refused: dict[bool, dict[str, list[str]]] = {True: {}, False: {}}
    for study in found:
        views = views_of(study, data)
        for dim in study.dims():
            end = refused_end(study, dim, views)
            if end:
                refused[dim.written].setdefault(end[1], []).append(f"{study.method}.{dim.name} ({end[0]})")
    where = found[0].base.path if found else ""
    if refused[True]:
        raise ConfigError(f"{where}: {_lines(refused[True])}. Narrow these ranges in the task's tune.space: a "
                          "trial there would fail and count against its row's budget, so the rows would not get "
                          "the same number of trials that run")
    if refused[False]:
        return [f"{where}: the declared {_lines(refused[False])}. Trials that draw such values fail and count "
                "against their row's budget; narrow the range in the task's tune.space"]
    return []


__all__ = ["check", "refused_end"]
