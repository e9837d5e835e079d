"""The contrastive loss family: values and gradients against naive loops, collapsed values, warm-up,
the temperature, and the default (the paper's max-violation hinge) left exactly as it was."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from baselines.contrastive import Contrastive, ContrastiveParams, PairLoss, hinge_max_violation
from harness.config.params import parse
from harness.encoders.mlp import MLP
from harness.errors import ConfigError
from harness.ops.losses import LOSSES, collapsed_value, infonce_loss, max_violation_loss, sum_violation_loss


def naive_max_violation(s: torch.Tensor, m: float) -> torch.Tensor:
    n, total = len(s), s.new_zeros(())
    for i in range(n):
        total = total + torch.stack([(m + s[i, j] - s[i, i]).clamp_min(0) for j in range(n) if j != i]).max()
        total = total + torch.stack([(m + s[j, i] - s[i, i]).clamp_min(0) for j in range(n) if j != i]).max()
    return total


def naive_sum(s: torch.Tensor, m: float) -> torch.Tensor:
    n, total = len(s), s.new_zeros(())
    for i in range(n):
        for j in range(n):
            if j != i:
                total = total + (m + s[i, j] - s[i, i]).clamp_min(0) + (m + s[j, i] - s[i, i]).clamp_min(0)
    return total


def naive_infonce(s: torch.Tensor, t: float) -> torch.Tensor:
    n, total = len(s), s.new_zeros(())
    for i in range(n):
        row = torch.stack([torch.exp(s[i, j] / t) for j in range(n)])
        col = torch.stack([torch.exp(s[j, i] / t) for j in range(n)])
        total = total - torch.log(row[i] / row.sum()) - torch.log(col[i] / col.sum())
    return total


CASES = [(max_violation_loss, naive_max_violation, 0.2), (sum_violation_loss, naive_sum, 0.2),
         (infonce_loss, naive_infonce, 0.1)]


def _sims(seed: int, n: int = 6) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    a = F.normalize(torch.randn(n, 4, generator=g, dtype=torch.float64), dim=1)
    b = F.normalize(torch.randn(n, 4, generator=g, dtype=torch.float64), dim=1)
    return a @ b.T


@pytest.mark.parametrize("fast, naive, arg", CASES, ids=["max_violation", "sum", "infonce"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_value_and_gradient_equal_a_naive_loop(fast, naive, arg, seed):
    s1 = _sims(seed).requires_grad_()
    s2 = s1.detach().clone().requires_grad_()
    v1, v2 = fast(s1, arg), naive(s2, arg)
    torch.testing.assert_close(v1, v2, rtol=1e-10, atol=1e-10)
    v1.backward()
    v2.backward()
    torch.testing.assert_close(s1.grad, s2.grad, rtol=1e-10, atol=1e-10)


def test_known_answers():
    s = torch.tensor([[1.0, 0.6], [0.0, 0.8]])
    # rows: [.5+.6-1]+ = .1, [.5+0-.8]+ = 0; columns: [.5+0-1]+ = 0, [.5+.6-.8]+ = .3
    assert float(max_violation_loss(s, 0.5)) == pytest.approx(0.4)
    assert float(sum_violation_loss(s, 0.5)) == pytest.approx(0.4)  # one negative each: sum = max
    expected = -math.log(math.e / (math.e + math.exp(0.6))) - math.log(math.exp(0.8) / (1 + math.exp(0.8))) \
        - math.log(math.e / (math.e + 1)) - math.log(math.exp(0.8) / (math.exp(0.6) + math.exp(0.8)))
    assert float(infonce_loss(s, 1.0)) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("batch", [2, 5, 128])
def test_collapsed_value_is_the_loss_of_equal_scores(loss, batch):
    fn = {"max_violation": lambda s: max_violation_loss(s, 0.3), "sum": lambda s: sum_violation_loss(s, 0.3),
          "infonce": lambda s: infonce_loss(s, 0.07)}[loss]
    equal = torch.full((batch, batch), 0.42, dtype=torch.float64)
    assert float(fn(equal)) == pytest.approx(collapsed_value(loss, batch, 0.3), rel=1e-9)
    assert float(fn(torch.eye(batch, dtype=torch.float64))) < collapsed_value(loss, batch, 0.3)


def test_default_contrastive_loss_is_the_vsepp_hinge_unchanged():
    # the paper's baseline: the max-violation hinge of unit-norm embeddings, margin 0.2, no warm-up
    params = parse(ContrastiveParams, {}, "t")
    assert (params.loss, params.margin, params.warmup_epochs) == ("max_violation", 0.2, 0)
    torch.manual_seed(0)
    method = Contrastive({"a": MLP(3, (4,), 5), "b": MLP(3, (4,), 5)}, params)
    x_a, x_b = torch.randn(8, 3), torch.randn(8, 3)
    loss, logs = method.loss(x_a, x_b)
    emb_a, emb_b = method.encode("a", x_a), method.encode("b", x_b)
    assert torch.equal(loss, hinge_max_violation(emb_a, emb_b, 0.2))
    torch.testing.assert_close(loss.double(), naive_max_violation((emb_a @ emb_b.T).double(), 0.2))
    assert logs["loss@collapsed"] == pytest.approx(2 * 8 * 0.2)
    assert [n for n, _ in method.named_parameters() if not n.startswith("encoders.")] == []  # nothing added


def test_warmup_uses_the_summed_hinge_then_the_hardest_negative():
    pair = PairLoss(parse(ContrastiveParams, {"warmup_epochs": 2, "margin": 0.5}, "t"))
    s = _sims(3, 5)
    for epoch, expected in ((1, sum_violation_loss(s, 0.5)), (2, sum_violation_loss(s, 0.5)),
                            (3, max_violation_loss(s, 0.5)), (10, max_violation_loss(s, 0.5))):
        pair.start_epoch(epoch)
        loss, collapsed = pair(s)
        assert torch.equal(loss, expected)
        assert collapsed == collapsed_value("sum" if epoch <= 2 else "max_violation", 5, 0.5)


def test_training_loop_tells_the_method_the_epoch(tiny_task):
    from harness.config.spec import load_task
    from harness.run import runner
    from harness.run import train as tr

    spec = load_task(tiny_task, ["contrastive.warmup_epochs=1", "train.epochs=3"])
    data = runner.load_data(spec)
    method = runner.build_method(spec, "contrastive", data, torch.device("cpu"))
    seen = []
    method.start_epoch = seen.append  # record what the loop passes
    t = spec.methods["contrastive"].train
    step = tr.make_step(method, tr.make_optimizer(method, t), data["train"], torch.device("cpu"), None)
    tr.fit(method, data["train"], t, seed=0, step=step, epoch=tr.run_epoch, validate=lambda: {"a2b/R@1": 0.0})
    assert seen == [1, 2, 3]


def test_fixed_and_learned_temperature():
    s = _sims(4)
    fixed = PairLoss(parse(ContrastiveParams, {"loss": "infonce", "temperature": 0.05}, "t"))
    assert list(fixed.parameters()) == []
    torch.testing.assert_close(fixed(s)[0], infonce_loss(s, 0.05))
    learned = PairLoss(parse(ContrastiveParams, {"loss": "infonce", "temperature": 0.05, "learn_temperature": True},
                             "t"))
    loss, _ = learned(s.float())
    loss.backward()
    assert learned.log_temperature.grad is not None and float(learned.log_temperature.grad) != 0
    assert float(learned.temperature().detach()) == pytest.approx(0.05)
    with torch.no_grad():
        learned.log_temperature.fill_(math.log(1e-4))
    assert float(learned.temperature().detach()) == pytest.approx(0.01)  # kept at the floor
    assert learned.logs("loss", loss, 1.0)["temperature"] == pytest.approx(0.01)


@pytest.mark.parametrize("body, message", [
    ({"loss": "hinge"}, r"unknown value 'hinge'.*valid: infonce, max_violation, sum"),
    ({"loss": "infonce", "warmup_epochs": 5}, "warmup_epochs .* with loss: infonce set warmup_epochs: 0"),
    ({"learn_temperature": True}, "learn_temperature applies to loss: infonce only"),
    ({"loss": "infonce", "temperature": 0.0}, "temperature must be >= 0.01"),
    ({"warmup_epochs": -1}, "warmup_epochs must be >= 0"),
])
def test_bad_loss_settings_are_config_errors(body, message):
    with pytest.raises(ConfigError, match=message):
        parse(ContrastiveParams, body, "methods.contrastive")
