"""The no-training floor: what a run's selection metric is on validation with no training at all, so that a
trained row that falls below it is marked rather than printed as if training had helped.

The floor of a task is the features' own cosine (the ``identity`` method: both modalities' items unit-normalised
and compared as they come) where both modalities hold float features of one width, which is what features
embedded by a pretrained aligned model are; elsewhere a run's floor is its own untrained model (epoch 0, see
``train.select_untrained``). A closed-form method (CCA) without an identity floor has none.
"""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from harness.config import metrics as metric_registry
from harness.config.spec import TaskSpec
from harness.data.paired import PairedData, Split
from harness.method import Method
from harness.run import evaluate

NO_FLOOR_METHODS = ("identity",)  # the floor itself


class FeatureCosine(Method):
    """The features as they come, flattened and unit-normalised, scored by cosine: the identity floor's scorer,
    and the ``identity`` method's (which adds its width check)."""

    def __init__(self, params: Any = None) -> None:
        super().__init__({}, params)  # no encoders: the features are compared as they come

    def encode(self, modality: str, x: Any) -> torch.Tensor:
        """(B, width) unit-norm float32 rows of a batch of raw features."""
        return F.normalize(x.flatten(1).float(), dim=-1)


def shares_a_space(split: Split) -> bool:
    """Both modalities are in-memory float features of the same width (so their cosine is defined)."""
    a, b = split.a, split.b
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.is_floating_point()
            and b.is_floating_point() and math.prod(a.shape[1:]) == math.prod(b.shape[1:]))


def identity_validation(spec: TaskSpec, name: str, data: PairedData, device: torch.device) -> dict[str, float] | None:
    """Validation metrics of the features' own cosine for method ``name``'s settings, or None when the two
    modalities do not share a space (:func:`shares_a_space`)."""
    split = data["val"]
    if not shares_a_space(split):
        return None
    m = spec.methods[name]
    return evaluate.evaluate(FeatureCosine().to(device), split, spec.metrics, device, m.train.eval_batch_size)


def record(select: str, selected: dict[str, float], identity: dict[str, float] | None,
           untrained: dict[str, float] | None) -> dict[str, Any] | None:
    """The result file's ``floor``: which floor applies (identity before the run's own epoch 0), its value and the
    run's selected value of metric ``select`` on validation, and whether the run fell below it. None when no
    floor applies."""
    kind, values = ("identity", identity) if identity is not None else ("untrained", untrained)
    if values is None or select not in values or select not in selected:
        return None
    lower_is_better = metric_registry.lower_is_better(select)
    floor, value = float(values[select]), float(selected[select])
    below = value > floor if lower_is_better else value < floor
    return {"kind": kind, "metric": select, "value": floor, "selected": value, "below": bool(below)}


def warning_line(label: str, floor: dict[str, Any]) -> str:
    """One line for a run that fell below its floor on validation."""
    what = ("the features' own cosine, no training (identity)" if floor["kind"] == "identity"
            else "its own untrained start, epoch 0")
    return (f"warning: {label}: validation {floor['metric']} {floor['selected']:.2f} at the selected epoch is below "
            f"the no-training floor {floor['value']:.2f} ({what}): training made retrieval worse than not training; "
            "the tables mark the row [below floor]. On features that are already good, start from encoders that "
            "keep them (type: linear, dim: auto) with a small train.lr; see docs/datasets/own-features.md")
