"""Every table committed under ``results/`` is what the current code renders from the result files
beside it: each generated file names the command that wrote it, and that command, re-run without
writing, gives the same bytes. A change to the tables, the statistics or the result reader that moves
a committed number fails here until the tables are regenerated (and the change is explained)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.report import tables
from harness.store.schema import load_results

ROOT = Path(__file__).resolve().parent.parent
HEADER = f"<!-- {tables.GENERATED}"


def generated_tables() -> list[Path]:
    found = []
    for path in sorted((ROOT / "results").rglob("*.md")):
        with open(path, encoding="utf-8") as f:
            if f.readline().startswith(HEADER):
                found.append(path)
    return found


def table_command(path: Path) -> tuple[str, str | None, str | None, str]:
    """(folder, reference, test stat, split) of the command in a generated table's first line, which names the
    folder the table lies in."""
    folder = path.parent.relative_to(ROOT)
    assert path.read_text(encoding="utf-8").startswith(f"{HEADER}{folder} "), f"{path} names another folder"
    options = tables.recorded_options(path.parent)
    return str(folder), options.reference, options.test_stat, options.split


COMMANDS = sorted(set(map(table_command, generated_tables())))
# a folder of dozens of runs with per-query ranks costs seconds of bootstrap resamples: the slow set re-renders it
BOOTSTRAPPED = 30


def _case(command: tuple[str, str | None, str | None, str]):
    heavy = command[1] is not None and len(list((ROOT / command[0]).rglob("seed*.ranks.npz"))) >= BOOTSTRAPPED
    return pytest.param(*command, marks=pytest.mark.slow, id=command[0]) if heavy else \
        pytest.param(*command, id=command[0])


def test_tables_are_committed():
    assert len(COMMANDS) >= 20, COMMANDS


@pytest.mark.parametrize("folder,reference,test_stat,split", [_case(c) for c in COMMANDS])
def test_committed_tables_rerender_identically(folder, reference, test_stat, split, monkeypatch):
    monkeypatch.chdir(ROOT)  # the commands name folders relative to the repository root
    results = load_results(Path(folder))
    assert results, f"no result files under {folder}"
    tasks = sorted({r["task"] for r in results})
    for task in tasks:
        subset = [r for r in results if r["task"] == task]
        out = Path(folder) if len(tasks) == 1 else Path(folder) / task
        expected = tables.table_files(subset, out, reference=reference, test_stat=test_stat, split=split)
        for path, text in expected.items():
            assert path.read_text(encoding="utf-8") == text, f"{path} differs from what `python -m harness table " \
                f"{folder}` renders now; regenerate it with the command in its first line"
