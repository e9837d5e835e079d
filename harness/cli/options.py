"""The option groups several subcommands share, each a function that adds its options to a subcommand's parser:
the plugin files (``--include``), the device, the launchers (the choices of :data:`harness.config.launchers.LAUNCHERS`),
the options of a grid of runs, the run-selecting flags of ``run`` (which ``status`` accepts too) and the tuning
budget of ``tune`` and ``leaderboard``."""
from __future__ import annotations

import argparse
from typing import Any

from harness.config.launchers import DEFAULT_LAUNCHER, LAUNCHERS, LOCAL_JOBS

TEST_STAT_HELP = ("statistic the significance columns test in each row group: a column's statistic (R@k, MedR, mAP, "
                  "mAP@k, P@k) in the first direction, DIRECTION/STAT (e.g. t2v/R@5) for another, or rsum "
                  "(default: the first direction's first R@k)")


def plugins(parser: argparse.ArgumentParser) -> None:
    """``--include``: plugin files beyond the shipped ones."""
    parser.add_argument("--include", action="append", default=[], metavar="PATH",
                        help="also load method, source and encoder files from PATH, a folder or a .py file "
                             "(repeatable; also the SWAMP_BENCH_INCLUDE environment variable, ':'-separated)")


def device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")


def launcher(parser: argparse.ArgumentParser, help: str, slurm: bool = True) -> None:
    """``--launcher``: the launchers named in :mod:`harness.config.launchers` (without ``slurm`` where the command has
    no SLURM jobs)."""
    choices = LAUNCHERS if slurm else tuple(name for name in LAUNCHERS if name != "slurm")
    parser.add_argument("--launcher", choices=choices, default=DEFAULT_LAUNCHER, help=help)


def test_stat(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--test-stat", default=None, metavar="STAT", help=TEST_STAT_HELP)


def grid(parser: argparse.ArgumentParser) -> None:
    """The options of a grid of runs, which ``run``, ``rerun``, ``tune`` and ``leaderboard`` share."""
    parser.add_argument("--out", default="runs",
                        help="results folder (default: runs/; the committed sets live in results/)")
    device(parser)
    parser.add_argument("--data-root", default=None,
                        help="dataset folder (sets dataset.root; rerun's default: the recorded root, "
                             "variables re-expanded)")
    parser.add_argument("--reference", default=None, metavar="RUN",
                        help="mark significant differences from this run in the tables, e.g. contrastive")
    parser.add_argument("--force", action="store_true",
                        help="re-run finished runs and restart interrupted ones (default: skip and resume)")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help=f"worker processes of --launcher local (default: {LOCAL_JOBS})")
    parser.add_argument("--threads", type=threads, default=None, metavar="N|auto",
                        help="torch threads per run (default: torch's own, whatever the machine's load; with "
                             "--launcher local, cores / jobs); auto: the cores other work leaves free at the start "
                             "(changes the numbers)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.add_argument("--no-tables", action="store_true", help=argparse.SUPPRESS)  # print no tables


# The flags that select a task's runs: run's, and status's (which lists the runs a run command plans).
SELECTION: list[tuple[str, dict[str, Any], str]] = [
    ("--methods", {"default": ""}, "comma-separated method names declared by the task (default: all)"),
    ("--seeds", {"default": "0"}, "comma-separated seeds (default: 0)"),
    ("--set", {"dest": "overrides", "action": "append", "default": [], "metavar": "NAME.KEY=VALUE"},
     "override a value, e.g. swamp.K=500 or train.lr=0.001 (repeatable)"),
    ("--sweep", {"action": "append", "default": [], "metavar": "NAME.KEY=V1,V2,..."},
     "run every listed value, e.g. swamp.K=200,500,1000; several --sweep flags form a grid"),
    ("--epochs", {"type": int, "default": None}, "override the number of epochs of every method"),
    ("--init", {"default": None, "metavar": "PATH"},
     "start the encoders from a checkpoint (seed<k>.pt) or result file (seed<k>.json)"),
]


def selection(parser: argparse.ArgumentParser, of_status: bool = False) -> None:
    """The run-selecting flags (:data:`SELECTION`); ``of_status``: as ``status`` takes them, to list the runs of a
    ``run`` command with TASK (its ``--seeds`` defaults to None: given without TASK, it is refused)."""
    for flag, kwargs, help in SELECTION:
        if of_status:
            kwargs = {**kwargs, "default": None} if flag == "--seeds" else kwargs
            default = "; default: 0" if flag == "--seeds" else ""
            help = f"the run command's {flag} (with TASK{default})"
        parser.add_argument(flag, help=help, **kwargs)


def tune(parser: argparse.ArgumentParser, seeds: str) -> None:
    """The options ``tune`` and ``leaderboard`` share: the budget, the seeds, the settings, the storage, the launcher,
    the pruning rule, and the two a worker of ``--launcher local`` or ``slurm`` gets."""
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
                        help="Optuna storage URL (default: sqlite:///OUT/TASK/_tune/studies.db; with --launcher "
                             "slurm, Optuna's journal file journal:///OUT/TASK/_tune/studies.log); "
                             "journal:///ABSOLUTE/PATH names a journal file elsewhere")
    launcher(parser, "where trials run: this process (default), --jobs worker processes, or --jobs SLURM jobs; "
                     "with local, the tuned runs too, each worker training whole rows")
    parser.add_argument("--slurm", default=None, metavar="KEY=VALUE,...",
                        help="SLURM options over the task file's launcher.slurm section (docs/slurm.md)")
    parser.add_argument("--prune", choices=("none", "median"), default="none",
                        help="none (default): every trial trains all its epochs; median: Optuna's median pruner once "
                             "every trial ran --prune-warmup of its epochs (the same rule for every method)")
    parser.add_argument("--prune-warmup", type=float, default=0.5, metavar="SHARE",
                        help="with --prune median: the share of the epochs before a trial may be pruned (default 0.5)")
    parser.add_argument("--no-final", action="store_true", help="run the studies only; no tuned runs")
    parser.add_argument("--studies-only", action="store_true", help=argparse.SUPPRESS)  # a worker of local/slurm
    parser.add_argument("--finals-only", action="store_true", help=argparse.SUPPRESS)  # a worker of the tuned runs
    parser.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)  # its number (seeds its sampler)


def threads(text: str) -> int | str:
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
    value = getattr(args, "threads", None)
    return value if isinstance(value, int) else None
