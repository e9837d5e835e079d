"""``harness run`` and ``harness rerun`` as library functions: a task's runs planned from a :class:`Selection` and
run by a :class:`harness.run.jobs.Grid` (:func:`run_task`, or :func:`plan_runs` then :func:`run_planned`), and the
runs that result files record run again (:func:`rerun_files`). Each hands back the grid's
:class:`harness.run.jobs.Outcome`; the command line prints its tables (:func:`harness.report.folders.show`)."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from harness.config import plan
from harness.config import spec as spec_file
from harness.config.plan import Run
from harness.errors import ConfigError, did_you_mean
from harness.run import checkpoint, contention, dispatch, preflight, rerun
from harness.run.jobs import Grid, Outcome
from harness.store.schema import result_path


@dataclass(frozen=True)
class Selection:
    """Which runs of a task file: ``run``'s run-selecting flags. ``methods``: run names the task declares (or
    registered methods; empty: all it declares); ``seeds``: ``0,1,2`` or ``0-4``; ``overrides``: ``NAME.KEY=VALUE``;
    ``sweep``: ``NAME.KEY=V1,V2`` (several form a grid); ``init``: a checkpoint or result file the encoders start
    from; ``data_root``: the dataset folder (``dataset.root``)."""

    task: str | Path
    methods: tuple[str, ...] = ()
    seeds: str = "0"
    overrides: tuple[str, ...] = ()
    sweep: tuple[str, ...] = ()
    epochs: int | None = None
    init: str | Path | None = None
    data_root: str | None = None


def plan_runs(selection: Selection) -> list[Run]:
    """The runs ``selection`` plans (seeds x sweep grid x methods), every setting checked; nothing runs."""
    overrides = list(selection.overrides) + ([f"dataset.root={selection.data_root}"] if selection.data_root else [])
    init = Path(selection.init) if selection.init else None
    if init is not None:
        checkpoint.checkpoint_of(init)
    return plan.plan(str(selection.task), overrides, list(selection.sweep), [m for m in selection.methods if m],
                     plan.parse_seeds(selection.seeds), selection.epochs,
                     checkpoint.init_label(init) if init else None)


def undeclared(task: str | Path, methods: Sequence[str]) -> list[str]:
    """A note for each registered method the task file does not declare: it runs with its default settings."""
    declared = spec_file.read_yaml(Path(task)).get("methods") or {}
    return [f"note: {name} is a registered method that {task} does not declare: it runs with its default settings "
            f"(declare it to set them: `{name}: {{method: {name}}}` under methods:)"
            for name in dict.fromkeys(m for m in methods if m not in declared)]


def reference_of(reference: str | None, runs: Sequence[Run]) -> str | None:
    """The run folder ``reference`` names among ``runs`` (a run name, or the method of exactly one run)."""
    names = list(dict.fromkeys(r.run_name for r in runs))
    try:
        return plan.resolve_reference(reference, ((r.run_name, r.method) for r in runs))
    except ConfigError:
        raise ConfigError(f"--reference {reference!r} is not among this command's runs: {', '.join(names)}"
                          f"{did_you_mean(reference or '', names)}; name one of them (or the method of exactly one "
                          "of them)") from None


def run_planned(runs: list[Run], grid: Grid, watch: contention.Snapshot | None = None) -> Outcome:
    """Run ``runs`` as ``grid`` says, after the checks of the results folder, the environment and the precision
    (``watch``: the machine's counters at the command's start, for its note on a busy machine)."""
    preflight.check_out(grid.out, [result_path(grid.out, r.spec.name, r.run_name, r.seed).parent for r in runs])
    preflight.check_environment()
    opts = dispatch.options(grid, watch)
    if grid.launcher != "slurm" and opts.dist.is_main:  # SLURM jobs train on other machines
        preflight.check_precision(runs, opts.device)
    return dispatch.run(runs, grid, opts)


def run_task(selection: Selection, grid: Grid) -> Outcome:
    """``harness run``: plan the task's runs, check them, run them (finished ones skipped), their outcome."""
    watch = contention.snapshot()
    return run_planned(plan_runs(selection), grid, watch)


@dataclass
class Reran:
    """What :func:`rerun_files` made: the grid's outcome, the result files' records it re-ran and the device type
    they ran on (for :meth:`check`)."""

    outcome: Outcome
    records: list[tuple[Path, dict[str, Any]]]
    device: str = "cpu"
    runs: list[Run] = field(default_factory=list)

    def check(self) -> int:
        """Print, per run, whether its test metrics equal the recorded ones; the number that differ on the hardware
        they were made with (:func:`harness.run.rerun.check_reruns`)."""
        return rerun.check_reruns(self.records, self.outcome.results, self.device)


def rerun_files(targets: Sequence[str | Path], grid: Grid) -> Reran:
    """``harness rerun``: the run of every result file named (or found in a named folder), rebuilt from the settings,
    seeds and torch threads it records (``grid.threads`` overrides them) and run again into ``grid.out``; a warning
    on stderr for each kind of difference from where they were made."""
    records = rerun.result_records([str(t) for t in targets])
    runs, _ = rerun.reruns(records, grid.data_root, "sequential")  # checked first: the same run twice, checkpoints
    preflight.check_out(grid.out, [result_path(grid.out, r.spec.name, r.run_name, r.seed).parent for r in runs])
    preflight.check_environment()
    opts = dispatch.options(grid)
    for line in rerun.rerun_warnings(records, opts.device.type, opts.dist.world_size, grid.threads):
        print(f"warning: {line}", file=sys.stderr)
    if opts.dist.is_main:  # a rerun repeats the recorded precision: fp32 is a new run of the task
        preflight.check_precision(runs, opts.device, "a new `harness run` of the task with --set train.precision=fp32")
    print(f"re-running {len(runs)} run(s) from their result files into {grid.out}/")
    return Reran(rerun.rerun(records, grid, opts), records, opts.device.type, runs)
