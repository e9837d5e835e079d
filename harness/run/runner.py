"""Orchestration of one run (method, settings, seed): build, train (timed from outside,
checkpointed every epoch, resumed after an interruption), select the best epoch, run the
full test retrieval (timed by part), write the result file, its checkpoint and per-query ranks."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from harness.config import params as P
from harness.config import plan
from harness.config.plan import Run
from harness.config.registry import plugin_folders
from harness.config.spec import MetricSpec, TaskSpec, TestSpec, TrainSpec
from harness.data.paired import PairedData, Split, expand_root
from harness.errors import ConfigError, DataError
from harness.method import Method
from harness.ops import precision as prec
from harness.run import checkpoint as ckpt
from harness.run import collapse, distributed, evaluate, guards, preflight, search
from harness.run import floor as floors
from harness.run import train as tr
from harness.run.build import build_method, classes_of, load_source, resolve_device, resolved_settings  # noqa: F401 (the runner's API)
from harness.run.profiling import Profiler
from harness.store import executed
from harness.store.io import atomic_write, save_checkpoint
from harness.store.provenance import code_record, environment
from harness.store.schema import Result, read_result, result_path, write_result


def load_data(spec: TaskSpec) -> PairedData:
    """Load the task's dataset through its registered source; check that its validation and test splits
    support the requested relevance and that every fold protocol fits them."""
    executed.watch_reads()  # the data files read are named in each run's record
    data = load_source(spec)
    preflight.check_data(spec, data)
    return data


@dataclass
class RunOptions:
    device: torch.device
    out: Path
    progress: bool = True
    force: bool = False
    init: Path | None = None
    dist: distributed.DistInfo = field(default_factory=distributed.DistInfo)
    on_nan: str = "stop"  # a non-finite loss stops the run, or "skip" drops that step's update (harness.run.guards)
    # run folder -> why its method cannot run on the data (harness.run.preflight.refusals); the others still run
    refused: dict[str, ConfigError] = field(default_factory=dict)
    # the machine's counters at the command's start, when the command may lower torch's threads on a busy machine
    # before the first run trains (harness.run.contention.threads_for); None: the threads stay as they are
    watch: Any = None
    tuning: dict[str, Any] | None = None  # the study that chose the run's settings (harness tune), for its result file


def _progress(total: int, done: int, desc: str, enabled: bool) -> tqdm:
    return tqdm(total=total, initial=done, desc=desc, unit="epoch", disable=not enabled, leave=True,
                dynamic_ncols=True)


def finished_result(run: Run, opts: RunOptions) -> dict[str, Any] | None:
    """The result file of ``run`` when it exists and was produced with the same settings; None when
    there is none or ``--force`` asks for a re-run. A result with other settings is an error."""
    path = result_path(opts.out, run.spec.name, run.run_name, run.seed)
    if opts.force or not path.exists():
        return None
    try:
        done = read_result(path)
    except ConfigError as err:
        raise ConfigError(f"{err}; delete it, or pass --force to run again and replace it") from None
    current = run.spec.resolved(run.method)
    changed = sorted(plan.diff(plan.with_legacy_defaults(done.get("config", {}), current), current,
                               defaults=run.spec.resolved(run.method, P.defaults)))
    if changed or done.get("init") != _init_text(opts):
        raise ConfigError(f"{path} exists but was produced with other settings ({', '.join(changed) or 'init'}); "
                          "pass --force to replace it, or --out to write elsewhere")
    return done


def _data_dir(root: Any) -> Path | None:
    """The folder a task's dataset root names here (None without a root, or with a variable left unset)."""
    if not root:
        return None
    try:
        return expand_root(str(root))
    except DataError:
        return None


def _init_text(opts: RunOptions) -> str | None:
    return str(opts.init) if opts.init is not None else None


def run_one(run: Run, data: PairedData, opts: RunOptions) -> dict[str, Any] | None:
    """Train (resuming an interrupted run) and test one (method, seed); write and return its result.

    A method with ``trains_by_gradient = False`` is fitted once in closed form on the training split
    (timed as its only training epoch) instead. Under torchrun every process trains its shard of
    each batch; only rank 0 validates (and shares the scores, so all select the same epoch), writes
    checkpoints, tests and writes the result; the other processes return None.
    """
    started = time.perf_counter()
    recorder = executed.Recorder()
    trained = train(run, data, opts)
    if trained is None:
        return None
    spec, name = run.spec, run.method
    m = spec.methods[name]
    path = result_path(opts.out, spec.name, run.run_name, run.seed)
    resume = ckpt.resume_path(path)
    test_memory = guards.memory_settings(spec, name, "test")
    floor = _floor(run, trained, opts)
    fitted = [f"{spec.path}: methods.{name}: {line}" for line in trained.method.fitted_warnings()]
    for line in fitted:
        tqdm.write(f"warning: {line}")
    ranks: dict[str, torch.Tensor] = {}
    metrics = guards.on_oom(full_test, "the test retrieval", test_memory, opts.device, resume)(
        trained.method, trained.data, spec.metrics, m.train.eval_batch_size, trained.prof, opts.device, ranks,
        m.train.precision, spec.test)
    save_checkpoint(trained.fit.best_state, path.with_suffix(".pt"))
    save_ranks(ranks, path.with_suffix(".ranks.npz"))
    result = _result(run, trained, opts, metrics, floor, fitted, path, started)
    root = spec.resolved(name)["dataset"].get("root")
    result.executed = recorder.finish(classes=classes_of(spec, name), plugin_dirs=plugin_folders(),
                                      data=trained.data, data_root=root, data_dir=_data_dir(root),
                                      device=opts.device, threads=torch.get_num_threads(),
                                      precision=m.train.precision)
    _add_notes(result, trained, m.train.epochs)
    written = write_result(path, result)
    resume.unlink(missing_ok=True)
    return written


def _floor(run: Run, trained: Trained, opts: RunOptions) -> dict[str, Any] | None:
    """The run's no-training floor on validation (:mod:`harness.run.floor`), warned when it fell below it; None
    for the methods that have none."""
    spec, name = run.spec, run.method
    m = spec.methods[name]
    if m.method in floors.NO_FLOOR_METHODS:
        return None
    with prec.scope(m.train.precision, opts.device):
        identity = floors.identity_validation(spec, name, trained.data, opts.device)
    floor = floors.record(m.train.select, trained.val_at_best, identity, trained.fit.untrained)
    if floor is not None and floor["below"]:
        tqdm.write(floors.warning_line(f"{run.run_name} seed{run.seed}", floor))
    return floor


def _result(run: Run, trained: Trained, opts: RunOptions, metrics: dict[str, float], floor: dict[str, Any] | None,
            fitted: list[str], path: Path, started: float) -> Result:
    """The result file of a trained and tested run (less ``executed``, recorded last)."""
    spec, name, seed, info = run.spec, run.method, run.seed, opts.dist
    m, data, fit, prof, method = spec.methods[name], trained.data, trained.fit, trained.prof, trained.method
    return Result(
        task=spec.name, task_version=spec.version, run_name=run.run_name, method=name, seed=seed, varied=run.varied,
        init=_init_text(opts), metrics=metrics, training="gradient" if method.trains_by_gradient else "closed_form",
        best_epoch=fit.best_epoch, val_at_best=trained.val_at_best, untrained=fit.untrained, floor=floor,
        auto=resolved_settings(spec, name, data) or None,
        collapse=collapse.detect(fit.history, trained.chance, patience=m.train.collapse_patience,
                                 tolerance=m.train.collapse_tolerance, best_epoch=fit.best_epoch),
        warnings=preflight.fit_warnings(spec, name, data) + fitted, history=fit.history, profile=prof.summary(),
        resumed_from_epoch=trained.resumed_from, on_nan=opts.on_nan,
        skipped_steps=trained.skipped,
        distributed={"world_size": info.world_size, "backend": info.backend,
                     "batch_per_process": -(-m.train.batch_size // info.world_size)},
        config=spec.resolved(name), overrides=list(spec.overrides), reference=spec.raw.get("reference"),
        tuning=opts.tuning,
        dataset=data.info, environment=environment(opts.device, plugin_folders()),
        checkpoint=path.with_suffix(".pt").name, ranks=path.with_suffix(".ranks.npz").name, search=prof.search,
        wall_s=time.perf_counter() - started, code=code_record(classes_of(spec, name)))


def _add_notes(result: Result, trained: Trained, epochs: int) -> None:
    """What a time budget left unscored (``metrics_skipped``) and which epochs a resumed run's timings cover."""
    if trained.prof.extrapolated:
        result.metrics_skipped = {
            f"test{tag}": f"time_budget_s stopped the test scoring after {100 * e['fraction_scored']:.2f}% of the "
                          "score matrix: no accuracy metrics; times in profile.extrapolated"
            for tag, e in trained.prof.extrapolated.items()}
    if trained.resumed_from:
        result.profile["notes"] = list(result.profile.get("notes", [])) + [
            f"resumed after epoch {trained.resumed_from}: train timings and memory cover epochs "
            f"{trained.resumed_from + 1}-{epochs} only"]


@dataclass
class Trained:
    """A run trained and its best epoch loaded (:func:`train`): what testing it needs."""

    method: Method
    fit: tr.FitResult
    prof: Profiler
    data: PairedData  # the data as prepared for the run's device
    chance: collapse.Chance | None = None  # the selection metric's chance level on validation
    resumed_from: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def val_at_best(self) -> dict[str, float]:
        """Validation metrics of the epoch kept (the untrained model's for epoch 0)."""
        fit = self.fit
        if fit.best_epoch == 0:
            return dict(fit.untrained or {})
        return {k[4:]: v for k, v in fit.history[fit.best_epoch - 1].items() if k.startswith("val/")}


def train(run: Run, data: PairedData, opts: RunOptions,
          on_epoch: Callable[[dict[str, float]], None] | None = None) -> Trained | None:
    """Build the run's model, train it (resuming an interrupted run, see :func:`run_one`) on the training split
    while validating each epoch, and load its best epoch; the test split is not read. ``on_epoch`` sees each
    epoch's record (its ``val/<metric>`` values) after the epoch; a closed-form fit has one. None on the processes
    other than rank 0 under torchrun."""
    spec, name, seed, info = run.spec, run.method, run.seed, opts.dist
    data = data.for_device(opts.device)
    torch.manual_seed(seed)
    m = spec.methods[name]
    path = result_path(opts.out, spec.name, run.run_name, seed)
    resume = ckpt.resume_path(path)
    method = guards.on_oom(build_method, "building the model", f"the sizes of {name} (e.g. {name}.queue) or of "
                           "encoders.a/b", opts.device, resume)(spec, name, data, opts.device)
    if opts.init is not None:
        ckpt.load_encoders(method, opts.init)
    prof = Profiler(opts.device)
    test_memory = guards.memory_settings(spec, name, "test")  # validation's guard names the test's settings
    precision = m.train.precision

    def val_metrics() -> dict[str, float]:
        with prec.scope(precision, opts.device):
            return evaluate.evaluate(method, data["val"], spec.metrics, opts.device, m.train.eval_batch_size, spec.test)

    def val_metrics_everywhere() -> dict[str, float]:  # rank 0 validates; every process gets its metrics
        return distributed.from_main(val_metrics, info)

    validate = prof.timed("validate", guards.on_oom(val_metrics_everywhere, "validation", test_memory, opts.device,
                                                    resume))
    chance = collapse.chance_level(data["val"], spec.metrics, m.train.select) if info.is_main else None
    if method.trains_by_gradient:
        fit, resumed_from, skipped = _train(run, method, data, opts, prof, validate, chance, on_epoch)
    else:
        fit_fn = guards.on_oom(method.fit_closed_form, "the closed-form fit",
                               guards.memory_settings(spec, name, "train"), opts.device, resume)
        with prof.phase("train"):
            fit = tr.fit_closed_form(method, data["train"], prof.timed("train_epoch", fit_fn), validate)
        resumed_from, skipped = 0, []
        if on_epoch is not None:
            on_epoch(fit.history[0])
        prof.notes.append("closed-form fit: train_epoch is the time of the fit; there are no gradient steps")
    for key, seconds in method.one_off_timings().items():
        prof.times[key] = [seconds]
        prof.notes.append(f"{key}: a one-off cost inside the first training steps ({seconds:.1f} s), also in "
                          "train_step's total, not in its median")
    if not info.is_main:
        return None
    method.load_state_dict(fit.best_state)
    return Trained(method, fit, prof, data, chance, resumed_from, skipped)

def _train(run: Run, method: Method, data: PairedData, opts: RunOptions, prof: Profiler, validate: Any,
           chance: collapse.Chance | None, extra: Callable[[dict[str, float]], None] | None = None,
           ) -> tuple[tr.FitResult, int, list[dict[str, Any]]]:
    """Gradient training with per-epoch resume checkpoints, the non-finite and out-of-memory guards and
    the collapse warning; returns (fit, epochs resumed, skipped steps). ``extra`` sees each epoch's record."""
    spec, info, m = run.spec, opts.dist, run.spec.methods[run.method]
    optimizer = tr.make_optimizer(method, m.train)
    scheduler = tr.make_scheduler(optimizer, m.train)
    resume = ckpt.resume_path(result_path(opts.out, spec.name, run.run_name, run.seed))
    fingerprint = {"config": spec.resolved(run.method), "seed": run.seed, "init": _init_text(opts),
                   "world_size": info.world_size}
    state, generator = None, None
    if resume.exists() and not opts.force:
        state, generator = ckpt.load_resume(resume, fingerprint, method, optimizer, scheduler)
    resumed_from = len(state.history) if state is not None else 0
    steps_per_epoch = tr.steps_per_epoch(data["train"].n_pairs, m.train.batch_size, m.train.drop_last)
    guard = guards.NonFiniteGuard(opts.on_nan, guards.hyperparameters(spec, run.method), steps_per_epoch, resume,
                                  step=resumed_from * steps_per_epoch)
    step = tr.make_step(method, optimizer, data["train"], opts.device, m.train.grad_clip,
                        loss_fn=prec.wrap_forward(distributed.wrap_ddp(method, info, opts.device), m.train.precision,
                                                  opts.device),
                        shard=partial(distributed.shard, info=info) if info.world_size > 1 else None,
                        world_size=info.world_size, check_loss=guard)
    step = guards.on_oom(guard.count(prec.wrap_step(step, m.train.precision)), "a training step",
                         guards.memory_settings(spec, run.method, "train"), opts.device, resume)
    label = f"{run.run_name} seed{run.seed}"
    bar = _progress(m.train.epochs, resumed_from, label, opts.progress and info.is_main)
    warned = state is not None and resumed_from > 0 and _collapsed(state.history, chance, m.train) is not None

    def on_epoch(record: dict[str, float]) -> None:
        bar.set_postfix(loss=f"{record.get('loss', float('nan')):.4g}",  # no loss: every step skipped (--on-nan)
                        **{f"val {m.train.select}": f"{record['val/' + m.train.select]:.2f}"})
        bar.update()
        if extra is not None:
            extra(record)

    def after_epoch(result: tr.FitResult, gen: torch.Generator) -> None:
        nonlocal warned
        if not info.is_main:
            return
        ckpt.save_resume(resume, fingerprint, method, optimizer, scheduler, result, gen)
        found = None if warned else _collapsed(result.history, chance, m.train)
        if found is not None:
            warned = True
            tqdm.write(collapse.warning_line(found, label, run.method, spec, data.input_shapes(), method.embed_dim))

    with prof.phase("train"):
        fit = tr.fit(method, data["train"], m.train, seed=run.seed, step=prof.timed("train_step", step),
                     epoch=prof.timed("train_epoch", tr.run_epoch), validate=validate, on_epoch=on_epoch,
                     scheduler=scheduler, state=state, generator=generator, after_epoch=after_epoch)
    bar.close()
    return fit, resumed_from, guard.skipped


def _collapsed(history: list[dict[str, float]], chance: collapse.Chance | None, t: Any) -> dict[str, Any] | None:
    return collapse.detect(history, chance, patience=t.collapse_patience, tolerance=t.collapse_tolerance)


def save_ranks(ranks: dict[str, torch.Tensor], path: Path) -> None:
    """Per-query ranks of the test protocols (keys as in :func:`harness.run.evaluate.rank_folds`), atomically."""
    arrays: dict[str, Any] = {k: v.numpy() for k, v in ranks.items()}  # savez's keywords name the arrays
    atomic_write(path, lambda f: np.savez_compressed(f, **arrays))


def full_test(method: Method, data: PairedData, metrics_spec: MetricSpec, batch_size: int, prof: Profiler,
              device: torch.device, ranks: dict[str, torch.Tensor] | None = None,
              precision: str = TrainSpec.precision, test: TestSpec | None = None) -> dict[str, float]:
    """Whole-test retrieval for every protocol of the task (the whole split, and averages over
    consecutive folds such as MS-COCO 1K); each protocol encodes, scores and ranks on its own clock.
    A protocol whose scoring the method's time budget stopped has no metrics (see :func:`run_protocol`).
    With ``test.search``, an approximate search of the whole split follows (:mod:`harness.run.search`)."""
    test = TestSpec() if test is None else test
    metrics: dict[str, float] = {}
    settings = test.search_settings()
    kept: dict[str, Any] | None = {} if settings is not None else None
    for n_folds in metrics_spec.folds:
        metrics.update(run_protocol(method, data["test"], metrics_spec, n_folds, batch_size, prof, device, ranks,
                                    precision, test, kept))
    if settings is not None and kept is not None:  # kept is a dict exactly when there are settings
        embeddings = kept.get("embeddings")
        if embeddings is None:
            with prec.scope(precision, device):
                embeddings = evaluate.encode_split(method, data["test"], device, batch_size)
        search.run_search(method, data["test"], metrics_spec, settings, prof, embeddings)
    return metrics


def run_protocol(method: Method, split: Split, metrics_spec: MetricSpec, n_folds: int, batch_size: int, prof: Profiler,
                 device: torch.device, ranks: dict[str, torch.Tensor] | None = None,
                 precision: str = TrainSpec.precision, test: TestSpec | None = None,
                 kept: dict[str, Any] | None = None) -> dict[str, float]:
    """Encode every item, score within each of ``n_folds`` folds, rank; timed as test_total/encode/score/rank
    with the protocol's tag ('' or '@<n>folds'), peak memory in phase 'test<tag>'. Encoding and scoring
    run under ``precision``. When the method's ``test_time_budget_s`` stops the scoring part-way, nothing
    is ranked: the profile records the fraction scored and the extrapolated times, and no metrics return.
    A method that reproduces a released evaluation with a pass over the test pairs (SCAN's) has that pass
    timed after the protocol, on clocks of its own (:func:`harness.run.evaluate.pair_pass`).

    On the streaming path (:func:`harness.run.evaluate.streams`) scoring and ranking interleave block by block:
    ``test_score`` is then the time spent inside the scorer over all blocks and ``test_rank`` the rest of
    that loop, and ``profile.test_path`` says so for the protocol."""
    test = TestSpec() if test is None else test
    tag = evaluate.protocol_tag(n_folds)
    metrics: dict[str, float] = {}
    blocks = (test.block_a, test.block_b)
    streamed = evaluate.streams(method, test)
    with prof.phase(f"test{tag}"), prof.timer(f"test_total{tag}"):
        with prof.timer(f"test_encode{tag}"), prec.scope(precision, device):
            emb_a, emb_b = evaluate.encode_split(method, split, device, batch_size)
        folds = evaluate.make_folds(split, n_folds)
        if kept is not None:  # the embeddings, for the approximate search after the protocols
            kept["embeddings"] = (emb_a, emb_b)
        if streamed:
            clock = evaluate.BlockClock(device)
            start = time.perf_counter()
            with prec.scope(precision, device):
                metrics = evaluate.stream_folds(method, emb_a, emb_b, folds, split, metrics_spec, blocks, ranks, clock)
            loop = time.perf_counter() - start
            prof.add(f"test_score{tag}", clock.score_s)
            prof.add(f"test_rank{tag}", loop - clock.score_s)
            prof.test_path[tag] = {"path": "stream", "block_a": blocks[0], "block_b": blocks[1], **clock.record(),
                                   "fused": True}
            prof.notes.append(f"test{tag}: streamed over blocks of {blocks[0]} x {blocks[1]}; scoring and ranking "
                              f"interleave: test_score{tag} is the time inside the scorer ({clock.rescored} of "
                              f"{clock.blocks} blocks scored twice, the first pass over the blocks holding relevant "
                              f"pairs), test_rank{tag} the rest of the loop")
        else:
            prof.test_path[tag] = {"path": "full", "block_a": blocks[0] if method.scores_in_blocks else None,
                                   "block_b": blocks[1] if method.scores_in_blocks else None, "fused": False}
            with prof.timer(f"test_score{tag}"), prec.scope(precision, device):
                scored, done = evaluate.score_folds(method, emb_a, emb_b, folds, method.test_time_budget_s, blocks)
            if done < 1:
                prof.extrapolate(tag, done)
            else:
                with prof.timer(f"test_rank{tag}"):
                    metrics = evaluate.rank_folds(scored, folds, split, metrics_spec, ranks)
    if method.times_pair_pass and split.paired:  # outside test_total: the protocol's own figure stays as it is
        with prec.scope(precision, device):
            evaluate.pair_pass(method, split, device, batch_size, prof.timer, tag)
    return metrics
