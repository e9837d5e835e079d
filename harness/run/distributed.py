"""Multi-process training with torch.distributed: process group set-up, batch sharding, row gathering
and the DistributedDataParallel wrapper.

``torchrun --nproc_per_node=N -m harness run ...`` starts N processes; each takes the
contiguous chunk ``index.tensor_split(N)[rank]`` of every global batch (:func:`shard`) and
DDP averages the gradients. Methods that need the global batch (SwAMP's queue and
Sinkhorn) ask :func:`is_distributed` once per step and gather what they need with
:func:`gather_rows`. In a single process nothing here initialises or communicates.
"""
from __future__ import annotations

import datetime
import inspect
import os
from dataclasses import dataclass
from typing import Any, Callable, TypeVar, cast

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from harness.method import Method
from harness.ops.queue import chunk_bounds  # noqa: F401 (a sharding helper of this module)

T = TypeVar("T")

_BACKENDS = {"cuda": "nccl", "cpu": "gloo"}


@dataclass(frozen=True)
class DistInfo:
    """Where this process stands: its global rank, the number of processes, its rank on this machine
    (the CUDA device it drives) and the process-group backend (None in a single process)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None

    @property
    def is_main(self) -> bool:
        """True on the one process that writes results, checkpoints and progress bars."""
        return self.rank == 0


def init_from_env(device_type: str, *, init_method: str = "env://",
                  timeout: datetime.timedelta | None = None) -> DistInfo:
    """Join the process group described by torchrun's RANK, WORLD_SIZE and LOCAL_RANK.

    Without those variables, or with WORLD_SIZE=1, returns a single-process :class:`DistInfo` and
    initialises nothing. Otherwise uses nccl for ``device_type`` 'cuda' (and makes LOCAL_RANK the
    current CUDA device) or gloo for 'cpu'; ``init_method`` defaults to torchrun's env://
    rendezvous (MASTER_ADDR, MASTER_PORT); ``timeout`` bounds every collective (torch's default
    when None).
    """
    if device_type not in _BACKENDS:
        raise ValueError(f"distributed training supports device types {sorted(_BACKENDS)}, got {device_type!r}")
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1 or "RANK" not in os.environ:
        return DistInfo()
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    backend = _BACKENDS[device_type]
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
    kwargs: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world_size, **kwargs)
    return DistInfo(rank, world_size, local_rank, backend)


def shutdown() -> None:
    """Leave the process group, if this process joined one."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def is_distributed() -> bool:
    """True when a process group is initialised and holds more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank_and_world() -> tuple[int, int]:
    """(rank, world size) of the default process group; (0, 1) in a single process."""
    return (dist.get_rank(), dist.get_world_size()) if is_distributed() else (0, 1)


def from_main(compute: Callable[[], T], info: DistInfo) -> T:
    """``compute()`` on rank 0, its (picklable) value sent to every process; just ``compute()`` in a
    single process. Used for validation, which only rank 0 runs, so that every process selects the
    same best epoch."""
    if info.world_size == 1:
        return compute()
    box = [compute() if info.is_main else None]
    dist.broadcast_object_list(box, src=0)
    return cast(T, box[0])  # rank 0's value, now on every process


def global_batch_sum(loss: torch.Tensor) -> torch.Tensor:
    """A loss summed over this process's shard of the batch (the VSE++ hinge), scaled so that DDP's
    gradient mean over the processes gives the gradient of the sum over the global batch (each row's
    negatives still come from its own shard): times the world size. ``loss`` itself, untouched, in a
    single process."""
    world_size = rank_and_world()[1]
    return loss if world_size == 1 else loss * world_size


def shard(index: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """This process's contiguous chunk of a global batch's index tensor (all of it in a single process)."""
    return index.tensor_split(info.world_size)[info.rank]


@torch.no_grad()
def gather_rows(t: torch.Tensor) -> torch.Tensor:
    """Every process's rows of ``t`` (n_r, ...) concatenated in rank order, detached; ``t`` itself
    in a single process. Row counts may differ between processes (the last batch of an epoch)."""
    if not is_distributed():
        return t.detach()
    world_size = dist.get_world_size()
    sizes = [torch.zeros(1, dtype=torch.long, device=t.device) for _ in range(world_size)]
    dist.all_gather(sizes, torch.tensor([len(t)], dtype=torch.long, device=t.device))
    counts = [int(s) for s in sizes]
    longest = max(counts)
    padded = torch.cat([t.detach(), t.new_zeros(longest - len(t), *t.shape[1:])]).contiguous()  # (longest, ...)
    parts = [torch.empty_like(padded) for _ in range(world_size)]
    dist.all_gather(parts, padded)
    return torch.cat([part[:count] for part, count in zip(parts, counts)])


class LossModule(nn.Module):
    """A method seen through ``forward``: DDP hooks its gradient averaging onto ``forward``, while
    methods expose ``loss(x_a, x_b) -> (loss, logs)``."""

    def __init__(self, method: Method):
        super().__init__()
        self.method = method

    def forward(self, x_a: Any, x_b: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return self.method.loss(x_a, x_b)


def wrap_ddp(method: Method, info: DistInfo, device: torch.device) -> nn.Module:
    """``LossModule(method)``, inside DistributedDataParallel when ``info`` has several processes.

    ``method`` must already be on ``device``. DDP broadcasts rank 0's parameters and buffers once,
    here; the method itself stays reachable as ``wrapped.module.method`` (DDP) or
    ``wrapped.method`` (single process), e.g. for its state_dict.
    """
    module = LossModule(method)
    if info.world_size == 1:
        return module
    device_ids = [device.index if device.index is not None else info.local_rank] if device.type == "cuda" else None
    # find_unused_parameters=False: every registered method's loss reaches all of its parameters
    # on every step (SwAMP's prototypes too: lambda = 0 multiplies L_s by zero, which still
    # back-propagates zeros), so DDP need not walk the graph each step; tests check it per method.
    # broadcast_buffers=False: SwAMP's queue is the only buffer of any method and every process
    # pushes the same gathered global batch into it, so it stays identical without re-sending it
    # from rank 0 before every forward (for SwAMP-PAR two 1280 x 20480 floats, about 200 MB).
    # An encoder with BatchNorm statistics would need the broadcast back.
    sync: dict[str, Any] = _no_buffer_sync_before_forward()  # its keyword depends on torch's version
    return DistributedDataParallel(module, device_ids=device_ids, find_unused_parameters=False, **sync)


def _no_buffer_sync_before_forward() -> dict[str, bool]:
    """DDP's keyword for "sync buffers at construction only": ``forward_sync_buffers`` where torch has it
    (it deprecates ``broadcast_buffers``), ``broadcast_buffers`` in the older versions we support."""
    if "forward_sync_buffers" in inspect.signature(DistributedDataParallel.__init__).parameters:
        return {"forward_sync_buffers": False}
    return {"broadcast_buffers": False}
