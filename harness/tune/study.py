"""One method's study: trials on the validation split until the method has its budget, shared through Optuna's
storage by every worker that runs the same command (this process, ``--launcher local`` processes, SLURM jobs).

A trial is one training run of the method at the settings Optuna's TPE sampler proposes (the first trial: the
task's own settings), trained with the study's seed and validated after each epoch, as ``harness run`` trains;
the value is the selection metric (``train.select``) of the epoch training keeps. Each epoch's best value so far
is reported to the study; by default nothing is pruned (a method that starts slowly would lose its trials for it),
and ``--prune median`` stops trials that trail the others' median at the same epoch once every trial has run the
same stated share of its epochs (:func:`pruner_of`). The test split is never read: trials get the data without it.

Equal budgets, exactly: a worker asks for a trial only under the study's lock (:func:`lock`), and only while the
trials counted (complete, pruned, or failed because of their settings: a refused combination, a diverged loss) and
those running fall short of the budget. The storage is one SQLite file, locked with ``flock``, or for workers on
several machines (``--launcher slurm``) Optuna's journal file, locked as Optuna locks the journal itself: a
symbolic link created and removed, which network file systems honour where ``flock`` and SQLite's locks may not.
A trial whose process died (SIGKILL, a node lost) is found by the next worker that takes the lock: its process is
gone (same machine) or its heartbeat is older than :data:`GRACE_S`. It is marked failed, not counted, and its
settings are queued again, so the same command resumes the study without losing or doubling a trial; the re-run
trial resumes from its last finished epoch.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import io
import json
import math
import os
import socket
import threading
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal

import optuna
from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock, JournalStorage
from optuna.trial import TrialState

from harness.config import spec as specs
from harness.config.plan import Run
from harness.config.registry import METHODS
from harness.config.spec import TaskSpec
from harness.data.paired import PairedData
from harness.errors import ConfigError, RunError
from harness.run import preflight, runner
from harness.run.checkpoint import resume_path
from harness.store.schema import result_path
from harness.tune.space import Dimension, dimensions, start_params

BEAT_S = 30.0  # a running trial writes its heartbeat this often
GRACE_S = 300.0  # a running trial without a heartbeat this long is taken for dead (another machine's)
HOST = socket.gethostname()
JOURNAL = "journal://"  # journal:///ABSOLUTE/PATH: Optuna's journal file (JournalFileBackend)
LOCK_GRACE_S = 30  # Optuna's journal lock: a lock unchanged this long is taken for a dead holder's and removed
LOCK_TOUCH_S = 5.0  # a live holder of a study's journal lock marks it this often, so that it is never taken over
COUNTED = ("complete", "pruned", "failed")


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
        defining = {"config": spec.resolved(self.method), "space": {d.name: d.describe() for d in self.dims()},
                    "seed": self.seed, "pruner": self.pruner_text}
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
        select = self.spec().methods[self.method].train.select
        return "minimize" if specs.lower_is_better(select) else "maximize"


def default_storage(folder: Path, journal: bool = False) -> str:
    """The storage in the results folder: one SQLite file, ``<out>/<task>/_tune/studies.db``; with ``journal``
    (workers on several machines, whose shared folder may be a network file system), Optuna's journal file
    ``journal:///<out>/<task>/_tune/studies.log``."""
    if journal:
        return f"{JOURNAL}{(folder / 'studies.log').resolve()}"
    return f"sqlite:///{(folder / 'studies.db').resolve()}"


def journal_path(url: str) -> Path | None:
    """The journal file a ``journal:///ABSOLUTE/PATH`` URL names; None for any other storage."""
    if not url.startswith(JOURNAL):
        return None
    path = url[len(JOURNAL):]
    if not path.startswith("/"):
        raise ConfigError(f"--storage {url}: a journal file is named by its absolute path: journal:///ABSOLUTE/PATH")
    return Path(path)


def storage_of(url: str) -> optuna.storages.BaseStorage:
    """Optuna's storage for ``url``; SQLite waits for its lock rather than failing while another worker writes; a
    journal file is appended to under Optuna's symbolic-link lock (:data:`LOCK_GRACE_S`)."""
    journal = journal_path(url)
    if journal is not None:
        journal.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(journal), JournalFileSymlinkLock(str(journal), LOCK_GRACE_S)))
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 120}})
    return optuna.storages.RDBStorage(url)


def shown_storage(url: str) -> str:
    """The storage URL without a password (what result files record)."""
    head, sep, rest = url.partition("://")
    if "@" in rest.split("/", 1)[0]:
        user = rest.split("@", 1)[0].split(":", 1)[0]
        return f"{head}{sep}{user}:***@{rest.split('@', 1)[1]}"
    return url


def open_study(study: Study, worker: int = 0) -> optuna.Study:
    """The method's study, created on first use (with the task's own settings queued as its first trial). The
    sampler is seeded by the study's seed and the ``worker``'s number, so that one worker's study is the same
    on every run of the command and parallel workers sample apart."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=study.seed * 1009 + worker)
    opened = optuna.create_study(storage=storage_of(study.storage), study_name=study.name, sampler=sampler,
                                 pruner=pruner_of(study), direction=study.direction, load_if_exists=True)
    with lock(study):
        if not opened.get_trials(deepcopy=False):
            spec = study.spec()
            start = start_params(spec, study.method, study.dims())
            opened.enqueue_trial(start, user_attrs={"start": True, "start_params": sorted(start)})
    return opened


PRUNERS = ("none", "median")


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


@contextlib.contextmanager
def lock(study: Study) -> Iterator[None]:
    """The study's lock: one worker at a time counts, recovers and asks. With SQLite (or a database server), an
    ``flock`` on ``<study>.lock`` in the study's folder; with a journal file, Optuna's journal lock beside it
    (:func:`journal_lock`), which holds on a network file system."""
    journal = journal_path(study.storage)
    if journal is not None:
        with journal_lock(journal.parent / f"{study.name}.budget"):
            yield
        return
    study.folder.mkdir(parents=True, exist_ok=True)
    path = study.folder / f"{study.name}.lock"
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def journal_lock(target: Path) -> Iterator[None]:
    """Optuna's ``JournalFileSymlinkLock`` on ``target``: held while the symbolic link ``<target>.lock`` exists
    (creating a link is atomic on NFS from version 2 on, as Optuna's journal relies on). A waiter removes a lock
    whose ``target`` was not modified for :data:`LOCK_GRACE_S` seconds, taking it for a killed holder's; the holder
    touches ``target`` every :data:`LOCK_TOUCH_S` seconds, so that a live holder's lock is not taken over."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.touch()  # the waiters watch its modification time
    held = JournalFileSymlinkLock(str(target), grace_period=LOCK_GRACE_S)
    held.acquire()
    stop = threading.Event()

    def touch() -> None:
        while True:
            with contextlib.suppress(OSError):  # a missed touch only shortens the grace left
                os.utime(target)
            if stop.wait(LOCK_TOUCH_S):
                return

    toucher = threading.Thread(target=touch, daemon=True)
    toucher.start()
    try:
        yield
    finally:
        stop.set()
        toucher.join()
        held.release()


def counts(opened: optuna.Study) -> Counter[str]:
    """Trials by what they mean for the budget: complete, pruned, failed (counted: the settings failed),
    interrupted (not counted: re-run), running, waiting."""
    out: Counter[str] = Counter()
    for t in opened.get_trials(deepcopy=False):
        if t.state == TrialState.COMPLETE:
            out["complete"] += 1
        elif t.state == TrialState.PRUNED:
            out["pruned"] += 1
        elif t.state == TrialState.FAIL:
            out["failed" if "failed" in t.user_attrs else "interrupted"] += 1
        elif t.state == TrialState.RUNNING:
            out["running"] += 1
        else:
            out["waiting"] += 1
    out["counted"] = sum(out[k] for k in COUNTED)
    return out


def seconds_spent(opened: optuna.Study) -> float:
    """The summed seconds of the counted and running trials."""
    now = time.time()
    total = 0.0
    for t in opened.get_trials(deepcopy=False):
        if t.datetime_start is None or (t.state == TrialState.FAIL and "failed" not in t.user_attrs):
            continue
        end = t.datetime_complete.timestamp() if t.datetime_complete is not None else now
        total += end - t.datetime_start.timestamp()
    return total


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(opened: optuna.Study) -> list[int]:
    """Mark the running trials whose worker died as failed (not counted) and queue their settings again; the
    numbers of the trials recovered. Call under the study's lock."""
    found = []
    now = time.time()
    for t in opened.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        attrs = t.user_attrs
        beat = float(attrs.get("beat", t.datetime_start.timestamp() if t.datetime_start else now))
        here = attrs.get("host") == HOST and "pid" in attrs
        # on this host the process says whether the trial runs (a stopped or starved worker is late to beat but
        # alive); on another host, only the heartbeat can
        if (here and not _alive(int(attrs["pid"]))) or (not here and now - beat > GRACE_S):
            opened.tell(t.number, state=TrialState.FAIL)
            keep: dict[str, Any] = {k: attrs[k] for k in ("start", "start_params") if k in attrs}
            opened.enqueue_trial(dict(t.params), user_attrs={**keep, "retry_of": t.number})
            found.append(t.number)
    return found


class _Heartbeat:
    """Writes the running trial's time to the storage every :data:`BEAT_S` seconds until stopped."""

    def __init__(self, trial: optuna.Trial):
        self.trial, self.stop = trial, threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self) -> None:
        while not self.stop.wait(BEAT_S):
            with contextlib.suppress(Exception):  # a missed beat only delays nothing: the trial is still running
                self.trial.set_user_attr("beat", time.time())

    def __enter__(self) -> _Heartbeat:
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


def run_trial(study: Study, opened: optuna.Study, trial: optuna.Trial, dims: list[Dimension], data: PairedData,
              opts: runner.RunOptions) -> None:
    """Train one trial on ``data`` (train and validation splits only) and tell the study how it ended."""
    trial.set_user_attr("host", HOST)
    trial.set_user_attr("pid", os.getpid())
    trial.set_user_attr("beat", time.time())
    values, overrides = trial_settings(trial, dims, study.method)
    try:
        spec = study.spec(overrides)
    except ConfigError as err:  # a combination the settings refuse (e.g. K not below queue): counted, failed
        trial.set_user_attr("failed", f"settings refused: {err}")
        opened.tell(trial, state=TrialState.FAIL)
        return
    m = spec.methods[study.method]
    select = m.train.select
    lower = specs.lower_is_better(select)
    # the last epoch (a closed-form fit's only one) ends the trial anyway: it is reported, never pruned
    last = m.train.epochs if METHODS.get(m.method, study.method).trains_by_gradient else 1
    tag = hashlib.sha1(json.dumps(values, sort_keys=True).encode()).hexdigest()[:12]
    run = Run(spec, study.method, f"{study.method}@trial-{tag}", values, study.seed)
    refused = preflight.refusals([run], data)
    if refused:  # settings the data refuses (K above the training pairs), as a run of them would be: counted, failed
        trial.set_user_attr("failed", f"settings refused: {next(iter(refused.values()))}"[:500])
        opened.tell(trial, state=TrialState.FAIL)
        return
    best: list[float] = []

    def report(record: dict[str, float]) -> None:
        value = float(record[f"val/{select}"])
        best.append(value if not best else (min if lower else max)(best[-1], value))
        trial.report(best[-1], int(record["epoch"]))
        if int(record["epoch"]) < last and trial.should_prune():
            raise optuna.TrialPruned()

    checkpoint = resume_path(result_path(opts.out, spec.name, run.run_name, run.seed))
    printed = io.StringIO()  # a trial's warnings (collapse, ...) go into the study, not onto the console
    try:
        with _Heartbeat(trial), contextlib.redirect_stdout(printed):
            trained = runner.train(run, data, opts, on_epoch=report)
    except optuna.TrialPruned:
        checkpoint.unlink(missing_ok=True)
        opened.tell(trial, state=TrialState.PRUNED)
        return
    except RunError as err:  # the settings made training fail (a non-finite loss): counted, failed
        checkpoint.unlink(missing_ok=True)
        trial.set_user_attr("failed", str(err).splitlines()[0][:500])
        opened.tell(trial, state=TrialState.FAIL)
        return
    checkpoint.unlink(missing_ok=True)
    if printed.getvalue().strip():
        trial.set_user_attr("printed", printed.getvalue().strip()[-2000:])
    if trained is None:  # not rank 0 under torchrun (tune runs one process per trial)
        raise ConfigError("harness tune runs each trial in one process; start it without torchrun")
    trial.set_user_attr("best_epoch", trained.fit.best_epoch)
    opened.tell(trial, float(trained.val_at_best[select]))


def without_test(data: PairedData) -> PairedData:
    """The data a trial sees: the training and validation splits (asking for 'test' is an error)."""
    return dataclasses.replace(data, splits={k: v for k, v in data.splits.items() if k != "test"})


def work(study: Study, data: PairedData, opts: runner.RunOptions, progress: Any = None,
         worker: int = 0) -> optuna.Study:
    """Run trials of ``study`` until its budget is met (counted plus running trials, or the summed seconds) as
    worker number ``worker``; ``progress`` (a tqdm bar) is advanced per trial this worker ends."""
    opened = open_study(study, worker)
    dims = study.dims()
    view = without_test(data)
    while True:
        with lock(study):
            recover(opened)
            have = counts(opened)
            if have["counted"] + have["running"] >= study.trials:
                break
            if study.seconds is not None and seconds_spent(opened) >= study.seconds:
                break
            if not dims and have["counted"] + have["running"] >= 1:
                break  # nothing to search: the task's own settings are the one trial
            with warnings.catch_warnings():  # the task's own value may lie outside a narrowed search: kept
                warnings.simplefilter("ignore", UserWarning)
                trial = opened.ask()
        trial.set_user_attr("worker", worker)  # with host and pid (run_trial): which worker ran the trial
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            run_trial(study, opened, trial, dims, view, opts)
        if progress is not None:
            done = counts(opened)
            progress.n = min(done["counted"], progress.total)
            best = best_trial(opened)
            progress.set_postfix(best=f"{best.value:.2f}" if best is not None and best.value is not None else "-")
            progress.refresh()
    return opened


def best_trial(opened: optuna.Study) -> optuna.trial.FrozenTrial | None:
    """The best complete trial (None before one completes)."""
    complete = opened.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        return None
    return opened.best_trial


def best_settings(best: optuna.trial.FrozenTrial, dims: list[Dimension]) -> dict[str, Any]:
    """The settings the best trial trained with, by setting name (layers rebuilt from width and depth)."""
    out: dict[str, Any] = {}
    for dim in dims:
        names = dim.params()
        if not all(n in best.params for n in names):
            continue
        if dim.space.layers:
            out[dim.name] = [best.params[names[0]]] * best.params[names[1]]
        else:
            out[dim.name] = best.params[dim.name]
    return out


def record(study: Study, opened: optuna.Study, dims: list[Dimension]) -> dict[str, Any]:
    """The study as the tuned result files record it (``tuning``); RunError when no trial completed."""
    best = best_trial(opened)
    have = counts(opened)
    trials = sorted(opened.get_trials(deepcopy=False), key=lambda t: t.number)
    if best is None:
        reasons = sorted({str(t.user_attrs.get("failed", "")) for t in trials if t.user_attrs.get("failed")})
        raise RunError(f"no trial of {study.method} completed ({have['pruned']} pruned, {have['failed']} failed"
                       f"{': ' + reasons[0] if reasons else ''}); widen or fix its search space (tune.space)")
    start = next((t for t in trials if t.user_attrs.get("start") and t.state == TrialState.COMPLETE), None)
    # the counted trials' minutes: an interrupted trial (its process killed, re-run later) is not counted, and its
    # duration runs to the moment a later worker found it dead
    spent = [t.duration.total_seconds() for t in trials if t.duration is not None
             and not (t.state == TrialState.FAIL and "failed" not in t.user_attrs)]
    return {
        "study": study.name, "storage": shown_storage(study.storage), "split": "val",
        "metric": study.spec().methods[study.method].train.select, "direction": study.direction,
        "sampler": "TPE", "pruner": study.pruner_text, "seed": study.seed,
        "budget": {"trials": study.trials, "seconds": study.seconds},
        "trials": {k: have[k] for k in ("counted", *COUNTED, "interrupted")},
        "space": {d.name: d.describe() for d in dims},
        "best": best_settings(best, dims), "best_trial": best.number, "best_value": best.value,
        "start_value": start.value if start is not None else None,
        "values": [[t.number, t.state.name.lower(), t.value] for t in trials],
        "importances": importances(opened, dims),
        "trial_minutes": round(sum(spent) / 60, 3),
    }


def importances(opened: optuna.Study, dims: list[Dimension]) -> dict[str, float]:
    """Each parameter's share of the variation of the trials' values (Optuna's PED-ANOVA; {} with too few
    complete trials)."""
    complete = opened.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(complete) < 3 or not dims:
        return {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = optuna.importance.get_param_importances(
                opened, evaluator=optuna.importance.PedAnovaImportanceEvaluator())
    except (ValueError, RuntimeError, ZeroDivisionError):
        return {}
    return {k: round(float(v), 4) for k, v in found.items()}


def final_overrides(study: Study, settings: dict[str, Any], dims: list[Dimension]) -> list[str]:
    """The --set texts that give the method the best trial's settings."""
    by_name = {d.name: d for d in dims}
    return [by_name[name].override(study.method, value) for name, value in settings.items()]


def check_budget(trials: int, seconds: float | None, prune: str = "none", warmup: float = 0.5) -> None:
    """--trials and --seconds-per-method must leave a budget; --prune names a rule and --prune-warmup a share."""
    if prune not in PRUNERS:
        raise ConfigError(f"--prune {prune!r}: valid: {', '.join(PRUNERS)}")
    if not 0 < warmup <= 1:
        raise ConfigError(f"--prune-warmup must be a share of the epochs in (0, 1], got {warmup}")
    if trials < 1:
        raise ConfigError(f"--trials must be >= 1 (trials per method), got {trials}")
    if seconds is not None and not seconds > 0:
        raise ConfigError(f"--seconds-per-method must be > 0, got {seconds}")

