"""``harness readme``: the README's generated sections, the claims ledger and the reference table
(:mod:`harness.report.readme`)."""
from __future__ import annotations

import argparse

NAME = "readme"
HELP = ("rewrite the README's generated sections (the claims ledger, the reference table in brief) from the "
        "committed results; --check: exit 1 when one is stale")
EXAMPLE = "python -m harness readme --check"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("readme", nargs="?", default="README.md",
                        help="the file holding the marked sections (default: README.md; result paths are relative "
                             "to its folder)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a section is stale")


def handle(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.report import readme

    return readme.main(readme.Options(Path(args.readme), bool(args.check)))
