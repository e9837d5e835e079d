"""Command line: ``python -m harness {run,list,table,plot,clusters,ensemble,compare,status,bench} ...``.
Bad input exits with status 2."""
from __future__ import annotations

import argparse
import logging
import re
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn, TextIO

from harness.config.checks import SHIPPED as TASKS_DIR
from harness.errors import ConfigError, RunError, did_you_mean, report

if TYPE_CHECKING:
    from harness.run.grid import Grid, Outcome


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are ConfigErrors: one line and exit status 2, like any other bad input."""

    def error(self, message: str) -> NoReturn:
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        hint = did_you_mean(choice.group(1), re.findall(r"'([^']*)'", choice.group(2))) if choice else ""
        raise ConfigError(f"{message}{hint}; see `{self.prog} --help`")


def _unrecognized(parser: argparse.ArgumentParser, extra: list[str]) -> ConfigError:
    """Unknown options of a subcommand, with the closest valid option."""
    options = [o for action in parser._actions for o in action.option_strings]
    flag = next((e for e in extra if e.startswith("-")), extra[0]).split("=")[0]
    return ConfigError(f"unrecognized arguments: {' '.join(extra)}{did_you_mean(flag, options)}; "
                       f"see `{parser.prog} --help`")


# One command per subcommand, shown under its --help; tests/test_cli.py parses every one and runs the quick ones.
EXAMPLES = {
    "run": "python -m harness run tasks/synthetic.yaml --methods contrastive,swamp --epochs 2",
    "rerun": "python -m harness rerun results/synthetic/contrastive/seed0.json --check",
    "list": "python -m harness list",
    "table": "python -m harness table results/synthetic",
    "plot": "python -m harness plot results/synthetic_ablations --x swamp.K --reference contrastive --out runs/plots/K",
    "clusters": "python -m harness clusters results/synthetic/swamp/seed0.json --out runs/clusters",
    "ensemble": "python -m harness ensemble results/synthetic/contrastive/seed0.json "
                "results/synthetic/swamp/seed0.json "
                "--out runs",
    "compare": "python -m harness compare results/synthetic runs/synthetic",
    "report": "python -m harness report results --out runs/site --no-figures",
    "status": "python -m harness status results tasks/synthetic.yaml --methods contrastive,swamp --seeds 0-4",
    "claims": "python -m harness claims --check",
    "reproduce": "python -m harness reproduce synthetic-pair synthetic-class --launcher local --jobs 2",
    "bench": "python -m harness bench --against HEAD~1",
    "tune": "python -m harness tune tasks/synthetic.yaml --methods contrastive,swamp --trials 4 --epochs 2 --out runs",
    "leaderboard": "python -m harness leaderboard tasks/own_features_labels.yaml --data-root FEATURES --out runs/ref",
}

TEST_STAT_HELP = ("statistic the significance columns test in each row group: a column's statistic (R@k, MedR, mAP, "
                  "mAP@k, P@k) in the first direction, DIRECTION/STAT (e.g. t2v/R@5) for another, or rsum "
                  "(default: the first direction's first R@k)")


def program() -> str:
    """How the command was typed: ``swamp-bench`` (the installed console script) or ``python -m harness``."""
    return "swamp-bench" if Path(sys.argv[0]).name == "swamp-bench" else "python -m harness"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=program(), description="SwAMP Bench: cross-modal retrieval benchmarks")
    sub = parser.add_subparsers(dest="command", required=True)
    plugins = _Parser(add_help=False)
    plugins.add_argument("--include", action="append", default=[], metavar="PATH",
                         help="also load method, source and encoder files from PATH, a folder or a .py file "
                              "(repeatable; also the SWAMP_BENCH_INCLUDE environment variable, ':'-separated)")
    grid = _Parser(add_help=False)  # the flags run and rerun share
    grid.add_argument("--out", default="runs",
                      help="results folder (default: runs/; the committed sets live in results/)")
    grid.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    grid.add_argument("--data-root", default=None,
                      help="dataset folder (sets dataset.root; rerun's default: the recorded root, "
                           "variables re-expanded)")
    grid.add_argument("--reference", default=None, metavar="RUN",
                      help="mark significant differences from this run in the tables, e.g. contrastive")
    grid.add_argument("--force", action="store_true",
                      help="re-run finished runs and restart interrupted ones (default: skip and resume)")
    grid.add_argument("--jobs", type=int, default=None, metavar="N",
                      help="worker processes of --launcher local (default: 2)")
    grid.add_argument("--threads", type=_threads, default=None, metavar="N|auto",
                      help="torch threads per run (default: torch's own, whatever the machine's load; with "
                           "--launcher local, cores / jobs); auto: the cores other work leaves free at the start "
                           "(changes the numbers)")
    grid.add_argument("--no-progress", action="store_true", help="hide progress bars")
    grid.add_argument("--no-tables", action="store_true", help=argparse.SUPPRESS)  # print no tables
    run = sub.add_parser("run", help="train and test methods of a task; write results and tables",
                         parents=[plugins, grid])
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
    run.add_argument("--test-stat", default=None, metavar="STAT", help=TEST_STAT_HELP)
    run.add_argument("--launcher", choices=("sequential", "local", "slurm"), default="sequential",
                     help="sequential (default): the runs one after another in this process; local: each run in a "
                          "worker process of its own, --jobs at a time; slurm: one SLURM job per run, submitted as "
                          "a job array through submitit (docs/slurm.md)")
    run.add_argument("--slurm", default=None, metavar="KEY=VALUE,...",
                     help="options of --launcher slurm, e.g. partition=gpu,gpus_per_node=1,timeout_min=600 (they "
                          "override the task file's launcher.slurm section; docs/slurm.md lists them)")
    run.add_argument("--wait", action="store_true",
                     help="with --launcher slurm: wait for the jobs, with a progress bar, and print the tables")
    run.add_argument("--on-nan", choices=("stop", "skip"), default="stop",
                     help="a step with a NaN or infinite loss: stop the run there (default) or skip its update")
    tune = sub.add_parser("tune", help="the same tuning budget for every method (Optuna, validation split), then "
                          "its best settings trained with the seeds and tested", parents=[grid, plugins])
    tune.add_argument("task", help="task YAML, e.g. tasks/own_features_labels.yaml")
    tune.add_argument("--methods", required=True, help="comma-separated methods to compare, each tuned alike")
    _tune_arguments(tune, seeds="0")
    tune.add_argument("--studies-only", action="store_true", help=argparse.SUPPRESS)  # a worker of local/slurm
    tune.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)  # its number (seeds its sampler)
    lead = sub.add_parser("leaderboard", help="the reference table of cross-modal losses: every row of each task's "
                          "leaderboard block tuned with one budget, trained with 5 seeds; ranks and the Bayesian "
                          "comparison across sets (docs/reference-table.md)", parents=[grid, plugins])
    lead.add_argument("tasks", nargs="*", metavar="TASK",
                      help="tasks whose sets to make (none: only compute the table of the sets under --out)")
    lead.add_argument("--metric", default=None, help="a metric other than the task's primary one (a set of its own, "
                      "for the claims ledger; not a column of the table)")
    lead.add_argument("--rows", default=None, help="comma-separated rows of the table to make (default: all the "
                      "task declares), e.g. max_violation,sum,infonce,siglip,swamp")
    lead.add_argument("--name", default=None, help="the set's folder under --out (default: the task's name, with "
                      "the metric when it is not the primary one)")
    lead.add_argument("--no-bayes", action="store_true", help="leave out the Bayesian comparison (minutes of MCMC)")
    _tune_arguments(lead, seeds="0-4")
    lead.add_argument("--studies-only", action="store_true", help=argparse.SUPPRESS)
    lead.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    rerun = sub.add_parser("rerun", help="run again what result files record, from their own settings; --check: "
                                         "compare the metrics", parents=[plugins, grid])
    rerun.add_argument("results", nargs="+", metavar="RESULT",
                       help="result files (seed<k>.json), or folders searched for them, e.g. results/wikipedia")
    rerun.add_argument("--check", action="store_true",
                       help="compare each run's test metrics with the recorded ones; exit 1 when any differ")
    rerun.add_argument("--launcher", choices=("sequential", "local"), default="sequential",
                       help="sequential (default): one run after another in this process; local: worker processes, "
                            "--jobs at a time, as for run")
    lst = sub.add_parser("list", help="tasks and the methods each declares; registered components", parents=[plugins])
    lst.add_argument("--tasks-dir", default=str(TASKS_DIR))
    table = sub.add_parser("table", help="print the tables of saved result files; --write: write them into the folder",
                           parents=[plugins])
    table.add_argument("folder", help="results folder, e.g. results/synthetic (or results/: every set under it)")
    table.add_argument("--format", default="simple", help="console format (tabulate name; md and tex also accepted)")
    table.add_argument("--reference", default=None, metavar="RUN",
                       help="run the others are tested against (default: the one the folder's tables record)")
    table.add_argument("--test-stat", default=None, metavar="STAT", help=TEST_STAT_HELP)
    table.add_argument("--split", default=None, choices=("test", "val"),
                       help="test (default) or val: the validation metrics of each run's selected epoch")
    table.add_argument("--write", action="store_true",
                       help="write accuracy/timing .md and .tex into each set's folder (default: print only)")
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
    clusters = sub.add_parser("clusters", help="report on the prototypes a trained SwAMP model learned",
                              parents=[plugins])
    clusters.add_argument("target", help="result file (seed<k>.json) or its checkpoint (seed<k>.pt)")
    clusters.add_argument("--out", default=None,
                          help="report folder (default: beside the result, <run>/clusters-seed<k>)")
    clusters.add_argument("--split", default="test", help="split whose items are assigned (default: test)")
    clusters.add_argument("--top-words", type=int, default=5, help="frequent words listed per text cluster")
    clusters.add_argument("--members", type=int, default=5, help="member ids listed per cluster and modality")
    clusters.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    ens = sub.add_parser("ensemble", help="evaluate the average of two finished runs' score matrices",
                         parents=[plugins])
    ens.add_argument("results", nargs=2, metavar="RESULT",
                     help="result files (seed<k>.json) or checkpoints of the runs")
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
    claims = sub.add_parser("claims", help="the paper's claims, each judged from the committed result files; "
                            "--check: exit 1 when a verdict differs from the one the ledger records")
    claims.add_argument("ledger", nargs="?", default=None,
                        help="claims ledger (YAML; default: claims/swamp-aistats2023.yaml)")
    claims.add_argument("--root", default=None, metavar="DIR",
                        help="folder the ledger's results paths are relative to (default: the one above claims/)")
    claims.add_argument("--check", action="store_true",
                        help="exit 1 when a verdict differs from the one the ledger records")
    claims.add_argument("--format", default="simple", help="table format (tabulate name; md for Markdown)")
    repro = sub.add_parser("reproduce", help="re-make the evidence of the ledger's claims at this checkout and judge "
                           "it again: committed against re-made number, interval and verdict")
    repro.add_argument("claims", nargs="*", metavar="CLAIM", help="claim ids of the ledger (default: every claim)")
    repro.add_argument("--ledger", default=None, help="claims ledger (default: claims/swamp-aistats2023.yaml)")
    repro.add_argument("--reference", default=None, metavar="ROOT",
                       help="re-make the reference table's tuned runs under ROOT instead (e.g. results/reference) and "
                            "compute the table again from them")
    repro.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                       help="re-make only the evidence whose runs took this long when made (in ledger order); "
                            "name what is left out")
    repro.add_argument("--write", action="store_true",
                       help="replace the committed result files and tables with the re-made ones")
    repro.add_argument("--out", default=None, help="scratch folder (default: a new temporary folder)")
    repro.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    repro.add_argument("--launcher", choices=("sequential", "local"), default="sequential",
                       help="sequential (default) or local: worker processes, --jobs at a time")
    repro.add_argument("--jobs", type=int, default=None, metavar="N", help="worker processes of --launcher local")
    repro.add_argument("--data-root", default=None, help="dataset folder (default: each file's recorded root)")
    repro.add_argument("--allow-dirty", action="store_true", help=argparse.SUPPRESS)  # tests on copies of a tree
    repro.add_argument("--no-progress", action="store_true", help="hide progress bars")
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
    for name, command in sub.choices.items():
        command.epilog = f"example: {EXAMPLES[name]}"
        command.formatter_class = argparse.RawDescriptionHelpFormatter  # the example on one line, as typed
    parser.set_defaults(subcommands=sub.choices)
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    """``harness run``: plan the task's runs, check them, run them with the launcher asked for, show the tables."""
    from harness.config import params as P
    from harness.config import plan
    from harness.config import spec as spec_file
    from harness.report import tables
    from harness.run import checkpoint, contention, grid, preflight
    from harness.store.schema import result_path

    watch = contention.snapshot()  # from here to the first training step: how busy is the machine?
    overrides = list(args.overrides) + ([f"dataset.root={args.data_root}"] if args.data_root else [])
    init = Path(args.init) if args.init else None
    if init is not None:
        checkpoint.checkpoint_of(init)
    methods = [m for m in args.methods.split(",") if m]
    runs = plan.plan(args.task, overrides, args.sweep, methods, plan.parse_seeds(args.seeds), args.epochs,
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
        tables.tested_column(P.as_dict(runs[0].spec.metrics), args.test_stat)
    out = Path(args.out)
    preflight.check_out(out, [result_path(out, r.spec.name, r.run_name, r.seed).parent for r in runs])
    preflight.check_environment()
    setup = _grid(args, init=init, later=_later(args, runs[0].spec.path, runs[0].spec.name))
    opts = grid.options(setup, watch)
    if setup.launcher != "slurm" and opts.dist.is_main:  # SLURM jobs train on other machines
        preflight.check_precision(runs, opts.device)
    outcome = grid.run(runs, setup, opts)
    if args.reference in outcome.refused_names:
        args.reference = None  # refused: it has no result to compare with
    return _finish(outcome, args, {runs[0].spec.name})


def _tune_arguments(parser: argparse.ArgumentParser, seeds: str) -> None:
    """The arguments ``tune`` and ``leaderboard`` share: the budget, the seeds, the settings, the storage, the
    launcher and the pruning rule."""
    parser.add_argument("--trials", type=int, default=None,
                        help="trials per method (default: the task's tune.trials, else 20)")
    parser.add_argument("--seconds-per-method", type=float, default=None, metavar="S",
                        help="also stop each method's study once its trials took S seconds in all (an equal "
                             "wall-clock budget; the tables mark a method that got fewer trials)")
    parser.add_argument("--seeds", default=seeds,
                        help=f"seeds of the tuned runs (default: {seeds}); the trials train with the first one")
    parser.add_argument("--study-seed", type=int, default=None, help="seed the trials train with (default: the first "
                        "of --seeds)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME.KEY=VALUE",
                        help="override a task setting for trials and tuned runs (repeatable)")
    parser.add_argument("--epochs", type=int, default=None, help="override the number of epochs of every method")
    parser.add_argument("--storage", default=None, metavar="URL",
                        help="Optuna storage URL (default: sqlite:///OUT/TASK/_tune/studies.db)")
    parser.add_argument("--launcher", choices=("sequential", "local", "slurm"), default="sequential",
                        help="where trials run: this process (default), --jobs worker processes, or --jobs SLURM jobs")
    parser.add_argument("--slurm", default=None, metavar="KEY=VALUE,...",
                        help="SLURM options over the task file's launcher.slurm section (docs/slurm.md)")
    parser.add_argument("--prune", choices=("none", "median"), default="none",
                        help="none (default): every trial trains all its epochs; median: Optuna's median pruner once "
                             "every trial ran --prune-warmup of its epochs (the same rule for every method)")
    parser.add_argument("--prune-warmup", type=float, default=0.5, metavar="SHARE",
                        help="with --prune median: the share of the epochs before a trial may be pruned (default 0.5)")
    parser.add_argument("--no-final", action="store_true", help="run the studies only; no tuned runs")


def _threads(text: str) -> int | str:
    """--threads: a positive number of torch threads, or ``auto``."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number of torch threads, or auto") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give a positive number of torch threads, or auto")
    return value


def fixed_threads(args: argparse.Namespace) -> int | None:
    """The torch threads --threads fixes (None: torch's default, or ``auto``'s choice at the start)."""
    threads = getattr(args, "threads", None)
    return threads if isinstance(threads, int) else None


def _grid(args: argparse.Namespace, init: Path | None = None, later: tuple[str, str] = ("", "")) -> Grid:
    """How ``run`` or ``rerun`` asks its runs to be run (:class:`harness.run.grid.Grid`)."""
    from harness.run import grid
    from harness.store import provenance

    return grid.Grid(out=Path(args.out), device=args.device, launcher=args.launcher, jobs=args.jobs,
                     threads=fixed_threads(args), auto_threads=args.threads == "auto",
                     slurm=getattr(args, "slurm", None), wait=getattr(args, "wait", False),
                     progress=not args.no_progress, force=args.force, on_nan=getattr(args, "on_nan", "stop"),
                     epochs=getattr(args, "epochs", None), init=init, include=tuple(args.include),
                     command=tuple(provenance.command()), data_root=args.data_root, later=later)


def _later(args: argparse.Namespace, task: str | Path, name: str) -> tuple[str, str]:
    """What to type once SLURM jobs are submitted: ``status`` of exactly this command's runs (its run-selecting
    flags), and the tables of the task's folder ``name``."""
    import shlex

    words = ["python", "-m", "harness", "status", args.out, str(task)]
    words += ["--methods", args.methods] if args.methods else []
    words += ["--seeds", args.seeds] if args.seeds != "0" else []
    words += [w for o in args.overrides for w in ("--set", o)] + [w for o in args.sweep for w in ("--sweep", o)]
    words += ["--set", f"dataset.root={args.data_root}"] if args.data_root else []
    words += ["--epochs", str(args.epochs)] if args.epochs is not None else []
    words += ["--init", args.init] if args.init else []
    words += [w for path in args.include for w in ("--include", path)]
    return shlex.join(words), f"python -m harness table {Path(args.out) / name} --write"


def _finish(outcome: Outcome, args: argparse.Namespace, tasks: set[str],
            check: Callable[[list[dict[str, Any]]], int] | None = None) -> int:
    """The end of ``run`` and ``rerun``: the tables of each task's folder (also when some runs failed), then the
    failure, then the refusals, each as the command's one error line."""
    from harness.report import folders

    if outcome.main and not args.no_tables and outcome.results:
        for task in sorted(tasks):
            done = [r for r in outcome.results if r["task"] == task]
            if done:
                folders.show(Path(args.out) / task, done, args.reference, getattr(args, "test_stat", None))
    if outcome.failed is not None:
        raise outcome.failed
    differ = check(outcome.results) if check is not None and outcome.main else 0
    if outcome.refused is not None:
        raise outcome.refused
    return 1 if differ else 0


def cmd_rerun(args: argparse.Namespace) -> int:
    """``harness rerun``: every given result file's run, rebuilt from the settings the file records."""
    from harness.run import grid, preflight
    from harness.store.schema import result_path

    records = grid.result_records(args.results)
    runs, _ = grid.reruns(records, args.data_root, "sequential")  # checked first: the same run twice, checkpoints
    out = Path(args.out)
    preflight.check_out(out, [result_path(out, r.spec.name, r.run_name, r.seed).parent for r in runs])
    preflight.check_environment()
    setup = _grid(args)
    opts = grid.options(setup)
    for line in grid.rerun_warnings(records, opts.device.type, opts.dist.world_size, fixed_threads(args)):
        print(f"warning: {line}", file=sys.stderr)
    if opts.dist.is_main:  # a rerun repeats the recorded precision: fp32 is a new run of the task
        preflight.check_precision(runs, opts.device, "a new `harness run` of the task with --set train.precision=fp32")
    print(f"re-running {len(runs)} run(s) from their result files into {out}/")
    outcome = grid.rerun(records, setup, opts)
    check = (lambda results: grid.check_reruns(records, results, opts.device.type)) if args.check else None
    return _finish(outcome, args, {r.spec.name for r in runs}, check)


def cmd_list(args: argparse.Namespace) -> int:
    from harness.config import spec as specs
    from harness.config.registry import ENCODERS, METHODS, SOURCES, failures

    shipped = Path(args.tasks_dir).resolve() == TASKS_DIR.resolve()
    if shipped:
        print(f"shipped tasks (run one by its file name or its path, e.g. `{program()} run synthetic`):")
    for path in sorted(Path(args.tasks_dir).glob("*.yaml")):
        try:
            task = specs.load_task(path)
            methods = ", ".join(f"{n} ({m.method})" for n, m in task.methods.items())
            shown = f"{path.stem}  ({path})" if shipped else str(path)
            print(f"{shown}  [{task.name} v{task.version}]  {task.description}\n    methods: {methods}")
        except ConfigError as err:
            print(f"{path}  INVALID: {err}")
    print(f"\nregistered methods: {', '.join(METHODS.names())}")
    print(f"registered data sources: {', '.join(SOURCES.names())}")
    print(f"registered encoders: {', '.join(ENCODERS.names())}")
    for file, error in failures().items():
        print(f"plugin file {file} failed to import and was skipped: {error}")
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    from harness.report import folders

    return folders.cmd(args)


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


def cmd_claims(args: argparse.Namespace) -> int:
    from harness.report import claims

    return claims.cmd(args)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """``harness leaderboard``: the reference table's sets (:mod:`harness.tune.leaderboard`), then the table."""
    from harness.tune import leaderboard

    return leaderboard.cmd(args)


def cmd_tune(args: argparse.Namespace) -> int:
    import optuna

    from harness.tune import command

    # Optuna's log records take the command's one-line warnings (main's handler), not Optuna's own console format
    optuna.logging.disable_default_handler()
    optuna.logging.enable_propagation()
    return command.cmd(args)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from harness.report import reproduce

    return reproduce.cmd(args)


def cmd_status(args: argparse.Namespace) -> int:
    from harness.report import status

    return status.cmd(args)


def cmd_bench(args: argparse.Namespace) -> int:
    from harness import bench

    return bench.gate(args.against, args.factor, args.bench)


def main(argv: list[str] | None = None) -> int:
    """Run one command; bad input exits with status 2 and a run that stopped with status 3, each with
    one ``error:`` line on stderr, its last line. Every line the command writes to stderr starts with
    ``error: ``, ``warning: `` or ``note: `` (docs/reliability.md): Python warnings and library log records
    become one ``warning:`` line each while it runs. Plugin files that failed to import are reported once,
    as warnings."""
    previous = warnings.showwarning
    warnings.showwarning = show_warning
    lines = LogLines()
    logging.getLogger().addHandler(lines)
    try:
        return _main(argv)
    finally:
        warnings.showwarning = previous
        logging.getLogger().removeHandler(lines)


def show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
    """``warnings.showwarning`` of a command: one ``warning:`` line, the category and the message's first line
    (Python's own format spans several lines: the message, its source file and the source line)."""
    print(f"warning: {category.__name__}: {first_line(message)}", file=sys.stderr if file is None else file)


class LogLines(logging.Handler):
    """A library's log records of level WARNING and above as one ``warning:`` line each on stderr (the logger's
    name and the message's first line); without a handler Python prints them bare."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(f"warning: {record.name}: {first_line(record.getMessage())}", file=sys.stderr)
        except (TypeError, ValueError, OSError):  # logging's rule: a record that cannot be shown is reported
            self.handleError(record)


def first_line(message: object) -> str:
    """The first non-empty line of ``message``."""
    return next((text.strip() for text in str(message).splitlines() if text.strip()), "")


def _main(argv: list[str] | None) -> int:
    from harness.config import registry
    from harness.store import provenance

    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        if extra:
            raise _unrecognized(args.subcommands[args.command], extra)
        registry.set_include(getattr(args, "include", []))
        provenance.set_command(sys.argv[1:] if argv is None else argv)
        handler = {"run": cmd_run, "rerun": cmd_rerun, "list": cmd_list, "table": cmd_table, "plot": cmd_plot,
                   "clusters": cmd_clusters, "ensemble": cmd_ensemble, "compare": cmd_compare, "report": cmd_report,
                   "status": cmd_status, "claims": cmd_claims, "reproduce": cmd_reproduce, "tune": cmd_tune,
                   "leaderboard": cmd_leaderboard,
                   "bench": cmd_bench}[args.command]
        code = handler(args)
        _plugin_warnings()
        return code
    except (ConfigError, RunError) as err:
        _plugin_warnings(str(err))
        return report(err)


def _plugin_warnings(error: str = "") -> None:
    """Print the plugin files that failed to import, except one the error line already names."""
    from harness.config import registry

    for line in registry.take_warnings():
        file = line.split("skipped plugin file ", 1)[1].split(" (", 1)[0]
        if file not in error:
            print(line, file=sys.stderr)
