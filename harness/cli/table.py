"""``harness table``: the tables of saved result files (:mod:`harness.report.folders`)."""
from __future__ import annotations

import argparse

from harness.cli import options

NAME = "table"
HELP = "print the tables of saved result files; --write: write them into the folder"
EXAMPLE = "python -m harness table results/synthetic"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.plugins(parser)
    parser.add_argument("folder", help="results folder, e.g. results/synthetic (or results/: every set under it)")
    parser.add_argument("--format", default="simple", help="console format (tabulate name; md and tex also accepted)")
    parser.add_argument("--reference", default=None, metavar="RUN",
                        help="run the others are tested against (default: the one the folder's tables record)")
    options.test_stat(parser)
    parser.add_argument("--split", default=None, choices=("test", "val"),
                        help="test (default) or val: the validation metrics of each run's selected epoch")
    parser.add_argument("--write", action="store_true",
                        help="write accuracy/timing .md and .tex into each set's folder (default: print only)")


def handle(args: argparse.Namespace) -> int:
    from harness.report import folders

    folders.tables(args.folder, fmt=args.format, reference=args.reference, test_stat=args.test_stat,
                   split=args.split, write=args.write)
    return 0
