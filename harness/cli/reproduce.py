"""``harness reproduce``: the evidence of the ledger's claims re-made and judged again (:mod:`harness.remake`)."""
from __future__ import annotations

import argparse

from harness.cli import options

NAME = "reproduce"
HELP = ("re-make the evidence of the ledger's claims at this checkout and judge it again: committed against re-made "
        "number, interval and verdict")
EXAMPLE = "python -m harness reproduce synthetic-pair synthetic-class --launcher local --jobs 2"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("claims", nargs="*", metavar="CLAIM", help="claim ids of the ledger (default: every claim)")
    parser.add_argument("--ledger", default=None, help="claims ledger (default: claims/swamp-aistats2023.yaml)")
    parser.add_argument("--reference", default=None, metavar="ROOT",
                        help="re-make the reference table's tuned runs under ROOT instead (e.g. results/reference) "
                             "and compute the table again from them")
    parser.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                        help="re-make only the evidence whose runs took this long when made (in ledger order); "
                             "name what is left out")
    parser.add_argument("--write", action="store_true",
                        help="replace the committed result files and tables with the re-made ones")
    parser.add_argument("--out", default=None, help="scratch folder (default: a new temporary folder)")
    options.device(parser)
    options.launcher(parser, "sequential (default) or local: worker processes, --jobs at a time", slurm=False)
    parser.add_argument("--jobs", type=int, default=None, metavar="N", help="worker processes of --launcher local")
    parser.add_argument("--data-root", default=None, help="dataset folder (default: each file's recorded root)")
    parser.add_argument("--allow-dirty", action="store_true", help=argparse.SUPPRESS)  # tests on copies of a tree
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def handle(args: argparse.Namespace) -> int:
    if args.reference:  # the reference table's tuned runs
        from pathlib import Path

        from harness.remake import reference

        return reference.reproduce_reference(reference.ReferenceOptions(
            Path(args.reference), Path(args.out) if args.out else None, args.write, args.budget, args.device,
            args.launcher, args.jobs, args.data_root, args.allow_dirty, not args.no_progress))
    from harness.remake import evidence  # the ledger's evidence

    moved = evidence.reproduce_evidence(
        args.claims, ledger=args.ledger, budget=args.budget, write=args.write, out=args.out, device=args.device,
        launcher=args.launcher, jobs=args.jobs, data_root=args.data_root, allow_dirty=args.allow_dirty,
        progress=not args.no_progress)
    return 1 if moved else 0
