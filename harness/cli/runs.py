"""What ``run`` and ``rerun`` share: how they ask for their runs (:class:`harness.run.grid.Grid`), the end of the
command (tables, then the failure or the refusals), and the ``status`` command to type once SLURM jobs are
submitted."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from harness.cli.options import fixed_threads

if TYPE_CHECKING:
    from harness.run.grid import Grid, Outcome


def grid_of(args: argparse.Namespace, init: Path | None = None, later: tuple[str, str] = ("", "")) -> Grid:
    """How ``run`` or ``rerun`` asks its runs to be run (:class:`harness.run.grid.Grid`)."""
    from harness.run import grid
    from harness.store import provenance

    return grid.Grid(out=Path(args.out), device=args.device, launcher=args.launcher, jobs=args.jobs,
                     threads=fixed_threads(args), auto_threads=args.threads == "auto",
                     slurm=getattr(args, "slurm", None), wait=getattr(args, "wait", False),
                     progress=not args.no_progress, force=args.force, on_nan=getattr(args, "on_nan", "stop"),
                     epochs=getattr(args, "epochs", None), init=init, include=tuple(args.include),
                     command=tuple(provenance.command()), data_root=args.data_root, later=later)


def later(args: argparse.Namespace, task: str | Path, name: str) -> tuple[str, str]:
    """What to type once SLURM jobs are submitted: ``status`` of exactly this command's runs (the run-selecting flags
    it shares with ``status``, rebuilt by status's own parser; --data-root as the --set it stands for), and the
    tables of the task's folder ``name``."""
    import shlex

    root = [f"dataset.root={args.data_root}"] if args.data_root else []
    words = args.subcommands["status"].argv_of(args, task=str(task), overrides=[*args.overrides, *root],
                                               seeds=None if args.seeds == "0" else args.seeds)
    return shlex.join(["python", "-m", "harness", "status", *words]), \
        f"python -m harness table {Path(args.out) / name} --write"


def finish(outcome: Outcome, args: argparse.Namespace, tasks: set[str],
           check: Callable[[list[dict[str, Any]]], int] | None = None) -> int:
    """The end of ``run`` and ``rerun``: the tables of each task's folder (also when some runs failed), then the
    failure, then the refusals, each as the command's one error line."""
    from harness.report import folders

    if outcome.main and not args.no_tables and outcome.results:
        for task in sorted(tasks):
            done = [r for r in outcome.results if r["task"] == task]
            if done:
                folders.show(Path(args.out) / task, done, args.reference, getattr(args, "test_stat", None))
    if outcome.failed is not None:
        raise outcome.failed
    differ = check(outcome.results) if check is not None and outcome.main else 0
    if outcome.refused is not None:
        raise outcome.refused
    return 1 if differ else 0
