"""A grid's runs dispatched to its launcher: the run options of this process (:func:`options`), every run by
``sequential``, ``local`` (worker processes, :mod:`harness.run.launcher`) or ``slurm`` (one job array,
:mod:`harness.run.slurm`) with the same checks first (:func:`run`), and one :class:`harness.run.jobs.Job` run in
this process, as a worker does (:func:`run_job`)."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

import torch

from harness.config import plan
from harness.config.launchers import LOCAL_JOBS
from harness.config.plan import Run
from harness.errors import ConfigError
from harness.run import checkpoint, contention, distributed, runner
from harness.run.build import resolve_device
from harness.run.jobs import SKIPPED, Grid, Job, Outcome, check, job
from harness.run.sequential import (
    ThreadWatch,
    checked_data,
    data_key,
    failed,
    finished,
    refused_error,
    run_here,
    skip_line,
)
from harness.store.provenance import set_command
from harness.store.schema import read_result


def options(grid: Grid, watch: contention.Snapshot | None = None) -> runner.RunOptions:
    """The run options of a grid's runs in this process: its device (the process's own GPU under torchrun),
    the process group joined under torchrun, and the machine's watch when this process may lower its threads."""
    device = resolve_device(grid.device)
    info = distributed.init_from_env(device.type)  # torchrun: join the process group; otherwise a single process
    if info.world_size > 1 and device.type == "cuda":
        device = torch.device("cuda", info.local_rank)
    check(grid, info.world_size)
    if grid.threads is not None:
        torch.set_num_threads(grid.threads)
    mine = ThreadWatch(watch, grid.auto_threads) if (watch is not None and grid.threads is None
                                                    and info.world_size == 1 and device.type == "cpu"
                                                    and grid.launcher == "sequential") else None
    return runner.RunOptions(device=device, out=grid.out, progress=grid.progress, force=grid.force, init=grid.init,
                             dist=info, on_nan=grid.on_nan, watch=mine)


def run(runs: list[Run], grid: Grid, opts: runner.RunOptions, inits: Sequence[Path | None] | None = None,
        last: bool = True) -> Outcome:
    """Every run of ``runs`` by the grid's launcher (skipped where finished); ``inits``: the checkpoint each run
    starts from when they differ (runs rebuilt from result files), else ``opts.init`` for all. ``last``: leave
    the process group (under torchrun) afterwards; False when the caller runs another part with the same
    options."""
    try:
        if grid.launcher == "sequential":
            results: list[dict[str, Any]] = []
            starts = list(inits) if inits is not None else [opts.init] * len(runs)
            for init in dict.fromkeys(starts):  # the runs of one starting point together, in the order given
                group = [r for r, i in zip(runs, starts, strict=True) if i == init]
                results += run_here(group, dataclasses.replace(opts, init=init))
            outcome = Outcome(results)
        else:
            outcome = in_workers(runs, grid, opts)
    finally:
        if last:
            distributed.shutdown()
    outcome.refused = refused_error(opts) if opts.dist.is_main else None
    outcome.main = opts.dist.is_main
    outcome.refused_names = frozenset(opts.refused)
    return outcome


def run_job(job: Job) -> dict[str, Any]:
    """Run one :class:`Job` in this process, as ``run`` or ``rerun`` of that one run would, without tables; the
    reply a worker sends back: whether it trained the run (False: found it finished) and its result file."""
    from harness.config import registry

    registry.set_include(list(job.include))
    set_command(list(job.command))
    init = Path(job.init) if job.init else None
    if job.source is not None:
        record = read_result(Path(job.source))
        runs = [plan.from_record(record, job.source, list(job.overrides))]
        init = Path(record["init"]) if record.get("init") else None
    else:
        if job.task is None or job.method is None:
            raise ConfigError("a job names a task and a method, or the result file of a run (source)")
        runs = plan.plan(job.task, list(job.overrides), [], [job.method], [job.seed], job.epochs,
                         checkpoint.init_label(init) if init else None)
    grid = Grid(out=Path(job.out), device=job.device, threads=job.threads, progress=False, force=job.force,
                on_nan=job.on_nan, epochs=job.epochs, init=init)
    outcome = run(runs, grid, dataclasses.replace(options(grid), tuning=job.tuning))
    if outcome.refused is not None:
        raise outcome.refused
    if outcome.failed is not None:
        raise outcome.failed
    return {"trained": any(not r.get(SKIPPED) for r in outcome.results),
            "results": [r["_path"] for r in outcome.results]}


# --- local and slurm: other processes -------------------------------------------------------------------------

def in_workers(runs: list[Run], grid: Grid, opts: runner.RunOptions) -> Outcome:
    """The checks of a sequential run, here, before any worker or job starts; then the unfinished runs in worker
    processes (local) or as one SLURM job array; the results of every run that finished."""
    from harness.run import launcher

    done_before = finished(runs, opts)
    for run, done in zip(runs, done_before, strict=True):
        if done is not None:
            print(skip_line(f"{run.run_name} seed{run.seed}", run, done))
    pending = [run for run, done in zip(runs, done_before, strict=True) if done is None]
    for key in dict.fromkeys(data_key(r) for r in pending):
        checked_data([r for r in pending if data_key(r) == key], opts)
    pending = [r for r in pending if r.run_name not in opts.refused]
    if grid.launcher == "local":
        jobs = grid.jobs or LOCAL_JOBS
        threads = grid.threads or launcher.default_threads(jobs)
        if pending:
            print(f"{len(pending)} run(s) in {jobs} worker process(es), {threads} torch thread(s) each")
        outcomes = launcher.run_local(pending, [job(r, grid, threads, opts.tuning) for r in pending], jobs, threads)
        failures = [(o.run, f"(exit {o.returncode}): {o.last_line.removeprefix('error: ')}")
                    for o in outcomes if o.returncode != 0]
        error = failed(failures, len(pending), "run(s)") if failures else None
    else:
        failures, submitted = _slurm(pending, runs, grid, opts.tuning)
        if submitted:
            return Outcome([], submitted=True)
        error = failed(failures, len(pending), "job(s)") if failures else None
    reading = dataclasses.replace(opts, force=False)  # the workers' result files, --force or not
    results = [d if d is not None else runner.finished_result(r, reading)
               for r, d in zip(runs, done_before, strict=True)]
    return Outcome([r for r in results if r is not None], failed=error)


def slurm_options(runs: list[Run], text: str | None) -> dict[str, Any]:
    """The task file's launcher.slurm section, overridden option by option by --slurm ``text``."""
    from harness.config import launch

    section = launch.check_section(runs[0].spec.raw.get("launcher"), f"{runs[0].spec.path}: launcher")
    return {**section.get("slurm", {}), **(launch.parse_slurm(text) if text else {})}


def _slurm(pending: list[Run], runs: list[Run], grid: Grid,
           tuning: dict[str, Any] | None = None) -> tuple[list[tuple[Run, str]], bool]:
    """Submit the pending runs as one job array (``tuning``: the study the runs' options record); without --wait,
    print how to follow them and report them submitted; with it, wait and return the failures."""
    from harness.run import slurm

    options = slurm_options(runs, grid.slurm)
    slurm.check_cluster(options)
    if options.get("cluster", "slurm") != "slurm" and not grid.wait:
        raise ConfigError(f"--slurm cluster={options['cluster']} runs the jobs from this command, which must stay "
                          "to the end; add --wait")
    if not pending:
        return [], False
    task = runs[0].spec.name
    folder = slurm.jobs_folder(grid.out, task)
    threads = grid.threads or options.get("cpus_per_task")
    jobs = slurm.submit(pending, [job(r, grid, threads, tuning) for r in pending], folder, options, task)
    ids = [str(j.job_id) for j in jobs]
    print(f"{len(jobs)} job(s) submitted ({options.get('cluster', 'slurm')}): {', '.join(ids)}; logs under {folder}/"
          "<job id>/")
    if not grid.wait:
        print(f"follow them with: {grid.later[0]}\nwhen they have ended, the tables: {grid.later[1]}")
        return [], True
    ended = slurm.wait(pending, jobs, progress=grid.progress)
    return [(e.run, f"(job {e.job_id}): {e.error.removeprefix('error: ')}; its log: {folder}/{e.job_id}/")
            for e in ended if e.error], False
