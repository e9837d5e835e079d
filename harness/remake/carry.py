"""``python -m harness carry``: a change of executed code shown to move no number, and recorded
(``claims/carried.yaml``).

Every committed result records the files its run executed (:mod:`harness.store.executed`), and any change of one
other than a cosmetic one stales it (:mod:`harness.report.freshness`). A refactor (a long function split, a name
given to a repeated expression) changes code without changing behaviour; this command proves that it does and
records the proof, so that the results it touches read as *carried* instead of stale:

1. **What it carries**: every file that committed results executed and whose working-tree version differs from the
   base commit's (default ``HEAD``) other than cosmetically, or only those given (``--files``). A file already
   carried to its working-tree version is passed over, a cosmetic edit needs no carry.
2. **Two trees**: the base commit's files (``git archive``), with the working tree's versions of every file no
   result executed (new modules, tests, docs) in both. The *old* tree keeps the base's versions of the carried
   files, the *new* tree takes the working tree's. The two trees differ in the carried files alone; other executed
   files keep the base's version in both, so that someone else's uncommitted edit is neither proved nor blamed.
3. **The method canaries** (``tests/test_canaries.py``: every method's loss, step, scores and metrics on float64
   inputs) run in a fresh process in each tree at one thread, and every number must be bit-identical. Which canaries
   cover a file: those whose run executed it (every canary for shared machinery; for a method's file, the
   canaries of the methods that use it).
4. **The end-to-end canary**: ``python -m harness run`` of the synthetic task's tiny variant (``tests/conftest.py``
   ``TINY``; contrastive and SwAMP, seed 0, 2 epochs, one thread) in each tree: the test metrics, every epoch's
   history, the validation metrics at the selected epoch, the selected epoch, the floor, collapse records,
   warnings and every query's rank must be bit-identical. It goes where the method canaries do not: the runner,
   data loading, the training loop's epochs, evaluation and epoch selection.
5. On success one entry per file is appended to ``claims/carried.yaml`` (:mod:`harness.report.carried`): the
   file, the versions it went from and to, the canaries that cover it, the end-to-end canary, the machine and the
   date. On any difference nothing is written: the command names the canary and the first number that differs,
   and says that the evidence must be re-made (``python -m harness reproduce``).

A file that no canary and not the end-to-end run executed cannot be carried (nothing would have tested it).
"""
from __future__ import annotations

import datetime
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any, Iterable

from harness.errors import ConfigError, RunError
from harness.report import carried as ca
from harness.store import executed as ex
from harness.store import provenance, siblings
from harness.store.schema import load_results

TREE_PARTS = ("harness", "baselines", "tests", "tasks", "pyproject.toml")  # what the canaries and a run need
END_TO_END_METHODS = ("contrastive", "swamp")
END_TO_END_EPOCHS = 2
END_TO_END = f"tiny synthetic task: {', '.join(END_TO_END_METHODS)}, seed 0, {END_TO_END_EPOCHS} epochs, 1 thread"
# what an end-to-end run must reproduce bit for bit (timings, provenance and the record of what ran may differ)
# in the order a run makes them, so that the first difference named is the earliest
COMPARED = ("untrained", "history", "skipped_steps", "best_epoch", "val_at_best", "floor", "collapse", "warnings",
            "training", "metrics")
TIMEOUT_S = 900

# the canaries of the tree's own tests/test_canaries.py, run in a fresh process: the trace of every case and the
# files each case's run executed
_CANARY_CODE = """
import json, sys, tempfile
from pathlib import Path
import torch
torch.set_num_threads(1)
from harness.config.registry import METHODS
from harness.store import executed as ex
from tests import conftest, test_canaries as tc
d = Path(tempfile.mkdtemp())
tasks = tuple(conftest.write_task(d, t, n + '.yaml') for n, t in (('tiny', conftest.TINY),
              ('tiny_image_text', conftest.TINY_IMAGE_TEXT), ('tiny_video_text', conftest.TINY_VIDEO_TEXT),
              ('tiny_sketch', conftest.TINY_SKETCH)))
out = {}
for case in tc.CASES:
    trace = tc.canary_case(case, tasks)
    kind = tc.VARIANTS.get(case, (case, {}))[0]
    files = sorted(ex.name_of(p) for p in ex.executed_files([METHODS.get(kind)]))
    out[case] = {"trace": trace, "files": files}
json.dump(out, open(sys.argv[1], "w"))
"""

_TASK_CODE = """
import sys
from pathlib import Path
from tests import conftest
conftest.write_task(Path(sys.argv[1]), conftest.TINY)
"""


@dataclass(frozen=True)
class Change:
    """One executed file to carry: its base version and its working-tree version."""

    file: str
    before: ca.Version
    after: ca.Version


@dataclass
class Outcome:
    """What :func:`carry` found: the carries made, or the first difference."""

    carries: list[ca.Carry]
    passed_over: list[str]  # 'FILE: why' for files that needed no carry
    difference: str = ""  # the canary and the first number that differs ('' when none)


def _git(root: Path, *args: str) -> bytes:
    try:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        detail = err.stderr.decode(errors="replace").strip() if isinstance(err, subprocess.CalledProcessError) else err
        raise ConfigError(f"git {' '.join(args)} failed in {root} ({detail}); carry needs a git checkout") from None


def recorded_files(root: Path) -> set[str]:
    """Every file (by its name in a record) that a committed result under ``root/results`` executed."""
    names: set[str] = set()
    for result in load_results(root / "results"):
        record = result.get("executed")
        if isinstance(record, dict):
            names.update(n for n in record.get("files") or {} if not os.path.isabs(n))
    return names


def changes(root: Path, files: Iterable[str] | None = None, base: str = "HEAD",
            recorded: set[str] | None = None) -> tuple[list[Change], list[str]]:
    """The changes to carry (see the module's docstring) and 'FILE: why' for each file passed over."""
    recorded = recorded_files(root) if recorded is None else recorded
    _, blobs = ex.commit_blobs(root, base)
    if not blobs:
        raise ConfigError(f"{root} has no commit {base!r}: carry compares the working tree with a commit")
    asked = None if files is None else [str(Path(f)) for f in files]
    for name in asked or []:
        if name not in recorded:
            raise ConfigError(f"{name}: no committed result executed it, so no evidence rests on it: nothing to "
                              "carry (name files that results record, or leave out --files)")
    carries = ca.load(root / ca.RECORD)
    out, passed = [], []
    for name in asked if asked is not None else sorted(recorded):
        blob = blobs.get(name)
        path = ex.path_of(name, root)
        if blob is None:
            if asked is not None:
                raise ConfigError(f"{name}: not in {base}; carry compares a committed version with the working tree")
            continue
        if not path.is_file():
            raise ConfigError(f"{name}: removed from the working tree; a removed file cannot be carried: re-make "
                              "the evidence that executed it (python -m harness reproduce)")
        old, new = _git(root, "cat-file", "blob", blob), path.read_bytes()
        if old == new:
            if asked is not None:
                passed.append(f"{name}: unchanged since {base}")
            continue
        suffix = path.suffix
        if ex.normalized_source(old.decode("utf-8", "replace"), suffix) == \
                ex.normalized_source(new.decode("utf-8", "replace"), suffix):
            passed.append(f"{name}: a cosmetic edit (comments, docstrings, layout): no carry needed")
            continue
        before, after = ca.Version(ex.sha256(old), blob), ca.Version(ex.sha256(new), ex.git_blob_sha1(new))
        if any(c.file == name and c.before.blob == before.blob and c.after.sha256 == after.sha256 for c in carries):
            passed.append(f"{name}: already carried to this version")
            continue
        out.append(Change(name, before, after))
    return out, passed


def _extract(root: Path, base: str, dest: Path) -> None:
    parts = [p for p in TREE_PARTS if (root / p).exists()]
    data = _git(root, "archive", "--format=tar", base, "--", *parts)
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")


def _local_files(root: Path, base: str, recorded: set[str]) -> list[str]:
    """Files of the working tree, under :data:`TREE_PARTS`, that differ from ``base`` (staged or not) or are new,
    and that no result executed (tests, new modules, reports): both trees take them as they are here."""
    parts = [p for p in TREE_PARTS if (root / p).exists()]
    changed = _git(root, "diff", "--name-only", "--no-renames", base, "--", *parts).decode().splitlines()
    new = _git(root, "ls-files", "--others", "--exclude-standard", "--", *parts).decode().splitlines()
    return sorted({n for n in changed + new if n and n not in recorded and (root / n).is_file()})


def build_trees(root: Path, base: str, todo: list[Change], recorded: set[str], folder: Path) -> tuple[Path, Path]:
    """The old and the new tree under ``folder`` (module docstring, step 2)."""
    old, new = folder / "old", folder / "new"
    local = _local_files(root, base, recorded)
    for tree in (old, new):
        tree.mkdir(parents=True)
        _extract(root, base, tree)
        for name in local:
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / name, tree / name)
    for change in todo:
        shutil.copyfile(ex.path_of(change.file, root), new / change.file)
    return old, new


def _environment(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWAMP_BENCH_")}
    return {**env, "PYTHONPATH": str(tree), "SWAMP_BENCH_SINKHORN_COMPILE": "off", "OMP_NUM_THREADS": "1",
            "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}


def _python(tree: Path, args: list[str], what: str) -> None:
    done = subprocess.run([sys.executable, *args], cwd=tree, env=_environment(tree), capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-6:])
        raise RunError(f"{what} failed in the {tree.name} tree (exit {done.returncode}):\n{tail}")


def method_canaries(tree: Path) -> dict[str, dict[str, Any]]:
    """Every canary's trace and the files its run executed, made in a fresh process in ``tree``."""
    out = tree.parent / f"{tree.name}-canaries.json"
    _python(tree, ["-c", _CANARY_CODE, str(out)], "the method canaries")
    traces: dict[str, dict[str, Any]] = json.loads(out.read_text())
    return traces


def end_to_end(tree: Path) -> dict[str, dict[str, Any]]:
    """The end-to-end canary's result files in ``tree`` by run name, with every query's rank (``ranks``)."""
    import numpy as np

    work = tree.parent / f"{tree.name}-run"
    work.mkdir()
    _python(tree, ["-c", _TASK_CODE, str(work)], "writing the end-to-end canary's task")
    _python(tree, ["-m", "harness", "run", str(work / "tiny.yaml"), "--methods", ",".join(END_TO_END_METHODS),
                   "--seeds", "0", "--epochs", str(END_TO_END_EPOCHS), "--threads", "1", "--no-progress",
                   "--out", str(work / "out")], "the end-to-end canary (harness run)")
    runs = {}
    for result in load_results(work / "out"):
        ranks: dict[str, list[float]] = {}
        path = siblings.ranks_path(Path(result["_path"]))
        if path.is_file():
            with np.load(path) as saved:
                ranks = {k: saved[k].astype(float).tolist() for k in sorted(saved.files)}
        runs[result["run_name"]] = {**{k: result.get(k) for k in COMPARED}, "ranks": ranks,
                                    "files": sorted((result.get("executed") or {}).get("files") or {})}
    if sorted(runs) != sorted(END_TO_END_METHODS):
        raise RunError(f"the end-to-end canary wrote runs {sorted(runs)}, not {list(END_TO_END_METHODS)}")
    return runs


def first_difference(old: Any, new: Any, where: str = "") -> str | None:
    """Where ``old`` and ``new`` (JSON values) first differ, in the order ``old`` lists its keys (a canary's trace
    lists its training steps first), with both values; None when they are bit-identical (floats compared exactly,
    NaN equal to NaN)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(k for k in new if k not in old)]:  # the trace's own order: steps before scores
            if key not in old or key not in new:
                return f"{where}{key}: {'absent' if key not in old else old[key]!r} -> " \
                       f"{'absent' if key not in new else new[key]!r}"
            found = first_difference(old[key], new[key], f"{where}{key}.")
            if found:
                return found
        return None
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return f"{where.rstrip('.')}: {len(old)} items -> {len(new)}"
        for i, (a, b) in enumerate(zip(old, new)):
            found = first_difference(a, b, f"{where}{i}.")
            if found:
                return found
        return None
    if isinstance(old, float) and isinstance(new, float) and math.isnan(old) and math.isnan(new):
        return None
    if type(old) is not type(new) or old != new:
        return f"{where.rstrip('.')}: {old!r} -> {new!r}"
    return None


def machine() -> str:
    """The CPU, its vector extensions and torch's version: what the bits of a canary depend on."""
    import torch

    return f"{provenance.cpu_model()} ({', '.join(provenance.cpu_flags()) or 'no vector flags read'}); " \
           f"torch {torch.__version__}"


def carry(root: Path, files: Iterable[str] | None = None, base: str = "HEAD", write: bool = True,
          log: Any = print) -> Outcome:
    """Carry the changes of ``files`` (default: every changed executed file) from ``base`` to the working tree of
    the checkout at ``root`` (module docstring); appends to ``claims/carried.yaml`` when ``write`` and every canary
    agrees."""
    recorded = recorded_files(root)
    todo, passed = changes(root, files, base, recorded)
    for line in passed:
        log(f"  {line}")
    if not todo:
        return Outcome([], passed)
    commit = _git(root, "rev-parse", base).decode().strip()
    log(f"carrying {len(todo)} file(s) from {commit[:10]}: {', '.join(c.file for c in todo)}")
    with tempfile.TemporaryDirectory(prefix="swamp-carry-") as scratch:
        old, new = build_trees(root, base, todo, recorded, Path(scratch))
        log("  method canaries: old code, then new code (a fresh process each)")
        canaries = {"old": method_canaries(old), "new": method_canaries(new)}
        for case in sorted(canaries["old"].keys() | canaries["new"].keys()):
            found = first_difference(canaries["old"].get(case, {}).get("trace"),
                                     canaries["new"].get(case, {}).get("trace"))
            if found:
                return Outcome([], passed, f"method canary {case}: {found}")
        log(f"  {len(canaries['new'])} method canaries bit-identical; end-to-end canary ({END_TO_END}): old, new")
        runs = {"old": end_to_end(old), "new": end_to_end(new)}
        for name in END_TO_END_METHODS:
            found = first_difference({k: v for k, v in runs["old"][name].items() if k != "files"},
                                     {k: v for k, v in runs["new"][name].items() if k != "files"})
            if found:
                return Outcome([], passed, f"end-to-end canary ({END_TO_END}), run {name}: {found}")
        log("  end-to-end canary bit-identical")
    covered_by_run = {f for r in runs["new"].values() for f in r["files"]} | \
        {f for r in runs["old"].values() for f in r["files"]}
    made, date, where = [], datetime.datetime.now(datetime.timezone.utc).date().isoformat(), machine()
    for change in todo:
        covering = sorted(case for case in canaries["new"]
                          if change.file in canaries["new"][case]["files"]
                          or change.file in canaries["old"].get(case, {}).get("files", []))
        in_run = change.file in covered_by_run
        if not covering and not in_run:
            raise RunError(f"{change.file}: no method canary and not the end-to-end canary executed it, so nothing "
                           "tested the change: it cannot be carried; re-make the evidence that executed it "
                           "(python -m harness reproduce)")
        made.append(ca.Carry(change.file, change.before, change.after,
                             (*covering, *((ca.END_TO_END_CANARY,) if in_run else ())), END_TO_END, where, date,
                             commit))
    if write:
        path = root / ca.RECORD
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(ca.dump([*ca.load(path), *made]))
    return Outcome(made, passed)


def cmd(root: Path, files: list[str] | None, base: str, write: bool) -> int:
    """The command: exit 0 when every change was carried (or none needed one), 1 when a canary moved."""
    outcome = carry(root, files, base, write)
    if outcome.difference:
        print(f"error: not carried: {outcome.difference}. The change moves a number, so the evidence that executed "
              "it must be re-made (python -m harness reproduce CLAIM --write; docs/claims.md, 'Evidence and code')",
              file=sys.stderr)
        return 1
    for c in outcome.carries:
        print(f"carried {c.file} {c.before.sha256[:12]} -> {c.after.sha256[:12]} (by canaries "
              f"{', '.join(c.canaries)})")
    if outcome.carries:
        n = len(outcome.carries)
        print(f"{'wrote' if write else 'would write'} {n} carr{'y' if n == 1 else 'ies'} to {root / ca.RECORD}; "
              "commit it with the change")
    elif not outcome.passed_over:
        print("nothing to carry: no file that a committed result executed differs from "
              f"{base} other than cosmetically")
    return 0
