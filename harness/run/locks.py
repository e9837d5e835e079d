"""One process at a time per run: a lock per (task, run folder, seed) beside the result file.

Several ``harness run`` commands may share a results folder: runs of different methods, settings
or seeds proceed side by side, while a second process that reaches a (task, run, seed) another
process is running **waits** for it, then skips the run if it finished (or resumes it if the other
process died). The lock is ``flock`` on ``.seed<k>.lock`` (the operating system releases it when its
holder dies, SIGKILL included), removed by its holder on release; POSIX only. The holder also
deletes temporary files that a killed write of this run left behind (``.seed<k>.*.tmp``).
"""
from __future__ import annotations

import fcntl
import os
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.store.io import write_error


def lock_path(result: Path) -> Path:
    """results/<task>/<run>/seed<k>.json -> .../.seed<k>.lock"""
    return result.with_name(f".{result.stem}.lock")


def stale_temporaries(result: Path) -> list[Path]:
    """Temporary files of interrupted writes of this run's files (result, checkpoints, ranks)."""
    return sorted(result.parent.glob(f".{result.stem}.*.tmp"))


@contextmanager
def run_lock(result: Path, on_wait: Callable[[str], None] = lambda holder: None,
             enabled: bool = True) -> Iterator[bool]:
    """Hold the lock of the run whose result file is ``result`` for the ``with`` block; yields whether
    another process held it first (``on_wait(holder)`` is called once before waiting). ``enabled``
    False (processes other than rank 0 under torchrun) holds nothing and yields False."""
    if not enabled:
        yield False
        return
    fd, waited = _acquire(lock_path(result), on_wait)
    try:
        for tmp in stale_temporaries(result):
            tmp.unlink(missing_ok=True)
        yield waited
    finally:
        lock_path(result).unlink(missing_ok=True)  # before unlocking: a waiter then finds the file gone and retries
        os.close(fd)
        _remove_if_empty(result.parent)


def is_held(result: Path) -> bool:
    """True while a live process holds the lock of the run whose result file is ``result`` (a lock file
    left by a process that died is not held: the operating system released its lock)."""
    try:
        fd = os.open(lock_path(result), os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock this probe took
    return False


def _acquire(path: Path, on_wait: Callable[[str], None]) -> tuple[int, bool]:
    waited = False
    while True:
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not waited:
                on_wait(_holder(path))
                waited = True
            fcntl.flock(fd, fcntl.LOCK_EX)
        if _same_file(fd, path):  # not unlinked by the previous holder while this process waited
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}: {' '.join(sys.argv)}\n".encode())
            return fd, waited
        os.close(fd)


def _open(path: Path) -> int:
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except FileNotFoundError:  # another process removed the empty folder in between: make it again
            continue
        except OSError as err:
            raise write_error(path, err) from None


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def _holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "another process"
    except OSError:
        return "another process"


def _remove_if_empty(folder: Path) -> None:
    """A run that wrote nothing leaves no empty run folder (nor an empty task folder above it)."""
    for f in (folder, folder.parent):
        try:
            f.rmdir()
        except OSError:
            return

