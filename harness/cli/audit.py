"""``python -m harness.cli.audit``: would the pruned trials have won? (:mod:`harness.tune.audit`)

    python -m harness.cli.audit tasks/own_features_labels.yaml --data-root OWN/quickdraw_halves \\
        --out results/tuning/quickdraw_halves --methods contrastive,swamp --json results/tuning/prune_audit.json

A script of its own, not a subcommand of ``python -m harness``: it re-trains the pruned trials of committed studies
for the measurement docs/reference-table.md ("Pruning") quotes.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, audit the studies, write the JSON and print the table."""
    from harness.tune import audit

    parser = argparse.ArgumentParser(description="Every pruned trial of each method's committed study, trained to its "
                                                 "last epoch, beside the best kept trial.")
    parser.add_argument("task")
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--out", required=True, help="the folder the studies' harness tune command wrote")
    parser.add_argument("--methods", required=True)
    parser.add_argument("--json", required=True, type=Path)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--scratch", default="/tmp/prune-audit")
    args = parser.parse_args(argv)
    found = audit.audit(args.task, args.out, args.methods, args.data_root, args.threads, args.scratch)
    audit.write(found, args.json, vars(args) | {"json": str(args.json)})
    print(audit.table(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
