"""Self-describing result files: one JSON per (task, method, seed), written atomically."""
from __future__ import annotations

import datetime as dt
import errno
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any, Callable

import psutil
import torch

from harness.errors import RunError

SCHEMA = 1


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo, else platform)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_info(device: torch.device) -> dict[str, Any]:
    """Name, memory and driver of the CUDA device (driver via NVML when available)."""
    if device.type != "cuda":
        return {}
    from harness.run.profiling import MiB, _nvml_reader

    props = torch.cuda.get_device_properties(device)
    info: dict[str, Any] = {"name": props.name, "memory_total_mib": props.total_memory / MiB}
    _, nvml, reason = _nvml_reader(device)
    info.update(nvml or {"nvml": reason})
    return info


def git_state(root: Path) -> dict[str, Any]:
    """Commit hash and dirty flag of the checkout holding ``root`` (empty when not a repository)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}


def environment(device: torch.device) -> dict[str, Any]:
    """Hardware, library versions and code version for a result file."""
    import numpy

    return {
        "hardware": {"cpu": cpu_model(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                     "ram_gib": round(psutil.virtual_memory().total / 2**30, 1), "device": str(device),
                     "gpu": gpu_info(device)},
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                     "numpy": numpy.__version__, "platform": platform.platform()},
        "git": git_state(Path(__file__).resolve().parent),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv,
    }


def result_path(out: Path, task: str, run_name: str, seed: int) -> Path:
    """results/<task>/<method>/seed<k>.json."""
    return out / task / run_name / f"seed{seed}.json"


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
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
            write(out)
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
        self._f, self.error = f, None

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


def load_results(folder: Path) -> list[dict[str, Any]]:
    """Every result file under ``folder`` (recursively), sorted by method then seed."""
    results = []
    for path in sorted(folder.rglob("seed*.json")):
        with open(path) as f:
            data = json.load(f)
        if data.get("schema") == SCHEMA:
            data["_path"] = str(path)
            results.append(data)
    return sorted(results, key=lambda r: (r["task"], r["run_name"], r["seed"]))
