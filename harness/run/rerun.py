"""Runs rebuilt from their result files and run again (``harness rerun``, ``harness reproduce``): the records found,
the runs they describe, run in groups of the torch threads each records, the warnings of what differs from where
they were made, and the check of the new metrics against the recorded ones."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

import torch

from harness.config import plan
from harness.config.plan import Run
from harness.errors import ConfigError
from harness.run import checkpoint, dispatch, distributed, runner
from harness.run.hardware import hardware_differences, this_machine
from harness.run.jobs import Grid, Outcome, check
from harness.store.schema import read_result


def result_records(targets: Sequence[str]) -> list[tuple[Path, dict[str, Any]]]:
    """(path, record) of every result file named, or found in a named folder (as `harness table` finds them),
    each once, in order."""
    from harness.store.schema import load_results

    records: dict[Path, dict[str, Any]] = {}
    for target in targets:
        path = Path(target)
        if path.is_dir():
            found = load_results(path)
            if not found:
                raise ConfigError(f"{path}: no result files (seed<k>.json) in this folder or below it")
            records.update((Path(r["_path"]), r) for r in found if Path(r["_path"]) not in records)
        elif path.is_file():
            records.setdefault(path, read_result(path))
        else:
            raise ConfigError(f"{path}: no such result file or folder; give result files (seed<k>.json) or "
                              "folders that hold them")
    return list(records.items())


def reruns(records: list[tuple[Path, dict[str, Any]]], data_root: str | None,
           launcher: str) -> tuple[list[Run], list[Path | None]]:
    """The runs the records describe, rebuilt from their own settings, and the checkpoint each started from;
    the same run twice, or a launcher that cannot start from checkpoints, is a ConfigError."""
    overrides = [f"dataset.root={data_root}"] if data_root else []
    runs = [plan.from_record(record, str(path), overrides) for path, record in records]
    keys = [(r.spec.name, r.run_name, r.seed) for r in runs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        task, name, seed = twice[0]
        raise ConfigError(f"two of the given result files are the same run ({task}/{name} seed{seed}); give each "
                          "run once")
    inits = [Path(record["init"]) if record.get("init") else None for _, record in records]
    for init in dict.fromkeys(i for i in inits if i is not None):
        checkpoint.checkpoint_of(init)  # a run that started from a checkpoint starts from it again
    if launcher == "local" and any(inits):
        raise ConfigError("--launcher local: some of these runs started from a checkpoint; re-run those "
                          "without --launcher local")
    return runs, inits


def rerun(records: list[tuple[Path, dict[str, Any]]], base: Grid, opts: runner.RunOptions | None = None,
          announce: bool = True) -> Outcome:
    """Run again every run that ``records`` describe, as ``base`` says (``opts``: its options, made once per
    process: under torchrun they join the process group), each with the torch threads its file records unless
    ``base.threads`` is set (:func:`thread_groups`); with the local launcher, runs that started from a
    checkpoint run in this process after the others."""
    outcome: Outcome | None = None
    opts = opts if opts is not None else dispatch.options(base)
    groups = thread_groups(records, base.threads)
    parts = []
    for threads, members in groups.items():
        part_records = [records[i] for i in members]
        if announce and (len(groups) > 1 or threads != base.threads):
            print(f"{len(members)} run(s) with {threads or 'torch default'} torch thread(s)"
                  f"{' (as recorded)' if base.threads is None else ''}")
        with_init = [r for r in part_records if r[1].get("init")] if base.launcher == "local" else []
        plain = [r for r in part_records if r not in with_init]
        for chunk, launcher in ((plain, base.launcher), (with_init, "sequential")):
            if chunk:
                parts.append((chunk, launcher, threads))
    for i, (chunk, launcher, threads) in enumerate(parts):
        runs, inits = reruns(chunk, base.data_root, launcher)
        setup = dataclasses.replace(base, threads=threads, launcher=launcher,
                                    jobs=base.jobs if launcher == "local" else None)
        check(setup, opts.dist.world_size)
        if threads is not None:
            torch.set_num_threads(threads)
        part_opts = dataclasses.replace(opts, watch=opts.watch if threads is None and launcher == "sequential"
                                        else None)
        part = dispatch.run(runs, setup, part_opts, inits, last=i == len(parts) - 1)
        outcome = part if outcome is None else outcome.merged(part)
    if not parts:
        distributed.shutdown()
    return outcome if outcome is not None else Outcome([])


def recorded_threads(record: dict[str, Any]) -> int | None:
    """The torch threads a result file's run trained with (None where the file does not say)."""
    threads = ((record.get("environment") or {}).get("hardware") or {}).get("torch_threads")
    return int(threads) if isinstance(threads, int) and threads > 0 else None


def thread_groups(records: list[tuple[Path, dict[str, Any]]], threads: int | None) -> dict[int | None, list[int]]:
    """The records' indices grouped by the threads each is re-run with: ``threads`` when given, else the
    thread count each file records (torch's default where it records none)."""
    groups: dict[int | None, list[int]] = {}
    for i, (_, record) in enumerate(records):
        groups.setdefault(threads if threads is not None else recorded_threads(record), []).append(i)
    return groups


def rerun_warnings(records: list[tuple[Path, dict[str, Any]]], device: str, world_size: int,
                   threads: int | None = None) -> list[str]:
    """One line per kind of difference between where the runs were made and where they are made again (the
    device type, the number of torchrun processes, threads forced by --threads, the CPU model, its vector
    extensions, the GPU, torch and numpy), which changes the numbers the runs compute."""
    lines, seen = [], set()
    here = this_machine(device)
    for path, record in records:
        made_on = ((record.get("environment") or {}).get("hardware") or {}).get("device")
        if made_on and made_on != device and ("device", made_on) not in seen:
            seen.add(("device", made_on))
            lines.append(f"{path} was made on {made_on}, and is made again on {device} here: expect other numbers "
                         f"(--device {made_on} to match)")
        processes = (record.get("distributed") or {}).get("world_size") or 1
        if processes != world_size and ("world", processes) not in seen:
            seen.add(("world", processes))
            lines.append(f"{path} was made by {processes} process(es) and is made again by {world_size} here: "
                         f"expect other numbers (torchrun --nproc_per_node={processes} -m harness rerun ... to match)")
        recorded = recorded_threads(record)
        if threads is not None and recorded is not None and recorded != threads and ("threads", recorded) not in seen:
            seen.add(("threads", recorded))
            lines.append(f"{path} was made with {recorded} torch thread(s); --threads {threads} re-runs it with "
                         f"{threads}: the numbers will differ (leave --threads out to use the recorded count)")
        differences = hardware_differences(record, here)
        if differences and ("hardware", tuple(differences)) not in seen:
            seen.add(("hardware", tuple(differences)))
            lines.append(f"{path} was made on other hardware or libraries ({'; '.join(differences)}): its numbers "
                         "may differ here for that reason alone; --check reports such differences as expected from "
                         "the hardware, not as a change of the code")
    return lines


def check_reruns(records: list[tuple[Path, dict[str, Any]]], results: list[dict[str, Any]],
                 device: str = "cpu") -> int:
    """Print, per run, whether its test metrics equal the recorded ones exactly; the number that differ on the
    hardware and libraries they were made with (differences on other hardware are reported as expected from
    it, and not counted)."""
    from tabulate import tabulate

    new = {(r["task"], r["run_name"], r["seed"]): r for r in results}
    here = this_machine(device)
    rows, differ, explained = [], 0, 0
    for path, record in records:
        result = new.get((record["task"], record["run_name"], record["seed"]))
        if result is None:
            continue
        old, now = record.get("metrics", {}), result.get("metrics", {})
        gaps = {k: abs(float(now[k]) - float(old[k])) for k in old.keys() & now.keys() if now[k] != old[k]}
        missing = sorted(old.keys() ^ now.keys())
        hardware = hardware_differences(record, here)
        if gaps or missing:
            worst = max(gaps, key=lambda k: gaps[k]) if gaps else None
            text = (f"{len(gaps)} of {len(old)} differ, largest {worst} {old[worst]:.4g} -> {now[worst]:.4g}"
                    if worst else "") + (f"; only in one: {', '.join(missing)}" if missing else "")
            if hardware and not missing:
                explained += 1
                verdict = "expected from hardware"
            else:
                differ += 1
                verdict = "differs"
        else:
            text, verdict = f"all {len(old)} identical", "reproduced"
        rows.append([str(path), verdict, text, "same" if not hardware else "; ".join(hardware)])
    print(f"\nRecorded against re-run test metrics\n"
          f"{tabulate(rows, headers=['result file', 'verdict', 'metrics', 'hardware and libraries'])}")
    same = len(rows) - explained
    print(f"\n{same - differ} of {same} run(s) made on this kind of machine reproduced their recorded test metrics "
          f"exactly" + (f"; {explained} made on other hardware or libraries differ, as expected from it (not counted "
                        "as a failure)" if explained else ""))
    return differ
