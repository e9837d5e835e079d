"""``harness plot``: a metric against a swept setting (:mod:`harness.report.plot`)."""
from __future__ import annotations

import argparse

NAME = "plot"
HELP = "metric against a swept setting, one line per method (PNG and PDF)"
EXAMPLE = "python -m harness plot results/synthetic_ablations --x swamp.K --reference contrastive --out runs/plots/K"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", help="results folder of one task, e.g. results/ablations/synthetic")
    parser.add_argument("--x", required=True, metavar="NAME.KEY", help="swept setting, e.g. swamp.K or train.lr")
    parser.add_argument("--metric", default=None, help="metric to plot (default: the task's selection metric)")
    parser.add_argument("--reference", default=None, metavar="RUN", help="run drawn as a horizontal mean ± std band")
    parser.add_argument("--out", default=None,
                        help="output path without suffix (default: FOLDER/plots/<x>_<metric>)")
    parser.add_argument("--logx", action="store_true", help="logarithmic x axis")
    parser.add_argument("--ignore", action="append", default=[], metavar="NAME.KEY",
                        help="a setting the sweep's runs share but the task file does not, e.g. train.epochs "
                             "(repeatable)")


def handle(args: argparse.Namespace) -> int:
    from harness.report import plot

    plot.plot_sweep(args.folder, args.x, metric=args.metric, reference=args.reference, out=args.out, logx=args.logx,
                    ignore=args.ignore)
    return 0
