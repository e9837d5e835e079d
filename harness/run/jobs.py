"""A grid of runs as the launchers see it: how a command asks its runs to be run (:class:`Grid`), one planned run as
a worker process or a SLURM job receives it (:class:`Job`, a JSON object) and what a grid produced
(:class:`Outcome`); the launcher options checked together (:func:`check`)."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.config.launchers import LAUNCHERS
from harness.config.plan import Run
from harness.errors import ConfigError, RunError

__all__ = ["LAUNCHERS", "SKIPPED", "Grid", "Job", "Outcome", "check", "job"]

SKIPPED = "_skipped"  # in a result dict (like _path, never written): found finished, not trained by this command


@dataclass(frozen=True)
class Job:
    """One planned run as a worker process or a SLURM job receives it: a run of a task file (task, method, seed,
    overrides) or, with ``source``, the run a result file records; with the options of the command that planned
    it and that command's own words (``command``, recorded in the result file)."""

    out: str
    task: str | None = None
    method: str | None = None
    seed: int = 0
    overrides: tuple[str, ...] = ()
    source: str | None = None
    epochs: int | None = None
    init: str | None = None
    device: str = "auto"
    force: bool = False
    on_nan: str = "stop"
    threads: int | None = None
    include: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    tuning: dict[str, Any] | None = None  # the study that chose the run's settings, for its result file

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Job:
        data = json.loads(text)
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, dict) or not set(data) <= names or "out" not in data:
            raise ConfigError(f"not a job description: {text[:200]!r}; expected a JSON object with keys among "
                              f"{', '.join(sorted(names))}")
        for key in ("overrides", "include", "command"):
            data[key] = tuple(data.get(key) or ())
        return cls(**data)


@dataclass
class Grid:
    """How a command asks its runs to be run: the launcher and its options, and what every run shares."""

    out: Path
    device: str = "auto"
    launcher: str = "sequential"
    jobs: int | None = None  # worker processes of the local launcher
    threads: int | None = None  # torch threads per run (None: torch's own default, whatever the machine's load)
    auto_threads: bool = False  # --threads auto: train with the cores other work leaves free (changes the numbers)
    slurm: str | None = None  # --slurm KEY=VALUE,...: over the task file's launcher.slurm section
    wait: bool = False  # SLURM: wait for the jobs to end
    data_root: str | None = None  # runs rebuilt from result files: their dataset.root
    progress: bool = True
    force: bool = False
    on_nan: str = "stop"
    epochs: int | None = None
    init: Path | None = None
    include: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    later: tuple[str, str] = ("", "")  # SLURM without --wait: the commands to follow the jobs, and the tables


@dataclass
class Outcome:
    """What a grid produced: the result dicts of every run finished (now or before), the error of the runs that
    failed (raised by the caller after printing the tables of the others), the error of the methods refused
    (raised last), and whether jobs were submitted without waiting for them (no results to show yet)."""

    results: list[dict[str, Any]]
    failed: RunError | None = None
    refused: ConfigError | None = None
    submitted: bool = False
    main: bool = True  # False in the other processes of a torchrun job: they print nothing
    refused_names: frozenset[str] = frozenset()  # the run folders refused (and not run)

    def merged(self, other: "Outcome") -> "Outcome":
        """This outcome and ``other`` (a later part of the same command) as one: their results, the first
        failure and refusal."""
        return Outcome(results=self.results + other.results, failed=self.failed or other.failed,
                       refused=self.refused or other.refused, submitted=self.submitted or other.submitted,
                       main=self.main and other.main, refused_names=self.refused_names | other.refused_names)


def check(grid: Grid, world_size: int) -> None:
    """The launcher options fit together: positive --jobs/--threads, --jobs with local only, SLURM outside
    torchrun and with submitit installed."""
    if grid.launcher not in LAUNCHERS:
        raise ConfigError(f"unknown launcher {grid.launcher!r}; use one of {', '.join(LAUNCHERS)}")
    if grid.threads is not None and grid.threads < 1:
        raise ConfigError(f"--threads {grid.threads}: give a positive number of torch threads per run")
    if grid.launcher != "slurm":
        for flag, given in (("--slurm", grid.slurm is not None), ("--wait", grid.wait)):
            if given:
                raise ConfigError(f"{flag} goes with --launcher slurm; add --launcher slurm")
    if grid.launcher == "slurm":
        if grid.jobs is not None:
            raise ConfigError("--jobs sets the workers of --launcher local; SLURM runs every job of the array "
                              "(limit them with --slurm array_parallelism=N)")
        if world_size > 1:
            raise ConfigError("--launcher slurm submits jobs; run it without torchrun")
        try:
            import submitit  # noqa: F401
        except ImportError:
            raise ConfigError('--launcher slurm needs submitit, which is not installed; pip install '
                              '"swamp-bench[cluster]" (or python -m pip install "submitit>=1.5")') from None
        return
    if grid.launcher != "local":
        if grid.jobs is not None:
            raise ConfigError("--jobs sets the workers of --launcher local; add --launcher local")
        return
    if grid.jobs is not None and grid.jobs < 1:
        raise ConfigError(f"--jobs {grid.jobs}: give a positive number of worker processes")
    if world_size > 1:
        raise ConfigError("--launcher local starts processes of its own; run it without torchrun")


def job(run: Run, grid: Grid, threads: int | None, tuning: dict[str, Any] | None = None) -> Job:
    """The :class:`Job` of one planned run of ``grid`` (``tuning``: the study its options record, as
    :attr:`harness.run.runner.RunOptions.tuning`)."""
    common: dict[str, Any] = dict(out=str(grid.out), epochs=grid.epochs, init=str(grid.init) if grid.init else None,
                  device=grid.device, force=grid.force, on_nan=grid.on_nan, threads=threads, include=grid.include,
                  command=grid.command, tuning=tuning)
    if run.source:  # rebuilt from a result file: the worker rebuilds it the same way
        overrides = (f"dataset.root={grid.data_root}",) if grid.data_root else ()
        return Job(source=run.source, seed=run.seed, overrides=overrides, **common)
    return Job(task=str(run.spec.path), method=run.method, seed=run.seed, overrides=tuple(run.spec.overrides),
               **common)
