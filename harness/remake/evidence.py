"""``python -m harness reproduce [CLAIM...]``: re-make the evidence of a ledger's claims at this checkout and judge
it again with the ledger's own rules, old against new.

For the named claims (all by default) it finds the result files each piece of evidence rests on (every seed of
the two runs it compares), runs them again from the settings, seeds and thread counts the files record
(:func:`harness.run.grid.rerun`) into a scratch folder laid out like the committed one, judges each piece of
evidence there (:func:`harness.report.claims.judge`) and prints the committed number, interval and verdict beside
the new ones. It refuses a checkout with uncommitted changes (what it makes must be what a commit holds).
``--budget SECONDS`` keeps to the evidence whose runs' recorded wall-clock fits (whole pieces, in ledger order) and
names what it left out; evidence it cannot re-make here (made on a GPU on a machine without one, an ensemble of
other runs) is named with the reason. ``--write`` then replaces the committed result files (and their checkpoints
and ranks) with the new ones and re-writes the folders' tables; the ledger's recorded verdicts stay for a person
to change, with the reason in docs/claims.md.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from harness.config.launchers import DEFAULT_LAUNCHER
from harness.errors import ConfigError, did_you_mean
from harness.report import claims as cl
from harness.report import files as table_files
from harness.report import formats, model
from harness.store import executed as ex
from harness.store.schema import load_results
from harness.store.siblings import SIBLINGS

if TYPE_CHECKING:
    from harness.run.grid import Grid


@dataclass
class Piece:
    """One piece of evidence to re-make: its claim, folder, and the result files it rests on."""

    claim_id: str
    folder: Path
    files: dict[Path, float] = field(default_factory=dict)  # result file -> the wall-clock it recorded, s
    skipped: str = ""  # why it is not re-made


def pieces(ledger: dict[str, Any], root: Path, wanted: list[str], device: str) -> list[Piece]:
    """The pieces of evidence of the ``wanted`` claims (all when empty) that name a results folder."""
    ids = [str(c["id"]) for c in ledger["claims"]]
    for claim_id in wanted:
        if claim_id not in ids:
            raise ConfigError(f"no claim {claim_id!r} in the ledger{did_you_mean(claim_id, ids)}; claims: "
                              f"{', '.join(ids)}")
    found: list[Piece] = []
    cache: dict[Path, list[dict[str, Any]]] = {}
    for claim in ledger["claims"]:
        if wanted and str(claim["id"]) not in wanted:
            continue
        for item in claim["evidence"]:
            if "not_measured" in item:
                continue
            folder = Path(item["results"])
            if folder not in cache:
                cache[folder] = cl.load_evidence(root / folder)
            names = cl.run_names(item)
            runs = cl.evidence_runs(cache[folder], item)
            piece = Piece(str(claim["id"]), folder, {Path(r["_path"]): float(r.get("wall_s") or 0.0) for r in runs})
            made_on = {model.device(r, "cpu") for r in runs}
            if not runs:
                piece.skipped = f"{folder} holds no result files of {' or '.join(sorted(names))}"
            elif any(r.get("sources") for r in runs):
                piece.skipped = "an ensemble of other runs: re-make those, then `harness ensemble`"
            elif device == "cpu" and any(str(m).startswith("cuda") for m in made_on):
                piece.skipped = "made on a GPU, and no GPU is here (benchmarks/gpu_tables.sh re-makes it on one)"
            found.append(piece)
    return found


def within_budget(found: list[Piece], budget: float | None) -> None:
    """Mark the pieces past ``budget`` seconds of recorded wall-clock (in order, whole pieces; files shared with
    an earlier piece cost nothing again) as skipped."""
    if budget is None:
        return
    spent, counted = 0.0, set()
    for piece in found:
        if piece.skipped:
            continue
        new = [f for f in piece.files if f not in counted]
        cost = sum(piece.files[f] for f in new)
        if spent + cost > budget:
            piece.skipped = (f"over the budget: its runs took {cost:.0f} s when made, {budget - spent:.0f} s of "
                             f"--budget {budget:.0f} were left")
            continue
        spent += cost
        counted.update(new)


def reproduce_evidence(claims: Sequence[str] = (), *, ledger: Path | str | None = None, budget: float | None = None,
                       write: bool = False, out: Path | str | None = None, device: str = "auto",
                       launcher: str = DEFAULT_LAUNCHER, jobs: int | None = None, data_root: str | None = None,
                       allow_dirty: bool = False, progress: bool = True) -> int:
    """``harness reproduce [CLAIM...]``: see the module's docstring. The number of verdicts that moved."""
    ledger_path = Path(ledger) if ledger else cl.DEFAULT_LEDGER
    loaded = cl.load(ledger_path)
    root = ledger_path.resolve().parent.parent
    dirty = ex.uncommitted_files(ex.ROOT)
    if dirty and not allow_dirty:
        raise ConfigError(f"the checkout has uncommitted changes ({', '.join(dirty[:5])}"
                          f"{' and more' if len(dirty) > 5 else ''}): reproduce re-makes evidence from a commit; "
                          "commit or stash them first")
    found = pieces(loaded, root, list(claims), device if device != "auto" else ("cuda" if _cuda() else "cpu"))
    within_budget(found, budget)
    todo = {f: seconds for p in found if not p.skipped for f, seconds in p.files.items()}
    scratch = Path(out) if out else Path(tempfile.mkdtemp(prefix="swamp-bench-reproduce-"))
    print(f"re-making {len(todo)} result file(s) of {sum(1 for p in found if not p.skipped)} piece(s) of evidence "
          f"into {scratch}/ (recorded wall-clock {sum(todo.values()):.0f} s)")
    for piece in found:
        if piece.skipped:
            print(f"  left out: {piece.claim_id} ({piece.folder}): {piece.skipped}")
    started = time.perf_counter()
    by_folder = _by_folder(found)
    from harness.run.grid import Grid

    remake(by_folder, Grid(out=scratch, device=device, launcher=launcher, jobs=jobs, progress=progress, force=True,
                           data_root=data_root, command=("reproduce", *claims)))
    minutes = (time.perf_counter() - started) / 60
    rows, moved = judged_again(ledger_path, root, scratch, found)
    print(formats.format_table(["claim", "evidence", "committed", "its verdict", "re-made", "its verdict", ""], rows,
                               [], "simple"))
    print(f"\n{len(rows)} piece(s) of evidence re-made in {minutes:.1f} min: {moved} verdict(s) moved")
    if write and rows:
        write_back(by_folder, root, scratch)
        if moved:
            print(f"warning: the ledger ({ledger_path}) still records the old verdicts: change them, and say why in "
                  "docs/claims.md", file=sys.stderr)
    return moved


def _by_folder(found: list[Piece]) -> dict[Path, list[Path]]:
    """The result files to re-make by results folder (each once, in ledger order)."""
    by_folder: dict[Path, list[Path]] = {}
    for piece in found:
        if not piece.skipped:
            by_folder.setdefault(piece.folder, [])
            by_folder[piece.folder] += [f for f in piece.files if f not in by_folder[piece.folder]]
    return by_folder


def remake(by_folder: dict[Path, list[Path]], scratch: Grid) -> None:
    """Run every result file's run again under ``scratch.out``, laid out like the committed folders, as the grid
    ``scratch`` says (its device, launcher, jobs, ...)."""
    import dataclasses

    from harness.run import grid

    for folder, files in by_folder.items():
        records = grid.result_records([str(f) for f in files])
        task = {r["task"] for _, r in records}
        if task != {folder.name}:
            raise ConfigError(f"{folder} holds runs of task(s) {sorted(task)}: reproduce expects a folder named "
                              "after its task (results/<task>)")
        outcome = grid.rerun(records, dataclasses.replace(scratch, out=scratch.out / folder.parent))
        if outcome.failed is not None:
            raise outcome.failed


def judged_again(ledger_path: Path, root: Path, scratch: Path, found: list[Piece]) -> tuple[list[list[str]], int]:
    """Each re-made piece of evidence judged at ``root`` (committed) and at ``scratch`` (re-made): the table's rows
    and the number of verdicts that moved."""
    old = {(line.claim_id, line.evidence, i): line for i, line in enumerate(cl.judge(ledger_path, root))}
    new = {(line.claim_id, line.evidence, i): line for i, line in enumerate(cl.judge(ledger_path, scratch))}
    rows, moved = [], 0
    done = {(p.claim_id, str(p.folder)) for p in found if not p.skipped}
    for key, before in old.items():
        if (key[0], key[1]) not in done:
            continue
        after = new[key]
        same = (before.verdict, before.ours) == (after.verdict, after.ours)
        moved += before.verdict != after.verdict
        rows.append([key[0], key[1], f"{before.ours} {before.interval}".strip(), before.verdict,
                     f"{after.ours} {after.interval}".strip(), after.verdict,
                     "same" if same else "verdict moved" if before.verdict != after.verdict else "number moved"])
    return rows, moved


def write_back(by_folder: dict[Path, list[Path]], root: Path, scratch: Path) -> None:
    """Replace the committed result files (with their checkpoints and ranks) by the re-made ones and re-write each
    folder's tables with their recorded options (a folder of one machine)."""
    for folder, files in by_folder.items():
        for path in files:
            made = scratch / folder / path.relative_to(root / folder)
            for suffix in SIBLINGS:
                src, dst = made.with_suffix(suffix), path.with_suffix(suffix)
                if src.exists():
                    shutil.copy2(src, dst)
        everything = load_results(root / folder)
        if len(model.by_machine(everything)) == 1:
            recorded = table_files.recorded_options(root / folder)
            opts = recorded or table_files.TableOptions(None, None, "test")
            table_files.write_tables(everything, root / folder, reference=opts.reference, test_stat=opts.test_stat,
                                     split=opts.split)
        print(f"replaced {len(files)} result file(s) in {folder}")


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())
