"""Run the rows of the bad-input matrix (``tests/bad_input_cases.py``) and write ``docs/bad-input-matrix.md``.

``python -m tests.bad_input_matrix`` rewrites the document from what every row prints now;
``tests/test_bad_input.py`` runs the same rows and fails when the committed document differs.
"""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from harness.cli import main
from harness.config.registry import ENCODERS, METHODS, SOURCES
from tests.bad_input_cases import CASES, Case
from tests.conftest import ROOT

DOC = ROOT / "docs" / "bad-input-matrix.md"
MOUNT = 'mount -t tmpfs -o ro,size=16k none "$0" && exec "$@"'  # run "$@" with "$0" a read-only file system


@dataclass
class Observation:
    """What one row did: exit status (None when an exception escaped), stderr, warnings, and the paths
    under the results folder that appeared, changed or went away."""

    status: int | None
    stderr: str
    raised: str | None
    warnings: list[str]
    written: list[str]


def results_folder(argv: list[str]) -> Path | None:
    """The folder after ``--out`` in a command line."""
    return Path(argv[argv.index("--out") + 1]) if "--out" in argv else None


def snapshot(folder: Path | None) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` with its size and modification time."""
    if folder is None or not folder.exists():
        return {}
    if folder.is_file():
        return {".": (folder.stat().st_size, folder.stat().st_mtime_ns)}
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*")} | {".": (0, 0)}


def mount_available() -> bool:
    """Whether this machine lets a process mount a read-only tmpfs in its own namespace (``unshare``)."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", MOUNT, "/tmp", "true"],
                           capture_output=True)
    return probe.returncode == 0


def observe(case: Case, folder: Path) -> Observation:
    """Set the row up in the empty ``folder`` and run its command (in this process, or in a subprocess
    on a read-only mount); compare the results folder before and after."""
    argv = case.setup(folder)
    out = results_folder(argv)
    before = snapshot(out)
    status, stderr, raised, caught = _subprocess(argv, folder) if case.read_only_mount else _in_process(argv)
    after = snapshot(out)
    written = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    return Observation(status, stderr, raised, caught, written)


def _in_process(argv: list[str]) -> tuple[int | None, str, str | None, list[str]]:
    err = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, redirect_stdout(io.StringIO()), redirect_stderr(err):
        warnings.simplefilter("always")
        try:
            status, raised = main(argv), None
        except BaseException as exc:  # an exception escaping main would be a traceback on the console
            status, raised = None, f"{type(exc).__name__}: {exc}"
    return status, err.getvalue(), raised, [str(w.message) for w in caught]


def _subprocess(argv: list[str], folder: Path) -> tuple[int | None, str, str | None, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", MOUNT, str(folder / "ro"),
           sys.executable, "-m", "harness", *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    raised = "traceback on stderr" if "Traceback" in proc.stderr else None
    return proc.returncode, proc.stderr, raised, []


def error_line(obs: Observation, folder: Path) -> str:
    """The row's error line with its scratch folder and the checkout written as <tmp> and <repo>."""
    line = obs.stderr.strip()
    for path, name in ((str(folder.resolve()), "<tmp>"), (str(folder), "<tmp>"), (str(ROOT), "<repo>")):
        line = line.replace(path, name)
    for registry in (METHODS, SOURCES, ENCODERS):  # a new plugin file changes these lists, not the document
        line = line.replace(", ".join(registry.names()), f"<every registered {registry.kind}>")
    return line


def row(n: int, case: Case, line: str | None) -> str:
    shown = "(not run on this machine)" if line is None else "`" + line.replace("|", "\\|").replace("`", "'") + "`"
    return f"| {n} | {case.group} | `{case.id}` | {case.mistake} | {shown} |"


def render(lines: dict[str, str | None]) -> str:
    """The whole document from each row's error line (None: the row could not run here)."""
    groups = {g: sum(c.group == g for c in CASES) for g in dict.fromkeys(c.group for c in CASES)}
    counts = ", ".join(f"{g}: {n}" for g, n in groups.items())
    head = [
        "# Bad input: every mistake in the matrix and the line it prints", "",
        "<!-- generated by `python -m tests.bad_input_matrix` from tests/bad_input_cases.py; "
        "tests/test_bad_input.py fails when this file is out of date -->", "",
        f"{len(CASES)} cases ({counts}). `tests/test_bad_input.py` runs each one as `python -m harness ...` "
        "(in the test process; the read-only file system row in a subprocess with its own mount namespace) and "
        "passes a row only when: the exit status is 2; stderr is exactly one line, `error: ...`, that contains "
        "the row's problem and fix fragments (and `(did you mean 'X'?)` where a name is close); no exception "
        "escapes and no warning is printed; and nothing under the results folder (`--out`) appears, changes or "
        "disappears. Progress bars are left on, so a row that started training would fail. `<tmp>` is the "
        "row's scratch folder, `<repo>` the checkout.", "",
        "| # | group | id | mistake | what `python -m harness` prints (stderr) |",
        "|---|---|---|---|---|",
    ]
    return "\n".join(head + [row(n, c, lines.get(c.id)) for n, c in enumerate(CASES, 1)] + generated()) + "\n"


def generated() -> list[str]:
    """The section on the generated inputs of tests/test_fuzz.py (its strategies and example counts)."""
    from tests import test_fuzz as fuzz
    from tests.fuzz_tasks import BASES, WITHOUT_FIXTURE

    default, thorough = fuzz.COUNTS["default"], fuzz.COUNTS["thorough"]
    return [
        "", "## Generated inputs", "",
        "Beside the hand-written rows, `tests/test_fuzz.py` generates inputs with Hypothesis (derandomized: the "
        "same examples on every machine) and requires of each the same as of a row, except that a generated "
        "input may also be valid (exit 0, a one-epoch run) or stop while running (exit 3, one line).", "",
        "| class | what is generated | examples (default / `SWAMP_BENCH_FUZZ=thorough`, which CI also runs) |",
        "|---|---|---|",
        f"| task files | each of the {len(BASES)} task files below, made small (tests/fuzz_tasks.py) and changed "
        f"one to three times: {'; '.join(fuzz.MUTATIONS)}; values: {'; '.join(fuzz.VALUE_CLASSES)} | "
        f"{default[0]} per task file ({default[0] * len(BASES)}) / {thorough[0]} per task file "
        f"({thorough[0] * len(BASES)}) |",
        f"| command-line flags | up to two `--set NAME.KEY=VALUE` over {len(fuzz.SET_KEYS)} keys (valid and "
        "misspelt) with valid, malformed and extreme values; an optional `--sweep`; `--seeds` lists, ranges and "
        "junk; `--methods` valid, repeated, empty and unknown; `--epochs` valid and invalid | "
        f"{default[1]} / {thorough[1]} |",
        "| escapes | the inputs that once raised an exception (unhashable registry names, impossible and "
        "unallocatable sizes, widths no allocator can count, non-finite or float32-overflowing numbers, seeds "
        "beyond 64 bits, encoders of two widths, a zero triplet margin), each a fixed "
        f"regression test | {len(fuzz.ESCAPES) + len(fuzz.FOUND) + len(fuzz.FOUND_FLAGS)} |", "",
        f"Task files fuzzed: {', '.join(f'`{b}`' for b in sorted(BASES))}"
        + (f"; not fuzzed (no fixture): {', '.join(WITHOUT_FIXTURE)}" if WITHOUT_FIXTURE else " (every file in "
           "`tasks/`)") + ". Runs are capped at "
        f"{fuzz.MEMORY_GIB} GiB by `SWAMP_BENCH_MEMORY_GIB`, so a generated size that needs more stops in the "
        "memory preflight.",
    ]


def write() -> Path:
    """Run every row in a scratch folder of its own and write the document."""
    can_mount = mount_available()
    lines: dict[str, str | None] = {}
    for case in CASES:
        if case.read_only_mount and not can_mount:
            lines[case.id] = None
            continue
        with tempfile.TemporaryDirectory() as tmp:
            obs = observe(case, Path(tmp))
            lines[case.id] = error_line(obs, Path(tmp))
    DOC.write_text(render(lines))
    return DOC


if __name__ == "__main__":
    print(f"wrote {write()}")
