"""``harness carry``: a change of executed code shown by the canaries to move no number, recorded so that the
evidence that ran the old version stays valid (:mod:`harness.remake.carry`; docs/claims.md, 'Evidence and code')."""
from __future__ import annotations

import argparse

NAME = "carry"
HELP = ("prove that a change of code committed runs executed moves no number (the canaries covering it and an "
        "end-to-end run, old code against new, bit for bit) and record it in claims/carried.yaml")
EXAMPLE = "python -m harness carry --files harness/run/runner.py --dry-run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--files", nargs="+", default=None, metavar="FILE",
                        help="carry only these files (paths relative to the checkout; default: every file a "
                             "committed result executed that differs from --base other than cosmetically)")
    parser.add_argument("--base", default="HEAD", metavar="REV",
                        help="the commit whose versions the changes start from (default: HEAD)")
    parser.add_argument("--root", default=None, metavar="DIR", help="the checkout (default: the one holding harness)")
    parser.add_argument("--dry-run", action="store_true",
                        help="run the canaries and say what would be carried, but write nothing")


def handle(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.remake import carry
    from harness.store import executed

    root = Path(args.root).resolve() if args.root else executed.ROOT
    return carry.cmd(root, args.files, args.base, write=not args.dry_run)
