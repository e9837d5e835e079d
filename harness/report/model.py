"""The model of a results folder that every reader computes from: the folder's result files grouped by the machine
that made them (nothing averages across machines), then by run (a method at its settings, over seeds); each run's
metrics, times and contention per seed; and the one timing ratio that the tables, the results site and the claims
ledger all show.

    results  --load_results-->  [result dict]  --sets()-->  ResultSet(folder, task, machine)
                                                              └─ runs: {run name: Run(seeds' result dicts)}
    timing_ratio(Run, Run, phase) -> TimingRatio(value, per seed, extrapolated, contended runs)

Each fact about a result that several readers need is defined here once: the folder that owns it (:func:`owner`),
the machine it was made on (:func:`machine`, :func:`machine_line`), its numeric precision (:func:`precision`),
whether its data was random (:func:`timing_only`).

Readers: the tables (``accuracy``, ``timing``, ``files``), ``site`` (pages), ``claims`` (the ledger), ``compare``,
``folders`` and ``reproduce``.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from harness.config.spec import TrainSpec
from harness.errors import ConfigError
from harness.report import stats
from harness.report.cells import Cell, number
from harness.run import contention

PHASES = {"step": "train", "test": "test"}  # a ratio's phase -> the profile phase contention is judged on


def hardware(result: dict[str, Any]) -> dict[str, Any]:
    """The machine a result file records (``environment.hardware``: cpu, cores, device, gpu, torch_threads); {} for
    a file that records none."""
    found: dict[str, Any] = (result.get("environment") or {}).get("hardware") or {}
    return found


def device(result: dict[str, Any], default: str = "?") -> str:
    """The device a result ran on ('cuda', 'cpu'; ``default`` when the file does not say)."""
    return str(hardware(result).get("device", default))


def hardware_name(result: dict[str, Any]) -> str:
    """What a result was timed on: the GPU's name, or the CPU's model and core count ('unknown hardware' for a file
    that does not record it)."""
    hw = hardware(result)
    gpu = (hw.get("gpu") or {}).get("name")
    if gpu:
        return str(gpu)
    return f"{hw['cpu']}, {hw['cores']} cores" if "cpu" in hw else "unknown hardware"


def machine(result: dict[str, Any]) -> str:
    """The hardware a result was timed on, with its device: :func:`hardware_name` ('cuda' or 'cpu')."""
    return f"{hardware_name(result)} ({device(result)})"


def precision(result: dict[str, Any]) -> str:
    """The numeric precision a result trained and tested in (``train.precision``; fp32 for files from before it)."""
    value: str = (result.get("config") or {}).get("train", {}).get("precision", TrainSpec.precision)
    return value


def machine_line(results: list[dict[str, Any]]) -> str:
    """One line naming the machine(s), thread count, software and numeric precision(s) the results came from;
    runs that differ only in precision share one entry ('precision fp32, bf16')."""
    seen: dict[tuple[str, str], list[str]] = {}  # (machine and software, processes) -> precisions
    for r in results:
        hw, v = hardware(r), r["environment"]["versions"]
        gpu = hw.get("gpu") or {}
        threads = f"{hw['torch_threads']} torch threads"
        where = (f"{gpu['name']} (driver {gpu.get('driver', '?')}; host {hw['cpu']}, {threads})" if gpu.get("name")
                 else f"{hw['cpu']} ({hw['cores']} cores, {threads})")
        cuda = f", CUDA {v['cuda']}" if gpu.get("name") and v.get("cuda") else ""
        world = (r.get("distributed") or {}).get("world_size", 1)
        processes = f" × {world} processes ({r['distributed']['backend']})" if world > 1 else ""
        precisions = seen.setdefault((f"{where}; torch {v['torch']}{cuda}; device {hw['device']}", processes), [])
        if precision(r) not in precisions:
            precisions.append(precision(r))
    return " | ".join(f"{where}; precision {', '.join(p)}{processes}" for (where, processes), p in seen.items())


def timing_only(results: Iterable[dict[str, Any]]) -> bool:
    """Whether any of the results ran on random data in a real dataset's shapes (a source marked ``timing_only``):
    their times mean something, their accuracy nothing."""
    return any((r.get("dataset") or {}).get("timing_only") for r in results)


def by_machine(results: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Result dicts grouped by :func:`machine`, in first-seen order: runs made on different hardware are never
    averaged into one row."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        groups[machine(r)].append(r)
    return dict(groups)


def group_runs(results: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Result dicts grouped by run name (a method at its settings), in first-seen order."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        groups[r["run_name"]].append(r)
    return dict(groups)


def one_machine(results: list[dict[str, Any]], what: str) -> str:
    """The one machine ``results`` were made on; ConfigError naming the machines when there are several."""
    machines = by_machine(results)
    if len(machines) > 1:
        raise ConfigError(f"{what} were made on {len(machines)} machines ({'; '.join(machines)}): results of "
                          "different machines are never averaged; keep each machine's runs in a folder of its own")
    return next(iter(machines), "")


def owner(result: dict[str, Any]) -> Path:
    """The folder a result belongs to, whose tables and page it appears in: the one holding its run's folder
    (``<out>/<task>`` for ``harness run --out OUT``)."""
    return Path(result["_path"]).parent.parent


def owned(results: Iterable[dict[str, Any]], folder: Path) -> list[dict[str, Any]]:
    """The results that ``folder`` owns (:func:`owner`), whatever else was loaded beside them."""
    where = Path(folder).resolve()
    return [r for r in results if owner(r).resolve() == where]


def folds(tag: str) -> int:
    """The number of folds of a protocol's timing-key suffix ('' whole split: 1; '@5folds': 5)."""
    return int(tag[1:-len("folds")]) if tag else 1


def extrapolated(result: dict[str, Any], tag: str) -> dict[str, Any] | None:
    """The protocol's extrapolation record when a time budget stopped its scoring (None otherwise)."""
    found: dict[str, Any] | None = (result["profile"].get("extrapolated") or {}).get(tag)
    return found


def test_part_seconds(result: dict[str, Any], part: str, tag: str) -> tuple[float | None, bool]:
    """Per-fold seconds of test part ``part`` (encode, score, rank, total) of one result, and whether it is
    extrapolated: a run stopped by its time budget has an extrapolated score and total time and no rank time."""
    extra = extrapolated(result, tag)
    if extra is not None and part in ("score", "total"):
        return extra[f"{part}_s"] / folds(tag), True
    if extra is not None and part == "rank":
        return None, False
    value = result["profile"]["timing"].get(f"test_{part}{tag}", {}).get("median_s")
    return (None if value is None else value / folds(tag)), False


def seconds(runs: list[dict[str, Any]], phase: str, tag: str = "") -> tuple[dict[int, float], bool]:
    """Per seed, the seconds a ratio compares: the median training step (``step``) or the whole test retrieval
    per fold (``test``, protocol ``tag``); and whether any test time is extrapolated from a time budget."""
    if phase not in PHASES:
        raise ConfigError(f"timing phase {phase!r}; valid: {', '.join(PHASES)}")
    values: dict[int, float] = {}
    estimated = False
    for r in runs:
        if phase == "step":
            step = r["profile"]["timing"].get("train_step")
            if step is not None:
                values[r["seed"]] = step["median_s"]
            continue
        value, est = test_part_seconds(r, "total", tag)
        if value is not None:
            values[r["seed"]] = value
            estimated |= est
    return values, estimated


@dataclass(frozen=True)
class TimingRatio:
    """One run's time over another's in one phase: the mean over seeds over the other's mean, the ratio of each
    seed both have, whether a time was extrapolated, and how many of the runs timed the phase contended."""

    value: float | None
    per_seed: tuple[float, ...] = ()
    estimated: bool = False
    contended: int = 0
    runs: int = 0

    @property
    def mark(self) -> str:
        """' [contended j/n]' when j of the n runs on both sides timed the phase while the machine was busy."""
        return f" [contended {self.contended}/{self.runs}]" if self.contended else ""

    def cell(self, digits: int = 2) -> Cell:
        """'1.23×' ('≈1.23×' when extrapolated), '–' without a value; keyed by the ratio."""
        return number(self.value, f".{digits}f", "≈" if self.estimated else "", "×")


def timing_ratio(of: list[dict[str, Any]], to: list[dict[str, Any]], phase: str, tag: str = "") -> TimingRatio:
    """The run ``of``'s time over the run ``to``'s in ``phase`` (``step`` or ``test``), both from one machine
    (ConfigError otherwise): the one ratio every table, page and claim shows."""
    one_machine(of + to, "the runs of a timing ratio")
    (num, est_num), (den, est_den) = seconds(of, phase, tag), seconds(to, phase, tag)
    busy = sum(1 for r in of + to if PHASES[phase] in contention.contended_phases(r))
    if not num or not den:
        return TimingRatio(None, contended=busy, runs=len(of) + len(to))
    common = sorted(set(num) & set(den))
    return TimingRatio(stats.summarize(list(num.values())).mean / stats.summarize(list(den.values())).mean,
                       tuple(num[s] / den[s] for s in common), est_num or est_den, busy, len(of) + len(to))


class Runs:
    """What every view of a set of result files (``results``) reads of them: its runs by name, whether its data
    is random (timing only), the selection metric."""

    results: list[dict[str, Any]]

    @property
    def runs(self) -> dict[str, list[dict[str, Any]]]:
        return group_runs(self.results)

    @property
    def timing_only(self) -> bool:
        return timing_only(self.results)

    @property
    def select(self) -> str:
        select: str = self.results[0]["config"]["train"]["select"]
        return select


@dataclass
class ResultSet(Runs):
    """The runs of one task found in one folder, made on one machine: what a table, a page or a claim reads."""

    task: str
    folder: Path
    results: list[dict[str, Any]]
    machine: str = ""
    root: Path | None = None  # the folder given on the command line that the set was found under
    several_machines: bool = False  # the folder holds runs of other machines too (each its own set)


def sets(results: Iterable[dict[str, Any]], root: Path | None = None) -> list[ResultSet]:
    """The result sets of ``results``: one per (folder holding the run folders, task, machine), sorted by task,
    then folder, in the machines' first-seen order."""
    grouped: dict[tuple[Path, str], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        grouped[(owner(r), r["task"])].append(r)
    out = []
    for (folder, task), found in sorted(grouped.items(), key=lambda kv: (kv[0][1], str(kv[0][0]))):
        machines = by_machine(found)
        for name, runs in machines.items():
            out.append(ResultSet(task, folder, runs, name, root, len(machines) > 1))
    return out
