"""``harness claims``: the paper's claims judged from the committed result files (:mod:`harness.report.claims`)."""
from __future__ import annotations

import argparse

NAME = "claims"
HELP = ("the paper's claims, each judged from the committed result files; --check: exit 1 when a verdict differs "
        "from the one the ledger records")
EXAMPLE = "python -m harness claims --check"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ledger", nargs="?", default=None,
                        help="claims ledger (YAML; default: claims/swamp-aistats2023.yaml)")
    parser.add_argument("--root", default=None, metavar="DIR",
                        help="folder the ledger's results paths are relative to (default: the one above claims/)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a verdict differs from the one the ledger records")
    parser.add_argument("--format", default="simple", help="table format (tabulate name; md for Markdown)")


def handle(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.report import claims

    ledger = Path(args.ledger) if args.ledger else None
    return claims.main(claims.Options(ledger, Path(args.root) if args.root else None, bool(args.check),
                                      str(args.format)))
