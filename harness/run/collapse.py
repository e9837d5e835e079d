"""Collapse detection, the same for every method: a pure function of the per-epoch history.

Two signals, each checked after every epoch:

* **plateau** — a logged loss term ``T`` stays within ``tolerance`` (relative) of its collapsed
  value, the value it takes when every score is equal (a method logs that value under
  ``plateau_key(T)``, e.g. the max-violation hinge's 2·B·margin; :mod:`harness.ops.losses`);
* **chance** — the validation selection metric stays at the level random scores reach: at
  most their mean + 3 std over draws (at least mean − 3 std for a rank, which is minimised).

A signal that holds for ``patience`` consecutive epochs is a collapse: the runner prints one
warning line naming the likely cause and the settings to try — only settings that this run's method,
data source and encoders have, not already set, and that go together (:func:`hints`) — and the result
file records it under ``collapse`` (tables then flag the run).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from harness.config import metrics as metric_registry
from harness.config import params as P
from harness.config.spec import MetricSpec, TaskSpec
from harness.data.paired import Split
from harness.ops.losses import plateau_key
from harness.run import evaluate

CHANCE_SDS = 3.0


@dataclass(frozen=True)
class Chance:
    """The selection metric under random scores: mean and std over draws, and whether lower is better."""

    metric: str
    mean: float
    std: float
    lower_is_better: bool = False

    def holds(self, value: float) -> bool:
        """Whether ``value`` is within chance: no better than mean + 3 std (mean − 3 std for ranks)."""
        if self.lower_is_better:
            return value >= self.mean - CHANCE_SDS * self.std
        return value <= self.mean + CHANCE_SDS * self.std


def chance_level(split: Split, metrics: MetricSpec, select: str, draws: int = 10, seed: int = 0) -> Chance:
    """Mean and std of ``select`` over ``draws`` matrices of i.i.d. uniform scores on ``split``."""
    gen = torch.Generator().manual_seed(seed)
    values = []
    for _ in range(draws):
        for n_folds in metrics.folds:
            folds = evaluate.make_folds(split, n_folds)
            blocks = [torch.rand(len(a), len(b), generator=gen) for a, b in folds]
            out = evaluate.rank_folds(blocks, folds, split, metrics)
            if select in out:
                values.append(out[select])
    x = torch.tensor(values, dtype=torch.float64)
    return Chance(select, float(x.mean()), float(x.std()) if len(x) > 1 else 0.0,
                  metric_registry.lower_is_better(select))


def epoch_signals(record: dict[str, float], chance: Chance | None, tolerance: float) -> dict[str, str]:
    """{signal key: description} of the collapse signals that hold in one epoch's record."""
    out = {}
    for term, value in record.items():
        collapsed = record.get(plateau_key(term))
        if collapsed and abs(value / collapsed - 1.0) <= tolerance:
            out[f"plateau:{term}"] = (f"the loss term '{term}' sits at its collapsed value {collapsed:.4g} "
                                      f"(every pair scored alike; within {tolerance:.0%})")
    val = record.get(f"val/{chance.metric}") if chance is not None else None
    if chance is not None and val is not None and chance.holds(val):
        out["chance"] = (f"validation {chance.metric} stays at chance ({chance.mean:.2f} ± {chance.std:.2f} "
                         f"under random scores)")
    return out


def detect(history: list[dict[str, float]], chance: Chance | None, *, patience: int, tolerance: float,
           best_epoch: int | None = None) -> dict[str, Any] | None:
    """The first signal that held for ``patience`` consecutive epochs, or None (also when ``patience`` is 0).

    Returns the signal, its description, the epochs of that stretch (``from_epoch`` .. ``to_epoch``,
    the stretch's end or the last epoch so far), whether it still held at the last epoch and, given
    ``best_epoch``, at the selected epoch.
    """
    if patience < 1:
        return None
    signals = [epoch_signals(r, chance, tolerance) for r in history]
    for key in dict.fromkeys(k for s in signals for k in s):
        held = [key in s for s in signals]
        start = _first_run(held, patience)
        if start is None:
            continue
        end = start
        while end + 1 < len(held) and held[end + 1]:
            end += 1
        found = {"signal": key, "description": signals[start][key], "from_epoch": start + 1, "to_epoch": end + 1,
                 "at_last_epoch": held[-1], "patience": patience, "tolerance": tolerance}
        if best_epoch is not None and 0 <= best_epoch <= len(held) and held:
            # the untrained model (epoch 0) is judged by the first epoch, whose steps started from it
            found["at_best_epoch"] = held[max(best_epoch, 1) - 1]
        return found
    return None


def _first_run(held: list[bool], length: int) -> int | None:
    """Index of the first of ``length`` consecutive True values."""
    count = 0
    for i, h in enumerate(held):
        count = count + 1 if h else 0
        if count == length:
            return i - length + 1
    return None


# an embedding this many times narrower than the narrower input is named as a cause: 768-d features in
# 5 or 16 dimensions are, the synthetic task's 100-d features in the 5 dimensions of its latent space are not
NARROW_RATIO = 32
WIDE_ENOUGH = 512  # the embedding width suggested at most
WARMUP_EPOCHS = 10  # the max-violation warm-up suggested (when the run is longer)


def narrow_embedding(input_shapes: Mapping[str, tuple[int, ...]] | None, embed_dim: int | None) -> int | None:
    """The narrower input width when the embedding is far narrower than the inputs, else None.

    Only for flat feature vectors (every item 1-D; images and sets of regions or word vectors are not):
    ``embed_dim`` × :data:`NARROW_RATIO` below the narrower width, and ``embed_dim`` below
    :data:`WIDE_ENOUGH`.
    """
    if not input_shapes or not embed_dim or any(len(s) != 1 for s in input_shapes.values()):
        return None
    width = min(math.prod(s) for s in input_shapes.values())
    return width if embed_dim * NARROW_RATIO < width and embed_dim < WIDE_ENOUGH else None


def hints(spec: TaskSpec, method: str, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
          embed_dim: int | None = None) -> list[str]:
    """The settings worth trying after a collapse of ``method`` (a name in ``spec.methods``), each a
    ``--set`` alternative, the last one always another ``train.lr``.

    Only settings that the method, data source and encoders have, that are not already at the suggested
    value, and that pass the component's own checks together with the other suggestions (the
    max-violation warm-up is offered as an alternative to InfoNCE, never beside it; a contrastive term
    switched off by ``contrastive_weight: 0`` gets no loss settings but the setting that turns it on).
    ``input_shapes`` ({modality: item shape}) and ``embed_dim`` name a too narrow embedding
    (:func:`narrow_embedding`).
    """
    m = spec.methods[method]
    out = []
    width = narrow_embedding(input_shapes, embed_dim)
    if width is not None and input_shapes is not None:  # a width needs the input shapes
        target = min(width, WIDE_ENOUGH)
        widen = {k: {"dim": target} for k, e in spec.encoders.items()}
        if all(_accepts(e.params, widen[k]) for k, e in spec.encoders.items()):
            shown = " and ".join(str(w) for w in sorted({math.prod(s) for s in input_shapes.values()}))
            out.append(" ".join(f"--set encoders.{k}.dim={target}" for k in sorted(widen))
                       + f" (the embedding has {embed_dim} dimensions for inputs of {shown})")
    if _accepts(spec.dataset.params, {"standardize": True}) and spec.dataset.params.standardize is not True:
        out.append("--set dataset.standardize=true")
    out += _method_hints(method, m.params, m.train.epochs)
    out.append(f"another train.lr (now {m.train.lr:g})")
    return out


def _method_hints(name: str, params: Any, epochs: int) -> list[str]:
    """The method's own suggestion (see :func:`hints`): one line, its alternatives joined by either/or, each
    alternative passing the method's checks."""
    fields = P.keys(type(params))
    out = []

    def offer(*alternatives: dict[str, Any]) -> None:
        fit = [a for a in alternatives if a and _accepts(params, a)]
        texts = [" ".join(f"--set {name}.{k}={_yaml(v)}" for k, v in a.items()) for a in fit]
        if texts:
            out.append(texts[0] if len(texts) == 1 else "either " + " or ".join(texts))

    if getattr(params, "contrastive_weight", None) == 0:
        # L_c is off: its loss settings change nothing; the contrastive term itself is the setting to try
        offer({"contrastive_weight": 1.0})
    elif "loss" in fields and params.loss != "infonce":
        infonce = {"loss": "infonce", **({"warmup_epochs": 0} if getattr(params, "warmup_epochs", 0) else {})}
        warmup = {}
        if params.loss == "max_violation" and "warmup_epochs" in fields:
            longer = max(WARMUP_EPOCHS, 2 * params.warmup_epochs)
            warmup = {"warmup_epochs": longer} if longer < epochs else {}
        offer(infonce, warmup)
    return out


def _accepts(params: Any, changes: Mapping[str, Any]) -> bool:
    """Whether ``params`` (a parameter dataclass) has every key of ``changes`` (YAML keys), takes their values
    and still passes its checks with them."""
    if not dataclasses.is_dataclass(params) or not set(changes) <= set(P.keys(type(params))):
        return False
    try:
        P.parse(type(params), {**P.as_dict(params), **changes}, "hint")
    except (ValueError, TypeError):  # ConfigError is a ValueError; a plugin's check may raise either
        return False
    return True


def _yaml(value: Any) -> str:
    """A value as written after ``--set NAME.KEY=``."""
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def warning_line(found: dict[str, Any], run: str, method: str, spec: TaskSpec | None = None,
                 input_shapes: Mapping[str, tuple[int, ...]] | None = None, embed_dim: int | None = None) -> str:
    """One line naming what was seen, the likely cause and the settings to try (:func:`hints`; without
    ``spec`` only another learning rate)."""
    cause = ("the hardest-negative (max_violation) hinge from a random start, often on features "
             "with little variance" if found["signal"].startswith("plateau") else
             "a collapsed or untrained embedding (features of little variance, or a learning rate "
             "that is too low or too high)")
    if narrow_embedding(input_shapes, embed_dim) is not None:
        cause = f"an embedding far narrower than its inputs, or {cause}"
    tries = hints(spec, method, input_shapes, embed_dim) if spec is not None else ["another train.lr"]
    tried = tries[0] if len(tries) == 1 else ", ".join(tries[:-1]) + ", or " + tries[-1]
    return (f"warning: {run}: training looks collapsed from epoch {found['from_epoch']}: {found['description']} "
            f"for {found['patience']} epochs; likely cause: {cause}. Try {tried}.")
