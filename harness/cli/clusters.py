"""``harness clusters``: the prototypes a trained SwAMP model learned (:mod:`harness.analysis.clusters`)."""
from __future__ import annotations

import argparse

from harness.cli import options

NAME = "clusters"
HELP = "report on the prototypes a trained SwAMP model learned"
EXAMPLE = "python -m harness clusters results/synthetic/swamp/seed0.json --out runs/clusters"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.plugins(parser)
    parser.add_argument("target", help="result file (seed<k>.json) or its checkpoint (seed<k>.pt)")
    parser.add_argument("--out", default=None,
                        help="report folder (default: beside the result, <run>/clusters-seed<k>)")
    parser.add_argument("--split", default="test", help="split whose items are assigned (default: test)")
    parser.add_argument("--top-words", type=int, default=5, help="frequent words listed per text cluster")
    parser.add_argument("--members", type=int, default=5, help="member ids listed per cluster and modality")
    options.device(parser)


def handle(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.analysis import clusters

    clusters.report_clusters(clusters.ClusterOptions(
        Path(args.target), Path(args.out) if args.out else None, args.split, args.top_words, args.members,
        args.device, getattr(args, "data_root", None)))
    return 0
