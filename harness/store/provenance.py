"""Where a result came from: the machine, the libraries, the commit (and whether the checkout differed
from it) and a hash of the source files of the run's method, encoders and data source."""
from __future__ import annotations

import datetime as dt
import hashlib
import inspect
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

import psutil
import torch

MiB = 2**20
ROOT = Path(__file__).resolve().parents[2]  # the checkout holding the harness


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo, else platform)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni",
                "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "neon", "asimd", "sve")


def cpu_flags() -> list[str]:
    """The CPU's vector extensions that change float results (kernels chosen, fused multiply-adds), as
    /proc/cpuinfo lists them; empty where it cannot be read."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                present = set(line.split(":", 1)[1].split())
                return [f for f in VECTOR_FLAGS if f in present]
    except OSError:
        pass
    return []


def nvml_reader(device: torch.device) -> tuple[Callable[[], int] | None, dict[str, Any], str]:
    """A callable reading NVML's used memory for ``device``, GPU facts, or the reason it is absent."""
    try:
        import pynvml

        pynvml.nvmlInit()
        index = device.index if device.index is not None else torch.cuda.current_device()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        name = pynvml.nvmlDeviceGetName(handle)
        info = {"name": name.decode() if isinstance(name, bytes) else name,
                "memory_total_mib": pynvml.nvmlDeviceGetMemoryInfo(handle).total / MiB,
                "driver": _text(pynvml.nvmlSystemGetDriverVersion())}
        return (lambda: int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)), info, ""
    except Exception as err:  # pynvml missing, no driver, or no device: skip NVML fields
        return None, {}, f"NVML unavailable: {type(err).__name__}: {err}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpu_info(device: torch.device) -> dict[str, Any]:
    """Name, memory and driver of the CUDA device (driver via NVML when available)."""
    if device.type != "cuda":
        return {}
    props = torch.cuda.get_device_properties(device)
    info: dict[str, Any] = {"name": props.name, "memory_total_mib": props.total_memory / MiB}
    _, nvml, reason = nvml_reader(device)
    info.update(nvml or {"nvml": reason})
    return info


def git_state(root: Path, plugin_folders: Iterable[str | Path] = ()) -> dict[str, Any]:
    """Commit hash and dirty flag of the checkout holding ``root`` (empty when not a repository).

    Dirty means a tracked file differs from the commit, or a file that git does not track lies in one of
    ``plugin_folders`` (relative to the checkout): a new method file is code the commit does not hold."""
    def git(*args: str | Path) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()

    try:
        top = Path(git("rev-parse", "--show-toplevel"))
        changed = git("status", "--porcelain", "--untracked-files=no")
        folders = [f for f in plugin_folders if (top / f).is_dir()]
        untracked = git("ls-files", "--others", "--exclude-standard", "--", *folders) if folders else ""
        untracked = "\n".join(f for f in untracked.splitlines() if f.endswith(".py"))
        state: dict[str, Any] = {"commit": git("rev-parse", "HEAD"), "dirty": bool(changed or untracked)}
        if untracked:
            state["untracked_plugins"] = untracked.splitlines()
        return state
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}


def source_files(objects: Iterable[Any]) -> list[Path]:
    """The Python files that define ``objects`` (classes and functions) and the classes they derive from,
    outside torch and the standard library; sorted, without repeats."""
    files: set[Path] = set()
    for obj in objects:
        for cls in inspect.getmro(obj) if inspect.isclass(obj) else (obj,):
            module = getattr(cls, "__module__", "") or ""
            if module == "builtins" or module.split(".")[0] in ("torch", "typing", "abc"):
                continue
            try:
                found = inspect.getsourcefile(cls)
            except TypeError:
                continue
            if found:
                files.add(Path(found).resolve())
    return sorted(files)


def code_record(objects: Iterable[Any]) -> dict[str, Any]:
    """SHA-256 of each source file of ``objects`` (see :func:`source_files`), named relative to the checkout
    when inside it, and one digest over all of them: two results with the same digest ran the same code of
    their method, encoders and data source, committed or not."""
    files = {}
    for path in source_files(objects):
        name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        files[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    digest = hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(files.items())).encode()).hexdigest()
    return {"sha256": digest, "files": files}


_ARGV: list[str] | None = None  # the arguments of the command being run, when called in-process (cli.main(argv))


def set_command(argv: list[str]) -> None:
    """Record the command's arguments (without the program name) for the result files' ``argv``; a command
    run in-process (``cli.main([...])`` from a script or a test) would otherwise record its host's argv."""
    global _ARGV
    _ARGV = list(argv)


def command() -> list[str]:
    """The arguments of the command being run (without the program name), as the result files record them."""
    return list(sys.argv[1:] if _ARGV is None else _ARGV)


def environment(device: torch.device, plugin_folders: Iterable[str | Path] = ()) -> dict[str, Any]:
    """Hardware, library versions and code version for a result file."""
    import numpy

    return {
        "hardware": {"cpu": cpu_model(), "cpu_flags": cpu_flags(), "cores": os.cpu_count(),
                     "torch_threads": torch.get_num_threads(),
                     "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                     "gomp_spincount": os.environ.get("GOMP_SPINCOUNT"),
                     "ram_gib": round(psutil.virtual_memory().total / 2**30, 1), "device": str(device),
                     "gpu": gpu_info(device)},
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                     "numpy": numpy.__version__, "platform": platform.platform()},
        "git": git_state(ROOT, plugin_folders),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv if _ARGV is None else [sys.argv[0], *_ARGV],
    }
