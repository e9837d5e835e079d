"""Wall-clock and peak-memory measurement that wraps the loops from outside.

* Clocks: ``time.perf_counter`` read only after ``torch.cuda.synchronize`` on CUDA.
* CPU memory: the process's peak RSS within a phase (Linux: VmHWM after resetting it
  through /proc/self/clear_refs; elsewhere a 5 ms RSS sampler via psutil).
* CUDA memory: the caching allocator's peak (``max_memory_allocated``, reset per phase)
  and NVML's device memory in use, sampled during the phase.
Fields that cannot be measured here are left out with the reason in ``notes``.
"""
from __future__ import annotations

import contextlib
import statistics
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, TypedDict

import psutil
import torch

from harness.run import contention
from harness.store.provenance import MiB, nvml_reader


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work so that a clock read afterwards is honest."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class _Sampler:
    """Background thread that records the maximum of ``read()`` every ``interval`` seconds."""

    def __init__(self, read: Callable[[], int], interval: float = 0.005):
        self.read, self.interval, self.peak = read, interval, read()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, self.read())

    def __enter__(self) -> "_Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.read())


class CpuPeakRSS:
    """Peak resident set size of this process over a ``with`` block, in bytes."""

    _status = Path("/proc/self/status")
    _clear = Path("/proc/self/clear_refs")

    def __init__(self) -> None:
        self.method = "VmHWM" if self._can_reset() else "psutil sampler"
        self.peak = 0
        self._sampler: _Sampler | None = None

    def _can_reset(self) -> bool:
        try:
            self._clear.write_text("5")
            return self._status.exists()
        except OSError:
            return False

    def _hwm(self) -> int:
        for line in self._status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise OSError("VmHWM missing from /proc/self/status")

    def __enter__(self) -> "CpuPeakRSS":
        if self.method == "VmHWM":
            self._clear.write_text("5")  # reset the high-water mark to the current RSS
        else:
            self._sampler = _Sampler(lambda: psutil.Process().memory_info().rss).__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._sampler is not None:
            self._sampler.__exit__()
            self.peak = self._sampler.peak
        else:
            self.peak = self._hwm()


class Extrapolated(TypedDict):
    """A test scoring that a time budget stopped (:meth:`Profiler.extrapolate`)."""

    fraction_scored: float
    score_measured_s: float
    score_s: float | None  # None when nothing was scored
    total_s: float | None


class Profiler:
    """Collects named timings (lists of seconds) and per-phase peak memory for one run."""

    def __init__(self, device: torch.device):
        self.device = device
        self.times: dict[str, list[float]] = {}
        self.memory: dict[str, dict[str, float]] = {}
        self.notes: list[str] = []
        self.extrapolated: dict[str, Extrapolated] = {}
        self.contention: dict[str, dict[str, Any]] = {}  # phase -> harness.run.contention.between's record
        self.test_path: dict[str, dict[str, Any]] = {}  # protocol tag -> how its test ranked (full or stream)
        self.search: dict[str, Any] | None = None  # the approximate search's record (harness.run.search)
        self._nvml = None
        if device.type == "cuda":
            self._nvml, _, reason = nvml_reader(device)
            if reason:
                self.notes.append(reason)
        else:
            self.notes.append("CPU run: CUDA allocator and NVML fields not applicable")

    @contextlib.contextmanager
    def timer(self, key: str) -> Iterator[None]:
        """Add the wall-clock of the block (device synchronised at both ends) to ``key``."""
        synchronize(self.device)
        start = time.perf_counter()
        yield
        synchronize(self.device)
        self.times.setdefault(key, []).append(time.perf_counter() - start)

    def add(self, key: str, seconds: float) -> None:
        """Add ``seconds`` measured elsewhere (the scorer's share of a streamed test) to ``key``."""
        self.times.setdefault(key, []).append(seconds)

    def timed(self, key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` wrapped so that every call is timed under ``key``."""

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.timer(key):
                return fn(*args, **kwargs)

        return wrapper

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Record peak memory (host RSS; on CUDA allocator and NVML) over the block, and how busy the machine was
        meanwhile (:mod:`harness.run.contention`)."""
        cuda = self.device.type == "cuda"
        if cuda:
            synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        sampler = _Sampler(self._nvml, 0.01) if self._nvml else None
        nvml = sampler if sampler is not None else contextlib.nullcontext()
        before = contention.snapshot()
        with CpuPeakRSS() as rss, nvml:
            yield
            synchronize(self.device)
        self.contention[name] = contention.between(before, contention.snapshot())
        mem = {"cpu_peak_rss_mib": rss.peak / MiB}
        if cuda:
            mem["cuda_max_allocated_mib"] = torch.cuda.max_memory_allocated(self.device) / MiB
            mem["cuda_max_reserved_mib"] = torch.cuda.max_memory_reserved(self.device) / MiB
        if sampler is not None:
            mem["nvml_peak_used_mib"] = sampler.peak / MiB
        self.memory[name] = mem

    def extrapolate(self, tag: str, fraction: float) -> None:
        """Record that the last ``test_score<tag>`` covered only ``fraction`` of the score matrix (a time
        budget stopped it): the measured seconds, the full scoring extrapolated linearly, and the whole
        test as measured encoding plus extrapolated scoring (nothing was ranked)."""
        measured = self.times[f"test_score{tag}"][-1]
        full = measured / fraction if fraction > 0 else None
        encode = self.times[f"test_encode{tag}"][-1]
        self.extrapolated[tag] = {"fraction_scored": fraction, "score_measured_s": measured, "score_s": full,
                                  "total_s": None if full is None else encode + full}
        self.notes.append(f"test{tag}: scoring stopped by the time budget after {100 * fraction:.2f}% of the "
                          f"score matrix ({measured:.1f} s); times extrapolated, no accuracy metrics")

    def summary(self, warmup: int = 5) -> dict[str, Any]:
        """Medians, p90s and totals of every timing key (``warmup`` first train steps excluded)."""
        out: dict[str, Any] = {}
        for key, values in self.times.items():
            kept = values[warmup:] if key == "train_step" and len(values) > warmup else values
            out[key] = {"n": len(kept), "median_s": statistics.median(kept), "p90_s": percentile(kept, 90),
                        "total_s": sum(values)}
        extra: dict[str, Any] = {"extrapolated": dict(self.extrapolated)} if self.extrapolated else {}
        if self.test_path:
            extra["test_path"] = dict(self.test_path)

        return {"timing": out, "memory": self.memory, "contention": self.contention, "notes": list(self.notes),
                **extra}


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (linear interpolation) of a non-empty list."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
