"""How busy the machine was while a phase was timed: a timing taken while other work ran on the same cores
measures the machine as much as the method, and not evenly across methods.

For each phase (:meth:`harness.run.profiling.Profiler.phase`) two snapshots, at its start and end, give:

* ``wall_s``, and ``cpu_s``: this process's CPU seconds (all its threads, and its child processes) in the phase,
  and ``cpu_per_wall``;
* ``others_cpu_s``: CPU seconds that everything else spent on this process's cores (the busy time of those cores
  in ``/proc/stat`` less this process's), and ``others_cores``, that over the wall-clock: how many cores other
  work kept busy on average;
* ``busy_processes``: the other processes that used at least a quarter of a core over the phase, with their
  names (at most five);
* ``involuntary_ctx_switches``: how often the scheduler took a core from this process;
* ``load1``: the one-minute load average at the start and the end; ``cores`` (the cores this process may run
  on) and ``threads`` (torch's intra-op threads, times the local ranks under torchrun, whose CPU time counts as
  this run's own).

**The rule.** A phase is *contended* when other work kept busy more than the cores this process's threads
left free, by over a quarter of a core: ``others_cores > max(0, cores - threads) + 0.25``. On two cores with two
torch threads, one busy process beside the run is contention; with one thread, two are (they take more than the
free core: 1.33 cores when three processes share two). Phases shorter than
:data:`MIN_JUDGED_S` are not judged (``contended`` is None): the kernel counts CPU time in 10 ms ticks.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

MIN_JUDGED_S = 0.5  # shorter phases: too few 10 ms CPU-accounting ticks to judge
SLACK_CORES = 0.25  # other work may use this much more than the free cores before a phase counts as contended
BUSY_SHARE = 0.25  # an other process using this share of a core over the phase is listed as busy
RULE = ("other work kept busy more than the cores the run's threads left free, by over a quarter of a core "
        "(others_cores > cores - threads + 0.25, over a phase of at least 0.5 s)")


def cores() -> list[int]:
    """The CPUs this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _busy(t: Any) -> float:
    """Non-idle seconds of one CPU's times (steal included: a hypervisor gave the core to someone else)."""
    busy: float = (t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)
                   + getattr(t, "steal", 0.0))
    return busy


@dataclass
class Snapshot:
    wall: float
    own_cpu: float
    cores_busy: float
    involuntary: int
    load1: float
    processes: dict[int, tuple[str, float]]


def _processes(own: set[int]) -> dict[int, tuple[str, float]]:
    out = {}
    for p in psutil.process_iter(["name", "cpu_times"]):
        if p.pid in own or p.info["cpu_times"] is None:
            continue
        t = p.info["cpu_times"]
        out[p.pid] = (p.info["name"] or "?", t.user + t.system)
    return out


def _own_pids() -> set[int]:
    me = psutil.Process()
    try:
        parent = me.parent() if local_processes() > 1 else None
        group = parent.children(recursive=True) if parent is not None else me.children(recursive=True)
        return {me.pid, *(c.pid for c in group)}
    except psutil.Error:
        return {me.pid}


def local_processes() -> int:
    """Processes of this run on this machine: torchrun's local world size (its ranks are siblings), else 1."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def _own_cpu(me: psutil.Process) -> float:
    """CPU seconds of this run: this process and its children, those it waited for and those still running
    (data loader workers, the regression gate's benchmark processes); under torchrun, every local rank (the
    children of the rank's parent, the torchrun agent)."""
    t = me.cpu_times()
    total: float = t.user + t.system + t.children_user + t.children_system
    try:
        children = me.children(recursive=True)
        parent = me.parent() if local_processes() > 1 else None
        if parent is not None:
            children = [c for c in parent.children(recursive=True) if c.pid != me.pid]
    except psutil.Error:
        children = []
    for child in children:
        try:
            c = child.cpu_times()
            total += c.user + c.system
        except psutil.Error:
            continue
    return total


def snapshot() -> Snapshot:
    """The counters a phase's record is the difference of."""
    me = psutil.Process()
    per_cpu = psutil.cpu_times(percpu=True)
    mine = cores()
    return Snapshot(wall=time.perf_counter(), own_cpu=_own_cpu(me),
                    cores_busy=sum(_busy(per_cpu[i]) for i in mine if i < len(per_cpu)),
                    involuntary=me.num_ctx_switches().involuntary, load1=os.getloadavg()[0],
                    processes=_processes(_own_pids()))


def between(start: Snapshot, end: Snapshot, threads: int | None = None) -> dict[str, Any]:
    """The contention record of the phase from ``start`` to ``end`` (see the module docstring)."""
    wall = max(end.wall - start.wall, 1e-9)
    own = max(0.0, end.own_cpu - start.own_cpu)
    others = max(0.0, end.cores_busy - start.cores_busy - own)
    if threads is None:
        import torch  # the intra-op threads of this process; the report side reads records and needs no torch

        threads = torch.get_num_threads() * local_processes()  # every local rank runs as many
    n_cores, n_threads = len(cores()), threads
    busy = sorted(((end.processes[pid][1] - cpu, name) for pid, (name, cpu) in start.processes.items()
                   if pid in end.processes and end.processes[pid][1] - cpu >= BUSY_SHARE * wall), reverse=True)
    record = {"wall_s": wall, "cpu_s": own, "cpu_per_wall": own / wall, "others_cpu_s": others,
              "others_cores": others / wall, "busy_processes": len(busy),
              "busy_names": [f"{name} ({cpu / wall:.2f} cores)" for cpu, name in busy[:5]],
              "involuntary_ctx_switches": end.involuntary - start.involuntary,
              "load1": [round(start.load1, 2), round(end.load1, 2)], "cores": n_cores, "threads": n_threads}
    record["contended"] = judge(record)
    return record


def judge(record: dict[str, Any]) -> bool | None:
    """Whether a phase's record says it was contended (:data:`RULE`); None when the phase was too short to tell."""
    if record["wall_s"] < MIN_JUDGED_S:
        return None
    free = max(0, record["cores"] - min(record["threads"], record["cores"]))
    contended: bool = record["others_cores"] > free + SLACK_CORES
    return contended


def runnable_others() -> int:
    """Threads of other processes that are runnable at this instant, from ``/proc/loadavg`` (this process's
    calling thread is one of the runnable ones); 0 where the file does not exist."""
    try:
        running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return 0
    return max(0, running - 1)


def probe(seconds: float = 2.0, threads: int | None = None) -> dict[str, Any]:
    """The machine's contention over ``seconds`` while this process sleeps: what other work keeps busy (for the
    regression gate, before it measures anything)."""
    start = snapshot()
    time.sleep(seconds)
    return between(start, snapshot(), threads)


def contended_phases(result: dict[str, Any]) -> list[str]:
    """The timed phases a result file records as contended (none for files without the record)."""
    records = (result.get("profile") or {}).get("contention") or {}
    return [phase for phase, record in records.items() if record.get("contended")]


MIN_WATCHED_S = 0.1  # a machine watched for less than this (fast set-up) is not judged before training


def threads_for(start: Snapshot, threads: int) -> tuple[int, dict[str, Any]] | None:
    """The torch threads to train with, given what other work did on this machine since ``start`` (a command's
    first moment, so that its set-up, the data loading, is the watch, extended to :data:`MIN_WATCHED_S` when other
    threads are runnable now): ``threads`` on a quiet machine, fewer where other work keeps cores busy: the cores
    it leaves free, at least 1. None when nothing changes; else (threads, the watch's record).
    On a busy machine, threads that spin waiting for a
    descheduled sibling make small parallel regions wait for it (docs/measurement.md has the measurement)."""
    watched = time.perf_counter() - start.wall
    if watched < MIN_WATCHED_S:
        if runnable_others() < 1:
            return None  # a fast set-up on a machine where nothing else is running now: nothing to change
        time.sleep(MIN_WATCHED_S - watched)  # something else runs: watch long enough to count its CPU time
    record = between(start, snapshot(), threads=len(cores()))
    fewer = max(1, int(len(cores()) - record["others_cores"] + SLACK_CORES))
    if record["others_cores"] <= SLACK_CORES or fewer >= threads:
        return None  # quiet enough, or already at one thread: nothing to change, nothing to say
    return fewer, record
