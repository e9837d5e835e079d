"""``python -m harness reproduce --reference ROOT``: every tuned result file of the reference table's sets under ROOT
run again from its recorded settings, seeds and threads into a scratch copy of ROOT (each keeps the study that chose
its settings: the studies are not run again), the table computed from them, and each cell, each set's strongest
contrastive loss, SwAMP's difference from it and the mean ranks printed beside the committed ones. ``--write``
replaces the committed files and the table. Exit 1 when a set's strongest loss, SwAMP's reading against it (better,
level, worse) or a rank order moved.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError
from harness.report import reference_table as leaderboard
from harness.report.formats import format_table
from harness.store import executed as ex
from harness.store import siblings


@dataclass(frozen=True)
class ReferenceOptions:
    """What ``harness reproduce --reference ROOT`` asks for: the sets' folder, a scratch folder (None: a new temporary
    one), whether to write the re-made files back, a budget in seconds, and how the runs are run."""

    reference: Path
    out: Path | None = None
    write: bool = False
    budget: float | None = None
    device: str = "auto"
    launcher: str = "sequential"
    jobs: int | None = None
    data_root: str | None = None
    allow_dirty: bool = False
    progress: bool = True


def reproduce_reference(opts: ReferenceOptions) -> int:
    """See the module's docstring; 1 when a set's strongest loss, a reading or the rank order moved, else 0.

        reproduce_reference(ReferenceOptions(Path("results/reference"), launcher="local", jobs=2))
    """
    root = Path(opts.reference)
    dirty = ex.uncommitted_files(ex.ROOT)
    if dirty and not opts.allow_dirty:
        raise ConfigError(f"the checkout has uncommitted changes ({', '.join(dirty[:5])}): reproduce re-makes "
                          "evidence from a commit; commit or stash them first")
    boards = leaderboard.load_boards(root)
    if not boards:
        raise ConfigError(f"{root} holds no set of the reference table (a folder with {leaderboard.MANIFEST})")
    scratch = Path(opts.out) if opts.out else Path(tempfile.mkdtemp(prefix="swamp-bench-reference-"))
    started = time.perf_counter()
    remake(boards, opts, root, scratch, started)
    again = {b.name: b for b in leaderboard.load_boards(scratch)}
    rows, moved = compared(boards, again)
    print(format_table(["set", "method", "committed mean", "re-made mean", ""], rows, [], "simple"))
    old_ranks = leaderboard.ranks([b for b in boards if b.column]).get("mean_ranks", {})
    new_ranks = leaderboard.ranks([b for b in again.values() if b.column]).get("mean_ranks", {})
    order = [sorted(r, key=lambda k: r[k]) for r in (old_ranks, new_ranks)]
    moved += order[0] != order[1]
    cells = sum(len(again[b.name].cells) for b in boards if b.name in again)
    print(f"\n{cells} cell(s) re-made in {(time.perf_counter() - started) / 60:.1f} min; rank order "
          f"{'unchanged' if order[0] == order[1] else 'moved: ' + ' > '.join(order[1])}")
    if opts.write:
        write_back(boards, root, scratch)
    return 1 if moved else 0


def remake(boards: list[leaderboard.Board], opts: ReferenceOptions, root: Path, scratch: Path,
           started: float) -> None:
    """Every cell's tuned runs again into the set's folder under ``scratch`` (with the set's manifest), each with the
    study its result files record; a cell past ``--budget`` seconds since ``started`` is left out and named."""
    from harness.run import grid

    for b in boards:
        (scratch / b.name).mkdir(parents=True, exist_ok=True)
        shutil.copy2(b.folder / leaderboard.MANIFEST, scratch / b.name / leaderboard.MANIFEST)
        for cell in b.cells.values():
            files = sorted(Path(r["_path"]) for r in cell.results)
            if opts.budget is not None and time.perf_counter() - started > opts.budget:
                print(f"  left out: {b.name} {cell.method}@tuned: over --budget")
                continue
            base = grid.Grid(out=scratch / b.name, device=opts.device, launcher=opts.launcher, jobs=opts.jobs,
                             progress=opts.progress, force=True, data_root=opts.data_root,
                             command=("reproduce", "--reference", str(root)))
            run_opts = grid.options(base)
            run_opts.tuning = cell.results[0]["tuning"]  # the study that chose the settings, as committed
            outcome = grid.rerun(grid.result_records([str(f) for f in files]), base, run_opts)
            if outcome.failed is not None:
                raise outcome.failed


def compared(boards: list[leaderboard.Board], again: dict[str, leaderboard.Board]) -> tuple[list[list[str]], int]:
    """One row per cell, committed mean beside re-made mean, and one per set for SwAMP against its strongest
    contrastive loss (the difference and its reading: better, level or worse); the number of sets whose strongest
    loss (or, on a tie, the losses validation could not tell apart) or whose reading moved."""
    rows, moved = [], 0
    for b in boards:
        new = again.get(b.name)
        if new is None:
            continue
        for role, cell in b.cells.items():
            other = new.cells.get(role)
            rows.append([b.name, b.shown(role), f"{cell.summary.mean:.2f}",
                         "–" if other is None else f"{other.summary.mean:.2f}",
                         "–" if other is None else "same" if other.values == cell.values else "moved"])
        before, after = leaderboard.tied(b), leaderboard.tied(new)  # the strongest loss, or the losses tied
        was, now = leaderboard.against_strongest(b), leaderboard.against_strongest(new)
        if was is not None:
            shown = [f"{a.tested.diff:+.2f} ({a.reading})" if a is not None and a.tested.diff is not None else "–"
                     for a in (was, now)]
            same = now is not None and now.rival == was.rival and now.reading == was.reading
            rows.append([b.name, f"SwAMP − {b.shown(was.rival)}", *shown, "same" if same else "moved"])
        moved += before != after or (was is not None and (now is None or now.reading != was.reading))
    return rows, moved


def write_back(boards: list[leaderboard.Board], root: Path, scratch: Path) -> None:
    """Replace the committed tuned result files (with their checkpoints and ranks) and the table."""
    for b in boards:
        for cell in b.cells.values():
            for r in cell.results:
                path = Path(r["_path"])
                made = scratch / b.name / path.relative_to(b.folder)
                for suffix in siblings.SIBLINGS:
                    if made.with_suffix(suffix).exists():
                        shutil.copy2(made.with_suffix(suffix), path.with_suffix(suffix))
    leaderboard.write(root, f"python -m harness leaderboard --out {root}")
    print(f"replaced the tuned result files and the table in {root}")
