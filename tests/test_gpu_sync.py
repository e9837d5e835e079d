"""A SwAMP step on a GPU makes no host–device synchronisation: ``torch.cuda.set_sync_debug_mode("error")`` turns
any synchronising call (``.item()``, a blocking copy between host and device, ``F.one_hot``'s range check, a
new device tensor made from a Python number) into an error, over the method's loss and backward pass for
soft targets, hard targets and SwAMP plus its contrastive term. The first steps run before the check: they
fill the queue and compile the Sinkhorn kernel, which are one-off costs.

Needs CUDA; elsewhere it skips and says so.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from baselines.swamp import SwAMP, SwAMPParams

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU: torch.cuda.set_sync_debug_mode checks a SwAMP step there")


class Linear(nn.Linear):
    """A linear encoder with the ``out_dim`` the methods read."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__(d_in, d_out)
        self.out_dim = d_out


@pytest.mark.parametrize("variant", [{}, {"hard": True}, {"contrastive_weight": 1.0}],
                         ids=["soft", "hard", "plus_contrastive"])
def test_a_swamp_step_on_a_gpu_does_not_synchronise(variant):
    device = torch.device("cuda")
    torch.manual_seed(0)
    method = SwAMP({"a": Linear(16, 8), "b": Linear(12, 8)},
                   SwAMPParams(**{"K": 32, "queue": 96, "tau": 0.05, "eta": 20.0, "contrastive_weight": 0.0,
                                  **variant})).to(device)
    optimizer = torch.optim.Adam(method.parameters(), lr=1e-3)
    x_a, x_b = torch.randn(32, 16, device=device), torch.randn(32, 12, device=device)

    def step() -> None:
        loss, _ = method.loss(x_a, x_b)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()

    for _ in range(5):  # the queue fills (32, 64, 96 rows) and the kernel compiles
        step()
        optimizer.step()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    optimizer.step()
    torch.cuda.synchronize()
