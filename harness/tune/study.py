"""One method's study: trials on the validation split until the method has its budget, shared through Optuna's
storage by every worker that runs the same command (this process, ``--launcher local`` processes, SLURM jobs).

The study is what every worker agrees on (:class:`Study`); :func:`work` is one worker's loop: under the study's lock
(:mod:`harness.tune.storage`: the storage, the lock, the trials counted against the exact budget, the recovery of
trials whose worker died) it asks Optuna's TPE sampler for a trial while the budget lasts, then trains it
(:mod:`harness.tune.trial`). The first trial is the task's own settings. By default nothing is pruned (a method that
starts slowly would lose its trials for it); ``--prune median`` stops trials that trail the others' median at the
same epoch once every trial has run the same stated share of its epochs (:func:`pruner_of`). What the tuned result
files record of a study: :mod:`harness.tune.record`.

One study is one row's sequence of trials, and it runs in order: a worker claims the whole row
(:func:`harness.tune.storage.claim`) and asks for the next trial only once the last one is told, so that each
proposal sees every earlier trial. The sampler that proposes trial ``n`` is seeded from the study's seed, the row's
name and ``n`` (:func:`trial_seed`: a stable hash, not Python's ``hash``), so that the same command proposes the same
trials whichever worker runs the row, however many workers there are, and after a resume. With ``folds`` the
objective is the mean over folds of the training split (:mod:`harness.tune.folds`).
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import warnings
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import optuna

from harness.config import spec as specs
from harness.config.spec import TaskSpec
from harness.data.paired import PairedData
from harness.errors import ConfigError
from harness.run import runner
from harness.tune import folds
from harness.tune import storage as stored
from harness.tune.space import Dimension, dimensions, start_params
from harness.tune.trial import run_trial, without_test

PRUNERS = ("none", "median")


@dataclass(frozen=True)
class Study:
    """What every worker of one method's study must agree on: the task, the method and its search space, the seed
    the trials train with, the budget, and where the study is stored."""

    task: str  # the task file
    method: str
    overrides: tuple[str, ...]  # the command's --set (and --data-root) values
    added: tuple[str, ...]  # registered methods the task does not declare
    epochs: int | None
    seed: int
    trials: int  # the budget: trials counted per method
    seconds: float | None  # an optional second budget: the trials' summed seconds per method
    folder: Path  # <out>/<task>/_tune: the default storage, the locks and the trials' resume checkpoints
    storage: str  # an Optuna storage URL (or journal:///PATH, Optuna's journal file)
    prune: str = "none"  # the pruning rule: none, or median (Optuna's median pruner after a warm-up)
    prune_warmup: float = 0.5  # with median: the share of the epochs every trial runs before it may be pruned
    row: str = ""  # the row's name, which seeds its sampler (the method's name where empty)
    folds: int = 0  # > 0: the objective is the mean over that many folds of the training split (harness.tune.folds)

    def spec(self, extra: list[str] | None = None) -> TaskSpec:
        """The task with the command's settings and ``extra`` overrides (a trial's settings); without them, the
        task as read once for the study (:attr:`base`)."""
        if not extra:
            return self.base
        spec = specs.load_task(self.task, list(self.overrides) + list(extra), self.added)
        return specs.with_epochs(spec, self.epochs) if self.epochs is not None else spec

    @functools.cached_property
    def base(self) -> TaskSpec:
        """The task with the command's settings, read and checked once (every trial's lock names the study)."""
        spec = specs.load_task(self.task, list(self.overrides), self.added)
        return specs.with_epochs(spec, self.epochs) if self.epochs is not None else spec

    def dims(self) -> list[Dimension]:
        return self._dims

    @functools.cached_property
    def _dims(self) -> list[Dimension]:
        return dimensions(self.base, self.method)

    @functools.cached_property
    def name(self) -> str:
        """The study's name in the storage: task, method and a hash of what defines the search (the method's
        resolved settings, the search space, the seed); the budget is not part of it, so a larger --trials
        continues the same study."""
        spec = self.spec()
        defining: dict[str, Any] = {"config": spec.resolved(self.method),
                                    "space": {d.name: d.describe() for d in self.dims()},
                                    "seed": self.seed, "pruner": self.pruner_text}
        if self.folds:  # another objective; studies on the validation split keep the names they had
            defining["folds"] = self.folds
        digest = hashlib.sha256(json.dumps(defining, sort_keys=True, default=str).encode()).hexdigest()[:10]
        return f"{spec.name}.{self.method}.{digest}"

    @property
    def warmup_epochs(self) -> int:
        """With the median pruner: the epochs every trial runs before it may be pruned (the stated share of the
        method's epochs, at least one)."""
        epochs = self.base.methods[self.method].train.epochs
        return max(1, math.ceil(self.prune_warmup * epochs))

    @property
    def pruner_text(self) -> str:
        """The pruning rule in words, as result files record it."""
        if self.prune == "none":
            return "none"
        return f"median after {self.prune_warmup:.0%} of the epochs ({self.warmup_epochs})"

    @property
    def direction(self) -> Literal["minimize", "maximize"]:
        """The direction the study is created with (from then on, Optuna's study holds it)."""
        select = self.spec().methods[self.method].train.select
        return "minimize" if specs.lower_is_better(select) else "maximize"

    @property
    def row_name(self) -> str:
        """The row whose sampler this study seeds: its ``row``, else the method's name."""
        return self.row or self.method

    def lock(self) -> AbstractContextManager[None]:
        """The study's lock (:func:`harness.tune.storage.lock`)."""
        return stored.lock(self.name, self.folder, self.storage)


def trial_seed(seed: int, row: str, number: int) -> int:
    """The seed of the sampler that proposes trial ``number`` of row ``row`` (a stable hash of the three).

    >>> trial_seed(0, "infonce", 3) == trial_seed(0, "infonce", 3) != trial_seed(0, "infonce+swamp", 3)
    True
    """
    digest = hashlib.sha256(f"{seed}:{row}:{number}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def sampler_for(study: Study, number: int) -> optuna.samplers.TPESampler:
    """The TPE sampler that proposes the study's trial ``number`` (:func:`trial_seed`)."""
    return optuna.samplers.TPESampler(seed=trial_seed(study.seed, study.row_name, number))


def open_study(study: Study, worker: int = 0) -> optuna.Study:
    """The method's study, created on first use, with the task's own settings queued as its first trial (Optuna's
    ``skip_if_exists``: queued once, whoever opens it; under the study's lock, as Optuna asks of workers that may
    open it at once). Each trial's sampler is seeded when it is asked for (:func:`sampler_for`), not by the
    ``worker`` that opens the study, so that a row's trials are the same whoever runs them."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = sampler_for(study, 0)
    opened = optuna.create_study(storage=stored.storage_of(study.storage), study_name=study.name, sampler=sampler,
                                 pruner=pruner_of(study), direction=study.direction, load_if_exists=True)
    start = start_params(study.spec(), study.method, study.dims())
    with study.lock():
        opened.enqueue_trial(start, user_attrs={"start": True, "start_params": sorted(start)}, skip_if_exists=True)
    return opened


def pruner_of(study: Study) -> optuna.pruners.BasePruner:
    """The study's pruner. ``none`` (the default): every trial trains all its epochs, so that a method whose
    validation value starts slowly is not stopped for it. ``median``: Optuna's median pruner, which stops a trial
    whose best value so far trails the median of the earlier trials at the same epoch, once every trial has run
    the warm-up (:attr:`Study.warmup_epochs`) and the first trials (a quarter of the budget, at most 5) are done;
    the same rule for every method of a comparison."""
    if study.prune == "none":
        return optuna.pruners.NopPruner()
    n_startup = max(1, min(5, study.trials // 4))
    return optuna.pruners.MedianPruner(n_startup_trials=n_startup, n_warmup_steps=study.warmup_epochs)


def check_budget(trials: int, seconds: float | None, prune: str = "none", warmup: float = 0.5,
                 folds: int = 0) -> None:
    """--trials and --seconds-per-method must leave a budget; --prune names a rule and --prune-warmup a share;
    folds (at least 3) go without pruning."""
    if folds and folds < 3:
        raise ConfigError(f"--folds {folds}: give at least 3 folds of the training split (or 0: the validation split)")
    if prune not in PRUNERS:
        raise ConfigError(f"--prune {prune!r}: valid: {', '.join(PRUNERS)}")
    if not 0 < warmup <= 1:
        raise ConfigError(f"--prune-warmup must be a share of the epochs in (0, 1], got {warmup}")
    if trials < 1:
        raise ConfigError(f"--trials must be >= 1 (trials per method), got {trials}")
    if folds and prune != "none":
        raise ConfigError("--prune median judges a trial by its epochs on the validation split; with folds of the "
                          "training split (--folds) a trial trains once per fold: leave out --prune")
    if seconds is not None and not seconds > 0:
        raise ConfigError(f"--seconds-per-method must be > 0, got {seconds}")


def _ask(study: Study, opened: optuna.Study, searched: bool) -> optuna.Trial | None:
    """Under the study's lock: recover the trials of dead workers, then a new trial while the budget lasts (counted
    plus running trials, or the summed seconds; one trial when nothing is searched), else None."""
    with study.lock():
        stored.recover(opened)
        have = stored.counts(opened)
        if have["counted"] + have["running"] >= (study.trials if searched else 1):
            return None
        if study.seconds is not None and stored.seconds_spent(opened) >= study.seconds:
            return None
        opened.sampler = sampler_for(study, len(opened.get_trials(deepcopy=False)))
        with warnings.catch_warnings():  # the task's own value may lie outside a narrowed search: kept
            warnings.simplefilter("ignore", UserWarning)
            return opened.ask()


def work(study: Study, data: PairedData, opts: runner.RunOptions, progress: Any = None,
         worker: int = 0) -> optuna.Study:
    """Run trials of ``study`` until its budget is met as worker number ``worker`` (:func:`_ask`), one after another;
    ``progress`` (a tqdm bar) is advanced per trial this worker ends. The trials see ``data`` without its test split,
    or with ``folds``, each fold's view of the training split (:func:`views_of`).

        opened = work(Study(task="tasks/synthetic.yaml", method="contrastive", ...), data, opts)
    """
    opened = open_study(study, worker)
    dims = study.dims()
    view = views_of(study, data)
    while (trial := _ask(study, opened, bool(dims))) is not None:
        trial.set_user_attr("worker", worker)  # with host and pid (run_trial): which worker ran the trial
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            run_trial(study, opened, trial, dims, view, opts)
        if progress is not None:
            progress.n = min(stored.counts(opened)["counted"], progress.total)
            best = _best_value(opened)
            progress.set_postfix(best=f"{best:.2f}" if best is not None else "-")
            progress.refresh()
    return opened


def views_of(study: Study, data: PairedData) -> list[PairedData]:
    """The data each trial trains on: ``data`` without its test split, or with ``folds``, the view of each fold of
    the training split (:func:`harness.tune.folds.fold_view`), the folds drawn with the study's seed."""
    view = without_test(data)
    if not study.folds:
        return [view]
    found = folds.make_folds(view["train"], study.folds, study.seed)
    return [folds.fold_view(view, found, i) for i in range(len(found))]


def _best_value(opened: optuna.Study) -> float | None:
    """The best complete trial's value (None before one completes)."""
    try:
        return opened.best_value
    except ValueError:  # Optuna's answer while no trial is complete
        return None
