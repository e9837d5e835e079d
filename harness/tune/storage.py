"""Where a method's study is kept and how its budget stays exact across workers: the storage (an Optuna storage URL;
by default one SQLite file, or for workers on several machines Optuna's journal file), the study's lock, the trials
counted against the budget, and the recovery of trials whose worker died.

Equal budgets, exactly: a worker asks for a trial only under the study's lock (:func:`lock`), and only while the
trials counted (complete, pruned, or failed because of their settings: a refused combination, a diverged loss) and
those running fall short of the budget. Optuna's own budget (``n_trials`` of ``optimize``) counts one process's calls,
not the trials every worker of a shared study ran, so the lock stays. With SQLite (or a database server) the lock
is an ``flock``; with a journal file (``--launcher slurm``), Optuna's journal lock, a symbolic link created and
removed, which network file systems honour where ``flock`` and SQLite's locks may not.

A trial whose process died (SIGKILL, a node lost) is found by the next worker that takes the lock: its process is
gone (same machine, same boot) or its heartbeat (:mod:`harness.tune.trial`) is older than :data:`GRACE_S`. It is
marked failed, not counted, and its settings are queued again, so the same command resumes the study without losing
or doubling a trial; the re-run trial resumes from its last finished epoch.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import optuna
from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock, JournalStorage
from optuna.trial import TrialState

from harness.errors import ConfigError

GRACE_S = 300.0  # a running trial without a heartbeat this long is taken for dead (another machine's)
HOST = socket.gethostname()


def _boot_id() -> str:
    """This boot of this machine (Linux's ``boot_id``; empty elsewhere): a process id means nothing across boots."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


BOOT = _boot_id()
JOURNAL = "journal://"  # journal:///ABSOLUTE/PATH: Optuna's journal file (JournalFileBackend)
LOCK_GRACE_S = 30  # Optuna's journal lock: a lock unchanged this long is taken for a dead holder's and removed
LOCK_TOUCH_S = 5.0  # a live holder of a study's journal lock marks it this often, so that it is never taken over
COUNTED = ("complete", "pruned", "failed")


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
    """Optuna's storage for ``url``; SQLite waits for its lock rather than failing while another worker writes, and a
    new SQLite file's tables are created by one process at a time; a journal file is appended to under Optuna's
    symbolic-link lock (:data:`LOCK_GRACE_S`)."""
    journal = journal_path(url)
    if journal is not None:
        journal.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(journal), JournalFileSymlinkLock(str(journal), LOCK_GRACE_S)))
    if url.startswith("sqlite:///"):
        db = Path(url[len("sqlite:///"):])
        db.parent.mkdir(parents=True, exist_ok=True)
        # two processes opening a new file at once would both create Optuna's tables (a UNIQUE constraint fails in
        # one of them): the first to hold the lock creates them, the others find them made
        with open(db.parent / f"{db.name}.schema.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 120}})
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
    return optuna.storages.RDBStorage(url)


def shown_storage(url: str) -> str:
    """The storage URL without a password (what result files record)."""
    head, sep, rest = url.partition("://")
    if "@" in rest.split("/", 1)[0]:
        user = rest.split("@", 1)[0].split(":", 1)[0]
        return f"{head}{sep}{user}:***@{rest.split('@', 1)[1]}"
    return url


@contextlib.contextmanager
def lock(name: str, folder: Path, url: str) -> Iterator[None]:
    """The lock of the study ``name`` stored at ``url``: one worker at a time counts, recovers and asks. With SQLite
    (or a database server), an ``flock`` on ``<name>.lock`` in the study's ``folder``; with a journal file, Optuna's
    journal lock beside it (:func:`journal_lock`), which holds on a network file system."""
    journal = journal_path(url)
    if journal is not None:
        with journal_lock(journal.parent / f"{name}.budget"):
            yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.lock", "a") as handle:
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


@contextlib.contextmanager
def claim(name: str, folder: Path) -> Iterator[bool]:
    """Claim the whole row of the study ``name`` for this worker, without waiting: yields True while this process
    holds it (an ``flock`` on ``<name>.row`` in ``folder``, released when the process ends, however it ends), False
    when another worker holds it. A row's trials run in order, in the one worker that holds its claim."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.row", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _file_of(url: str) -> tuple[str, str] | None:
    """(scheme prefix, path) of a storage kept in one file (SQLite, a journal); None for a database server."""
    for prefix in ("sqlite:///", JOURNAL):
        if url.startswith(prefix):
            return prefix, url[len(prefix):]
    return None


def relative_storage(url: str, folder: Path, within: Path) -> str:
    """The storage URL as a result file in ``folder`` records it: a SQLite file inside the results folder ``within``
    named relative to ``folder`` (``sqlite:///../_tune/studies.db``), so that the committed folder opens its studies
    wherever it is checked out; any other storage (a database server, a journal file of SLURM's workers, which names
    the shared path every job opens) as :func:`shown_storage` gives it.

    >>> relative_storage("sqlite:////r/set/task/_tune/studies.db", Path("/r/set/task/m@tuned"), Path("/r"))
    'sqlite:///../_tune/studies.db'
    """
    found = _file_of(url)
    if found is None or found[0] == JOURNAL or not found[1].startswith("/") \
            or not Path(found[1]).is_relative_to(Path(within).resolve()):
        return shown_storage(url)
    prefix, path = found
    return f"{prefix}{os.path.relpath(path, Path(folder).resolve())}"


def recorded_storage(url: str, folder: Path) -> str:
    """The storage URL to open for a study a result file in ``folder`` records: a relative file
    (:func:`relative_storage`) resolved against ``folder``; an absolute file as recorded where it exists, else the
    same ``_tune`` file beside the result's run folder (records written before storages were relative name the
    machine's absolute path); any other URL as recorded.

    >>> recorded_storage("sqlite:///../_tune/studies.db", Path("/r/set/task/m@tuned"))
    'sqlite:////r/set/task/_tune/studies.db'
    """
    found = _file_of(url)
    if found is None:
        return url
    prefix, path = found
    if not path.startswith("/"):
        return f"{prefix}{os.path.normpath(Path(folder).resolve() / path)}"
    beside = Path(folder).resolve().parent / "_tune" / Path(path).name
    return url if Path(path).exists() or not beside.exists() else f"{prefix}{beside}"


def interrupted(t: optuna.trial.FrozenTrial) -> bool:
    """A trial failed because its worker died (not because of its settings): not counted, re-run."""
    return t.state == TrialState.FAIL and "failed" not in t.user_attrs


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
            out["interrupted" if interrupted(t) else "failed"] += 1
        elif t.state == TrialState.RUNNING:
            out["running"] += 1
        else:
            out["waiting"] += 1
    out["counted"] = sum(out[k] for k in COUNTED)
    return out


def seconds_spent(opened: optuna.Study) -> float:
    """The summed seconds of the counted and running trials: Optuna's duration of each finished one, the time so far
    of each running one."""
    now = time.time()
    total = 0.0
    for t in opened.get_trials(deepcopy=False):
        if t.datetime_start is None or interrupted(t):
            continue
        total += t.duration.total_seconds() if t.duration is not None else now - t.datetime_start.timestamp()
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
        here = attrs.get("host") == HOST and attrs.get("boot") == BOOT and "pid" in attrs
        # on this host, in this boot, the process says whether the trial runs (a stopped or starved worker is late to
        # beat but alive); on another host or after a reboot (a study's storage carried to a fresh machine of the
        # same name, whose processes reuse the ids), only the heartbeat can
        if (here and not _alive(int(attrs["pid"]))) or (not here and now - beat > GRACE_S):
            opened.tell(t.number, state=TrialState.FAIL)
            keep: dict[str, Any] = {k: attrs[k] for k in ("start", "start_params") if k in attrs}
            opened.enqueue_trial(dict(t.params), user_attrs={**keep, "retry_of": t.number})
            found.append(t.number)
    return found
