"""``harness run``: plan a task's runs, check them, run them with the launcher asked for, show the tables."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli import options
from harness.cli.lines import plugin_warnings
from harness.cli.runs import finish, grid_of, later

NAME = "run"
HELP = "train and test methods of a task; write results and tables"
EXAMPLE = "python -m harness run tasks/synthetic.yaml --methods contrastive,swamp --epochs 2"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.plugins(parser)
    options.grid(parser)
    parser.add_argument("task", help="task YAML, e.g. tasks/synthetic.yaml")
    options.selection(parser)
    options.test_stat(parser)
    options.launcher(parser, "sequential (default): the runs one after another in this process; local: each run in a "
                             "worker process of its own, --jobs at a time; slurm: one SLURM job per run, submitted as "
                             "a job array through submitit (docs/slurm.md)")
    parser.add_argument("--slurm", default=None, metavar="KEY=VALUE,...",
                        help="options of --launcher slurm, e.g. partition=gpu,gpus_per_node=1,timeout_min=600 (they "
                             "override the task file's launcher.slurm section; docs/slurm.md lists them)")
    parser.add_argument("--wait", action="store_true",
                        help="with --launcher slurm: wait for the jobs, with a progress bar, and print the tables")
    parser.add_argument("--on-nan", choices=("stop", "skip"), default="stop",
                        help="a step with a NaN or infinite loss: stop the run there (default) or skip its update")


def handle(args: argparse.Namespace) -> int:
    from harness.config import params as P
    from harness.report import accuracy
    from harness.run import commands, contention

    watch = contention.snapshot()  # from here to the first training step: how busy is the machine?
    selection = commands.Selection(task=args.task, methods=tuple(m for m in args.methods.split(",") if m),
                                   seeds=args.seeds, overrides=tuple(args.overrides), sweep=tuple(args.sweep),
                                   epochs=args.epochs, init=args.init, data_root=args.data_root)
    runs = commands.plan_runs(selection)
    for note in commands.undeclared(args.task, selection.methods):
        print(note, file=sys.stderr)
    plugin_warnings()  # before the runs start rather than after their tables
    args.reference = commands.reference_of(args.reference, runs)
    if args.test_stat is not None:
        accuracy.tested_column(P.as_dict(runs[0].spec.metrics), args.test_stat)
    setup = grid_of(args, init=Path(args.init) if args.init else None,
                    later=later(args, runs[0].spec.path, runs[0].spec.name))
    outcome = commands.run_planned(runs, setup, watch)
    if args.reference in outcome.refused_names:
        args.reference = None  # refused: it has no result to compare with
    return finish(outcome, args, {runs[0].spec.name})
