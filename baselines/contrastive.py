"""VSE++ contrastive baseline: modality-wise embeddings trained with one loss of the contrastive family
(:mod:`harness.ops.losses`): the hinge with the hardest negative (max violation, the default and the
paper's baseline), the hinge summed over all negatives, InfoNCE, or SigLIP's pairwise sigmoid loss with
its learned logit scale and bias; optionally a warm-up with the summed hinge before the hardest negative.
:class:`PairLoss` is the piece that SwAMP and the PAR methods share."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, ClassVar, Literal

import torch
from torch import nn

from harness.api import (
    METHODS,
    Method,
    bounded,
    collapsed_value,
    global_batch_sum,
    infonce_loss,
    max_violation_loss,
    plateau_key,
    require,
    search,
    siglip_loss,
    sum_violation_loss,
)

__all__ = ["Contrastive", "ContrastiveParams", "PairLoss", "PairLossFields", "hinge_max_violation",
           "max_violation_loss"]

MIN_TEMPERATURE = 0.01  # a learned temperature stops here (CLIP caps its logit scale at 100)


def hinge_max_violation(emb_a: torch.Tensor, emb_b: torch.Tensor, margin: float) -> torch.Tensor:
    """VSE++ loss (Faghri et al. 2018, Eq. 5) summed over the batch, on unit-norm rows of ``emb_a`` and
    ``emb_b`` (both (B, D)); see :func:`harness.ops.losses.max_violation_loss`."""
    return max_violation_loss(emb_a @ emb_b.T, margin)


@dataclass(frozen=True)
class PairLossFields:
    """Settings of the contrastive loss family, shared by every method with a contrastive term.

    ``loss``: max_violation | sum | infonce | siglip. ``margin``: the hinges' margin. ``temperature``:
    InfoNCE's τ, fixed unless ``learn_temperature`` (then log τ is a parameter trained with the encoders,
    starting at ``temperature``, with τ kept ≥ 0.01). ``siglip_scale``, ``siglip_bias``: the starting
    values of SigLIP's logit scale t and bias b, both always trained with the encoders (the parameter is
    log t), as the paper does and from its values (t = 10, b = −10). ``warmup_epochs``: with max_violation,
    the first epochs use the summed hinge.
    """

    margin: float = bounded(0.2, tune=search(0.01, 0.5, log=True, when={"loss": ("max_violation", "sum")}))
    loss: Literal["max_violation", "sum", "infonce", "siglip"] = "max_violation"
    temperature: float = bounded(0.1, tune=search(0.02, 1.0, log=True, when={"loss": ("infonce",)}))
    learn_temperature: bool = False
    siglip_scale: float = bounded(10.0, gt=0, tune=search(1.0, 100.0, log=True, when={"loss": ("siglip",)}))
    siglip_bias: float = bounded(-10.0, tune=search(-15.0, 0.0, when={"loss": ("siglip",)}))
    warmup_epochs: int = 0

    def check_pair_loss(self, where: str) -> None:
        require(self.margin >= 0, where, f"margin must be >= 0, got {self.margin}")
        require(self.temperature >= MIN_TEMPERATURE, where,
                f"temperature must be >= {MIN_TEMPERATURE}, got {self.temperature}")
        require(self.siglip_scale > 0, where, f"siglip_scale must be > 0, got {self.siglip_scale}")
        require(self.warmup_epochs >= 0, where, f"warmup_epochs must be >= 0, got {self.warmup_epochs}")
        require(self.warmup_epochs == 0 or self.loss == "max_violation", where,
                f"warmup_epochs ({self.warmup_epochs}) warms up the max_violation hinge with the summed one; "
                f"with loss: {self.loss} set warmup_epochs: 0")
        require(not self.learn_temperature or self.loss == "infonce", where,
                "learn_temperature applies to loss: infonce only")


class PairLoss(nn.Module):
    """The configured member of the loss family on a (B, B) score matrix with the positives on the
    diagonal. Returns the loss and its collapsed value (all scores equal) for this batch size."""

    def __init__(self, p: PairLossFields):
        super().__init__()
        self.kind, self.margin, self.warmup_epochs, self.epoch = p.loss, p.margin, p.warmup_epochs, 1
        self.fixed_temperature = p.temperature
        if p.learn_temperature:
            self.log_temperature = nn.Parameter(torch.tensor(math.log(p.temperature)))
        if p.loss == "siglip":  # SigLIP learns its logit scale (as log t) and bias, always
            self.log_siglip_scale = nn.Parameter(torch.tensor(math.log(p.siglip_scale)))
            self.siglip_bias = nn.Parameter(torch.tensor(p.siglip_bias))
        self._losses: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
            "max_violation": partial(max_violation_loss, margin=p.margin),
            "sum": partial(sum_violation_loss, margin=p.margin), "infonce": self._infonce, "siglip": self._siglip}

    def start_epoch(self, epoch: int) -> None:
        """Remember the epoch (1-based) that starts: warm-up epochs use the summed hinge."""
        self.epoch = epoch

    @property
    def current(self) -> str:
        """The loss used in the current epoch."""
        return "sum" if self.epoch <= self.warmup_epochs else self.kind

    def temperature(self) -> torch.Tensor | float:
        """InfoNCE's τ: the fixed value, or the learned one (≥ ``MIN_TEMPERATURE``)."""
        if not hasattr(self, "log_temperature"):
            return self.fixed_temperature
        return self.log_temperature.exp().clamp_min(MIN_TEMPERATURE)

    def _infonce(self, sims: torch.Tensor) -> torch.Tensor:
        return infonce_loss(sims, self.temperature())

    def _siglip(self, sims: torch.Tensor) -> torch.Tensor:
        return siglip_loss(sims, self.log_siglip_scale.exp(), self.siglip_bias)

    def forward(self, sims: torch.Tensor) -> tuple[torch.Tensor, float]:  # (B, B) -> (), collapsed value
        kind = self.current
        return self._losses[kind](sims), collapsed_value(kind, len(sims), self.margin)

    def logs(self, name: str, loss: torch.Tensor, collapsed: float) -> dict[str, Any]:
        """Detached scalars to log for the term ``name``: its value, its collapsed value and, when learned,
        the temperature, or SigLIP's logit scale and bias (tensors, so that logging them reads nothing back
        from the device)."""
        out: dict[str, Any] = {name: loss.detach(), plateau_key(name): collapsed}
        if hasattr(self, "log_temperature"):
            temperature = self.temperature()  # learned: a tensor
            out["temperature"] = float(temperature.detach() if isinstance(temperature, torch.Tensor) else temperature)
        if hasattr(self, "log_siglip_scale"):
            out["siglip_scale"] = self.log_siglip_scale.detach().exp()
            out["siglip_bias"] = self.siglip_bias.detach().clone()  # a copy: the optimizer steps the parameter
        return out


@dataclass(frozen=True)
class ContrastiveParams(PairLossFields):
    def check(self, where: str) -> None:
        self.check_pair_loss(where)


@METHODS.register("contrastive")
class Contrastive(Method):
    """Modality-wise embeddings trained with a loss of the contrastive family (default: the VSE++
    max-violation hinge); under torchrun each process takes its negatives from its own shard."""

    Params: ClassVar[type] = ContrastiveParams

    def __init__(self, encoders: dict[str, nn.Module], params: ContrastiveParams):
        super().__init__(encoders, params)
        self.pair_loss = PairLoss(params)

    def start_epoch(self, epoch: int) -> None:
        self.pair_loss.start_epoch(epoch)

    def loss(self, x_a: Any, x_b: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        sims = self.encode("a", x_a) @ self.encode("b", x_b).T  # (B, B)
        loss, collapsed = self.pair_loss(sims)
        return global_batch_sum(loss), self.pair_loss.logs("loss", loss, collapsed)
