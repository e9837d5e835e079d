"""Command line: ``python -m harness {run,list,table,plot,clusters,ensemble,compare,status,bench} ...``. Bad input exits with status 2."""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from pathlib import Path

from harness.errors import ConfigError, NotApplicable, RunError, did_you_mean, one_line
from harness.config.checks import SHIPPED as TASKS_DIR


def parse_seeds(text: str) -> list[int]:
    """'0,1,2' -> [0, 1, 2]; also 'A-B' ranges."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part.strip()[1:]:
                lo, hi = part.split("-", 1)
                seeds.extend(range(int(lo), int(hi) + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise ConfigError(f"--seeds {text!r}: expected comma-separated integers such as 0,1,2 or 0-4") from None
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds {text!r}: expected distinct non-negative integers")
    if max(seeds) >= 2**63:
        raise ConfigError(f"--seeds {text!r}: seeds must be below 2^63 (torch's seed is a 64-bit integer)")
    return seeds


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are ConfigErrors: one line and exit status 2, like any other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        hint = did_you_mean(choice.group(1), re.findall(r"'([^']*)'", choice.group(2))) if choice else ""
        raise ConfigError(f"{message}{hint}; see `{self.prog} --help`")


def _unrecognized(parser: argparse.ArgumentParser, extra: list[str]) -> ConfigError:
    """Unknown options of a subcommand, with the closest valid option."""
    options = [o for action in parser._actions for o in action.option_strings]
    flag = next((e for e in extra if e.startswith("-")), extra[0]).split("=")[0]
    return ConfigError(f"unrecognized arguments: {' '.join(extra)}{did_you_mean(flag, options)}; "
                       f"see `{parser.prog} --help`")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m harness", description="SwAMP Bench: cross-modal retrieval benchmarks")
    sub = parser.add_subparsers(dest="command", required=True)
    plugins = argparse.ArgumentParser(add_help=False)
    plugins.add_argument("--include", action="append", default=[], metavar="PATH",
                         help="also load method, source and encoder files from PATH, a folder or a .py file "
                              "(repeatable; also the SWAMP_BENCH_INCLUDE environment variable, ':'-separated)")
    run = sub.add_parser("run", help="train and test methods of a task; write results and tables", parents=[plugins])
    run.add_argument("task", help="task YAML, e.g. tasks/synthetic.yaml")
    run.add_argument("--methods", default="", help="comma-separated method names declared by the task (default: all)")
    run.add_argument("--seeds", default="0", help="comma-separated seeds (default: 0)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME.KEY=VALUE",
                     help="override a value, e.g. swamp.K=500 or train.lr=0.001 (repeatable)")
    run.add_argument("--sweep", action="append", default=[], metavar="NAME.KEY=V1,V2,...",
                     help="run every listed value, e.g. swamp.K=200,500,1000; several --sweep flags form a grid")
    run.add_argument("--epochs", type=int, default=None, help="override the number of epochs of every method")
    run.add_argument("--init", default=None, metavar="PATH",
                     help="start the encoders from a checkpoint (seed<k>.pt) or result file (seed<k>.json)")
    run.add_argument("--reference", default=None, metavar="RUN",
                     help="mark significant differences from this run in the tables, e.g. contrastive")
    run.add_argument("--test-stat", default=None, metavar="STAT",
                     help="statistic the significance columns test in each row group, e.g. mAP (default: the first, R@k)")
    run.add_argument("--force", action="store_true",
                     help="re-run finished runs and restart interrupted ones (default: skip and resume)")
    run.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    run.add_argument("--data-root", default=None, help="dataset folder (sets dataset.root)")
    run.add_argument("--out", default="results", help="results folder (default: results/)")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument("--launcher", choices=("sequential", "local", "slurm"), default="sequential",
                     help="sequential (default): the runs one after another in this process; local: each run in a "
                          "worker process of its own, --jobs at a time; slurm: one SLURM job per run, submitted as "
                          "a job array through submitit (docs/slurm.md)")
    run.add_argument("--slurm", default=None, metavar="KEY=VALUE,...",
                     help="options of --launcher slurm, e.g. partition=gpu,gpus_per_node=1,timeout_min=600 (they "
                          "override the task file's launcher.slurm section; docs/slurm.md lists them)")
    run.add_argument("--wait", action="store_true",
                     help="with --launcher slurm: wait for the jobs, with a progress bar, and print the tables")
    run.add_argument("--jobs", type=int, default=None, metavar="N",
                     help="worker processes of --launcher local (default: 2)")
    run.add_argument("--threads", type=int, default=None, metavar="N",
                     help="torch threads per run (default: torch's own; with --launcher local, cores / jobs)")
    run.add_argument("--no-tables", action="store_true", help=argparse.SUPPRESS)  # workers of a launcher
    run.add_argument("--on-nan", choices=("stop", "skip"), default="stop",
                     help="a step with a NaN or infinite loss: stop the run there (default) or skip its update")
    rerun = sub.add_parser("rerun", help="run again what result files record, from their own settings; --check: "
                                         "compare the metrics", parents=[plugins])
    rerun.add_argument("results", nargs="+", metavar="RESULT",
                       help="result files (seed<k>.json), or folders searched for them, e.g. results/wikipedia")
    rerun.add_argument("--out", default="runs", help="results folder to write into (default: runs/)")
    rerun.add_argument("--data-root", default=None,
                       help="dataset folder (sets dataset.root; default: the recorded root, variables re-expanded)")
    rerun.add_argument("--check", action="store_true",
                       help="compare each run's test metrics with the recorded ones; exit 1 when any differ")
    rerun.add_argument("--reference", default=None, metavar="RUN", help="as for run: marks in the tables")
    rerun.add_argument("--force", action="store_true", help="replace finished runs in --out (default: skip them)")
    rerun.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    rerun.add_argument("--launcher", choices=("sequential", "local"), default="sequential",
                       help="sequential (default): one run after another in this process; local: worker processes, "
                            "--jobs at a time, as for run")
    rerun.add_argument("--jobs", type=int, default=None, metavar="N",
                       help="worker processes of --launcher local (default: 2)")
    rerun.add_argument("--threads", type=int, default=None, metavar="N",
                       help="torch threads per run (default: torch's own; with --launcher local, cores / jobs)")
    rerun.add_argument("--no-progress", action="store_true", help="hide progress bars")
    rerun.add_argument("--no-tables", action="store_true", help=argparse.SUPPRESS)  # workers of a launcher
    rerun.set_defaults(slurm=None, wait=False)  # for the launcher checks shared with run
    lst = sub.add_parser("list", help="tasks and the methods each declares; registered components", parents=[plugins])
    lst.add_argument("--tasks-dir", default=str(TASKS_DIR))
    table = sub.add_parser("table", help="re-render tables from saved result files", parents=[plugins])
    table.add_argument("folder", help="e.g. results/synthetic")
    table.add_argument("--format", default="simple", help="console format (tabulate name; md and tex also accepted)")
    table.add_argument("--reference", default=None, metavar="RUN",
                       help="mark significant differences from this run, e.g. contrastive")
    table.add_argument("--test-stat", default=None, metavar="STAT",
                       help="statistic the significance columns test in each row group, e.g. mAP (default: R@k)")
    table.add_argument("--split", default="test", choices=("test", "val"),
                       help="val: the validation metrics at each run's selected epoch, written to validation.md/.tex")
    plot = sub.add_parser("plot", help="metric against a swept setting, one line per method (PNG and PDF)")
    plot.add_argument("folder", help="results folder of one task, e.g. results/ablations/synthetic")
    plot.add_argument("--x", required=True, metavar="NAME.KEY", help="swept setting, e.g. swamp.K or train.lr")
    plot.add_argument("--metric", default=None, help="metric to plot (default: the task's selection metric)")
    plot.add_argument("--reference", default=None, metavar="RUN", help="run drawn as a horizontal mean ± std band")
    plot.add_argument("--out", default=None, help="output path without suffix (default: FOLDER/plots/<x>_<metric>)")
    plot.add_argument("--logx", action="store_true", help="logarithmic x axis")
    plot.add_argument("--ignore", action="append", default=[], metavar="NAME.KEY",
                      help="a setting the sweep's runs share but the task file does not, e.g. train.epochs "
                           "(repeatable)")
    clusters = sub.add_parser("clusters", help="report on the prototypes a trained SwAMP model learned", parents=[plugins])
    clusters.add_argument("target", help="result file (seed<k>.json) or its checkpoint (seed<k>.pt)")
    clusters.add_argument("--out", default=None, help="report folder (default: beside the result, <run>/clusters-seed<k>)")
    clusters.add_argument("--split", default="test", help="split whose items are assigned (default: test)")
    clusters.add_argument("--top-words", type=int, default=5, help="frequent words listed per text cluster")
    clusters.add_argument("--members", type=int, default=5, help="member ids listed per cluster and modality")
    clusters.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    ens = sub.add_parser("ensemble", help="evaluate the average of two finished runs' score matrices", parents=[plugins])
    ens.add_argument("results", nargs=2, metavar="RESULT", help="result files (seed<k>.json) or checkpoints of the runs")
    ens.add_argument("--out", default=None, help="results folder (default: the one holding the first run's task)")
    ens.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    ens.add_argument("--data-root", default=None, help="dataset folder (sets dataset.root)")
    comp = sub.add_parser("compare", help="accuracy regressions: two result folders of the same task(s), per metric")
    comp.add_argument("old", help="result folder before the change, e.g. results/synthetic")
    comp.add_argument("new", help="result folder after it, e.g. runs/synthetic")
    comp.add_argument("--metric", action="append", default=[], metavar="METRIC",
                      help="compare only this metric, e.g. a2b/R@1 (repeatable; default: every metric of both)")
    comp.add_argument("--alpha", type=float, default=0.05, help="significance level (default: 0.05)")
    comp.add_argument("--min-diff", type=float, default=0.5,
                      help="smallest difference, in the metric's units, that counts as a change (default: 0.5)")
    comp.add_argument("--fail-on-change", action="store_true", help="exit 1 when a change is flagged")
    comp.add_argument("--only-flagged", action="store_true", help="list only the flagged metrics")
    comp.add_argument("--format", default="simple", help="table format (tabulate name, e.g. github)")
    rep = sub.add_parser("report", help="a results site (HTML) or Markdown pages generated from result files")
    rep.add_argument("folders", nargs="+", metavar="RESULTS", help="folders holding result files, e.g. results/")
    rep.add_argument("--out", required=True, help="folder to write the site (or the Markdown pages) into")
    rep.add_argument("--format", default="html", choices=("html", "md"),
                     help="html (default): a self-contained site; md: pages for docs/ that link the result files")
    rep.add_argument("--no-figures", action="store_true", help="tables and provenance only (faster)")
    rep.add_argument("--no-progress", action="store_true", help="no progress bar")
    status = sub.add_parser("status", help="which runs of a grid are finished, running, interrupted or not started",
                            parents=[plugins])
    status.add_argument("out", help="results folder, e.g. results")
    status.add_argument("task", nargs="?", default=None,
                        help="task YAML: list its planned runs, those not started included (default: the runs found)")
    status.add_argument("--methods", default="", help="the run command's --methods (with TASK)")
    status.add_argument("--seeds", default=None, help="the run command's --seeds (with TASK; default: 0)")
    status.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME.KEY=VALUE",
                        help="the run command's --set (with TASK)")
    status.add_argument("--sweep", action="append", default=[], metavar="NAME.KEY=V1,V2,...",
                        help="the run command's --sweep (with TASK)")
    status.add_argument("--epochs", type=int, default=None, help="the run command's --epochs (with TASK)")
    status.add_argument("--init", default=None, metavar="PATH", help="the run command's --init (with TASK)")
    status.add_argument("--format", default="simple", help="table format (tabulate name, e.g. github)")
    from harness.bench import DEFAULT_FACTOR

    bench = sub.add_parser("bench", help="regression gate: asv suite on REV and on the working tree; exit 1 if slower")
    bench.add_argument("--against", required=True, metavar="REV", help="commit to compare with, e.g. HEAD~1 or main")
    bench.add_argument("--factor", type=float, default=DEFAULT_FACTOR,
                       help=f"after/before ratio that fails the gate (default: {DEFAULT_FACTOR}, from measured noise)")
    bench.add_argument("--bench", default=None, metavar="REGEX", help="only benchmarks matching REGEX (asv's -b)")
    parser.set_defaults(subcommands=sub.choices)
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    import torch

    from harness.config import params as P
    from harness.config import plan
    from harness.config import spec as spec_file
    from harness.report import tables
    from harness.run import checkpoint, contention, preflight, runner
    from harness.run import distributed as dd
    from harness.store.schema import result_path

    watch = contention.snapshot()  # from here to the first training step: how busy is the machine?
    overrides = list(args.overrides) + ([f"dataset.root={args.data_root}"] if args.data_root else [])
    init = Path(args.init) if args.init else None
    if init is not None:
        checkpoint.checkpoint_of(init)
    methods = [m for m in args.methods.split(",") if m]
    runs = plan.plan(args.task, overrides, args.sweep, methods, parse_seeds(args.seeds), args.epochs,
                     checkpoint.init_label(init) if init else None)
    declared = spec_file.read_yaml(Path(args.task)).get("methods") or {}
    for name in dict.fromkeys(m for m in methods if m not in declared):
        print(f"note: {name} is a registered method that {args.task} does not declare: it runs with its default "
              f"settings (declare it to set them: `{name}: {{method: {name}}}` under methods:)", file=sys.stderr)
    _plugin_warnings()  # before the runs start rather than after their tables
    names = list(dict.fromkeys(r.run_name for r in runs))
    try:
        args.reference = plan.resolve_reference(args.reference, ((r.run_name, r.method) for r in runs))
    except ConfigError:
        raise ConfigError(f"--reference {args.reference!r} is not among this command's runs: {', '.join(names)}"
                          f"{did_you_mean(args.reference, names)}; name one of them (or the method of exactly "
                          "one of them)") from None
    if args.test_stat is not None:
        tables.tested_column(tables.column_stats(P.as_dict(runs[0].spec.metrics)), args.test_stat)
    out = Path(args.out)
    preflight.check_out(out, [result_path(out, r.spec.name, r.run_name, r.seed).parent for r in runs])
    preflight.check_environment()
    device = runner.resolve_device(args.device)
    info = dd.init_from_env(device.type)  # torchrun: join the process group; otherwise a single process
    if info.world_size > 1 and device.type == "cuda":
        device = torch.device("cuda", info.local_rank)
    opts = runner.RunOptions(device=device, out=Path(args.out), progress=not args.no_progress, force=args.force,
                             init=init, dist=info, on_nan=args.on_nan,
                             watch=watch if args.threads is None and info.world_size == 1 and device.type == "cpu"
                             and args.launcher == "sequential" else None)
    _check_launcher(args, info)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    launch = {"local": _run_local, "slurm": _run_slurm}.get(args.launcher)
    try:
        results = launch(runs, opts, args) if launch else _run_all(runs, opts)
    finally:
        dd.shutdown()
    refused = _refused_error(opts) if info.is_main else None
    if not info.is_main or args.no_tables or not results:
        if refused is not None:
            raise refused
        return 0
    folder = Path(args.out) / runs[0].spec.name
    if args.reference in opts.refused:
        args.reference = None  # refused: it has no result to compare with
    _print_tables(results, args.reference, args.test_stat)
    paths = tables.write_tables(results, folder, reference=args.reference, test_stat=args.test_stat)
    print(f"\nresults: {folder}/<run>/seed<k>.json; tables: {', '.join(str(p) for p in paths)}")
    if refused is not None:
        raise refused
    return 0


def cmd_rerun(args: argparse.Namespace) -> int:
    """``harness rerun``: every given result file's run, rebuilt from the settings the file records."""
    import torch

    from harness.config import plan
    from harness.report import tables
    from harness.run import distributed as dd
    from harness.run import checkpoint, preflight, runner
    from harness.store.schema import result_path

    records = _result_records(args.results)
    overrides = [f"dataset.root={args.data_root}"] if args.data_root else []
    runs = [plan.from_record(record, str(path), overrides) for path, record in records]
    out = Path(args.out)
    keys = [(r.spec.name, r.run_name, r.seed) for r in runs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        task, name, seed = twice[0]
        raise ConfigError(f"two of the given result files are the same run ({task}/{name} seed{seed}); give each "
                          "run once")
    inits = [Path(record["init"]) if record.get("init") else None for _, record in records]
    for init in dict.fromkeys(i for i in inits if i is not None):
        checkpoint.checkpoint_of(init)  # a run that started from a checkpoint starts from it again
    preflight.check_out(out, [result_path(out, r.spec.name, r.run_name, r.seed).parent for r in runs])
    preflight.check_environment()
    if args.launcher == "local" and any(inits):
        raise ConfigError("--launcher local: some of these runs started from a checkpoint; re-run those "
                          "without --launcher local")
    device = runner.resolve_device(args.device)
    opts = runner.RunOptions(device=device, out=out, progress=not args.no_progress, force=args.force, init=None,
                             dist=dd.init_from_env(device.type), on_nan="stop")
    _check_launcher(args, opts.dist)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    for line in _rerun_warnings(records, device.type, opts.dist.world_size):
        print(f"warning: {line}", file=sys.stderr)
    print(f"re-running {len(runs)} run(s) from their result files into {out}/")
    results = []
    try:
        if args.launcher == "local":
            common = ["--out", str(out), "--device", args.device, *(["--force"] if args.force else []),
                      *(["--data-root", args.data_root] if args.data_root else []),
                      *[arg for path in args.include for arg in ("--include", path)]]
            results = _run_local(runs, opts, args, common)
        else:
            for init in dict.fromkeys(inits):  # the runs of one starting point together, in the order given
                group = [r for r, i in zip(runs, inits) if i == init]
                results += _run_all(group, dataclasses.replace(opts, init=init))
    finally:
        dd.shutdown()
    if not opts.dist.is_main or args.no_tables:  # under torchrun the first process prints and checks
        return 0
    by_task: dict[str, list[dict]] = {}
    for result in results:
        by_task.setdefault(result["task"], []).append(result)
    for task, group in by_task.items():
        _print_tables(group, args.reference)
        paths = tables.write_tables(group, out / task, reference=args.reference)
        print(f"\nresults: {out / task}/<run>/seed<k>.json; tables: {', '.join(str(p) for p in paths)}")
    if not args.check:
        return 0
    differ = _check_reruns(records, results)
    return 1 if differ else 0


def _rerun_warnings(records: list[tuple[Path, dict]], device: str, world_size: int) -> list[str]:
    """One line per kind of difference between where the runs were made and where they are made again (the
    device type, the number of torchrun processes), which changes the numbers the runs compute."""
    lines, seen = [], set()
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
    return lines


def _result_records(targets: list[str]) -> list[tuple[Path, dict]]:
    """(path, record) of every result file named, or found in a named folder (as `harness table` finds them),
    each once, in order."""
    from harness.store.schema import load_results

    records: dict[Path, dict] = {}
    for target in targets:
        path = Path(target)
        if path.is_dir():
            found = load_results(path)
            if not found:
                raise ConfigError(f"{path}: no result files (seed<k>.json) in this folder or below it")
            records.update((Path(r["_path"]), r) for r in found if Path(r["_path"]) not in records)
        elif path.is_file():
            try:
                records.setdefault(path, json.loads(path.read_text()))
            except (OSError, ValueError) as err:
                raise ConfigError(f"cannot read the result file {path} ({err})") from None
        else:
            raise ConfigError(f"{path}: no such result file or folder; give result files (seed<k>.json) or "
                              "folders that hold them")
    return list(records.items())


def _check_reruns(records: list[tuple[Path, dict]], results: list[dict]) -> int:
    """Print, per run, whether its test metrics equal the recorded ones exactly; the number that differ."""
    from tabulate import tabulate

    new = {(r["task"], r["run_name"], r["seed"]): r for r in results}
    rows, differ = [], 0
    for path, record in records:
        result = new.get((record["task"], record["run_name"], record["seed"]))
        if result is None:
            continue
        old, now = record.get("metrics", {}), result.get("metrics", {})
        gaps = {k: abs(float(now[k]) - float(old[k])) for k in old.keys() & now.keys() if now[k] != old[k]}
        missing = sorted(old.keys() ^ now.keys())
        if gaps or missing:
            differ += 1
            worst = max(gaps, key=gaps.get) if gaps else None
            text = (f"{len(gaps)} of {len(old)} differ, largest {worst} {old[worst]:.4g} -> {now[worst]:.4g}"
                    if worst else "") + (f"; only in one: {', '.join(missing)}" if missing else "")
        else:
            text = f"all {len(old)} identical"
        rows.append([str(path), text])
    print(f"\nRecorded against re-run test metrics\n{tabulate(rows, headers=['result file', 'metrics'])}")
    print(f"\n{len(rows) - differ} of {len(rows)} run(s) reproduced their recorded test metrics exactly")
    return differ


def _check_launcher(args: argparse.Namespace, info) -> None:
    """--jobs and --threads are positive and --jobs goes with --launcher local, outside torchrun."""
    if args.threads is not None and args.threads < 1:
        raise ConfigError(f"--threads {args.threads}: give a positive number of torch threads per run")
    if args.launcher != "slurm":
        for flag, given in (("--slurm", args.slurm is not None), ("--wait", args.wait)):
            if given:
                raise ConfigError(f"{flag} goes with --launcher slurm; add --launcher slurm")
    if args.launcher == "slurm":
        if args.jobs is not None:
            raise ConfigError("--jobs sets the workers of --launcher local; SLURM runs every job of the array "
                              "(limit them with --slurm array_parallelism=N)")
        if info.world_size > 1:
            raise ConfigError("--launcher slurm submits jobs; run it without torchrun")
        try:
            import submitit  # noqa: F401
        except ImportError:
            raise ConfigError('--launcher slurm needs submitit, which is not installed; pip install '
                              '"swamp-bench[cluster]" (or python -m pip install "submitit>=1.5")') from None
        return
    if args.launcher != "local":
        if args.jobs is not None:
            raise ConfigError("--jobs sets the workers of --launcher local; add --launcher local")
        return
    if args.jobs is not None and args.jobs < 1:
        raise ConfigError(f"--jobs {args.jobs}: give a positive number of worker processes")
    if info.world_size > 1:
        raise ConfigError("--launcher local starts processes of its own; run it without torchrun")


def _run_local(runs: list, opts, args: argparse.Namespace, common: list[str] | None = None) -> list[dict]:
    """``--launcher local``: the checks of a sequential run, then one worker process per unfinished run; the
    result files of every run (raises RunError naming the runs that failed, after printing the others).
    ``common``: the options every worker gets (default: those of ``run``'s arguments)."""
    from harness.run import launcher, runner

    jobs = args.jobs or 2
    threads = args.threads or launcher.default_threads(jobs)
    finished = [runner.finished_result(run, opts) for run in runs]
    pending = [run for run, done in zip(runs, finished) if done is None]
    for run, done in zip(runs, finished):
        if done is not None:
            print(_skip_line(f"{run.run_name} seed{run.seed}", run, done))
    for key in dict.fromkeys(_data_key(r) for r in pending):  # what a sequential run checks, before any worker
        _checked_data([r for r in pending if _data_key(r) == key], opts)
    pending = [r for r in pending if r.run_name not in opts.refused]
    common = _worker_args(args, opts) if common is None else common
    if pending:
        print(f"{len(pending)} run(s) in {jobs} worker process(es), {threads} torch thread(s) each")
    outcomes = launcher.run_local(pending, common, jobs, threads)
    failed = [o for o in outcomes if o.returncode != 0]
    done = {(o.run.run_name, o.run.seed) for o in outcomes if o.returncode == 0}
    reading = dataclasses.replace(opts, force=False)  # the workers' result files, --force or not
    results = [d if d is not None else runner.finished_result(r, reading)
               for r, d in zip(runs, finished) if d is not None or (r.run_name, r.seed) in done]
    if failed:
        if results:
            _print_tables(results, args.reference, getattr(args, "test_stat", None))
        first = failed[0]
        raise RunError(f"{len(failed)} of {len(pending)} run(s) failed, first {first.run.run_name} seed{first.run.seed}"
                       f" (exit {first.returncode}): {first.last_line.removeprefix('error: ')}")
    return results


def _worker_args(args: argparse.Namespace, opts) -> list[str]:
    """The options every worker of a launcher shares (its task, method, seed and overrides come first)."""
    return ["--out", str(opts.out), "--device", args.device, "--on-nan", args.on_nan,
            *(["--epochs", str(args.epochs)] if args.epochs is not None else []),
            *(["--init", args.init] if args.init else []), *(["--force"] if args.force else []),
            *[arg for path in args.include for arg in ("--include", path)]]


def _slurm_options(runs: list, args: argparse.Namespace) -> dict:
    """The task file's launcher.slurm section, overridden option by option by --slurm."""
    from harness.config import launch

    section = launch.check_section(runs[0].spec.raw.get("launcher"), f"{runs[0].spec.path}: launcher")
    return {**section.get("slurm", {}), **(launch.parse_slurm(args.slurm) if args.slurm else {})}


def _run_slurm(runs: list, opts, args: argparse.Namespace) -> list[dict] | None:
    """``--launcher slurm``: the checks of a sequential run, then one job per unfinished run as one array.
    With --wait, the result files of every run once the jobs ended (raises RunError naming the failed ones);
    without it, None after printing the job ids and the commands that follow the grid."""
    from harness.run import launcher, runner
    from harness.run import slurm

    options = _slurm_options(runs, args)
    slurm.check_cluster(options)
    if options.get("cluster", "slurm") != "slurm" and not args.wait:
        raise ConfigError(f"--slurm cluster={options['cluster']} runs the jobs from this command, which must stay "
                          "to the end; add --wait")
    finished = [runner.finished_result(run, opts) for run in runs]
    pending = [run for run, done in zip(runs, finished) if done is None]
    for run, done in zip(runs, finished):
        if done is not None:
            print(_skip_line(f"{run.run_name} seed{run.seed}", run, done))
    for key in dict.fromkeys(_data_key(r) for r in pending):  # what a sequential run checks, before submitting
        _checked_data([r for r in pending if _data_key(r) == key], opts)
    pending = [r for r in pending if r.run_name not in opts.refused]
    task = runs[0].spec.name
    folder = slurm.jobs_folder(opts.out, task)
    later = (slurm.status_command(opts.out, runs[0].spec.path, args), f"python -m harness table {opts.out / task}")
    if pending:
        threads = args.threads or options.get("cpus_per_task")
        argvs = [launcher.run_argv(run, _worker_args(args, opts), threads)[1:] for run in pending]
        jobs = slurm.submit(pending, argvs, folder, options, f"{task}")
        ids = [str(job.job_id) for job in jobs]
        print(f"{len(jobs)} job(s) submitted ({options.get('cluster', 'slurm')}): {', '.join(ids)}; logs under {folder}/"
              "<job id>/")
        if not args.wait:
            print(f"follow them with: {later[0]}\nwhen they have ended, the tables: {later[1]}")
            return None
        ended = slurm.wait(pending, jobs, progress=not args.no_progress)
        failed = [e for e in ended if e.error]
    else:
        failed = []
    reading = dataclasses.replace(opts, force=False)
    results = [d if d is not None else runner.finished_result(r, reading) for r, d in zip(runs, finished)]
    results = [r for r in results if r is not None]
    if failed:
        if results:
            _print_tables(results, args.reference, args.test_stat)
        first = failed[0]
        raise RunError(f"{len(failed)} of {len(pending)} job(s) failed, first {first.run.run_name} seed{first.run.seed}"
                       f" (job {first.job_id}): {first.error.removeprefix('error: ')}; its log: {folder}/"
                       f"{first.job_id}/")
    return results


def _checked_data(group: list, opts):
    """The data of ``group`` (runs sharing one dataset setting), loaded once after the memory preflight of
    loading it, with every run of the group built on the meta device and its memory checked."""
    from harness.run import memory, preflight

    memory.check_data(group[0].spec)
    data = _load_data(group[0].spec)
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


def _refused_error(opts) -> ConfigError | None:
    """The error a command ends with when some of its methods were refused (the others ran); None when only
    methods that do not apply to the data were skipped."""
    refused = {name: err for name, err in opts.refused.items() if not isinstance(err, NotApplicable)}
    if not refused:
        return None
    names = ", ".join(f"{name} ({one_line(err)})" for name, err in refused.items())
    return ConfigError(f"{len(refused)} run folder(s) refused, the others ran: {names}; fix or drop those "
                       "methods' settings")


def _skip_line(tag: str, run, done: dict) -> str:
    """What is printed for a run whose result file exists."""
    return f"{tag}: finished earlier, skipped ({done['_path']}; --force re-runs it){_code_changed(run, done)}"


def _run_all(runs: list, opts) -> list[dict]:
    """Run (or skip, when finished) every planned run; the result dicts, on rank 0."""
    from harness.run import runner

    finished = [runner.finished_result(run, opts) for run in runs]  # conflicts fail before any training
    results, data, data_key = [], None, None
    for i, (run, done) in enumerate(zip(runs, finished), 1):
        tag = f"[{i}/{len(runs)}] {run.run_name} seed{run.seed}"
        if done is not None:
            if opts.dist.is_main:
                print(_skip_line(tag, run, done))
            results.append(done)
            continue
        if _data_key(run) != data_key:
            data_key = _data_key(run)
            data = _checked_data([r for r, d in zip(runs, finished) if d is None and _data_key(r) == data_key], opts)
        if run.run_name in opts.refused:
            continue
        if opts.watch is not None:
            _fit_threads(opts)
        result = _run_locked(run, data, opts, tag)
        if result is not None:
            results.append(result)
    return results


def _fit_threads(opts) -> None:
    """Once, before the first run trains: on a machine where other work kept cores busy since the command started,
    train with the cores it leaves free (at least one), and say so; the timings are marked [contended] anyway."""
    import torch

    from harness.run import contention

    found = contention.threads_for(opts.watch, torch.get_num_threads())
    opts.watch = None
    if found is None:
        return
    threads, record = found
    names = ", ".join(record["busy_names"]) or "many small processes"
    print(f"note: the machine is busy (other work kept {record['others_cores']:.1f} of its {record['cores']} cores "
          f"busy in the last {record['wall_s']:.1f} s: {names}): torch trains with {threads} thread(s) instead of "
          f"{torch.get_num_threads()}, which slows it less beside other work (docs/measurement.md); --threads N "
          "sets it. Timings taken on a busy machine are marked [contended].", file=sys.stderr)
    torch.set_num_threads(threads)


def _code_changed(run, done: dict) -> str:
    """A note for the skip line when the source files of the run's method, encoders or data source differ
    from those its result was made with (results that predate the record say nothing)."""
    from harness.run.build import classes_of
    from harness.store.provenance import code_record

    then = (done.get("code") or {}).get("files")
    if not then:
        return ""
    now = code_record(classes_of(run.spec, run.method))["files"]
    changed = sorted(f for f in set(then) | set(now) if then.get(f) != now.get(f))
    return f"; note: its code changed since ({', '.join(changed)})" if changed else ""


def _load_data(spec):
    """The task's data; running out of host memory while loading is one line and exit status 3."""
    from harness.run import guards, runner

    try:
        return runner.load_data(spec)
    except Exception as err:
        if not guards.is_oom(err):
            raise
        raise RunError(f"out of memory while loading dataset {spec.dataset.kind!r} of {spec.path}: reduce its sizes "
                       "(dataset settings, or --set dataset.KEY=VALUE); nothing was written") from None


def _data_key(run) -> str:
    return repr(run.spec.resolved(run.method)["dataset"])


def _run_locked(run, data, opts, tag: str) -> dict | None:
    """``runner.run_one`` holding the run's lock (``harness.run.locks``): a second process reaching the same
    (task, run, seed) waits, then skips it when the first one finished it."""
    from harness.run import distributed as dd
    from harness.run import locks
    from harness.run import runner
    from harness.store.schema import result_path

    path = result_path(opts.out, run.spec.name, run.run_name, run.seed)
    with locks.run_lock(path, lambda holder: print(f"{tag}: waiting for {holder}", flush=True),
                        enabled=opts.dist.is_main) as waited:
        # checked again under the lock: another process may have finished the run since this one planned it,
        # whether this one had to wait for the lock or arrived just after the other released it
        done = dd.from_main(lambda: runner.finished_result(run, opts), opts.dist)
        if done is None:
            return runner.run_one(run, data, opts)
    if opts.dist.is_main:
        how = "while this one waited" if waited else "since this command started"
        print(f"{tag}: finished by the other process {how}, skipped ({done['_path']})")
    return done


def _print_tables(results: list[dict], reference: str | None = None, test_stat: str | None = None) -> None:
    from harness.report import tables

    rendered = tables.render(results, "simple", reference=reference, test_stat=test_stat)
    print(f"\nAccuracy (test split, %; mean ± std over seeds)\n{rendered['accuracy']}")
    print(f"\nTiming and peak memory ({tables.hardware_line(results)})\n{rendered['timing']}")


def cmd_list(args: argparse.Namespace) -> int:
    from harness.config import spec as specs
    from harness.config.registry import ENCODERS, METHODS, SOURCES, failures

    for path in sorted(Path(args.tasks_dir).glob("*.yaml")):
        try:
            task = specs.load_task(path)
            methods = ", ".join(f"{n} ({m.method})" for n, m in task.methods.items())
            print(f"{path}  [{task.name} v{task.version}]  {task.description}\n    methods: {methods}")
        except ConfigError as err:
            print(f"{path}  INVALID: {err}")
    print(f"\nregistered methods: {', '.join(METHODS.names())}")
    print(f"registered data sources: {', '.join(SOURCES.names())}")
    print(f"registered encoders: {', '.join(ENCODERS.names())}")
    for file, error in failures().items():
        print(f"plugin file {file} failed to import and was skipped: {error}")
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    from harness.report import tables
    from harness.store.schema import load_results

    folder = Path(args.folder)
    results = load_results(folder) if folder.is_dir() else []
    if not results:
        raise ConfigError(f"no result files (<method>/seed<k>.json) under {folder}")
    if args.split == "val" and args.reference:
        raise ConfigError("--split val shows validation metrics only; significance tests use the test split's "
                          "per-query ranks, so drop --reference")
    for task in sorted({r["task"] for r in results}):
        subset = [r for r in results if r["task"] == task]
        shown = tables.validation_view(subset) if args.split == "val" else subset
        rendered = tables.render(shown, args.format, reference=args.reference, test_stat=args.test_stat)
        print(f"Task {task}\n\nAccuracy ({args.split})\n{rendered['accuracy']}\n\nTiming ({tables.hardware_line(subset)})\n{rendered['timing']}\n")
        tables.write_tables(subset, folder if len({r['task'] for r in results}) == 1 else folder / task,
                            reference=args.reference, test_stat=args.test_stat, split=args.split)
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from harness.report import plot

    return plot.cmd(args)


def cmd_clusters(args: argparse.Namespace) -> int:
    from harness.analysis import clusters

    return clusters.cmd(args)


def cmd_ensemble(args: argparse.Namespace) -> int:
    from harness.analysis import ensemble

    return ensemble.cmd(args)


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.report import compare

    return compare.cmd(args)


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report import site

    return site.cmd(args)


def cmd_status(args: argparse.Namespace) -> int:
    from harness.config import plan
    from harness.report import status

    if args.task is None:
        if args.methods or args.seeds or args.overrides or args.sweep or args.epochs is not None or args.init:
            raise ConfigError("--methods, --seeds, --set, --sweep, --epochs and --init describe the planned runs of "
                              "a task; add the task file, e.g. status results tasks/synthetic.yaml --seeds 0-4")
        planned = None
    else:
        from harness.run import checkpoint

        runs = plan.plan(args.task, list(args.overrides), args.sweep, [m for m in args.methods.split(",") if m],
                         parse_seeds(args.seeds or "0"), args.epochs,
                         checkpoint.init_label(Path(args.init)) if args.init else None)
        planned = [(r.spec.name, r.run_name, r.seed) for r in runs]
    status.show(Path(args.out), planned, args.format)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from harness import bench

    return bench.gate(args.against, args.factor, args.bench)


def main(argv: list[str] | None = None) -> int:
    """Run one command; bad input exits with status 2 and a run that stopped with status 3, each with
    one ``error:`` line on stderr. Plugin files that failed to import are reported once, as warnings."""
    from harness.config import registry
    from harness.store import provenance

    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        if extra:
            raise _unrecognized(args.subcommands[args.command], extra)
        registry.set_include(getattr(args, "include", []))
        provenance.set_command(sys.argv[1:] if argv is None else argv)
        handler = {"run": cmd_run, "rerun": cmd_rerun, "list": cmd_list, "table": cmd_table, "plot": cmd_plot, "clusters": cmd_clusters,
                   "ensemble": cmd_ensemble, "compare": cmd_compare, "report": cmd_report, "status": cmd_status,
                   "bench": cmd_bench}[args.command]
        code = handler(args)
        _plugin_warnings()
        return code
    except ConfigError as err:
        _plugin_warnings(str(err))
        print(f"error: {one_line(err)}", file=sys.stderr)
        return 2
    except RunError as err:
        _plugin_warnings(str(err))
        print(f"error: {one_line(err)}", file=sys.stderr)
        return 3


def _plugin_warnings(error: str = "") -> None:
    """Print the plugin files that failed to import, except one the error line already names."""
    from harness.config import registry

    for line in registry.take_warnings():
        file = line.split("skipped plugin file ", 1)[1].split(" (", 1)[0]
        if file not in error:
            print(line, file=sys.stderr)
