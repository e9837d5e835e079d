"""A grid of planned runs, run: the checks every launcher shares, then the runs one after another in this
process (``sequential``), in worker processes of this machine (``local``, :mod:`harness.run.launcher`) or as
SLURM jobs (``slurm``, :mod:`harness.run.slurm`); one report of what was refused and what failed.

The command line plans the runs (:mod:`harness.config.plan`) and describes how to run them (:class:`Grid`);
this module runs them and hands back an :class:`Outcome` whose tables the command line prints. A worker
process or a SLURM job receives one run as a :class:`Job`, a JSON object, and runs it with :func:`run_job`:
no launcher writes or parses command lines.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from harness.config import plan
from harness.config.plan import Run
from harness.errors import ConfigError, NotApplicable, RunError, one_line
from harness.run import checkpoint, contention, distributed, guards, locks, memory, preflight, runner
from harness.run.build import resolve_device
from harness.store.provenance import code_record, set_command
from harness.store.schema import read_result, result_path

LAUNCHERS = ("sequential", "local", "slurm")


@dataclass(frozen=True)
class Job:
    """One planned run as a worker process or a SLURM job receives it: a run of a task file (task, method, seed,
    overrides) or, with ``source``, the run a result file records; with the options of the command that planned
    it and that command's own words (``command``, recorded in the result file)."""

    out: str
    task: str | None = None
    method: str | None = None
    seed: int = 0
    overrides: tuple[str, ...] = ()
    source: str | None = None
    epochs: int | None = None
    init: str | None = None
    device: str = "auto"
    force: bool = False
    on_nan: str = "stop"
    threads: int | None = None
    include: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    tuning: dict[str, Any] | None = None  # the study that chose the run's settings, for its result file

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Job:
        data = json.loads(text)
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, dict) or not set(data) <= names or "out" not in data:
            raise ConfigError(f"not a job description: {text[:200]!r}; expected a JSON object with keys among "
                              f"{', '.join(sorted(names))}")
        for key in ("overrides", "include", "command"):
            data[key] = tuple(data.get(key) or ())
        return cls(**data)


@dataclass
class Grid:
    """How a command asks its runs to be run: the launcher and its options, and what every run shares."""

    out: Path
    device: str = "auto"
    launcher: str = "sequential"
    jobs: int | None = None  # worker processes of the local launcher
    threads: int | None = None  # torch threads per run (None: torch's own default, whatever the machine's load)
    auto_threads: bool = False  # --threads auto: train with the cores other work leaves free (changes the numbers)
    slurm: str | None = None  # --slurm KEY=VALUE,...: over the task file's launcher.slurm section
    wait: bool = False  # SLURM: wait for the jobs to end
    data_root: str | None = None  # runs rebuilt from result files: their dataset.root
    progress: bool = True
    force: bool = False
    on_nan: str = "stop"
    epochs: int | None = None
    init: Path | None = None
    include: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    later: tuple[str, str] = ("", "")  # SLURM without --wait: the commands to follow the jobs, and the tables


@dataclass
class Outcome:
    """What a grid produced: the result dicts of every run finished (now or before), the error of the runs that
    failed (raised by the caller after printing the tables of the others), the error of the methods refused
    (raised last), and whether jobs were submitted without waiting for them (no results to show yet)."""

    results: list[dict[str, Any]]
    failed: RunError | None = None
    refused: ConfigError | None = None
    submitted: bool = False
    main: bool = True  # False in the other processes of a torchrun job: they print nothing
    refused_names: frozenset[str] = frozenset()  # the run folders refused (and not run)

    def merged(self, other: "Outcome") -> "Outcome":
        """This outcome and ``other`` (a later part of the same command) as one: their results, the first
        failure and refusal."""
        return Outcome(results=self.results + other.results, failed=self.failed or other.failed,
                       refused=self.refused or other.refused, submitted=self.submitted or other.submitted,
                       main=self.main and other.main, refused_names=self.refused_names | other.refused_names)


def check(grid: Grid, world_size: int) -> None:
    """The launcher options fit together: positive --jobs/--threads, --jobs with local only, SLURM outside
    torchrun and with submitit installed."""
    if grid.launcher not in LAUNCHERS:
        raise ConfigError(f"unknown launcher {grid.launcher!r}; use one of {', '.join(LAUNCHERS)}")
    if grid.threads is not None and grid.threads < 1:
        raise ConfigError(f"--threads {grid.threads}: give a positive number of torch threads per run")
    if grid.launcher != "slurm":
        for flag, given in (("--slurm", grid.slurm is not None), ("--wait", grid.wait)):
            if given:
                raise ConfigError(f"{flag} goes with --launcher slurm; add --launcher slurm")
    if grid.launcher == "slurm":
        if grid.jobs is not None:
            raise ConfigError("--jobs sets the workers of --launcher local; SLURM runs every job of the array "
                              "(limit them with --slurm array_parallelism=N)")
        if world_size > 1:
            raise ConfigError("--launcher slurm submits jobs; run it without torchrun")
        try:
            import submitit  # noqa: F401
        except ImportError:
            raise ConfigError('--launcher slurm needs submitit, which is not installed; pip install '
                              '"swamp-bench[cluster]" (or python -m pip install "submitit>=1.5")') from None
        return
    if grid.launcher != "local":
        if grid.jobs is not None:
            raise ConfigError("--jobs sets the workers of --launcher local; add --launcher local")
        return
    if grid.jobs is not None and grid.jobs < 1:
        raise ConfigError(f"--jobs {grid.jobs}: give a positive number of worker processes")
    if world_size > 1:
        raise ConfigError("--launcher local starts processes of its own; run it without torchrun")


def options(grid: Grid, watch: contention.Snapshot | None = None) -> runner.RunOptions:
    """The run options of a grid's runs in this process: its device (the process's own GPU under torchrun),
    the process group joined under torchrun, and the machine's watch when this process may lower its threads."""
    device = resolve_device(grid.device)
    info = distributed.init_from_env(device.type)  # torchrun: join the process group; otherwise a single process
    if info.world_size > 1 and device.type == "cuda":
        device = torch.device("cuda", info.local_rank)
    check(grid, info.world_size)
    if grid.threads is not None:
        torch.set_num_threads(grid.threads)
    mine = ThreadWatch(watch, grid.auto_threads) if (watch is not None and grid.threads is None
                                                    and info.world_size == 1 and device.type == "cpu"
                                                    and grid.launcher == "sequential") else None
    return runner.RunOptions(device=device, out=grid.out, progress=grid.progress, force=grid.force, init=grid.init,
                             dist=info, on_nan=grid.on_nan, watch=mine)


def run(runs: list[Run], grid: Grid, opts: runner.RunOptions, inits: Sequence[Path | None] | None = None,
        last: bool = True) -> Outcome:
    """Every run of ``runs`` by the grid's launcher (skipped where finished); ``inits``: the checkpoint each run
    starts from when they differ (runs rebuilt from result files), else ``opts.init`` for all. ``last``: leave
    the process group (under torchrun) afterwards; False when the caller runs another part with the same
    options."""
    try:
        if grid.launcher == "sequential":
            results: list[dict[str, Any]] = []
            starts = list(inits) if inits is not None else [opts.init] * len(runs)
            for init in dict.fromkeys(starts):  # the runs of one starting point together, in the order given
                group = [r for r, i in zip(runs, starts, strict=True) if i == init]
                results += _sequential(group, dataclasses.replace(opts, init=init))
            outcome = Outcome(results)
        else:
            outcome = _in_workers(runs, grid, opts)
    finally:
        if last:
            distributed.shutdown()
    outcome.refused = refused_error(opts) if opts.dist.is_main else None
    outcome.main = opts.dist.is_main
    outcome.refused_names = frozenset(opts.refused)
    return outcome


def job(run: Run, grid: Grid, threads: int | None, tuning: dict[str, Any] | None = None) -> Job:
    """The :class:`Job` of one planned run of ``grid`` (``tuning``: the study its options record, as
    :attr:`harness.run.runner.RunOptions.tuning`)."""
    common: dict[str, Any] = dict(out=str(grid.out), epochs=grid.epochs, init=str(grid.init) if grid.init else None,
                  device=grid.device, force=grid.force, on_nan=grid.on_nan, threads=threads, include=grid.include,
                  command=grid.command, tuning=tuning)
    if run.source:  # rebuilt from a result file: the worker rebuilds it the same way
        overrides = (f"dataset.root={grid.data_root}",) if grid.data_root else ()
        return Job(source=run.source, seed=run.seed, overrides=overrides, **common)
    return Job(task=str(run.spec.path), method=run.method, seed=run.seed, overrides=tuple(run.spec.overrides),
               **common)


SKIPPED = "_skipped"  # in a result dict (like _path, never written): found finished, not trained by this command


def run_job(job: Job) -> dict[str, Any]:
    """Run one :class:`Job` in this process, as ``run`` or ``rerun`` of that one run would, without tables; the
    reply a worker sends back: whether it trained the run (False: found it finished) and its result file."""
    from harness.config import registry

    registry.set_include(list(job.include))
    set_command(list(job.command))
    init = Path(job.init) if job.init else None
    if job.source is not None:
        record = read_result(Path(job.source))
        runs = [plan.from_record(record, job.source, list(job.overrides))]
        init = Path(record["init"]) if record.get("init") else None
    else:
        if job.task is None or job.method is None:
            raise ConfigError("a job names a task and a method, or the result file of a run (source)")
        runs = plan.plan(job.task, list(job.overrides), [], [job.method], [job.seed], job.epochs,
                         checkpoint.init_label(init) if init else None)
    grid = Grid(out=Path(job.out), device=job.device, threads=job.threads, progress=False, force=job.force,
                on_nan=job.on_nan, epochs=job.epochs, init=init)
    outcome = run(runs, grid, dataclasses.replace(options(grid), tuning=job.tuning))
    if outcome.refused is not None:
        raise outcome.refused
    if outcome.failed is not None:
        raise outcome.failed
    return {"trained": any(not r.get(SKIPPED) for r in outcome.results),
            "results": [r["_path"] for r in outcome.results]}


# --- runs rebuilt from result files (harness rerun) -----------------------------------------------------------

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
    opts = opts if opts is not None else options(base)
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
        part = run(runs, setup, part_opts, inits, last=i == len(parts) - 1)
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


def hardware_of(record: dict[str, Any]) -> dict[str, Any]:
    """What a result file says of the hardware and libraries that shape its numbers: CPU model and vector
    extensions, GPU, torch and numpy versions (fields a file does not record are left out)."""
    env = record.get("environment") or {}
    hw, versions = env.get("hardware") or {}, env.get("versions") or {}
    facts = {"CPU": hw.get("cpu"), "vector extensions": hw.get("cpu_flags"),
             "GPU": (hw.get("gpu") or {}).get("name") if hw.get("device", "cpu") != "cpu" else None,
             "torch": versions.get("torch"), "numpy": versions.get("numpy")}
    return {k: v for k, v in facts.items() if v is not None}


def this_machine(device: str) -> dict[str, Any]:
    """:func:`hardware_of` for the machine at hand."""
    import numpy

    from harness.store import provenance

    facts: dict[str, Any] = {"CPU": provenance.cpu_model(), "vector extensions": provenance.cpu_flags(),
                             "torch": torch.__version__, "numpy": numpy.__version__}
    if device.startswith("cuda") and torch.cuda.is_available():
        facts["GPU"] = torch.cuda.get_device_name()
    return facts


def hardware_differences(record: dict[str, Any], here: dict[str, Any]) -> list[str]:
    """'CPU: Intel(R) Xeon(R) Processor -> AMD EPYC', one per fact the file records that differs here."""
    return [f"{k}: {_short(v)} -> {_short(here.get(k))}" for k, v in hardware_of(record).items()
            if k in here and here[k] != v]


def _short(value: Any) -> str:
    return " ".join(value) if isinstance(value, list) else str(value)


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


# --- the preamble every launcher shares ---------------------------------------------------------------------

def _finished(runs: list[Run], opts: runner.RunOptions) -> list[dict[str, Any] | None]:
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


def _failed(failures: list[tuple[Run, str]], pending: int, what: str) -> RunError:
    """The one error of a grid whose runs failed: how many, and the first one's reason."""
    run, reason = failures[0]
    return RunError(f"{len(failures)} of {pending} {what} failed, first {run.run_name} seed{run.seed} {reason}")


# --- sequential: this process ---------------------------------------------------------------------------------

def _sequential(runs: list[Run], opts: runner.RunOptions) -> list[dict[str, Any]]:
    """Run (or skip, when finished) every planned run in this process; the result dicts, on rank 0."""
    finished = _finished(runs, opts)
    results, data, key = [], None, None
    for i, (run, done) in enumerate(zip(runs, finished, strict=True), 1):
        tag = f"[{i}/{len(runs)}] {run.run_name} seed{run.seed}"
        if done is not None:
            if opts.dist.is_main:
                print(skip_line(tag, run, done))
            results.append({**done, SKIPPED: True})
            continue
        if data_key(run) != key:  # each dataset loaded when its first run comes, checked with all of its runs
            key = data_key(run)
            data = checked_data([r for r, d in zip(runs, finished, strict=True) if d is None and data_key(r) == key],
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


# --- local and slurm: other processes -------------------------------------------------------------------------

def _in_workers(runs: list[Run], grid: Grid, opts: runner.RunOptions) -> Outcome:
    """The checks of a sequential run, here, before any worker or job starts; then the unfinished runs in worker
    processes (local) or as one SLURM job array; the results of every run that finished."""
    from harness.run import launcher

    finished = _finished(runs, opts)
    for run, done in zip(runs, finished, strict=True):
        if done is not None:
            print(skip_line(f"{run.run_name} seed{run.seed}", run, done))
    pending = [run for run, done in zip(runs, finished, strict=True) if done is None]
    for key in dict.fromkeys(data_key(r) for r in pending):
        checked_data([r for r in pending if data_key(r) == key], opts)
    pending = [r for r in pending if r.run_name not in opts.refused]
    if grid.launcher == "local":
        jobs = grid.jobs or 2
        threads = grid.threads or launcher.default_threads(jobs)
        if pending:
            print(f"{len(pending)} run(s) in {jobs} worker process(es), {threads} torch thread(s) each")
        outcomes = launcher.run_local(pending, [job(r, grid, threads, opts.tuning) for r in pending], jobs, threads)
        failures = [(o.run, f"(exit {o.returncode}): {o.last_line.removeprefix('error: ')}")
                    for o in outcomes if o.returncode != 0]
        error = _failed(failures, len(pending), "run(s)") if failures else None
    else:
        failures, submitted = _slurm(pending, runs, grid, opts.tuning)
        if submitted:
            return Outcome([], submitted=True)
        error = _failed(failures, len(pending), "job(s)") if failures else None
    reading = dataclasses.replace(opts, force=False)  # the workers' result files, --force or not
    results = [d if d is not None else runner.finished_result(r, reading) for r, d in zip(runs, finished, strict=True)]
    return Outcome([r for r in results if r is not None], failed=error)


def slurm_options(runs: list[Run], text: str | None) -> dict[str, Any]:
    """The task file's launcher.slurm section, overridden option by option by --slurm ``text``."""
    from harness.config import launch

    section = launch.check_section(runs[0].spec.raw.get("launcher"), f"{runs[0].spec.path}: launcher")
    return {**section.get("slurm", {}), **(launch.parse_slurm(text) if text else {})}


def _slurm(pending: list[Run], runs: list[Run], grid: Grid,
           tuning: dict[str, Any] | None = None) -> tuple[list[tuple[Run, str]], bool]:
    """Submit the pending runs as one job array (``tuning``: the study the runs' options record); without --wait,
    print how to follow them and report them submitted; with it, wait and return the failures."""
    from harness.run import slurm

    options = slurm_options(runs, grid.slurm)
    slurm.check_cluster(options)
    if options.get("cluster", "slurm") != "slurm" and not grid.wait:
        raise ConfigError(f"--slurm cluster={options['cluster']} runs the jobs from this command, which must stay "
                          "to the end; add --wait")
    if not pending:
        return [], False
    task = runs[0].spec.name
    folder = slurm.jobs_folder(grid.out, task)
    threads = grid.threads or options.get("cpus_per_task")
    jobs = slurm.submit(pending, [job(r, grid, threads, tuning) for r in pending], folder, options, task)
    ids = [str(j.job_id) for j in jobs]
    print(f"{len(jobs)} job(s) submitted ({options.get('cluster', 'slurm')}): {', '.join(ids)}; logs under {folder}/"
          "<job id>/")
    if not grid.wait:
        print(f"follow them with: {grid.later[0]}\nwhen they have ended, the tables: {grid.later[1]}")
        return [], True
    ended = slurm.wait(pending, jobs, progress=grid.progress)
    return [(e.run, f"(job {e.job_id}): {e.error.removeprefix('error: ')}; its log: {folder}/{e.job_id}/")
            for e in ended if e.error], False
