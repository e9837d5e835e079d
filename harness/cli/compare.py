"""``harness compare``: accuracy regressions between two result folders (:mod:`harness.report.compare`)."""
from __future__ import annotations

import argparse

NAME = "compare"
HELP = "accuracy regressions: two result folders of the same task(s), per metric"
EXAMPLE = "python -m harness compare results/synthetic runs/synthetic"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", help="result folder before the change, e.g. results/synthetic")
    parser.add_argument("new", help="result folder after it, e.g. runs/synthetic")
    parser.add_argument("--metric", action="append", default=[], metavar="METRIC",
                        help="compare only this metric, e.g. a2b/R@1 (repeatable; default: every metric of both)")
    parser.add_argument("--alpha", type=float, default=None,  # None: stats.ALPHA, read when the command runs
                        help="significance level (default: the reports' one, harness.report.stats.ALPHA)")
    parser.add_argument("--min-diff", type=float, default=0.5,
                        help="smallest difference, in the metric's units, that counts as a change (default: 0.5)")
    parser.add_argument("--fail-on-change", action="store_true", help="exit 1 when a change is flagged")
    parser.add_argument("--only-flagged", action="store_true", help="list only the flagged metrics")
    parser.add_argument("--format", default="simple", help="table format (tabulate name, e.g. github)")


def handle(args: argparse.Namespace) -> int:
    from harness.report import compare

    changes = compare.compare_folders(args.old, args.new, metrics=args.metric, alpha=args.alpha,
                                      min_diff=args.min_diff, fmt=args.format, only_flagged=args.only_flagged)
    return 1 if args.fail_on_change and any(c.flagged for c in changes) else 0
