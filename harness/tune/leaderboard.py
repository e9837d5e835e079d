"""``harness leaderboard``: the reference table of cross-modal losses. For each task given, its ``leaderboard:`` block
names the set's primary metric, the trials every method's study gets, and the table's rows (the contrastive loss
family, SwAMP, SwAMP with InfoNCE, CCA, the no-training floor) mapped to the task's methods. Every row gets one study
with that budget on the validation split for that metric (``harness tune``, which also trains each best with every
seed and tests it); then the table is computed over every set under ``--out``
(:mod:`harness.report.leaderboard`). Without tasks, the command only computes the table.

    python -m harness leaderboard tasks/wikipedia.yaml --out results/reference --launcher local --jobs 2
    python -m harness leaderboard tasks/wikipedia.yaml --metric t2i/class_mAP \\
        --rows max_violation,sum,infonce,siglip,swamp --out results/reference   # a second metric: not a column
    python -m harness leaderboard tasks/own_features_labels.yaml --data-root MY_FEATURES --out runs/reference
    python -m harness leaderboard --out results/reference            # the table of the sets already made

A set is ``<out>/<name>/`` (name: the task's, with the metric for a metric other than the primary one), holding its
manifest ``leaderboard.json`` and the studies and tuned result files of ``harness tune`` below it.
"""
from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.config import spec as specs
from harness.config.plan import Run
from harness.config.spec import TaskSpec
from harness.errors import ConfigError, did_you_mean, unknown
from harness.report import leaderboard as board
from harness.run import preflight, runner
from harness.store import provenance
from harness.tune import command

DEFAULT_TRIALS = 20
DEFAULT_SEEDS = "0-4"
BLOCK_KEYS = ("metric", "trials", "methods")


@dataclass(frozen=True)
class Block:
    """A task's ``leaderboard:`` block: the primary metric, the trials per method, and row -> method."""

    metric: str
    trials: int
    rows: dict[str, str]


def block_of(spec: TaskSpec) -> Block:
    """The task's leaderboard block, checked (rows among the table's, methods the task declares, a metric it has)."""
    raw = spec.raw.get("leaderboard")
    where = f"{spec.path}: leaderboard"
    if raw is None:
        raise ConfigError(f"{where}: the task has no leaderboard block; add one naming its primary metric and the "
                          "table's rows, e.g. leaderboard: {metric: a2b/R@1, trials: 20, methods: {infonce: "
                          "contrastive, swamp: swamp}} (docs/reference-table.md)")
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where} must be a mapping with keys among {', '.join(BLOCK_KEYS)}")
    for key in raw:
        if key not in BLOCK_KEYS:
            raise ConfigError(f"{where}.{key} is not a key of leaderboard{did_you_mean(str(key), BLOCK_KEYS)}; keys: "
                              f"{', '.join(BLOCK_KEYS)}")
    metric = raw.get("metric")
    if metric not in spec.metrics.names():
        raise unknown("leaderboard metric", str(metric), spec.metrics.names(), f"{where}.metric")
    trials = raw.get("trials", DEFAULT_TRIALS)
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ConfigError(f"{where}.trials must be a positive integer, got {trials!r}")
    rows = raw.get("methods")
    if not isinstance(rows, Mapping) or not rows:
        raise ConfigError(f"{where}.methods must map the table's rows ({', '.join(board.ROLES)}) to this task's "
                          "methods")
    for role, method in rows.items():
        if role not in board.ROLES:
            raise unknown("leaderboard row", str(role), board.ROLES, f"{where}.methods")
        if method not in spec.methods:
            raise unknown("method", str(method), spec.methods, f"{where}.methods.{role}")
    return Block(str(metric), int(trials), {str(r): str(rows[r]) for r in board.ROLES if r in rows})


def set_name(spec: TaskSpec, metric: str, block: Block, given: str | None) -> str:
    """The set's folder name: ``--name``, else the task's name, with the metric for a metric other than the primary
    one (``wikipedia-t2i_class_mAP``)."""
    if given:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", given):
            raise ConfigError(f"--name {given!r}: use letters, digits, '_', '.' and '-' only (it names a folder)")
        return given
    return spec.name if metric == block.metric else f"{spec.name}-{re.sub(r'[^A-Za-z0-9_.]+', '_', metric)}"


def chosen_rows(block: Block, asked: str | None) -> dict[str, str]:
    """The rows ``--rows`` asks for (default: every row of the block)."""
    if not asked:
        return dict(block.rows)
    names = [r for r in asked.split(",") if r]
    for name in names:
        if name not in block.rows:
            raise unknown("row", name, block.rows, "--rows")
    return {r: m for r, m in block.rows.items() if r in names}


def applicable(spec: TaskSpec, rows: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The rows whose method can run on the task's data, and why each other one cannot (identity on two widths, CCA
    on items that are not feature vectors, ...): checked on the data before any study starts."""
    data = runner.load_data(spec)
    refused = preflight.refusals([Run(spec, m, m, {}, 0) for m in rows.values()], data)
    keep = {r: m for r, m in rows.items() if m not in refused}
    skipped = {r: str(refused[m]).split(": ", 1)[-1] for r, m in rows.items() if m in refused}
    return keep, skipped


def manifest(args: argparse.Namespace, task: str, spec: TaskSpec, name: str, metric: str, block: Block,
             rows: dict[str, str], skipped: dict[str, str], trials: int) -> dict[str, Any]:
    """What a set's ``leaderboard.json`` records: the task, the metric (and whether it is the primary one), the rows,
    the rows that do not apply and why, the budget, the seeds, the pruning rule and the command."""
    return {"task": task, "task_name": spec.name, "label": name, "metric": metric,
            "primary": metric == block.metric, "rows": rows, "skipped": skipped, "trials": trials,
            "seeds": args.seeds, "prune": args.prune, "data_root": args.data_root,
            "command": " ".join(provenance.command())}


def run_set(args: argparse.Namespace, task: str) -> Path:
    """One set: the task's rows studied with the block's (or --trials) budget for the metric, each best trained with
    every seed; its folder."""
    overrides = list(args.overrides) + ([f"dataset.root={args.data_root}"] if args.data_root else [])
    spec = specs.load_task(task, overrides)
    block = block_of(spec)
    metric = args.metric or block.metric
    if metric not in spec.metrics.names():
        raise unknown("metric", metric, spec.metrics.names(), "--metric")
    rows, skipped = applicable(spec, chosen_rows(block, args.rows))
    for role, why in skipped.items():
        print(f"note: {spec.name}: the row {board.ROLES[role]} ({block.rows[role]}) does not apply: {why}")
    if not rows:
        raise ConfigError(f"{spec.name}: no row of the table applies to its data ({'; '.join(skipped.values())})")
    name = set_name(spec, metric, block, args.name)
    folder = Path(args.out) / name
    trials = args.trials if args.trials is not None else block.trials
    found = manifest(args, task, spec, name, metric, block, rows, skipped, trials)
    if (folder / board.MANIFEST).is_file():
        before = board.read_manifest(folder)
        for key in ("task_name", "metric"):
            if before.get(key) != found[key]:
                raise ConfigError(f"{folder} holds the set of {key} {before.get(key)!r}, not {found[key]!r}; give "
                                  "another --name or --out")
    board.write_manifest(folder, found)
    tune_args = argparse.Namespace(**{
        **vars(args), "task": task, "methods": ",".join(rows.values()), "trials": trials, "out": str(folder),
        "overrides": list(args.overrides) + [f"train.select={metric}"], "no_tables": True})
    print(f"leaderboard {name}: {len(rows)} methods x {trials} trials on validation {metric}, then seeds "
          f"{args.seeds}: {', '.join(f'{board.ROLES[r]} ({m})' for r, m in rows.items())}")
    command.cmd(tune_args)
    return folder


def cmd(args: argparse.Namespace) -> int:
    """``harness leaderboard [TASK ...] --out ROOT``: each task's set (its studies and tuned runs), then the table of
    every set under ROOT, printed and written (reference.md, reference.json, cd.png)."""
    if args.tasks:
        for task in args.tasks:
            run_set(args, task)
    return board.cmd(args)
