"""``harness status``: which runs of a grid are finished, running, interrupted or not started
(:mod:`harness.report.status`)."""
from __future__ import annotations

import argparse

from harness.cli import options

NAME = "status"
HELP = "which runs of a grid are finished, running, interrupted or not started"
EXAMPLE = "python -m harness status results tasks/synthetic.yaml --methods contrastive,swamp --seeds 0-4"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.plugins(parser)
    parser.add_argument("out", help="results folder, e.g. results")
    parser.add_argument("task", nargs="?", default=None,
                        help="task YAML: list its planned runs, those not started included (default: the runs found)")
    options.selection(parser, of_status=True)
    parser.add_argument("--format", default="simple", help="table format (tabulate name, e.g. github)")


def handle(args: argparse.Namespace) -> int:
    from harness.report import status

    status.status(args.out, args.task, methods=args.methods.split(",") if args.methods else (), seeds=args.seeds,
                  overrides=args.overrides, sweep=args.sweep, epochs=args.epochs, init=args.init, fmt=args.format)
    return 0
