"""The options of ``harness tune`` and ``harness leaderboard`` as the library takes them: frozen dataclasses the
command line converts its arguments into once (:mod:`harness.cli.tune`, :mod:`harness.cli.leaderboard`), so that
everything below the command line is called with typed values, from a script as from the shell.

    from harness.tune.options import TuneOptions
    TuneOptions(task="tasks/synthetic.yaml", methods=("contrastive", "swamp"), trials=4, epochs=2, out=Path("runs"))
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_TRIALS = 20  # trials per row (method) when neither the command nor the task says
DEFAULT_CAP = 40  # the most trials a set's rows get when their studies have not converged
DEFAULT_FOLDS = 3  # folds of the training split where a validation split is too small to choose by
SMALL_VALIDATION = 100  # a validation split with fewer items than this cannot choose settings alone
DEFAULT_THREADS = 1  # torch threads of every trial and tuned run: fixed, never derived from --jobs or the load


@dataclass(frozen=True)
class TuneOptions:
    """One ``harness tune`` command: the task, the methods compared, the budget, where and how the trials run.

    ``rows`` names each method's row (``((method, row), ...)``: the TPE sampler of a study is seeded by the study's
    seed and its row's name; a method without one is its own row). ``folds`` > 0: the studies' objective is the mean
    over that many folds of the training split instead of the validation split (:mod:`harness.tune.folds`)."""

    task: str
    methods: tuple[str, ...]
    out: Path = Path("runs")
    device: str = "auto"
    data_root: str | None = None
    reference: str | None = None
    force: bool = False
    jobs: int | None = None
    threads: int = DEFAULT_THREADS
    no_progress: bool = False
    no_tables: bool = False
    trials: int | None = None
    seconds_per_method: float | None = None
    seeds: str = "0"
    study_seed: int | None = None
    overrides: tuple[str, ...] = ()
    epochs: int | None = None
    storage: str | None = None
    launcher: str = "sequential"
    slurm: str | None = None
    prune: str = "none"
    prune_warmup: float = 0.5
    no_final: bool = False
    studies_only: bool = False
    finals_only: bool = False
    worker: int = 0
    include: tuple[str, ...] = ()
    folds: int = 0
    rows: tuple[tuple[str, str], ...] = ()

    def row_of(self, method: str) -> str:
        """The row name a method's study is seeded by (the method's own name where no row is given)."""
        return dict(self.rows).get(method, method)


@dataclass(frozen=True)
class SetOptions:
    """One ``harness leaderboard TASK ...`` command: the sets to make and how (the tuning options every set's studies
    share, with ``task`` and ``methods`` filled per set).

    ``cap``: the most trials per row when a set's studies have not converged; ``folds``: the folds of the training
    split the studies choose by where the validation split has fewer than :data:`SMALL_VALIDATION` items
    (``None``: the block's ``folds``, else :data:`DEFAULT_FOLDS`)."""

    tasks: tuple[str, ...]
    tune: TuneOptions = field(default_factory=lambda: TuneOptions(task="", methods=(), seeds="0-4"))
    metric: str | None = None
    rows: str | None = None
    name: str | None = None
    cap: int = DEFAULT_CAP
    folds: int | None = None
