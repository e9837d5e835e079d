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

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from harness.errors import ConfigError, did_you_mean
from harness.report import claims as cl
from harness.report import model, tables
from harness.store.schema import load_results


@dataclass
class Piece:
    """One piece of evidence to re-make: its claim, folder, and the result files it rests on."""

    claim_id: str
    folder: Path
    files: dict[Path, float] = field(default_factory=dict)  # result file -> the wall-clock it recorded, s
    skipped: str = ""  # why it is not re-made


def dirty_files(root: Path) -> list[str]:
    """Tracked files of the checkout at ``root`` that differ from its commit (empty outside a repository)."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return [line[3:] for line in out.splitlines() if line.strip()]


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
                cache[folder] = load_results(root / folder) if (root / folder).is_dir() else []
            names = cl.run_names(item)
            runs = [r for r in cache[folder] if r["run_name"] in names]
            piece = Piece(str(claim["id"]), folder, {Path(r["_path"]): float(r.get("wall_s") or 0.0) for r in runs})
            made_on = {((r.get("environment") or {}).get("hardware") or {}).get("device", "cpu") for r in runs}
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


def reference(args: argparse.Namespace) -> int:
    """``harness reproduce --reference ROOT``: every tuned result file of the reference table's sets under ROOT run
    again from its recorded settings, seeds and threads into a scratch copy of ROOT (each keeps the study that chose
    its settings: the studies are not run again), the table computed from them, and each cell, each set's strongest
    contrastive loss and the mean ranks printed beside the committed ones. ``--write`` replaces the committed files
    and the table. Exit 1 when a set's strongest loss or a rank order moved."""
    from harness.report import leaderboard
    from harness.run import grid
    from harness.store.executed import ROOT

    root = Path(args.reference)
    dirty = dirty_files(ROOT)
    if dirty and not args.allow_dirty:
        raise ConfigError(f"the checkout has uncommitted changes ({', '.join(dirty[:5])}): reproduce re-makes "
                          "evidence from a commit; commit or stash them first")
    boards = leaderboard.load_boards(root)
    if not boards:
        raise ConfigError(f"{root} holds no set of the reference table (a folder with {leaderboard.MANIFEST})")
    scratch = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="swamp-bench-reference-"))
    started = time.perf_counter()
    for b in boards:
        (scratch / b.name).mkdir(parents=True, exist_ok=True)
        shutil.copy2(b.folder / leaderboard.MANIFEST, scratch / b.name / leaderboard.MANIFEST)
        for cell in b.cells.values():
            files = sorted(Path(r["_path"]) for r in cell.results)
            if args.budget is not None and time.perf_counter() - started > args.budget:
                print(f"  left out: {b.name} {cell.method}@tuned: over --budget")
                continue
            base = grid.Grid(out=scratch / b.name, device=args.device, launcher=args.launcher, jobs=args.jobs,
                             progress=not args.no_progress, force=True, data_root=args.data_root,
                             command=("reproduce", "--reference", str(root)))
            opts = grid.options(base)
            opts.tuning = cell.results[0]["tuning"]  # the study that chose the settings, as committed
            outcome = grid.rerun(grid.result_records([str(f) for f in files]), base, opts)
            if outcome.failed is not None:
                raise outcome.failed
    again = {b.name: b for b in leaderboard.load_boards(scratch)}
    rows, moved = [], 0
    for b in boards:
        new = again.get(b.name)
        if new is None:
            continue
        for role, cell in b.cells.items():
            other = new.cells.get(role)
            rows.append([b.name, leaderboard.ROLES[role], f"{cell.summary.mean:.2f}",
                         "–" if other is None else f"{other.summary.mean:.2f}",
                         "–" if other is None else "same" if other.values == cell.values else "moved"])
        before, after = leaderboard.strongest(b)[0], leaderboard.strongest(new)[0]
        moved += before != after
    print(tabulate(rows, ["set", "method", "committed mean", "re-made mean", ""], disable_numparse=True))
    old_ranks = leaderboard.ranks([b for b in boards if b.primary]).get("mean_ranks", {})
    new_ranks = leaderboard.ranks([b for b in again.values() if b.primary]).get("mean_ranks", {})
    order = [sorted(r, key=lambda k: r[k]) for r in (old_ranks, new_ranks)]
    moved += order[0] != order[1]
    print(f"\n{len(rows)} cell(s) re-made in {(time.perf_counter() - started) / 60:.1f} min; rank order "
          f"{'unchanged' if order[0] == order[1] else 'moved: ' + ' > '.join(order[1])}")
    if args.write:
        for b in boards:
            for cell in b.cells.values():
                for r in cell.results:
                    path = Path(r["_path"])
                    made = scratch / b.name / path.relative_to(b.folder)
                    for suffix in (".json", ".pt", ".ranks.npz"):
                        if made.with_suffix(suffix).exists():
                            shutil.copy2(made.with_suffix(suffix), path.with_suffix(suffix))
        leaderboard.write(root, f"python -m harness leaderboard --out {root}")
        print(f"replaced the tuned result files and the table in {root}")
    return 1 if moved else 0


def cmd(args: argparse.Namespace) -> int:
    """``harness reproduce``: see the module's docstring. Exit 1 when a verdict moved."""
    from harness.run import grid

    if getattr(args, "reference", None):
        return reference(args)
    ledger_path = Path(args.ledger) if args.ledger else cl.DEFAULT_LEDGER
    ledger = cl.load(ledger_path)
    root = ledger_path.resolve().parent.parent
    from harness.store.executed import ROOT

    dirty = dirty_files(ROOT)
    if dirty and not args.allow_dirty:
        raise ConfigError(f"the checkout has uncommitted changes ({', '.join(dirty[:5])}"
                          f"{' and more' if len(dirty) > 5 else ''}): reproduce re-makes evidence from a commit; "
                          "commit or stash them first")
    device = args.device if args.device != "auto" else ("cuda" if _cuda() else "cpu")
    found = pieces(ledger, root, list(args.claims), device)
    within_budget(found, args.budget)
    todo = {f: seconds for p in found if not p.skipped for f, seconds in p.files.items()}
    scratch = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="swamp-bench-reproduce-"))
    print(f"re-making {len(todo)} result file(s) of {sum(1 for p in found if not p.skipped)} piece(s) of evidence "
          f"into {scratch}/ (recorded wall-clock {sum(todo.values()):.0f} s)")
    for piece in found:
        if piece.skipped:
            print(f"  left out: {piece.claim_id} ({piece.folder}): {piece.skipped}")
    started = time.perf_counter()
    by_folder: dict[Path, list[Path]] = {}
    for piece in found:
        if not piece.skipped:
            by_folder.setdefault(piece.folder, [])
            by_folder[piece.folder] += [f for f in piece.files if f not in by_folder[piece.folder]]
    for folder, files in by_folder.items():
        records = grid.result_records([str(f) for f in files])
        task = {r["task"] for _, r in records}
        if task != {folder.name}:
            raise ConfigError(f"{folder} holds runs of task(s) {sorted(task)}: reproduce expects a folder named "
                              "after its task (results/<task>)")
        base = grid.Grid(out=scratch / folder.parent, device=args.device, launcher=args.launcher, jobs=args.jobs,
                         progress=not args.no_progress, force=True, data_root=args.data_root,
                         command=("reproduce", *args.claims))
        outcome = grid.rerun(records, base)
        if outcome.failed is not None:
            raise outcome.failed
    minutes = (time.perf_counter() - started) / 60
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
    print(tabulate(rows, ["claim", "evidence", "committed", "its verdict", "re-made", "its verdict", ""],
                   disable_numparse=True))
    print(f"\n{len(rows)} piece(s) of evidence re-made in {minutes:.1f} min: {moved} verdict(s) moved")
    if args.write and rows:
        for folder, files in by_folder.items():
            for path in files:
                made = scratch / folder / path.relative_to(root / folder)
                for suffix in (".json", ".pt", ".ranks.npz"):
                    src, dst = made.with_suffix(suffix), path.with_suffix(suffix)
                    if src.exists():
                        shutil.copy2(src, dst)
            everything = load_results(root / folder)
            if len(model.by_machine(everything)) == 1:
                recorded = tables.recorded_options(root / folder)
                opts = recorded or tables.TableOptions(None, None, "test")
                tables.write_tables(everything, root / folder, reference=opts.reference, test_stat=opts.test_stat,
                                    split=opts.split)
            print(f"replaced {len(files)} result file(s) in {folder}")
        if moved:
            print(f"warning: the ledger ({ledger_path}) still records the old verdicts: change them, and say why in "
                  "docs/claims.md", file=sys.stderr)
    return 1 if moved else 0


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())
