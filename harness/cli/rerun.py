"""``harness rerun``: every given result file's run, rebuilt from the settings the file records."""
from __future__ import annotations

import argparse

from harness.cli import options
from harness.cli.runs import finish, grid_of

NAME = "rerun"
HELP = "run again what result files record, from their own settings; --check: compare the metrics"
EXAMPLE = "python -m harness rerun results/synthetic/contrastive/seed0.json --check"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.plugins(parser)
    options.grid(parser)
    parser.add_argument("results", nargs="+", metavar="RESULT",
                        help="result files (seed<k>.json), or folders searched for them, e.g. results/wikipedia")
    parser.add_argument("--check", action="store_true",
                        help="compare each run's test metrics with the recorded ones; exit 1 when any differ")
    options.launcher(parser, "sequential (default): one run after another in this process; local: worker "
                             "processes, --jobs at a time, as for run", slurm=False)


def handle(args: argparse.Namespace) -> int:
    from harness.run import commands

    reran = commands.rerun_files(args.results, grid_of(args))
    return finish(reran.outcome, args, {r.spec.name for r in reran.runs}, (lambda _: reran.check()) if args.check
                  else None)
