"""Set-up shared by the asv suite: a small in-memory variant of tasks/synthetic.yaml.

Shapes are fixed here so that numbers stay comparable across commits: the task's batch
(128), SwAMP's declared K and queue (1000, 1280), and a test split of 2,000 pairs
(the paper's synthetic test size). Nothing here trains or evaluates on its own terms:
it builds the objects through :mod:`harness.api` (``benchmarks.compat``) and calls them.
"""
from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

import harness
from benchmarks.compat import H

TASK_FILE = Path(harness.__file__).resolve().parent.parent / "tasks" / "synthetic.yaml"
# 20 classes x 200 pairs: 1,000 train, 1,000 validation, 2,000 test pairs.
OVERRIDES = ("dataset.pairs_per_class=200", "dataset.split_sizes=[1000,1000,2000]")
WARMUP_STEPS = 12  # fills SwAMP's queue (1280 rows = 10 batches of 128) before anything is timed
DRIFT_EPOCHS = 5  # on the task's full dataset (7,000 training pairs)
SEED = 0
# One intra-op thread: on a 2-core machine a second thread competing with any other load
# made a training step more than 10x slower and the gate's ratios noisy.
THREADS = 1


def pin_threads() -> None:
    """Use :data:`THREADS` intra-op threads in this process (every benchmark set-up calls it)."""
    torch.set_num_threads(THREADS)


def benchmark_task() -> H.TaskSpec:
    """The benchmark task: tasks/synthetic.yaml of the measured checkout with :data:`OVERRIDES`."""
    return H.load_task(TASK_FILE, list(OVERRIDES))


def benchmark_methods() -> list[str]:
    """Registered methods that the benchmark task declares under their own name, sorted.

    A method added later (a new file in baselines/ plus an entry in the task) joins every
    parameterised benchmark without an edit here.
    """
    declared = H.load_task(TASK_FILE).methods
    return [name for name in H.METHODS.names() if name in declared]


def load_data(task: H.TaskSpec) -> H.PairedData:
    """The task's dataset, generated in memory through its registered source."""
    return H.load_data(task)


def build(task: H.TaskSpec, name: str, data: H.PairedData, device: torch.device) -> H.Method:
    """Method ``name`` of ``task`` with seeded initial weights, on ``device``."""
    torch.manual_seed(SEED)
    return H.build_method(task, name, data, device)


def train_step(task: H.TaskSpec, name: str, data: H.PairedData, device: torch.device) -> Callable[[], Any]:
    """A zero-argument callable running one optimisation step on the first batch, warmed up; NotImplementedError
    (asv: skipped) for a method with no optimisation step (fitted in closed form, or nothing to train)."""
    method = build(task, name, data, device)
    if not method.trains_by_gradient or not any(p.requires_grad for p in method.parameters()):
        raise NotImplementedError(f"{name} has no optimisation step: it is fitted in closed form or not trained")
    train = task.methods[name].train
    optimizer = H.make_optimizer(method, train)
    step = H.make_step(method, optimizer, data["train"], device, train.grad_clip)
    index = torch.arange(train.batch_size)  # (B,) pair indices
    method.train()
    for _ in range(WARMUP_STEPS):
        step(index)
    return lambda: step(index)


def retrieval(task: H.TaskSpec, name: str, data: H.PairedData, device: torch.device) -> Callable[[], Any]:
    """A zero-argument callable running whole-test retrieval (encode, score, rank) of ``name``; a method fitted in
    closed form is fitted on the training split first, as a run does."""
    method = build(task, name, data, device)
    if not method.trains_by_gradient:
        method.fit_closed_form(data["train"])
    batch = task.methods[name].train.eval_batch_size
    return lambda: H.evaluate(method, data["test"], task.metrics, device, batch)


def drift_task() -> H.TaskSpec:
    """tasks/synthetic.yaml of the measured checkout, unchanged except for :data:`DRIFT_EPOCHS`."""
    return H.with_epochs(H.load_task(TASK_FILE), DRIFT_EPOCHS)


def drift_metrics(task: H.TaskSpec, name: str, data: H.PairedData) -> dict[str, float]:
    """Test metrics of a seeded CPU run of ``name``, through the same code as ``harness run``."""
    with tempfile.TemporaryDirectory() as out:
        opts = H.RunOptions(device=torch.device("cpu"), out=Path(out), progress=False)
        return H.run_one(H.Run(task, name, name, {}, SEED), data, opts)["metrics"]


def reset_peak_rss() -> None:
    """Reset the process's peak RSS to its current RSS (Linux), so peakmem_* sees only the call.

    asv reads ``ru_maxrss``, which otherwise also holds the peak of imports and set-up.
    Elsewhere this does nothing and peakmem_* keeps asv's whole-process meaning.
    """
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def require_cuda() -> torch.device:
    """The CUDA device, or NotImplementedError, which asv reports as a skipped benchmark."""
    if not torch.cuda.is_available():
        raise NotImplementedError("no CUDA device: track_* GPU benchmarks are skipped")
    return torch.device("cuda")


def cuda_ms(fn: Callable[[], Any], device: torch.device, repeats: int = 20, warmup: int = 3) -> float:
    """Median wall-clock milliseconds of ``fn`` with the device synchronised around each call."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        H.synchronize(device)
        start = time.perf_counter()
        fn()
        H.synchronize(device)
        times.append(time.perf_counter() - start)
    return 1000.0 * statistics.median(times)


def cuda_peak_mib(fn: Callable[[], Any], device: torch.device) -> float:
    """``torch.cuda.max_memory_allocated`` (MiB) over one call of ``fn``."""
    H.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    H.synchronize(device)
    return torch.cuda.max_memory_allocated(device) / H.MiB
