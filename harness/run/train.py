"""The training loop: the same for every method; it calls ``method.start_epoch`` and ``method.loss``
and nothing else. Methods fitted in closed form go through :func:`fit_closed_form` instead.

Measurement stays outside: :func:`fit` receives the step function and the epoch
runner already wrapped by whoever wants to time them.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from harness.config import metrics as metric_registry
from harness.config.spec import TrainSpec
from harness.data.paired import Split, to_device
from harness.method import Method

StepFn = Callable[[torch.Tensor], dict[str, torch.Tensor]]


def make_optimizer(method: Method, t: TrainSpec) -> torch.optim.Optimizer:
    """Optimizer named by the task over all trainable parameters of the method."""
    params = [p for p in method.parameters() if p.requires_grad]
    if t.optimizer == "adam":
        return torch.optim.Adam(params, lr=t.lr, weight_decay=t.weight_decay)
    if t.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=t.lr, weight_decay=t.weight_decay)
    return torch.optim.SGD(params, lr=t.lr, momentum=0.9, weight_decay=t.weight_decay, nesterov=t.nesterov)


def make_step(method: Method, optimizer: torch.optim.Optimizer, split: Split, device: torch.device,
              grad_clip: float | None, loss_fn: Callable[..., Any] | None = None,
              shard: Callable[[torch.Tensor], torch.Tensor] | None = None, world_size: int = 1,
              check_loss: Callable[[torch.Tensor, dict[str, torch.Tensor]], bool] | None = None) -> StepFn:
    """One optimisation step on the pairs ``index`` of ``split``; returns the method's logs.

    ``loss_fn`` defaults to ``method.loss`` (a DistributedDataParallel wrapper of it under
    torchrun); ``shard`` keeps this process's part of the global batch. A global batch with fewer
    pairs than processes is skipped by every process alike (some shard would be empty).
    ``check_loss(loss, logs)`` (e.g. :class:`harness.run.guards.NonFiniteGuard`) sees the loss before the
    backward pass; False skips the update and the step logs nothing.
    """
    loss_fn = loss_fn or method.loss

    def step(index: torch.Tensor) -> dict[str, torch.Tensor]:
        if len(index) < world_size:
            return {}
        if shard is not None:
            index = shard(index)
        x_a, x_b = (to_device(x, device) for x in split.pair_batch(index))
        loss, logs = loss_fn(x_a, x_b)
        if check_loss is not None and not check_loss(loss, logs):
            return {}
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(method.parameters(), grad_clip)
        optimizer.step()
        return logs

    return step


def batches(n: int, batch_size: int, generator: torch.Generator, drop_last: bool = False) -> list[torch.Tensor]:
    """A shuffled partition of range(n) into batches (the last one may be smaller); with ``drop_last``
    the last batch is left out when it is smaller than ``batch_size`` (as torch's DataLoader does),
    unless it is the only one."""
    parts = list(torch.split(torch.randperm(n, generator=generator), batch_size))
    if drop_last and len(parts) > 1 and len(parts[-1]) < batch_size:
        parts.pop()
    return parts


def steps_per_epoch(n: int, batch_size: int, drop_last: bool = False) -> int:
    """How many batches :func:`batches` gives for ``n`` items."""
    full, rest = divmod(n, batch_size)
    return full + (1 if rest and not (drop_last and full) else 0)


@dataclass
class FitResult:
    """What training produced: the best epoch by the selection metric and per-epoch history."""

    best_epoch: int = -1
    best_score: float = float("-inf")
    best_state: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, float]] = field(default_factory=list)
    untrained: dict[str, float] | None = None  # validation metrics of the model before training (epoch 0)


def run_epoch(step: StepFn, n_pairs: int, batch_size: int, generator: torch.Generator,
              drop_last: bool = False) -> dict[str, float]:
    """All steps of one epoch; returns the mean of each logged scalar."""
    sums: dict[str, torch.Tensor] = {}
    counts: dict[str, int] = {}
    for index in batches(n_pairs, batch_size, generator, drop_last):
        for key, value in step(index).items():
            sums[key] = sums.get(key, 0) + value
            counts[key] = counts.get(key, 0) + 1
    return {k: float(v) / counts[k] for k, v in sums.items()}


def fit(method: Method, split: Split, t: TrainSpec, *, seed: int, step: StepFn,
        epoch: Callable[..., dict[str, float]], validate: Callable[[], dict[str, float]],
        on_epoch: Callable[[dict[str, float]], None] = lambda logs: None,
        scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
        state: FitResult | None = None, generator: torch.Generator | None = None,
        after_epoch: Callable[[FitResult, torch.Generator], None] = lambda result, generator: None) -> FitResult:
    """Train for ``t.epochs`` epochs, validating after each; keep the state of the best epoch. With
    ``t.select_untrained`` the model is validated before the first step too, as epoch 0, the first candidate:
    a run whose training never beats its start keeps (and tests) the untrained model, with ``best_epoch`` 0.

    ``select`` metrics that are ranks are minimised, all others maximised
    (:func:`harness.config.metrics.lower_is_better`); only a strictly
    better value makes a new best epoch. With ``t.early_stop_patience`` = P, training stops once P
    epochs in a row after the best one brought no better value (the epoch kept is still the best
    one); :func:`stopped_early` tells whether it stopped so. To resume,
    pass the ``state`` and batch-order ``generator`` saved by ``after_epoch`` (called at the end
    of every epoch): training continues at epoch ``len(state.history) + 1``.
    """
    generator = generator if generator is not None else torch.Generator().manual_seed(seed)
    lower_is_better = metric_registry.lower_is_better(t.select)
    result = state if state is not None else FitResult()
    if t.select_untrained and not result.history and result.untrained is None:
        method.eval()
        result.untrained = validate()
        result.best_epoch = 0
        result.best_score = -result.untrained[t.select] if lower_is_better else result.untrained[t.select]
        result.best_state = copy.deepcopy(method.state_dict())
    for e in range(len(result.history), t.epochs):
        if stopped_early(result, t):
            break
        method.train()
        method.start_epoch(e + 1)
        logs = epoch(step, split.n_pairs, t.batch_size, generator, drop_last=t.drop_last)
        if scheduler is not None:
            scheduler.step()
        method.eval()
        val = validate()
        score = -val[t.select] if lower_is_better else val[t.select]
        record = {"epoch": e + 1, **logs, **{f"val/{k}": v for k, v in val.items()}}
        result.history.append(record)
        if score > result.best_score:
            result.best_epoch, result.best_score = e + 1, score
            result.best_state = copy.deepcopy(method.state_dict())
        on_epoch(record)
        after_epoch(result, generator)
    return result


def stopped_early(result: FitResult, t: TrainSpec) -> bool:
    """Whether ``t.early_stop_patience`` epochs have passed since the best one (so training stops)."""
    patience = t.early_stop_patience
    return patience is not None and bool(result.history) and len(result.history) - result.best_epoch >= patience


def fit_closed_form(method: Method, split: Split, fit: Callable[[Split], None],
                    validate: Callable[[], dict[str, float]]) -> FitResult:
    """A method without gradient training: ``fit`` (``method.fit_closed_form``, possibly timed) on the
    training ``split``, then one validation; the result is a single 'epoch' that is also the best."""
    fit(split)
    method.eval()
    val = validate()
    return FitResult(best_epoch=1, best_score=0.0, best_state=copy.deepcopy(method.state_dict()),
                     history=[{"epoch": 1, **{f"val/{k}": v for k, v in val.items()}}])


def make_scheduler(optimizer: torch.optim.Optimizer, t: TrainSpec) -> torch.optim.lr_scheduler.LRScheduler | None:
    """Step decay by ``lr_gamma`` every ``lr_step`` epochs, when the task asks for it."""
    if t.lr_step is None:
        return None
    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=t.lr_step, gamma=t.lr_gamma)
