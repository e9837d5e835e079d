"""SwAMP's contrastive_reduction: mean is the summed contrastive term divided by the batch (swamp), sum is
HowTo100M's mean ranking loss times the batch (swamp_mmr); L_s is untouched."""
from __future__ import annotations

import pytest
import torch

from baselines.swamp import SwAMP, SwAMPParams
from baselines.swamp_mmr import SwAMPMMR, SwAMPMMRParams
from harness.config.params import parse
from harness.encoders.mlp import MLP
from harness.errors import ConfigError


@pytest.mark.parametrize("cls, params", [(SwAMP, SwAMPParams), (SwAMPMMR, SwAMPMMRParams)])
def test_the_two_readings_differ_by_the_batch_size(cls, params):
    x_a, x_b = torch.randn(6, 3), torch.randn(6, 3)
    terms = {}
    for reduction in ("sum", "mean"):
        torch.manual_seed(0)
        method = cls({"a": MLP(3, (4,), 2), "b": MLP(3, (4,), 2)},
                     params(K=4, queue=10, contrastive_reduction=reduction))
        total, logs = method.loss(x_a, x_b)
        terms[reduction] = (float(total.detach() - method.params.lam * logs["swamp"]), float(logs["swamp"]))
    assert terms["sum"][0] == pytest.approx(6 * terms["mean"][0], rel=1e-5) and terms["sum"][0] > 0
    assert terms["sum"][1] == pytest.approx(terms["mean"][1])
    assert params().contrastive_reduction == ("mean" if cls is SwAMPMMR else "sum")  # each keeps its behaviour


def test_an_unknown_reduction_is_refused():
    with pytest.raises(ConfigError, match="contrastive_reduction"):
        parse(SwAMPParams, {"contrastive_reduction": "avg"}, "methods.swamp")
