"""SwAMP's Sinkhorn as a small C kernel for float32 on x86-64 CPUs with AVX-512 or AVX2 and FMA
(``sinkhorn_native.c``).

The kernel runs the eager reference's iteration (:func:`harness.ops.ot.sinkhorn`, log-softmax folded in) with
its -80 exponent floor, and skips the ``exp`` of every vector of 16 (AVX-512) or 8 (AVX2) entries that lie wholly
below that floor;
with SwAMP's exponents (eta * log p over thousands) that is nearly all of them, so a pass costs about a read of
the matrix. Two modalities' problems run on two threads when torch has two or more.

The source is compiled once per vector width (16 lanes for AVX-512, 8 for AVX2; the widest this CPU runs is
used, ``SWAMP_BENCH_SINKHORN_NATIVE=avx2`` keeps to 8) with the system C compiler (``$CC``, else ``cc``)
into a user cache folder
(``$SWAMP_BENCH_CACHE``, else ``$XDG_CACHE_HOME/swamp-bench``, else ``~/.cache/swamp-bench``), named by a hash of
the source, the compiler and its flags, and loaded with ctypes: no Python or torch headers, about a second.
Where it cannot be used (another architecture, no compiler, a CPU without AVX2 and FMA, or
``SWAMP_BENCH_SINKHORN_NATIVE=off``) :func:`unavailable` says why and the callers use the compiled or eager
Sinkhorn instead.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from harness.errors import ConfigError

SOURCE = Path(__file__).with_name("sinkhorn_native.c")
ENV = "SWAMP_BENCH_SINKHORN_NATIVE"  # "off": never build or use the kernel; "avx2": the 8-lane build only
ENV_VALUES = ("auto", "avx2", "off")
CACHE_ENV = "SWAMP_BENCH_CACHE"
FLAGS = ("-O2", "-fPIC", "-shared", "-fno-math-errno", "-ffp-contract=off", "-fopenmp")  # no FMA contraction: the
# eager code rounds (x - lse) * eta and each addition on its own


class _Kernel:
    """The loaded library, or why there is none; built on first use, once per process."""

    def __init__(self) -> None:
        self.lib: ctypes.CDLL | None = None
        self.reason: str | None = None
        self.tried = False
        self.seconds: float | None = None  # build (or cache lookup) plus load
        self.path: Path | None = None
        self.width: int | None = None  # lanes of the build in use
        self.compiler: str | None = None
        self.compiler_version: str | None = None  # the first line of its --version

    def load(self) -> None:
        self.tried = True
        start = time.perf_counter()
        try:
            self.lib, self.path, self.width = _build_and_load()
        except _Unavailable as exc:
            self.reason = str(exc)
            return
        self.seconds = time.perf_counter() - start


class _Unavailable(Exception):
    pass


_KERNEL = _Kernel()


def cache_dir() -> Path:
    """Where the built kernel is kept (see the module's docstring)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]) / "native"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "swamp-bench" / "native"


def _compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise _Unavailable("no C compiler found (set CC or install gcc)")
    return cc


def _build(cc: str, version: str, width: int) -> Path:
    """The library for ``width`` lanes, from the cache or compiled into it (into the system's temporary folder
    where the cache folder cannot be written)."""
    flags = (*FLAGS, f"-DSK_WIDTH={width}")
    source = SOURCE.read_bytes()
    key = hashlib.sha256(b"\0".join([source, version.encode(), " ".join(flags).encode()])).hexdigest()[:16]
    name = f"sinkhorn_native_w{width}_{key}.so"
    folders = (cache_dir(), Path(tempfile.gettempdir()) / "swamp-bench-native")
    for folder in folders:
        target = folder / name
        if target.exists():
            return target
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
        except OSError:
            continue
        os.close(fd)
        try:
            done = subprocess.run([cc, *flags, "-o", tmp, str(SOURCE), "-lm"], capture_output=True, text=True,
                                  timeout=300)
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
                raise _Unavailable(f"{cc} could not build {SOURCE.name}: {last}")
            os.replace(tmp, target)  # atomic: processes building at once each install a whole library
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return target
    raise OSError(f"none of {', '.join(map(str, folders))} can be written")


def _load(target: Path) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(str(target))
    except OSError as exc:
        raise _Unavailable(f"could not load {target}: {exc}") from None


def setting() -> str:
    """``SWAMP_BENCH_SINKHORN_NATIVE`` (``auto`` when unset); a value it does not know is a ConfigError."""
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    if value not in ENV_VALUES:
        raise ConfigError(f"{ENV}={value!r}: use auto (the widest build this CPU runs), avx2 or off, or unset it")
    return value


def _build_and_load() -> tuple[ctypes.CDLL, Path, int]:
    """The library of the widest build this CPU runs, its path and its lanes."""
    setting_ = setting()
    if setting_ == "off":
        raise _Unavailable(f"{ENV}=off")
    if platform.machine().lower() not in ("x86_64", "amd64"):
        raise _Unavailable(f"the kernel is written for x86-64 (AVX2, AVX-512), this machine is {platform.machine()}")
    cc = _compiler()
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise _Unavailable(f"C compiler {cc!r} does not run: {exc}") from None
    _KERNEL.compiler, _KERNEL.compiler_version = cc, (version.splitlines() or [""])[0]
    chosen = None
    for width in ((16, 8) if setting_ == "auto" else (8,)):
        try:
            path = _build(cc, version, width)
        except (OSError, subprocess.SubprocessError) as exc:  # no writable folder, a compiler that hangs
            raise _Unavailable(f"could not build {SOURCE.name}: {exc}") from None
        lib = _load(path)
        if lib.sk_cpu_supported():
            chosen = (lib, path, width)
            break
    if chosen is None:
        raise _Unavailable("this CPU lacks AVX2 or FMA")
    lib = chosen[0]
    fp = ctypes.POINTER(ctypes.c_float)
    lib.sk_solve.argtypes = [ctypes.c_int, ctypes.POINTER(fp), ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                             ctypes.c_float, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(fp),
                             ctypes.POINTER(fp), ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
    lib.sk_solve.restype = ctypes.c_int
    return chosen


def unavailable() -> str | None:
    """Why the kernel cannot run here (built on the first call), or None when it can."""
    if not _KERNEL.tried:
        _KERNEL.load()
    return _KERNEL.reason


def describe() -> str:
    """The kernel in use, e.g. ``native (AVX-512, 16 lanes)``, or why there is none."""
    reason = unavailable()
    if reason is not None:
        return f"unavailable: {reason}"
    return f"native ({'AVX-512' if _KERNEL.width == 16 else 'AVX2'}, {_KERNEL.width} lanes)"


def build_record() -> dict[str, Any]:
    """The build in use, for a result file: source file, compiler and its version line, flags, lanes."""
    if unavailable() is not None:
        return {"unavailable": _KERNEL.reason}
    return {"source": SOURCE.name, "compiler": _KERNEL.compiler, "compiler_version": _KERNEL.compiler_version,
            "flags": [*FLAGS, f"-DSK_WIDTH={_KERNEL.width}"], "lanes": _KERNEL.width,
            "library": _KERNEL.path.name if _KERNEL.path else None}


def build_seconds() -> float | None:
    """Seconds the first use took (the build, or finding it in the cache, plus loading); None before."""
    return _KERNEL.seconds


def accepts(x: torch.Tensor) -> bool:
    """Whether the kernel takes these logits: float32 (n, K) on the CPU, K >= 1, no gradient needed."""
    return x.device.type == "cpu" and x.dtype == torch.float32 and x.ndim == 2 and x.shape[1] > 0


def solve(xs: list[torch.Tensor], eta: float, n_iters: int, *, from_logits: bool,
          rows: int | None = None) -> list[torch.Tensor] | None:
    """Sinkhorn targets of each (n_i, K) float32 CPU tensor in ``xs`` (one or two, same K), the first ``rows``
    rows of each (all by default); ``from_logits``: of their log-softmax. Two problems run on two threads when
    torch has two. None when a logit is not finite (the caller's eager path decides what that gives) or the
    kernel is unavailable (:func:`unavailable`)."""
    if unavailable() is not None or _KERNEL.lib is None:
        return None
    if not 1 <= len(xs) <= 2 or len({x.shape[1] for x in xs}) != 1 or not all(accepts(x) for x in xs):
        raise ValueError("the native Sinkhorn takes one or two float32 (n, K) CPU tensors with the same K")
    xs = [x.detach().contiguous() for x in xs]
    k = xs[0].shape[1]
    out_rows = max(x.shape[0] for x in xs) if rows is None else rows
    qs = [torch.empty(min(out_rows, x.shape[0]), k) for x in xs]
    works = [torch.empty(2 * x.shape[0] + 3 * k) for x in xs]
    fp = ctypes.POINTER(ctypes.c_float)

    def ptrs(ts: list[torch.Tensor]) -> ctypes.Array[ctypes._Pointer[ctypes.c_float]]:
        return (fp * len(ts))(*[ctypes.cast(t.data_ptr(), fp) for t in ts])

    count = len(xs)
    status = (ctypes.c_int * count)()
    ns = (ctypes.c_int * count)(*[x.shape[0] for x in xs])
    rc = _KERNEL.lib.sk_solve(count, ptrs(xs), ns, k, float(eta), int(n_iters), int(from_logits), out_rows,
                              ptrs(qs), ptrs(works), torch.get_num_threads(), status)
    if rc != 0:
        raise RuntimeError(f"native Sinkhorn: bad arguments (code {rc})")
    return None if any(status) else qs
