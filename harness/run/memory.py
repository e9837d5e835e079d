"""Memory preflight: the largest allocations a run will make, estimated from the resolved configuration and
the data's shapes before anything is built, against the memory this machine has.

Two moments: before the data are generated or loaded (a source may say what loading costs through an
optional ``estimate_bytes(params)`` static method returning ``[(what, bytes, setting), ...]``), and before
the first run trains (the method built on the meta device gives its parameters and buffers exactly, and
the test split's size gives the embeddings and the score matrix). What is not estimated: activations of
a training step (bounded by ``train.batch_size``; an out-of-memory error there still ends the run with
exit status 3 and one line naming the phase and the setting). The budget is the memory available now
(host RAM on the CPU, the device's free memory on CUDA), or ``SWAMP_BENCH_MEMORY_GIB`` when set lower.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable

import psutil
import torch

from harness.config.registry import SOURCES
from harness.config.spec import TaskSpec
from harness.data.paired import PairedData, take, to_device
from harness.errors import ConfigError
from harness.run.build import build_method

LIMIT_ENV = "SWAMP_BENCH_MEMORY_GIB"
GiB = 2**30
FLOAT32 = 4
TRAINING_COPIES = 4  # a trained parameter: its value, its gradient, and Adam's two moments


@dataclass(frozen=True)
class Need:
    """One allocation: what it is, its size in bytes, and the setting that sizes it."""

    what: str
    bytes: int
    setting: str


def budget(device: torch.device) -> tuple[int, str]:
    """Bytes a run may allocate on ``device`` and where that number comes from."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        amount, source = int(free), f"free memory of {device}"
    else:
        amount, source = int(psutil.virtual_memory().available), "available RAM"
    limit = os.environ.get(LIMIT_ENV)
    if limit:
        try:
            capped = int(float(limit) * GiB)
        except ValueError:
            raise ConfigError(f"{LIMIT_ENV}={limit!r} is not a number of GiB; set it to e.g. 8 or unset it") from None
        if capped < amount:
            amount, source = capped, f"{LIMIT_ENV}={limit}"
    return amount, source


def data_needs(spec: TaskSpec) -> list[Need]:
    """What generating or loading the task's data allocates, when its source can say (else nothing)."""
    estimate = getattr(SOURCES.get(spec.dataset.kind), "estimate_bytes", None)
    if estimate is None:
        return []
    return [Need(what, int(size), setting) for what, size, setting in estimate(spec.dataset.params)]


def run_needs(spec: TaskSpec, name: str, data: PairedData, device: torch.device | None = None) -> list[Need]:
    """The model (built on the meta device: parameters and buffers exactly), its training state, the test
    retrieval's embeddings and score matrix, a scorer's scratch memory, and on CUDA the data themselves."""
    device = torch.device("cpu") if device is None else device
    with torch.device("meta"):
        method = build_method(spec, name, data, torch.device("meta"))
    needs = []
    trained = sum(p.numel() * p.element_size() for p in method.parameters() if p.requires_grad)
    frozen = sum(p.numel() * p.element_size() for p in method.parameters() if not p.requires_grad)
    largest = max(method.named_parameters(), key=lambda kv: kv[1].numel(), default=None)
    if largest is not None:
        shown = f"largest {largest[0]} {tuple(largest[1].shape)}"
        needs.append(Need(f"parameters, gradients and optimiser state ({shown})",
                          trained * TRAINING_COPIES + frozen, f"the widths of encoders.a/b or of {name}'s parts"))
    for buffer_name, buffer in method.named_buffers():
        size = buffer.numel() * buffer.element_size()
        if size >= 64 * 2**20:
            needs.append(Need(f"buffer {buffer_name} {tuple(buffer.shape)}", size,
                              f"{name}'s sizes (e.g. {name}.queue)"))
    test = data["test"]
    n_a, n_b = len(test.a), len(test.b)
    per_a, per_b = (_per_item(method, m, getattr(test, m)) for m in ("a", "b"))
    needs.append(Need(f"test embeddings ({n_a} x {per_a} + {n_b} x {per_b} values)", (n_a * per_a + n_b * per_b) *
                      FLOAT32, "the embedding width (encoders.a/b dim)"))
    test_spec = spec.test
    if test_spec.path != "full" and method.scores_in_blocks:
        block = min(n_a, test_spec.block_a) * min(n_b, test_spec.block_b)
        needs.append(Need(f"streamed test: blocks of {min(n_a, test_spec.block_a)} x {min(n_b, test_spec.block_b)} "
                          "scores, a copy and their relevance masks", block * (2 * FLOAT32 + 2),
                          "test.block_a and test.block_b"))
    else:
        needs.append(Need(f"test score matrix ({n_a} x {n_b}) and its relevance mask", n_a * n_b * (FLOAT32 + 1),
                          "the test split's size (dataset settings)" + (", or test.path auto/stream to stream it"
                                                                       if method.scores_in_blocks else "")))
    scratch = getattr(spec.methods[name].params, "memory_budget_mib", None)
    if scratch:
        needs.append(Need("the scorer's scratch memory", int(scratch * 2**20), f"{name}.memory_budget_mib"))
    if device.type == "cuda":
        needs.append(Need("the data, moved to the device", data_bytes(data), "the dataset's sizes"))
    return needs


def _per_item(method: Any, modality: str, items: Any) -> int:
    """Values in one item's embedding: a vector for most methods, a set (regions, words) for cross
    attention; from encoding two items on the meta device, or the method's ``embed_dim``."""
    try:
        with torch.device("meta"):
            sample = to_device(take(items, torch.arange(min(2, len(items)))), torch.device("meta"))
            emb = method.encode(modality, sample)
        parts = [emb] if isinstance(emb, torch.Tensor) else list(emb) if isinstance(emb, (tuple, list)) else \
            list(vars(emb).values())
        tensor = max((v for v in parts if isinstance(v, torch.Tensor)), key=torch.Tensor.numel)
        return max(1, tensor.numel() // max(1, min(2, len(items))))
    except Exception:  # an encoder that cannot run on the meta device: fall back to the declared width
        try:
            return int(method.embed_dim)
        except Exception:
            return 0


def data_bytes(data: PairedData) -> int:
    """Bytes of every tensor the data's splits hold (what moving them to a device copies)."""
    seen: set[int] = set()

    def size(node: Any) -> int:
        if isinstance(node, torch.Tensor):
            if id(node) in seen:
                return 0
            seen.add(id(node))
            return node.numel() * node.element_size()
        if isinstance(node, dict):
            return sum(size(v) for v in node.values())
        if isinstance(node, (list, tuple)):
            return sum(size(v) for v in node)
        if hasattr(node, "__dict__"):
            return sum(size(v) for v in vars(node).values())
        return 0

    return sum(size(data[name]) for name in ("train", "val", "test"))


def _gib(n: float) -> str:
    return f"{n / GiB:.3g} GiB"


def require_fits(needs: Iterable[Need], device: torch.device, where: str) -> None:
    """ConfigError naming the largest need and the setting that sizes it when the needs add up to more than
    the budget of ``device``."""
    needs = list(needs)
    total = sum(n.bytes for n in needs)
    available, source = budget(device)
    if not needs or total <= available:
        return
    top = max(needs, key=lambda n: n.bytes)
    raise ConfigError(f"{where} needs about {_gib(total)} on {device}, more than the {_gib(available)} of {source}: "
                      f"the largest part is the {top.what}, {_gib(top.bytes)}; reduce {top.setting}")


def check_data(spec: TaskSpec) -> None:
    """Stop before the data are generated or loaded when that alone exceeds the host's memory."""
    require_fits(data_needs(spec), torch.device("cpu"), f"{spec.path}: loading dataset {spec.dataset.kind!r}")


def check_runs(runs: Iterable[Any], data: PairedData, device: torch.device) -> None:
    """Stop before the first run trains when any planned (settings, method) would not fit on ``device``."""
    seen: set[tuple[int, str]] = set()
    for run in runs:
        if (id(run.spec), run.method) in seen:
            continue
        seen.add((id(run.spec), run.method))
        require_fits(run_needs(run.spec, run.method, data, device), device, f"{run.spec.path}: method {run.method!r}")
