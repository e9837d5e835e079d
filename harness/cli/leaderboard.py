"""``harness leaderboard``: the reference table's sets (:mod:`harness.tune.leaderboard`), then the table."""
from __future__ import annotations

import argparse

from harness.cli import options

NAME = "leaderboard"
HELP = ("the reference table of cross-modal losses: every row of each task's leaderboard block tuned with one budget, "
        "trained with 5 seeds; ranks and the Bayesian comparison across sets (docs/reference-table.md)")
EXAMPLE = "python -m harness leaderboard tasks/own_features_labels.yaml --data-root FEATURES --out runs/ref"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.grid(parser)
    options.plugins(parser)
    parser.add_argument("tasks", nargs="*", metavar="TASK",
                        help="tasks whose sets to make (none: only compute the table of the sets under --out)")
    parser.add_argument("--metric", default=None, help="a metric other than the task's primary one (a set of its "
                        "own, for the claims ledger; not a column of the table)")
    parser.add_argument("--rows", default=None, help="comma-separated rows of the table to make (default: all the "
                        "task declares), e.g. max_violation,sum,infonce,siglip,swamp")
    parser.add_argument("--name", default=None, help="the set's folder under --out (default: the task's name, with "
                        "the metric when it is not the primary one)")
    parser.add_argument("--no-bayes", action="store_true", help="leave out the Bayesian comparison (minutes of MCMC)")
    options.tune(parser, seeds="0-4")


def handle(args: argparse.Namespace) -> int:
    from harness.tune import leaderboard

    return leaderboard.cmd(args)
