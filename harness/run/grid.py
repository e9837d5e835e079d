"""A grid of planned runs, run: the checks every launcher shares, then the runs one after another in this
process (``sequential``), in worker processes of this machine (``local``, :mod:`harness.run.launcher`) or as
SLURM jobs (``slurm``, :mod:`harness.run.slurm`); one report of what was refused and what failed.

The command line plans the runs (:mod:`harness.config.plan`) and describes how to run them (:class:`Grid`);
this package runs them and hands back an :class:`Outcome` whose tables the command line prints. A worker
process or a SLURM job receives one run as a :class:`Job`, a JSON object, and runs it with :func:`run_job`:
no launcher writes or parses command lines.

This module is the grid's one name for its callers; the work lives in rooms of one job each:
:mod:`harness.run.jobs` (``Grid``, ``Job``, ``Outcome``, the launcher options' checks),
:mod:`harness.run.dispatch` (the run options of a process, the runs by their launcher, one job in this process),
:mod:`harness.run.sequential` (the shared preamble and the runs in this process), :mod:`harness.run.rerun` (runs
rebuilt from result files) and :mod:`harness.run.hardware` (what a result file says of its machine).
"""
from __future__ import annotations

from harness.run.dispatch import in_workers, options, run, run_job, slurm_options
from harness.run.hardware import hardware_differences, hardware_of, this_machine
from harness.run.jobs import LAUNCHERS, SKIPPED, Grid, Job, Outcome, check, job
from harness.run.rerun import (
    check_reruns,
    recorded_threads,
    rerun,
    rerun_warnings,
    reruns,
    result_records,
    thread_groups,
)
from harness.run.sequential import (
    ThreadWatch,
    checked_data,
    code_changed,
    data_key,
    load_data,
    refused_error,
    run_here,
    skip_line,
)

__all__ = ["LAUNCHERS", "SKIPPED", "Grid", "Job", "Outcome", "ThreadWatch", "check", "check_reruns", "checked_data",
           "code_changed", "data_key", "hardware_differences", "hardware_of", "in_workers", "job", "load_data",
           "options", "recorded_threads", "refused_error", "rerun", "rerun_warnings", "reruns", "result_records",
           "run", "run_here", "run_job", "skip_line", "slurm_options", "this_machine", "thread_groups"]
