"""One trial: the settings Optuna proposes for it, one training run of the method at those settings on the training
and validation splits, and how it ended, told to the study.

A trial trains with the study's seed and is validated after each epoch, as ``harness run`` trains; its value is the
selection metric (``train.select``) of the epoch training keeps. Each epoch's best value so far is reported to the
study, whose pruner may stop it (:func:`harness.tune.study.pruner_of`). Settings the task, the method or the data
refuse, and a training that fails (a non-finite loss), end the trial as failed and counted. While it trains, the
trial's heartbeat (:class:`Heartbeat`) tells the other workers it is alive (:func:`harness.tune.storage.recover`).
The test split is never read: trials get the data without it (:func:`without_test`). With folds of the training
split (:mod:`harness.tune.folds`) a trial trains once per fold, each validated on its fold, and its value is the mean;
such a trial reports no epochs to the pruner.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import threading
import time
from typing import Any, Protocol

import optuna
from optuna.study import StudyDirection
from optuna.trial import TrialState

from harness.config.plan import Run
from harness.config.registry import METHODS
from harness.config.spec import TaskSpec
from harness.data.paired import PairedData
from harness.errors import ConfigError, RunError
from harness.run import preflight, runner
from harness.run.checkpoint import resume_path
from harness.store.schema import result_path
from harness.tune.space import Dimension
from harness.tune.storage import BOOT, HOST

BEAT_S = 30.0  # a running trial writes its heartbeat this often


class Trialled(Protocol):
    """What a trial needs of its study (:class:`harness.tune.study.Study`): the method, the seed, and the task with a
    trial's settings."""

    @property
    def method(self) -> str: ...

    @property
    def seed(self) -> int: ...

    def spec(self, extra: list[str] | None = None) -> TaskSpec: ...


class Heartbeat:
    """Writes the running trial's time to the storage every :data:`BEAT_S` seconds until stopped."""

    def __init__(self, trial: optuna.Trial):
        self.trial, self.stop = trial, threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self) -> None:
        while not self.stop.wait(BEAT_S):
            with contextlib.suppress(Exception):  # a missed beat only delays nothing: the trial is still running
                self.trial.set_user_attr("beat", time.time())

    def __enter__(self) -> Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def trial_settings(trial: optuna.Trial, dims: list[Dimension], method: str) -> tuple[dict[str, Any], list[str]]:
    """The trial's value of each searched setting and their --set texts. The first trial (the task's own settings)
    sets only the settings its space can write; the others stay as the task has them (``auto``)."""
    fixed = set(trial.user_attrs.get("start_params", [])) if trial.user_attrs.get("start") else None
    values: dict[str, Any] = {}
    kinds: dict[str, str] = {}  # encoder types this trial picked
    for dim in dims:
        if dim.kind is not None and kinds.get(dim.part, dim.base_kind) != dim.kind:
            continue  # a setting of an encoder type this trial did not pick
        if fixed is not None and not set(dim.params()) <= fixed:
            continue
        values[dim.name] = dim.suggest(trial)
        if dim.is_type:
            kinds[dim.part] = values[dim.name]
    return values, [dim.override(method, values[dim.name]) for dim in dims if dim.name in values]


def _fail(opened: optuna.Study, trial: optuna.Trial, why: str) -> None:
    """End the trial as failed because of its settings: counted against the budget, with the reason."""
    trial.set_user_attr("failed", why)
    opened.tell(trial, state=TrialState.FAIL)


def run_trial(study: Trialled, opened: optuna.Study, trial: optuna.Trial, dims: list[Dimension],
              views: PairedData | list[PairedData], opts: runner.RunOptions) -> None:
    """Train one trial on each of ``views`` (the training and validation splits, or each fold's view of the training
    split: :mod:`harness.tune.folds`) and tell the study how it ended: the mean of the views' selected validation
    values.

        run_trial(study, opened, opened.ask(), study.dims(), [without_test(data)], opts)
    """
    views = views if isinstance(views, list) else [views]
    trial.set_user_attr("host", HOST)
    trial.set_user_attr("boot", BOOT)
    trial.set_user_attr("pid", os.getpid())
    trial.set_user_attr("beat", time.time())
    values, overrides = trial_settings(trial, dims, study.method)
    try:
        spec = study.spec(overrides)
    except ConfigError as err:  # a combination the settings refuse (e.g. K not below queue): counted, failed
        return _fail(opened, trial, f"settings refused: {err}")
    tag = hashlib.sha1(json.dumps(values, sort_keys=True).encode()).hexdigest()[:12]
    runs = [Run(spec, study.method, f"{study.method}@trial-{tag}" + (f"-fold{i}" if len(views) > 1 else ""), values,
                study.seed) for i in range(len(views))]
    for run, view in zip(runs, views):
        refused = preflight.refusals([run], view)
        if refused:  # settings the data refuses (K above the training pairs), as a run would be: counted, failed
            return _fail(opened, trial, f"settings refused: {next(iter(refused.values()))}"[:500])
    select = spec.methods[study.method].train.select
    scores = []
    for run, view in zip(runs, views):
        reporter = _reporter(opened, trial, spec, study.method) if len(views) == 1 else None
        trained = _train(opened, trial, run, view, opts, reporter)
        if trained is None:
            return
        scores.append(float(trained.val_at_best[select]))
        trial.set_user_attr("best_epoch" if len(views) == 1 else f"best_epoch_fold{len(scores) - 1}",
                            trained.fit.best_epoch)
    if len(views) > 1:
        trial.set_user_attr("fold_values", scores)
    opened.tell(trial, sum(scores) / len(scores))


def _train(opened: optuna.Study, trial: optuna.Trial, run: Run, view: PairedData, opts: runner.RunOptions,
           reporter: Any) -> Any:
    """One training of the trial; None when it ended the trial (pruned, or failed because of its settings)."""
    checkpoint = resume_path(result_path(opts.out, run.spec.name, run.run_name, run.seed))
    printed = io.StringIO()  # a trial's warnings (collapse, ...) go into the study, not onto the console
    try:
        with Heartbeat(trial), contextlib.redirect_stdout(printed):
            trained = runner.train(run, view, opts, on_epoch=reporter)
    except optuna.TrialPruned:
        checkpoint.unlink(missing_ok=True)
        opened.tell(trial, state=TrialState.PRUNED)
        return None
    except RunError as err:  # the settings made training fail (a non-finite loss): counted, failed
        checkpoint.unlink(missing_ok=True)
        _fail(opened, trial, str(err).splitlines()[0][:500])
        return None
    checkpoint.unlink(missing_ok=True)  # kept on any other end (an interrupt): the trial's re-run resumes from it
    if printed.getvalue().strip():
        trial.set_user_attr("printed", printed.getvalue().strip()[-2000:])
    if trained is None:  # not rank 0 under torchrun (tune runs one process per trial)
        raise ConfigError("harness tune runs each trial in one process; start it without torchrun")
    return trained


def _reporter(opened: optuna.Study, trial: optuna.Trial, spec: TaskSpec, method: str) -> Any:
    """The epoch callback of a trial's training: the best value so far (in the study's direction) reported at each
    epoch, and the trial pruned when the pruner says so, but for its last epoch (a closed-form fit's only one),
    which ends the trial anyway."""
    m = spec.methods[method]
    select = m.train.select
    better = min if opened.direction == StudyDirection.MINIMIZE else max
    last = m.train.epochs if METHODS.get(m.method, method).trains_by_gradient else 1
    best: list[float] = []

    def report(record: dict[str, float]) -> None:
        value = float(record[f"val/{select}"])
        best.append(value if not best else better(best[-1], value))
        trial.report(best[-1], int(record["epoch"]))
        if int(record["epoch"]) < last and trial.should_prune():
            raise optuna.TrialPruned()

    return report


def without_test(data: PairedData) -> PairedData:
    """The data a trial sees: the training and validation splits (asking for 'test' is an error)."""
    return dataclasses.replace(data, splits={k: v for k, v in data.splits.items() if k != "test"})
