"""The result sets a site shows: one page per folder of runs of one task made on one machine
(:func:`harness.report.model.sets`), with its page name, the options its committed tables were written with (their
record, ``tables.json``: :func:`harness.report.files.recorded_for`), and the data settings that set a run apart from
its task file."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.report import files, model, plot
from harness.store.schema import load_results


@dataclass
class Figure:
    """One figure file of a page: its path relative to the page's folder and its caption."""

    path: str
    caption: str


@dataclass
class ResultSet(model.Runs):
    """The runs of one task found in one folder, and what its page shows."""

    task: str
    folder: Path
    slug: str
    results: list[dict[str, Any]]
    reference: str | None = None
    test_stat: str | None = None
    figures: list[Figure] = field(default_factory=list)
    root: Path | None = None  # the folder given on the command line that the set was found under
    machine: str | None = None  # set when the folder holds runs of several machines: this set's (one page each)

    @property
    def name(self) -> str:
        """The folder as figures and headings name it: from the given folder's own name on
        ('results/scan_evaluation_cost/flickr30k_shapes'), with the machine when the folder holds several."""
        if self.root is None:
            base = self.folder.name
        else:
            rel = self.folder.resolve().relative_to(self.root.resolve()).as_posix()
            base = self.root.resolve().name if rel in ("", ".") else f"{self.root.resolve().name}/{rel}"
        return f"{base} ({self.machine})" if self.machine else base



def find_sets(folders: list[Path]) -> list[ResultSet]:
    """Every result set under ``folders`` (:func:`harness.report.model.sets`: one per folder, task and machine,
    sorted by task, then folder); ConfigError when there is none."""
    found: list[ResultSet] = []
    seen: set[Path] = set()
    for root in folders:
        if not root.is_dir():
            raise ConfigError(f"{root} is not a folder; give folders that hold result files (<run>/seed<k>.json)")
        results = [r for r in load_results(root) if Path(r["_path"]).resolve() not in seen]
        seen |= {Path(r["_path"]).resolve() for r in results}
        for one in model.sets(results, root):
            found.append(ResultSet(one.task, one.folder, "", one.results, root=root,
                                   machine=one.machine if one.several_machines else None))
    if not found:
        raise ConfigError(f"no result files (<run>/seed<k>.json) under {', '.join(map(str, folders))}; "
                          "write some with `python -m harness run TASK --out FOLDER`")
    found.sort(key=lambda s: (s.task, str(s.folder)))
    n_sets = len({(s.folder, s.task) for s in found})
    for s in found:
        s.slug = _slug(s.folder, s.root or s.folder, s.task, n_sets)
        if s.machine:  # runs timed on different hardware are never averaged into one row: a page each
            s.slug = f"{s.slug}-{re.sub(r'[^A-Za-z0-9_.]+', '-', s.machine).strip('-')}"
    slugs = [s.slug for s in found]
    for s in found:  # one folder may hold several tasks: keep their pages apart
        if slugs.count(s.slug) > 1:
            s.slug = f"{s.slug}-{s.task}"
    for s in found:
        s.reference, s.test_stat = committed_table_options(s)
    return found


def _slug(folder: Path, root: Path, task: str, n_sets: int) -> str:
    """The page name: the folder relative to the root it was found under ('explore-qmul_chairs'), the task
    name when the root is the set itself."""
    rel = folder.resolve().relative_to(root.resolve()).as_posix()
    name = task if rel in ("", ".") else rel
    return re.sub(r"[^A-Za-z0-9_.]+", "-", name).strip("-") or task


def committed_table_options(rs: ResultSet) -> tuple[str | None, str | None]:
    """The reference run and tested statistic that the set's committed test tables were rendered with, from the
    record written beside them (``tables.json``: :func:`harness.report.files.recorded_for`), while the reference
    still names a run; else none."""
    recorded = files.recorded_for(rs.folder, rs.results)
    if recorded is None or recorded.split != "test":
        return None, None
    return recorded.reference, recorded.test_stat


def data_settings(runs: list[dict[str, Any]]) -> str:
    """The dataset settings in which the runs differ from their task file ('dataset.images=[64, 20, 100]'), or ''
    when they ran on the task's own data."""
    keys = {}
    for r in runs:
        for key, value in plot.varied(r).items():
            if key.startswith("dataset.") and key != "dataset.root":
                keys[key] = value
    return ", ".join(f"{k}={v}" for k, v in sorted(keys.items()))


def relative(path: Path, start: Path) -> str:
    return Path(os.path.relpath(path.resolve(), start.resolve())).as_posix()
