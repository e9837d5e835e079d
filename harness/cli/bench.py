"""``harness bench``: the asv regression gate (:mod:`harness.bench`)."""
from __future__ import annotations

import argparse

NAME = "bench"
HELP = "regression gate: asv suite on REV and on the working tree; exit 1 if slower"
EXAMPLE = "python -m harness bench --against HEAD~1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--against", required=True, metavar="REV", help="commit to compare with, e.g. HEAD~1 or main")
    parser.add_argument("--factor", type=float, default=None,  # the gate's own default: harness.bench stays unloaded
                        help="after/before median ratio that fails the gate when the samples agree (default: the "
                             "gate's DEFAULT_FACTOR in harness/bench.py; docs/benchmarks.md)")
    parser.add_argument("--bench", default=None, metavar="REGEX", help="only benchmarks matching REGEX (asv's -b)")


def handle(args: argparse.Namespace) -> int:
    from harness import bench

    return bench.gate(args.against, bench.DEFAULT_FACTOR if args.factor is None else args.factor, args.bench)
