"""Guards around a run's computation: a non-finite loss and running out of memory end a run with one
message that says where it happened and what to change, instead of a traceback or a silent NaN.

- :class:`NonFiniteGuard` looks at every step's loss before the backward pass. Policy ``stop``
  (default) ends the run at the first NaN or infinite loss with the step, the loss terms and the
  hyperparameters; ``skip`` drops that step's update (no backward, no optimizer step) and records
  it in the result, until :data:`MAX_CONSECUTIVE_SKIPS` steps in a row fail. Under torchrun all
  processes agree on the verdict (one all-reduce), so none of them waits forever for the others.
- :func:`on_oom` turns an out-of-memory error (CUDA's, or a failed CPU allocation) raised inside a
  phase into a message naming the settings that bound that phase's memory.

Either way :class:`harness.errors.RunError` leaves the last complete epoch's checkpoint as it was and
writes no result.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ParamSpec, TypeVar

import torch
import torch.distributed as dist

from harness.config import params as P
from harness.config.spec import TaskSpec
from harness.errors import RunError
from harness.run.distributed import is_distributed

MAX_CONSECUTIVE_SKIPS = 10
Args = ParamSpec("Args")
R = TypeVar("R")
_OOM_CLASSES = (getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError), MemoryError)
_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory",
             # sizes so large that the allocator's arithmetic overflows before it can say it is out of memory
             "storage size calculation overflowed", "overflow when unpacking long", "array is too big",
             "too large to convert", "maximum supported dimension")


def hyperparameters(spec: TaskSpec, name: str) -> str:
    """'method=swamp K=1000 ... lr=0.001 batch_size=128 ...': what a message about a run's numbers should show."""
    m = spec.methods[name]
    train = {k: v for k, v in P.as_dict(m.train).items() if k in ("optimizer", "lr", "batch_size", "grad_clip")}
    return " ".join(f"{k}={v}" for k, v in {"method": m.method, **P.as_dict(m.params), **train}.items())


@dataclass
class NonFiniteGuard:
    """Checks each step's loss (see the module docstring); ``count`` must wrap the step function so that
    the guard knows the step's number."""

    policy: str
    settings: str  # hyperparameters(spec, name)
    steps_per_epoch: int
    checkpoint: Path  # the last complete epoch's checkpoint, named in the message
    step: int = 0  # steps taken in this run, resumed epochs included
    consecutive: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def count(self, step_fn: Callable[Args, R]) -> Callable[Args, R]:
        """``step_fn`` with the step counter advanced before every call."""
        def counted(*args: Args.args, **kwargs: Args.kwargs) -> R:
            self.step += 1
            return step_fn(*args, **kwargs)

        return counted

    def __call__(self, loss: torch.Tensor, logs: dict[str, torch.Tensor]) -> bool:
        """True when the step may update the model; False to skip it; raises RunError to stop the run."""
        if _all_finite(loss):
            self.consecutive = 0
            return True
        epoch, within = divmod(self.step - 1, self.steps_per_epoch)
        where = {"epoch": epoch + 1, "step": within + 1, "run_step": self.step,
                 "terms": {k: float(v) for k, v in logs.items()}}
        self.consecutive += 1
        if self.policy == "skip" and self.consecutive < MAX_CONSECUTIVE_SKIPS:
            self.skipped.append(where)
            return False
        raise RunError(self._message(where))

    def _message(self, where: dict[str, Any]) -> str:
        terms = ", ".join(f"{k}={v:.4g}" for k, v in where["terms"].items()) or "none logged"
        streak = f" ({self.consecutive} non-finite steps in a row)" if self.consecutive > 1 else ""
        return (f"non-finite loss at epoch {where['epoch']}, step {where['step']} of {self.steps_per_epoch} "
                f"(step {where['run_step']} of the run){streak}: {terms}; hyperparameters: {self.settings}; the run "
                f"stopped and wrote no result; {_kept(self.checkpoint)}; lower train.lr, set train.grad_clip, or "
                "pass --on-nan skip to drop such steps' updates")


def _kept(checkpoint: Path) -> str:
    return (f"its last complete epoch stays in {checkpoint}, where the same command resumes" if checkpoint.exists()
            else "no epoch was complete, so there is no checkpoint")


def _all_finite(loss: torch.Tensor) -> bool:
    """Whether the loss is finite here and, under torchrun, on every process."""
    ok = torch.isfinite(loss.detach()).all().to(torch.int32).reshape(1)
    if is_distributed():
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    return bool(ok)


def is_oom(err: BaseException) -> bool:
    """CUDA's OutOfMemoryError, MemoryError, or an allocator error saying memory ran out or that a size cannot
    be allocated at all (its byte count overflows)."""
    return isinstance(err, _OOM_CLASSES) or (isinstance(err, (RuntimeError, TypeError, ValueError, OverflowError))
                                             and any(t in str(err).lower() for t in _OOM_TEXT))


def memory_settings(spec: TaskSpec, name: str, phase: str) -> str:
    """The settings that bound the memory of ``phase`` ('train' or 'test'), with their current values."""
    m = spec.methods[name]
    batch = f"train.batch_size (now {m.train.batch_size})" if phase == "train" else \
        f"train.eval_batch_size (now {m.train.eval_batch_size})"
    budget = getattr(m.params, "memory_budget_mib", None)
    return batch + (f" or {name}.memory_budget_mib (now {budget}), the cross-attention scorer's scratch memory"
                    if budget is not None else "")


def on_oom(fn: Callable[Args, R], phase: str, settings: str, device: torch.device,
           checkpoint: Path) -> Callable[Args, R]:
    """``fn`` with out-of-memory errors turned into a RunError naming ``phase`` and the ``settings`` to lower."""
    def guarded(*args: Args.args, **kwargs: Args.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except Exception as err:
            if not is_oom(err):
                raise
            raise RunError(f"out of memory on {device} during {phase}: lower {settings} (pass --set NAME.KEY=VALUE); "
                           f"the run wrote no result; {_kept(checkpoint)}") from None

    return guarded
