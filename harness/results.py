"""Self-describing result files: one JSON per (task, method, seed), written atomically."""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import psutil
import torch

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
    from harness.profiling import MiB, _nvml_reader

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


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Write JSON to a temporary file in the same folder, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp creates 0600; result files are for everyone to read
        with os.fdopen(fd, "w") as f:
            json.dump(payload, f, indent=2, sort_keys=False, default=str)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save_checkpoint(state: dict[str, Any], path: Path) -> None:
    """torch.save to a temporary file, then rename (a crash never leaves a truncated checkpoint)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


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
