"""Writing files so that a reader, or a process killed at any moment, never sees a part of one."""
from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Callable, cast

import torch

from harness.errors import RunError


def atomic_write(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write ``path`` through ``write(file)`` into a temporary file beside it (``.<name>.<random>.tmp``),
    flush it to disk, then rename it into place: readers, and a process killed at any moment, see the
    previous file (or none) or the complete new one, never a part. A failed write (disk full,
    read-only folder) removes the temporary file and raises :class:`RunError` naming the fix."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise write_error(path, err) from None
    out = None
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp creates 0600; result files are for everyone to read
        with os.fdopen(fd, "wb") as f:
            out = _Recorder(f)
            write(cast(IO[bytes], out))  # a proxy: every attribute but write is the file's own
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        cause = err if isinstance(err, OSError) else out.error if out is not None else None
        if cause is not None:
            raise write_error(path, cause) from None
        raise


class _Recorder:
    """A file that remembers why a write failed: torch.save reports a full disk as a bare RuntimeError
    ('unexpected pos ...'), losing the OSError behind it."""

    def __init__(self, f: IO[bytes]):
        self._f = f
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return self._f.write(data)
        except OSError as err:
            self.error = err
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


def write_error(path: Path, err: OSError) -> RunError:
    """A failed write as one message: what, why, and what to do."""
    full = err.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
    read_only = err.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
    fix = ("free space on that file system or pass --out with a folder on another one" if full else
           "pass --out with a writable folder" if read_only else "check the folder and run the command again")
    return RunError(f"cannot write {path}: {err.strerror or err}; {fix} (nothing was replaced: the previous "
                    "version of the file, if any, is intact)")


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Write JSON atomically (see :func:`atomic_write`)."""
    text = json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n"
    atomic_write(path, lambda f: f.write(text.encode()))


def write_text_atomic(path: Path, text: str) -> None:
    """Write UTF-8 text atomically (see :func:`atomic_write`)."""
    atomic_write(path, lambda f: f.write(text.encode()))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save_checkpoint(state: dict[str, Any], path: Path) -> None:
    """torch.save atomically (see :func:`atomic_write`): a crash never leaves a truncated checkpoint."""
    atomic_write(path, lambda f: torch.save(state, f))
