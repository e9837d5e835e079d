"""The studies of a reference set still being made, carried from one machine to the next through the repository.

A set's studies can take longer than one machine stays up (the synthetic set's 440 trials took about six
trial-hours here), and only what is committed outlives the machine. Every study of a set lives in one file,
``RESULTS/SET/TASK/_tune/studies.db``; the trials it holds are never run again, and a study killed in a trial resumes
by running that trial's settings again (:func:`harness.tune.storage.recover`). So a set being made is carried as that
one file, under ``results/making/SET/TASK/_tune/studies.db``, with the tuned runs finished so far packed in one
archive, ``results/making/SET/tuned.tar`` (their result files and per-query ranks, as a landed set commits them).
Nothing else reads that folder (no result file or manifest lies there as such):

    python -m benchmarks.making_sets save results/reference synthetic     # a consistent copy into results/making
    python -m benchmarks.making_sets restore results/reference synthetic  # back, where RESULTS holds none yet
    python -m benchmarks.making_sets status                               # the trials of each carried study

``benchmarks/reference_table.sh`` restores before it makes each set, so the same command goes on where the last
machine stopped; the copy under ``results/making`` is removed in the commit that lands the set. ``save`` copies with
SQLite's backup API, so a copy taken while the workers write is still one consistent state of the studies.
"""
from __future__ import annotations

import argparse
import sqlite3
import sys
import tarfile
from pathlib import Path

MAKING = Path("results") / "making"
STUDIES = Path("_tune") / "studies.db"
TUNED = "tuned.tar"  # the finished tuned runs' files of a set being made, relative to the set's folder
RESULTS = "*/*@tuned/seed*.json"  # a tuned run's result file, written when it ended


def storages(folder: Path) -> list[Path]:
    """The ``TASK/_tune/studies.db`` files of one set's folder, sorted."""
    return sorted(p for p in Path(folder).glob(f"*/{STUDIES.as_posix()}") if p.is_file())


def _copy(src: Path, dst: Path) -> None:
    """A consistent copy of the SQLite file ``src`` at ``dst`` (written beside it, then moved into place)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    part = dst.with_name(dst.name + ".part")
    part.unlink(missing_ok=True)
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    target = sqlite3.connect(part)
    try:
        with target:
            source.backup(target)
    finally:
        source.close()
        target.close()
    part.replace(dst)


def trial_counts(db: Path) -> dict[str, int]:
    """Trials of all studies in a studies file, by state name (``{"COMPLETE": 30, "RUNNING": 1}``)."""
    total: dict[str, int] = {}
    for states in study_counts(db).values():
        for state, n in states.items():
            total[state] = total.get(state, 0) + n
    return total


def study_counts(db: Path) -> dict[str, dict[str, int]]:
    """Trials per study of a studies file and state name (``{"synthetic.swamp.…": {"COMPLETE": 30}}``)."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = connection.execute("SELECT s.study_name, t.state, COUNT(*) FROM studies s JOIN trials t "
                                  "ON t.study_id = s.study_id GROUP BY s.study_name, t.state").fetchall()
    finally:
        connection.close()
    found: dict[str, dict[str, int]] = {}
    for study, state, n in rows:
        found.setdefault(str(study), {})[str(state)] = int(n)
    return found


def _finished(counts: dict[str, int]) -> int:
    """The finished trials of one study's counts by state (complete, pruned or failed)."""
    return sum(n for state, n in counts.items() if state in ("COMPLETE", "PRUNED", "FAIL"))


def status(making: Path = MAKING) -> list[str]:
    """One line per study carried: the set, the study and its trials by state (the finished ones count)."""
    lines = []
    for db in sorted(Path(making).glob(f"*/*/{STUDIES.as_posix()}")):
        for study, states in sorted(study_counts(db).items()):
            lines.append(f"{db.relative_to(making).parts[0]}  {study}  {_finished(states)} finished  {states}")
    return lines


def tuned_files(folder: Path) -> list[Path]:
    """The files of the finished tuned runs of one set's folder, relative to it, sorted: each result file (written
    when its run ended) with its per-query ranks where it has them."""
    found = []
    for result in Path(folder).glob(RESULTS):
        ranks = result.with_name(f"{result.stem}.ranks.npz")
        found += [p.relative_to(folder) for p in (result, ranks) if p.is_file()]
    return sorted(found)


def _pack(folder: Path, names: list[Path], dst: Path) -> None:
    """``names`` (relative to ``folder``) in the archive ``dst``, in order, with no owner or time of this machine."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    part = dst.with_name(dst.name + ".part")
    with tarfile.open(part, "w") as archive:
        for name in names:
            info = archive.gettarinfo(str(folder / name), arcname=name.as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(folder / name, "rb") as handle:
                archive.addfile(info, handle)
    part.replace(dst)


def save(results: Path, name: str, making: Path = MAKING) -> list[Path]:
    """Copy the studies of the set ``results/name`` into ``making/name``, with its finished tuned runs packed in
    ``making/name/tuned.tar`` (none: no archive); the files written."""
    folder = Path(results) / name
    found = storages(folder)
    if not found:
        raise SystemExit(f"error: {folder} holds no */{STUDIES.as_posix()}: name a set folder whose "
                         "studies have begun (python -m harness leaderboard ... --out RESULTS)")
    written = []
    for db in found:
        dst = Path(making) / name / db.relative_to(folder)
        _copy(db, dst)
        written.append(dst)
        print(f"saved {db} -> {dst}: trials {trial_counts(dst)}")
    runs = tuned_files(folder)
    archive = Path(making) / name / TUNED
    if runs:
        _pack(folder, runs, archive)
        written.append(archive)
        print(f"saved {sum(p.suffix == '.json' for p in runs)} finished tuned runs -> {archive}")
    return written


def _ahead(here: Path, carried: Path) -> bool:
    """Whether the studies file ``here`` holds every carried study with at least as many finished trials (the same
    making, gone further on this machine); SystemExit when it holds other studies or fewer trials, which a restore
    would otherwise mix or lose."""
    mine, theirs = study_counts(here), study_counts(carried)
    missing = sorted(set(theirs) - set(mine))
    behind = sorted(s for s in theirs if s in mine and _finished(mine[s]) < _finished(theirs[s]))
    if not missing and not behind:
        return True
    why = (f"it lacks the carried studies {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} (the set's "
           "committed first making, or another)") if missing else \
        f"its studies {', '.join(behind[:3])} have fewer finished trials than the carried ones"
    raise SystemExit(f"error: {here} holds studies other than those carried in {carried}: {why}. Remove "
                     f"{here.parent.parent.parent} to go on from the carried studies, or save this folder's with "
                     "python -m benchmarks.making_sets save to carry it instead")


def restore(results: Path, name: str, making: Path = MAKING) -> list[Path]:
    """Copy the carried studies of ``name`` back under ``results/name`` where none are there; a studies file there
    that is the same making gone further is left to go on, any other is refused (:func:`_ahead`). The files written
    (none when nothing is carried)."""
    written = []
    for db in storages(Path(making) / name):
        dst = Path(results) / name / db.relative_to(Path(making) / name)
        if dst.exists() and _ahead(dst, db):
            print(f"{dst} holds the carried studies, as far or further: they go on (the carried copy is left unused)")
            continue
        _copy(db, dst)
        written.append(dst)
        print(f"restored {db} -> {dst}: trials {trial_counts(dst)}")
    archive = Path(making) / name / TUNED
    if archive.is_file():
        written += _unpack(archive, Path(results) / name)
    return written


def _result_of(path: Path) -> Path:
    """The result file of a tuned run's file (``seed3.ranks.npz`` -> ``seed3.json``)."""
    return path.with_name(f"{path.name.split('.')[0]}.json")


def _unpack(archive: Path, folder: Path) -> list[Path]:
    """The archive's tuned runs that ``folder`` does not hold yet, written there, each whole: a run whose result file
    is here already (finished here) keeps every file of its own."""
    written = []
    with tarfile.open(archive) as packed:
        members = packed.getmembers()
        for member in members:
            if not member.isfile() or Path(member.name).is_absolute() or ".." in Path(member.name).parts:
                raise SystemExit(f"error: {archive} holds {member.name!r}, not a file of a set's tuned runs")
        here = {m.name for m in members if (folder / _result_of(Path(m.name))).exists()}
        for member in members:
            target = folder / member.name
            if member.name in here:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            source = packed.extractfile(member)
            assert source is not None  # a regular file's member
            part = target.with_name(target.name + ".part")
            part.write_bytes(source.read())
            part.replace(target)
            written.append(target)
    print(f"restored {sum(p.suffix == '.json' for p in written)} finished tuned runs from {archive}")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.making_sets", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=("save", "restore", "status"))
    parser.add_argument("results", type=Path, nargs="?", help="the folder of the sets (e.g. results/reference)")
    parser.add_argument("set", nargs="?", help="the set's name (its folder under RESULTS), e.g. synthetic")
    parser.add_argument("--making", type=Path, default=MAKING, help=f"where sets being made are kept ({MAKING})")
    args = parser.parse_args(argv)
    if args.action == "status":
        print("\n".join(status(args.making)) or f"no set is being made under {args.making}")
        return 0
    if args.results is None or args.set is None:
        parser.error(f"{args.action} needs RESULTS and SET, e.g. {args.action} results/reference synthetic")
    (save if args.action == "save" else restore)(args.results, args.set, args.making)
    return 0


if __name__ == "__main__":
    sys.exit(main())
