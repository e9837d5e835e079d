"""``harness leaderboard``: the reference table's sets (:mod:`harness.tune.reference_sets`), then the table."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from harness.cli import options
from harness.cli.tune import fixed_threads, quiet_optuna, tune_options

NAME = "leaderboard"
HELP = ("the reference table of cross-modal losses: every row of each task's leaderboard block tuned with one budget, "
        "trained with 5 seeds; ranks and the Bayesian comparison across sets (docs/reference-table.md)")
if TYPE_CHECKING:
    from harness.tune.options import SetOptions

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
    parser.add_argument("--trials-cap", type=int, default=None, metavar="N",
                        help="while a row's best validation value still rises over its last quarter of trials, every "
                             "row of the set gets more trials, equally, up to N (default 40)")
    parser.add_argument("--folds", type=int, default=None, metavar="K",
                        help="where a validation split has fewer than 100 items, choose by the mean over K >= 3 folds "
                             "of the training split (default: the block's folds, else 3)")
    parser.add_argument("--sets-only", action="store_true",
                        help="make the sets, not the table (compute it later with --out alone)")
    options.tune(parser, seeds="0-4")
    fixed_threads(parser)


def set_options(args: argparse.Namespace) -> SetOptions:
    """The command line's arguments as :class:`harness.tune.options.SetOptions`."""
    from harness.tune.options import DEFAULT_CAP, SetOptions

    cap = DEFAULT_CAP if args.trials_cap is None else args.trials_cap
    return SetOptions(tasks=tuple(args.tasks), tune=tune_options(args, task="", methods=()), metric=args.metric,
                      rows=args.rows, name=args.name, cap=cap, folds=args.folds)


def handle(args: argparse.Namespace) -> int:
    if args.tasks:
        quiet_optuna()
        from harness.tune import reference_sets

        reference_sets.make_sets(set_options(args))
        if args.sets_only:
            return 0
    from pathlib import Path

    from harness.report.reference_table import Options, table

    print(table(Options(Path(args.out), bayes=not args.no_bayes)))
    return 0
