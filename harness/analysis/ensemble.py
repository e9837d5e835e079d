"""Ensembles of two finished runs: ``python -m harness ensemble RESULT_A RESULT_B``.

SCAN's strongest published rows ("t-i AVG + i-t LSE") average the similarity matrices of two
separately trained models. Both runs are rebuilt from their result files and checkpoints
(:mod:`harness.analysis.restore`), every test protocol of the task is run through the same code as
``harness run`` (:func:`harness.run.runner.full_test`) on a method that encodes with both and
scores with the mean of both matrices, and the outcome is written as a result file of its
own, ``<task>/<run A>+<run B>/seed<k>.json``, with both sources recorded. Its test time is
the sum of both encoders and both scorers plus the averaging and the ranking; it has no
training step. Each source encodes and scores under its own ``train.precision``; time
budgets do not apply (an ensemble needs both matrices whole).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence, cast

import torch
from torch import nn

from harness.analysis.restore import restore_run, run_files, train_settings
from harness.config import params as P
from harness.config import plan
from harness.config.registry import plugin_folders
from harness.config.spec import MetricSpec
from harness.errors import ConfigError
from harness.method import Method
from harness.ops import precision as prec
from harness.run.build import resolve_device
from harness.run.profiling import Profiler
from harness.store.provenance import environment
from harness.store.schema import Result, read_result, result_path, write_result
from harness.store.siblings import ranks_path

SAME = ("dataset", "metrics")  # config sections both sources must share


class Ensemble(Method):
    """Two trained methods side by side: embeddings are pairs of theirs, scores the mean of their matrices."""

    def __init__(self, members: list[Method], precisions: list[str], device: torch.device):
        super().__init__({}, None)
        self.members = nn.ModuleList(members)
        self.precisions, self.device = precisions, device

    @property
    def methods(self) -> list[Method]:
        """The members (the ModuleList registers them; it types them as modules)."""
        return cast(list[Method], list(self.members))

    def encode(self, modality: str, x: Any) -> Any:
        """Each member's embeddings of the batch, under its own precision: a tuple, which :meth:`score` takes."""
        out = []
        for member, precision in zip(self.methods, self.precisions):
            with prec.scope(precision, self.device):
                out.append(member.encode(modality, x))
        return tuple(out)

    def score(self, emb_a: tuple[Any, ...], emb_b: tuple[Any, ...]) -> torch.Tensor:
        """(n_a, n_b) mean of the members' score matrices, float32 on the CPU."""
        total: torch.Tensor | None = None
        for member, precision, a, b in zip(self.methods, self.precisions, emb_a, emb_b):
            with prec.scope(precision, self.device):
                sims = member.score(a, b).float().cpu()
            total = sims if total is None else total + sims
        if total is None:
            raise ValueError("an ensemble needs at least one member")
        return total / len(self.members)


def check_compatible(results: list[dict[str, Any]], paths: list[Path]) -> None:
    """ConfigError unless both results come from the same task version, dataset and metrics."""
    first, second = results
    if (first.get("task"), first.get("task_version")) != (second.get("task"), second.get("task_version")):
        raise ConfigError(f"{paths[0]} and {paths[1]} belong to different tasks ({first.get('task')} "
                          f"v{first.get('task_version')}, {second.get('task')} v{second.get('task_version')}); "
                          "an ensemble averages scores over the same test items")
    for section in SAME:
        changed = plan.diff({section: first["config"].get(section)}, {section: second["config"].get(section)})
        if changed:
            raise ConfigError(f"{paths[0]} and {paths[1]} differ in {', '.join(sorted(changed))}; an ensemble needs "
                              "the same dataset and metrics")


def source_record(result: dict[str, Any], path: Path) -> dict[str, Any]:
    """What the ensemble's result file keeps of one source."""
    return {"result": str(path), "run_name": result["run_name"], "method": result["method"], "seed": result["seed"],
            "checkpoint": result.get("checkpoint"), "precision": train_settings(result, str(path)).precision,
            "git": result.get("environment", {}).get("git")}


def ensemble(targets: list[str], device: torch.device, out: Path | None = None,
             data_root: str | None = None) -> dict[str, Any]:
    """Evaluate the ensemble of the two runs ``targets`` (result files or checkpoints); write and return its result."""
    from harness.run import runner

    started = time.perf_counter()
    paths = [run_files(Path(t))[0] for t in targets]
    results = [read_result(p) for p in paths]
    settings = [train_settings(result, str(path)) for path, result in zip(paths, results)]
    check_compatible(results, paths)
    first, data, _ = restore_run(paths[0], device, data_root)
    second, _, _ = restore_run(paths[1], device, data_root, data=data)
    data = data.for_device(device)
    precisions = [s.precision for s in settings]
    method = Ensemble([first, second], precisions, device)
    metrics_spec = P.parse(MetricSpec, results[0]["config"]["metrics"], f"{paths[0]}: config.metrics")
    batch = settings[0].eval_batch_size
    prof = Profiler(device)
    ranks: dict[str, torch.Tensor] = {}
    metrics = runner.full_test(method, data, metrics_spec, batch, prof, device, ranks)
    name = "+".join(r["method"] for r in results)
    path = result_path(out if out is not None else paths[0].parent.parent.parent, results[0]["task"],
                       "+".join(r["run_name"] for r in results), results[0]["seed"])
    path.parent.mkdir(parents=True, exist_ok=True)
    runner.save_ranks(ranks, ranks_path(path))
    config = dict(results[0]["config"], method={"name": name, "method": "ensemble",
                                                "sources": [r["run_name"] for r in results]})
    result = Result(task=results[0]["task"], task_version=results[0]["task_version"], run_name=path.parent.name,
                    method=name, seed=results[0]["seed"], metrics=metrics, profile=prof.summary(), config=config,
                    reference=results[0].get("reference"), dataset=data.info,
                    environment=environment(device, plugin_folders()), ranks=ranks_path(path).name,
                    wall_s=time.perf_counter() - started,
                    sources=[source_record(r, p) for r, p in zip(results, paths)])
    return write_result(path, result)


def evaluate_ensemble(targets: Sequence[str | Path], *, device: str = "auto", out: Path | str | None = None,
                      data_root: str | None = None) -> dict[str, Any]:
    """``python -m harness ensemble RESULT_A RESULT_B``: the two runs' score matrices averaged and evaluated on
    ``device`` (auto: CUDA when available), the result written under ``out`` (default: the folder holding the first
    run's task) and returned."""
    if len(targets) != 2:
        raise ConfigError(f"an ensemble averages two runs; got {len(targets)} ({', '.join(map(str, targets))}): give "
                          "two result files (seed<k>.json) or checkpoints")
    return ensemble([str(t) for t in targets], resolve_device(device), Path(out) if out else None, data_root)


def summary(result: dict[str, Any]) -> str:
    """What ``harness ensemble`` prints of an ensemble's result: its metrics, its whole-test time, its file."""
    total = result["profile"]["timing"].get("test_total", {}).get("median_s")
    return "\n".join([*(f"{k}: {v:.2f}" for k, v in result["metrics"].items()),
                      f"whole-test time (both encoders and scorers): {total:.3f} s" if total is not None else "",
                      f"result: {result['_path']}"])
