"""The runs of a grid in this process, one after another (``--launcher sequential``), and the preamble every launcher
shares before anything trains: finished runs found and skipped, each dataset loaded once and checked with all of its
runs (memory, refusals, fit), the refusals and failures as one error each."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import torch

from harness.config.plan import Run
from harness.errors import ConfigError, NotApplicable, RunError, one_line
from harness.run import contention, distributed, guards, locks, memory, preflight, runner
from harness.run.jobs import SKIPPED
from harness.store.provenance import code_record
from harness.store.schema import result_path

# --- the preamble every launcher shares ---------------------------------------------------------------------

def finished(runs: list[Run], opts: runner.RunOptions) -> list[dict[str, Any] | None]:
    """Each run's result when it is finished with the same settings (a conflict fails before any training)."""
    return [runner.finished_result(r, opts) for r in runs]


def skip_line(tag: str, run: Run, done: dict[str, Any]) -> str:
    """What is printed for a run whose result file exists."""
    return f"{tag}: finished earlier, skipped ({done['_path']}; --force re-runs it){code_changed(run, done)}"


def code_changed(run: Run, done: dict[str, Any]) -> str:
    """A note for the skip line when the source files of the run's method, encoders or data source differ
    from those its result was made with (results that predate the record say nothing)."""
    from harness.run.build import classes_of

    then = (done.get("code") or {}).get("files")
    if not then:
        return ""
    now = code_record(classes_of(run.spec, run.method))["files"]
    moved = set(then.values()) & set(now.values())  # a file that moved keeps its hash (harness/data/sources/)
    changed = sorted(f for f in set(then) | set(now) if then.get(f) != now.get(f)
                     and (then.get(f) or now.get(f)) not in moved)
    return f"; note: its code changed since ({', '.join(changed)})" if changed else ""


def data_key(run: Run) -> str:
    return repr(run.spec.resolved(run.method)["dataset"])


def load_data(spec: Any) -> Any:
    """The task's data; running out of host memory while loading is one line and exit status 3."""
    try:
        return runner.load_data(spec)
    except Exception as err:
        if not guards.is_oom(err):
            raise
        raise RunError(f"out of memory while loading dataset {spec.dataset.kind!r} of {spec.path}: reduce its sizes "
                       "(dataset settings, or --set dataset.KEY=VALUE); nothing was written") from None


def checked_data(group: list[Run], opts: runner.RunOptions) -> Any:
    """The data of ``group`` (runs sharing one dataset setting), loaded once after the memory preflight of
    loading it, with every run of the group built on the meta device and its memory checked; methods refused
    on this data are recorded in ``opts.refused`` (an error when nothing else is left to run)."""
    memory.check_data(group[0].spec)
    data = load_data(group[0].spec)
    refused = preflight.refusals(group, data)
    if refused and all(r.run_name in refused for r in group) and not opts.refused:
        raise next(iter(refused.values()))  # nothing else to run: the one line of any bad input
    for name, err in refused.items():
        if isinstance(err, NotApplicable):
            print(f"note: {name} does not apply to this data and is skipped: {one_line(err)}", file=sys.stderr)
        else:
            print(f"warning: {name} is refused and does not run; the other methods do: {one_line(err)}",
                  file=sys.stderr)
    opts.refused.update(refused)
    group = [r for r in group if r.run_name not in refused]
    memory.check_runs(group, data, opts.device)
    preflight.check_fit(group, data)  # last: its warnings are printed only when no check before it failed
    return data


def refused_error(opts: runner.RunOptions) -> ConfigError | None:
    """The error a command ends with when some of its methods were refused (the others ran); None when only
    methods that do not apply to the data were skipped."""
    refused = {name: err for name, err in opts.refused.items() if not isinstance(err, NotApplicable)}
    if not refused:
        return None
    names = ", ".join(f"{name} ({one_line(err)})" for name, err in refused.items())
    return ConfigError(f"{len(refused)} run folder(s) refused, the others ran: {names}; fix or drop those "
                       "methods' settings")


def failed(failures: list[tuple[Run, str]], pending: int, what: str) -> RunError:
    """The one error of a grid whose runs failed: how many, and the first one's reason."""
    run, reason = failures[0]
    return RunError(f"{len(failures)} of {pending} {what} failed, first {run.run_name} seed{run.seed} {reason}")


# --- sequential: this process ---------------------------------------------------------------------------------

def run_here(runs: list[Run], opts: runner.RunOptions) -> list[dict[str, Any]]:
    """Run (or skip, when finished) every planned run in this process; the result dicts, on rank 0."""
    done_before = finished(runs, opts)
    results, data, key = [], None, None
    for i, (run, done) in enumerate(zip(runs, done_before, strict=True), 1):
        tag = f"[{i}/{len(runs)}] {run.run_name} seed{run.seed}"
        if done is not None:
            if opts.dist.is_main:
                print(skip_line(tag, run, done))
            results.append({**done, SKIPPED: True})
            continue
        if data_key(run) != key:  # each dataset loaded when its first run comes, checked with all of its runs
            key = data_key(run)
            data = checked_data([r for r, d in zip(runs, done_before, strict=True) if d is None and data_key(r) == key],
                                opts)
        if run.run_name in opts.refused:
            continue
        if opts.watch is not None:
            _fit_threads(opts)
        result = _run_locked(run, data, opts, tag)
        if result is not None:
            results.append(result)
    return results


@dataclass(frozen=True)
class ThreadWatch:
    """The machine's counters at a command's start, and whether the command asked for ``--threads auto``."""

    start: contention.Snapshot
    auto: bool = False


def _fit_threads(opts: runner.RunOptions) -> None:
    """Once, before the first run trains, on a machine where other work kept cores busy since the command started:
    say so in one ``note:`` line. The threads stay torch's default, so that the numbers are a function of the command
    and not of the moment (the thread count changes the arithmetic); only ``--threads auto`` trains with the cores
    the other work leaves free (at least one), which is recorded and changes the numbers."""
    watch: ThreadWatch = opts.watch
    opts.watch = None
    found = contention.threads_for(watch.start, torch.get_num_threads())
    if found is None:
        return
    fewer, record = found
    names = ", ".join(record["busy_names"]) or "many small processes"
    busy = (f"note: the machine is busy (other work kept {record['others_cores']:.1f} of its {record['cores']} cores "
            f"busy in the last {record['wall_s']:.1f} s: {names})")
    if not watch.auto:
        print(f"{busy}: torch trains with its {torch.get_num_threads()} thread(s) all the same, so the numbers are "
              f"those of a quiet machine; timings are marked [contended]. --threads N sets the threads, --threads "
              f"auto trains with the {fewer} the other work leaves free (other numbers); on a machine shared for "
              "good, OMP_WAIT_POLICY=PASSIVE in the environment keeps contended steps steadier at a cost to quiet "
              "ones (docs/measurement.md).", file=sys.stderr)
        return
    print(f"{busy}: --threads auto: torch trains with {fewer} thread(s) instead of {torch.get_num_threads()}, "
          "recorded in the result files; the thread count changes the numbers (docs/measurement.md). Timings taken "
          "on a busy machine are marked [contended].", file=sys.stderr)
    torch.set_num_threads(fewer)


def _run_locked(run: Run, data: Any, opts: runner.RunOptions, tag: str) -> dict[str, Any] | None:
    """``runner.run_one`` holding the run's lock (:mod:`harness.run.locks`): a second process reaching the same
    (task, run, seed) waits, then skips it when the first one finished it."""
    path = result_path(opts.out, run.spec.name, run.run_name, run.seed)
    with locks.run_lock(path, lambda holder: print(f"{tag}: waiting for {holder}", flush=True),
                        enabled=opts.dist.is_main) as waited:
        # checked again under the lock: another process may have finished the run since this one planned it,
        # whether this one had to wait for the lock or arrived just after the other released it
        done = distributed.from_main(lambda: runner.finished_result(run, opts), opts.dist)
        if done is None:
            return runner.run_one(run, data, opts)
    if opts.dist.is_main:
        how = "while this one waited" if waited else "since this command started"
        print(f"{tag}: finished by the other process {how}, skipped ({done['_path']})")
    return {**done, SKIPPED: True}
