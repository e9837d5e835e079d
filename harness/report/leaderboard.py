"""The names ``harness.tune.leaderboard`` reads while it moves to :mod:`harness.report.reference_table`, where the
reference table now lives (sets, rows, comparisons, statistics, page): the first edition's fixed row keys with their
labels, the manifest's name and its reader and writer, and the table's entry point."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.report import rows as rowmodel
from harness.report.reference_table import MANIFEST, read_manifest, write_manifest
from harness.report.reference_table import record as _record

# a task's first-edition leaderboard block maps each of these keys to one of its methods
ROLES: dict[str, str] = {key: rowmodel.label_of(key, role) if key != "swamp_infonce" else "SwAMP + InfoNCE"
                         for key, role in rowmodel.LEGACY_KEYS.items()}

__all__ = ["MANIFEST", "ROLES", "cmd", "read_manifest", "write_manifest"]


def cmd(args: Any) -> int:
    """``harness leaderboard --out ROOT`` without tasks: the table from the sets already made (``args`` carries
    ``out`` and ``no_bayes``); prints the page."""
    print(_record.table(_record.Options(Path(args.out), bayes=not args.no_bayes)))
    return 0
