"""``harness report``: a results site or Markdown pages (:mod:`harness.report.site`)."""
from __future__ import annotations

import argparse

NAME = "report"
HELP = "a results site (HTML) or Markdown pages generated from result files"
EXAMPLE = "python -m harness report results --out runs/site --no-figures"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folders", nargs="+", metavar="RESULTS", help="folders holding result files, e.g. results/")
    parser.add_argument("--out", required=True, help="folder to write the site (or the Markdown pages) into")
    parser.add_argument("--format", default="html", choices=("html", "md"),
                        help="html (default): a self-contained site; md: pages for docs/ that link the result files")
    parser.add_argument("--no-figures", action="store_true", help="tables and provenance only (faster)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def handle(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.report import site

    site.write_site(site.SiteOptions(tuple(Path(f) for f in args.folders), Path(args.out), args.format,
                                     figures=not args.no_figures, progress=not args.no_progress))
    return 0
