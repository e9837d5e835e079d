"""Orchestration of a task run: data once, then for each method and seed build, train
(timed from outside), select the best epoch, run the full test retrieval (timed by
part), write one result file and its checkpoint."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from harness import evaluate as ev
from harness import train as tr
from harness.data import PairedData, Split
from harness.errors import ConfigError
from harness.method import Method
from harness.profiling import Profiler
from harness.registry import ENCODERS, METHODS, SOURCES
from harness.results import SCHEMA, environment, result_path, save_checkpoint, write_json_atomic
from harness.spec import TaskSpec


def resolve_device(name: str) -> torch.device:
    """'auto' picks CUDA when present; an explicit CUDA device that is absent is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ConfigError(f"--device {name!r} is not a device name; use auto, cpu, cuda or cuda:N") from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"--device {name}: CUDA is not available on this machine; use --device cpu")
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"--device {name}: only cpu and cuda are supported")
    return device


def load_data(spec: TaskSpec) -> PairedData:
    """Load the task's dataset through its registered source; check that every fold protocol fits it."""
    data = SOURCES.get(spec.dataset.kind).load(spec.dataset.params)
    for name in ("val", "test"):
        n_items = len(data[name].a)
        bad = [n for n in spec.metrics.folds if n_items % n]
        if bad:
            raise ConfigError(f"{spec.path}: metrics.folds {bad} do not divide the {n_items} a-items of the "
                              f"{name} split into equal folds; use divisors of {n_items}")
    return data


def build_method(spec: TaskSpec, name: str, data: PairedData, device: torch.device) -> Method:
    """Encoders sized from the data, wrapped by the method class, on ``device``."""
    shapes = data.input_shapes()
    encoders = {m: ENCODERS.get(c.kind).build(shapes[m], c.params) for m, c in spec.encoders.items()}
    m = spec.methods[name]
    return METHODS.get(m.method)(encoders, m.params).to(device)


@dataclass
class RunOptions:
    device: torch.device
    out: Path
    run_names: dict[str, str]
    overrides: list[str]
    progress: bool = True


def _progress(total: int, desc: str, enabled: bool) -> tqdm:
    return tqdm(total=total, desc=desc, unit="epoch", disable=not enabled, leave=True, dynamic_ncols=True)


def run_one(spec: TaskSpec, name: str, seed: int, data: PairedData, opts: RunOptions) -> dict[str, Any]:
    """Train and test one (method, seed); write and return its result dict."""
    started = time.perf_counter()
    torch.manual_seed(seed)
    m = spec.methods[name]
    method = build_method(spec, name, data, opts.device)
    optimizer = tr.make_optimizer(method, m.train)
    prof = Profiler(opts.device)
    step = prof.timed("train_step", tr.make_step(method, optimizer, data["train"], opts.device, m.train.grad_clip))
    validate = prof.timed("validate", lambda: ev.evaluate(method, data["val"], spec.metrics, opts.device,
                                                          m.train.eval_batch_size))
    bar = _progress(m.train.epochs, f"{opts.run_names[name]} seed{seed}", opts.progress)

    def on_epoch(record: dict[str, float]) -> None:
        bar.set_postfix(loss=f"{record['loss']:.4g}", **{f"val {m.train.select}": f"{record['val/' + m.train.select]:.2f}"})
        bar.update()

    with prof.phase("train"):
        fit = tr.fit(method, data["train"], m.train, seed=seed, step=step, epoch=prof.timed("train_epoch", tr.run_epoch),
                     validate=validate, on_epoch=on_epoch, scheduler=tr.make_scheduler(optimizer, m.train))
    bar.close()
    method.load_state_dict(fit.best_state)
    metrics = full_test(method, data, spec, m.train.eval_batch_size, prof, opts.device)
    path = result_path(opts.out, spec.name, opts.run_names[name], seed)
    save_checkpoint(fit.best_state, path.with_suffix(".pt"))
    payload = {
        "schema": SCHEMA, "task": spec.name, "task_version": spec.version, "run_name": opts.run_names[name],
        "method": name, "seed": seed, "metrics": metrics, "best_epoch": fit.best_epoch,
        "val_at_best": {k[4:]: v for k, v in fit.history[fit.best_epoch - 1].items() if k.startswith("val/")},
        "history": fit.history, "profile": prof.summary(), "config": spec.resolved(name),
        "overrides": opts.overrides, "reference": spec.raw.get("reference"), "dataset": data.info,
        "environment": environment(opts.device), "checkpoint": path.with_suffix(".pt").name,
        "wall_s": time.perf_counter() - started,
    }
    write_json_atomic(path, payload)
    return payload


def full_test(method: Method, data: PairedData, spec: TaskSpec, batch_size: int, prof: Profiler,
              device: torch.device) -> dict[str, float]:
    """Whole-test retrieval for every protocol of the task (the whole split, and averages over
    consecutive folds such as MS-COCO 1K); each protocol encodes, scores and ranks on its own clock."""
    metrics: dict[str, float] = {}
    for n_folds in spec.metrics.folds:
        metrics.update(run_protocol(method, data["test"], spec, n_folds, batch_size, prof, device))
    return metrics


def run_protocol(method: Method, split: Split, spec: TaskSpec, n_folds: int, batch_size: int, prof: Profiler,
                 device: torch.device) -> dict[str, float]:
    """Encode every item, score within each of ``n_folds`` folds, rank; timed as test_total/encode/score/rank
    with the protocol's tag ('' or '@<n>folds'), peak memory in phase 'test<tag>'."""
    tag = ev.protocol_tag(n_folds)
    with prof.phase(f"test{tag}"), prof.timer(f"test_total{tag}"):
        with prof.timer(f"test_encode{tag}"):
            emb_a, emb_b = ev.encode_split(method, split, device, batch_size)
        folds = ev.make_folds(split, n_folds)
        with prof.timer(f"test_score{tag}"):
            blocks = ev.score_folds(method, emb_a, emb_b, folds)
        with prof.timer(f"test_rank{tag}"):
            return ev.rank_folds(blocks, folds, split, spec.metrics)


def run_names(spec: TaskSpec, methods: list[str], overrides: list[str], epochs: int | None) -> dict[str, str]:
    """Folder name per method: the method name plus any override that touches it (the dataset's
    location, ``dataset.root``, changes no result and names no folder)."""
    names = {}
    for name in methods:
        tags = [o.split(".", 1)[1] if o.startswith(f"{name}.") else o for o in overrides
                if (o.startswith(f"{name}.") or o.split(".", 1)[0] in ("train", "dataset", "encoders", "metrics"))
                and not o.startswith("dataset.root=")]
        if epochs is not None:
            tags.append(f"epochs={epochs}")
        names[name] = f"{name}@{','.join(tags)}" if tags else name
    return names
