"""``harness ensemble``: two finished runs' score matrices averaged (:mod:`harness.analysis.ensemble`)."""
from __future__ import annotations

import argparse

from harness.cli import options

NAME = "ensemble"
HELP = "evaluate the average of two finished runs' score matrices"
EXAMPLE = ("python -m harness ensemble results/synthetic/contrastive/seed0.json results/synthetic/swamp/seed0.json "
           "--out runs")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.plugins(parser)
    parser.add_argument("results", nargs=2, metavar="RESULT",
                        help="result files (seed<k>.json) or checkpoints of the runs")
    parser.add_argument("--out", default=None,
                        help="results folder (default: the one holding the first run's task)")
    options.device(parser)
    parser.add_argument("--data-root", default=None, help="dataset folder (sets dataset.root)")


def handle(args: argparse.Namespace) -> int:
    from harness.analysis import ensemble

    result = ensemble.evaluate_ensemble(args.results, device=args.device, out=args.out, data_root=args.data_root)
    print(ensemble.summary(result))
    return 0
