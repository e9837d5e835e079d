"""Image–text training steps at a small fixed shape: PAR head readings, numeric precision, and the
SwAMP-PAR / Contrastive-PAR step ratio that the paper's timing comparison rests on.

The shape (``tasks/flickr30k_shapes.yaml`` with the overrides below) is small enough for CI: batch 128,
36 regions of 128 features, D = 64, p = 5 PAR queries, H = 2 heads, K = 200 prototypes, a queue of 256
(the paper's K = 1,000 and queue 1,280 would make Sinkhorn dominate a CPU step). Every
set-up imports what it needs from the measured revision and raises NotImplementedError (asv: n/a)
where that revision lacks it, so the gate compares them only where both sides have them.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch

import harness
from benchmarks import common
from benchmarks.compat import H

TASK_FILE = Path(harness.__file__).resolve().parent.parent / "tasks" / "flickr30k_shapes.yaml"
OVERRIDES = ("dataset.images=[256,16,16]", "dataset.feature_dim=128", "dataset.vocab_size=2000",
             "encoders.a.dim=64", "encoders.b.dim=64", "encoders.b.word_dim=32",
             "contrastive_par.p=5", "contrastive_par.H=2", "swamp_par.p=5", "swamp_par.H=2", "swamp_par.K=200",
             "swamp_par.queue=256")
WARMUP_STEPS = 3  # fills the queue of 256 rows
RATIO_STEPS = 15  # steps per method when timing the step ratio


CPU = torch.device("cpu")


def step_for(method: str, extra: tuple[str, ...] = (), device: torch.device = CPU,
             overrides: tuple[str, ...] = OVERRIDES, warmup: int = WARMUP_STEPS) -> Callable[[], Any]:
    """One warmed-up training step of ``method`` on the first batch, wrapped as the runner wraps it."""
    common.pin_threads()
    if not hasattr(H, "wrap_step"):
        raise NotImplementedError("no precision setting in this revision")
    try:
        task = H.load_task(TASK_FILE, [*overrides, *extra])
    except H.ConfigError as err:  # a setting this revision does not know
        raise NotImplementedError(str(err)) from None
    data = H.load_data(task)
    data = data.for_device(device)
    model = common.build(task, method, data, device)
    train = task.methods[method].train
    step = H.make_step(model, H.make_optimizer(model, train), data["train"], device, train.grad_clip,
                       loss_fn=H.wrap_forward(model.loss, train.precision, device))
    step = H.wrap_step(step, train.precision)
    index = torch.arange(train.batch_size)
    model.train()
    for _ in range(warmup):
        step(index)
    return lambda: step(index)


def step_ratio(steps: dict[str, Callable[[], Any]], device: torch.device, n: int = RATIO_STEPS) -> float:
    """Median step time of ``swamp_par`` over that of ``contrastive_par``, interleaved so that a change in
    load hits both."""
    times: dict[str, list[float]] = {m: [] for m in steps}
    for _ in range(n):
        for name, step in steps.items():
            H.synchronize(device)
            start = time.perf_counter()
            step()
            H.synchronize(device)
            times[name].append(time.perf_counter() - start)
    median = {m: statistics.median(t) for m, t in times.items()}
    return median["swamp_par"] / median["contrastive_par"]


class SwampParStep:
    """A SwAMP-PAR step as the task declares it (H = 2 heads side by side, 2·p·D wide, fp32), with its heads
    splitting D instead (p·D wide), and under bf16 autocast (on a CPU, tf32 changes nothing; the CUDA suite
    has all three precisions)."""

    params = [["default", "swamp_par.heads=split", "train.precision=bf16"]]
    param_names = ["setting"]

    def setup(self, setting: str) -> None:
        self.step = step_for("swamp_par", () if setting == "default" else (setting,))

    def time_train_step(self, setting: str) -> None:
        self.step()


class StepRatio:
    """Median SwAMP-PAR step over median Contrastive-PAR step, both timed in this process (the paper's
    target: SwAMP costs little more per step than the contrastive baseline)."""

    unit = "ratio"
    rounds = 1
    repeat = 1

    def setup(self) -> None:
        self.steps = {m: step_for(m) for m in ("swamp_par", "contrastive_par")}

    def track_swamp_par_over_contrastive_par(self) -> float:
        return step_ratio(self.steps, torch.device("cpu"))
