"""A first-in first-out queue of recent embedding pairs, shared by methods that use more negatives or
more rows than one batch holds (SwAMP's Sinkhorn over batch + queue, a MoCo-style InfoNCE)."""
from __future__ import annotations

import torch
from torch import nn


def chunk_bounds(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """[start, stop) of the ``rank``-th of ``world_size`` contiguous chunks of n rows, sized like
    ``tensor_split``: the first n % world_size chunks hold one row more."""
    base, extra = divmod(n, world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (rank < extra)


class EmbeddingQueue(nn.Module):
    """FIFO of the latest ``size`` detached (a, b) embedding pairs; newest rows first.

    The fill count lives twice: as a buffer (saved in checkpoints) and as a host integer that
    slices the queue, so that a training step never reads a number back from the GPU (a
    host–device synchronisation). The host copy is set from the buffer when a state is loaded.
    """

    a: torch.Tensor  # buffers (register_buffer), newest rows first
    b: torch.Tensor
    filled: torch.Tensor

    def __init__(self, size: int, dim: int):
        super().__init__()
        self.size = size
        self.register_buffer("a", torch.zeros(size, dim))
        self.register_buffer("b", torch.zeros(size, dim))
        self.register_buffer("filled", torch.zeros((), dtype=torch.long))
        self.n_filled = 0  # host copy of ``filled``
        # torch declares this method without annotations
        self.register_load_state_dict_post_hook(  # type: ignore[no-untyped-call]
            lambda module, keys: module.sync_count())

    def sync_count(self) -> None:
        """Read the fill count from the buffer (after a checkpoint was loaded into it)."""
        self.n_filled = int(self.filled)

    def with_batch(self, emb_a: torch.Tensor, emb_b: torch.Tensor,
                   share: tuple[int, int] = (0, 1)) -> tuple[torch.Tensor, torch.Tensor]:
        """Batch rows followed by the queued rows (N = B + filled), detached.

        ``share=(rank, world_size)`` keeps only that contiguous chunk of the queued rows: with
        the same queue on every process, each queued row then appears on exactly one process.
        """
        start, stop = chunk_bounds(self.n_filled, *share)
        return (torch.cat([emb_a.detach(), self.a[start:stop]]), torch.cat([emb_b.detach(), self.b[start:stop]]))

    @torch.no_grad()
    def push(self, emb_a: torch.Tensor, emb_b: torch.Tensor) -> None:
        """Insert a batch, dropping the oldest rows beyond ``size``."""
        if self.size == 0:
            return
        self.a.copy_(torch.cat([emb_a.detach(), self.a])[: self.size])
        self.b.copy_(torch.cat([emb_b.detach(), self.b])[: self.size])
        self.n_filled = min(self.size, self.n_filled + len(emb_a))
        self.filled.fill_(self.n_filled)
