"""The tables of result folders: printed per folder of runs, written only when asked, and never averaging runs
timed on different hardware into one row (``harness table``, and the end of ``harness run`` and ``rerun``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.report import files, formats, model
from harness.report import freshness as fr
from harness.report.accuracy import validation_view
from harness.report.cells import SPREAD
from harness.store.schema import load_results


def tables(folder: Path | str, *, fmt: str = "simple", reference: str | None = None, test_stat: str | None = None,
           split: str | None = None, write: bool = False) -> list[Path]:
    """``harness table FOLDER``: every result set's tables under ``folder`` printed in ``fmt``, with ``reference``,
    ``test_stat`` and ``split`` (each set's recorded options where none is given); with ``write``, written into each
    set's folder: the files written."""
    folder = Path(folder)
    results = load_results(folder) if folder.is_dir() else []
    if not results:
        raise ConfigError(f"no result files (<method>/seed<k>.json) under {folder}")
    given = files.TableOptions(reference, test_stat, split or "test")
    checkout = fr.Checkout()  # one for every folder: its caches hold the files the folders' runs share
    writes, mixed = [], []
    for where, subset in files.table_folders(results).items():
        recorded = files.recorded_options(where)
        options = given if recorded is None or any((reference, test_stat, split)) else recorded
        if options.split == "val" and options.reference:
            raise ConfigError("--split val shows validation metrics only; significance tests use the test split's "
                              "per-query ranks, so drop --reference")
        machines = model.by_machine(subset)
        for name, runs in machines.items():
            shown = validation_view(runs) if options.split == "val" else runs
            rendered = formats.render(shown, fmt, reference=options.reference, test_stat=options.test_stat,
                                      spread_note=True)
            print(f"{where} (task {runs[0]['task']}{f'; {name}' if len(machines) > 1 else ''})\n\n"
                  f"Accuracy ({options.split})\n{rendered['accuracy']}\n\n"
                  f"Timing ({model.machine_line(runs)})\n{rendered['timing']}\n\n{code_line(runs, checkout)}\n")
        if len(machines) > 1:
            mixed.append(f"{where} ({len(machines)} machines: {'; '.join(machines)})")
        writes.append((where, subset, options))
    if not write:
        return []
    if mixed:  # checked before anything is written
        raise ConfigError(f"not written: {', '.join(mixed)} hold runs timed on different hardware, whose rows would "
                          "average unlike times; move each machine's runs into a folder of its own (e.g. "
                          "results/gpu/<task>) and write each folder's tables")
    written: list[Path] = []
    for where, subset, options in writes:
        paths = files.write_tables(subset, where, reference=options.reference, test_stat=options.test_stat,
                                    split=options.split)
        print(f"wrote {', '.join(str(p) for p in paths)}")
        written += paths
    return written


def show(folder: Path, results: list[dict[str, Any]], reference: str | None, test_stat: str | None) -> None:
    """Print and write the tables of every result file in ``folder`` (this command's ``results`` and those
    already there), with the command's --reference/--test-stat or else the ones the folder's tables record;
    runs timed on another machine keep the folder's tables from being written (they are printed apart)."""
    everything = model.owned(load_results(folder), folder) or results
    recorded = files.recorded_for(folder, everything)
    if reference is None and test_stat is None and recorded is not None and recorded.split == "test":
        reference, test_stat = recorded.reference, recorded.test_stat
    machines = model.by_machine(everything)
    for runs in machines.values():
        print_tables(runs, reference if any(r["run_name"] == reference or r["method"] == reference for r in runs)
                      else None, test_stat)
    if len(everything) > len(results):
        print(f"\n(the tables hold all {len(everything)} result files in {folder}; this command made or found "
              f"{len(results)} of them)")
    if len(machines) > 1:
        print(f"\nresults: {folder}/<run>/seed<k>.json; tables not written: the folder holds runs timed on "
              f"{len(machines)} machines ({'; '.join(machines)}); give this command an --out of its own")
        return
    paths = files.write_tables(everything, folder, reference=reference, test_stat=test_stat)
    print(f"\nresults: {folder}/<run>/seed<k>.json; tables: {', '.join(str(p) for p in paths)}")


def print_tables(results: list[dict[str, Any]], reference: str | None = None, test_stat: str | None = None) -> None:
    """The accuracy and timing tables of ``results`` on the console."""
    rendered = formats.render(results, "simple", reference=reference, test_stat=test_stat, spread_note=True)
    print(f"\nAccuracy (test split, %; {SPREAD})\n{rendered['accuracy']}")
    print(f"\nTiming and peak memory ({model.machine_line(results)})\n{rendered['timing']}")
    print(f"\n{code_line(results)}")


def code_line(results: list[dict[str, Any]], checkout: fr.Checkout | None = None) -> str:
    """One line under a folder's tables: how its runs stand against this checkout (fresh, stale with the
    files, dirty, unverifiable). The written tables leave it out: they describe the results, this line the
    results against the code at hand."""
    checkout = checkout or fr.Checkout()
    names = dict.fromkeys(r["run_name"] for r in results)  # each run once, in the results' order
    judged = {n: fr.combine(fr.judge(x, checkout) for x in results if x["run_name"] == n) for n in names}
    counts = {s: sum(1 for j in judged.values() if j.state == s) for s in fr.STATES}
    text = "Code against this checkout: " + ", ".join(f"{n} run(s) {s}" for s, n in counts.items() if n)
    for name, j in judged.items():
        if j.state in (fr.STALE, fr.DIRTY):
            text += f"\n  {name}: {j.label(limit=4)}"
    return text
