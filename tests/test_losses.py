"""The contrastive loss family: values and gradients against naive loops, collapsed values, warm-up,
the temperature, SigLIP's learned scale and bias, and the default (the paper's max-violation hinge) left
exactly as it was."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from baselines.contrastive import Contrastive, ContrastiveParams, PairLoss, hinge_max_violation
from baselines.swamp import SwAMP, SwAMPParams
from harness.config.params import parse
from harness.encoders.mlp import MLP
from harness.errors import ConfigError
from harness.ops.losses import (
    LOSSES,
    collapsed_value,
    infonce_loss,
    max_violation_loss,
    siglip_loss,
    sum_violation_loss,
)


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


def naive_siglip(s: torch.Tensor, scale_bias: tuple[float, float]) -> torch.Tensor:
    t, b = scale_bias
    n, total = len(s), s.new_zeros(())
    for i in range(n):
        for j in range(n):
            z = 1.0 if i == j else -1.0
            total = total - torch.log(1 / (1 + torch.exp(-z * (t * s[i, j] + b))))
    return total


def reference_siglip(s: torch.Tensor, t: float, b: float) -> float:
    """−Σ_ij log σ(z_ij·(t·s_ij + b)) in Python floats (float64), one pair at a time."""
    total = 0.0
    for i in range(len(s)):
        for j in range(len(s)):
            z = 1.0 if i == j else -1.0
            total -= math.log(1 / (1 + math.exp(-z * (t * float(s[i, j]) + b))))
    return total


CASES = [(max_violation_loss, naive_max_violation, 0.2), (sum_violation_loss, naive_sum, 0.2),
         (infonce_loss, naive_infonce, 0.1), (lambda s, a: siglip_loss(s, *a), naive_siglip, (10.0, -10.0))]


def _sims(seed: int, n: int = 6) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    a = F.normalize(torch.randn(n, 4, generator=g, dtype=torch.float64), dim=1)
    b = F.normalize(torch.randn(n, 4, generator=g, dtype=torch.float64), dim=1)
    return a @ b.T


@pytest.mark.parametrize("fast, naive, arg", CASES, ids=["max_violation", "sum", "infonce", "siglip"])
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
          "infonce": lambda s: infonce_loss(s, 0.07),
          # at the bias that suits equal scores best: σ(t·0.42 + b) = 1/B
          "siglip": lambda s: siglip_loss(s, 10.0, -math.log(batch - 1) - 10.0 * 0.42)}[loss]
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


@pytest.mark.parametrize("seed, t, b", [(0, 10.0, -10.0), (1, 1.0, 0.0), (2, 37.5, -4.25), (3, 3.0, 2.5)])
def test_siglip_equals_a_direct_reference(seed, t, b):
    s = _sims(seed, 5)
    assert float(siglip_loss(s, t, b)) == pytest.approx(reference_siglip(s, t, b), rel=1e-12)
    as_tensors = siglip_loss(s, torch.tensor(t, dtype=torch.float64), torch.tensor(b, dtype=torch.float64))
    assert float(as_tensors) == pytest.approx(reference_siglip(s, t, b), rel=1e-12)


def test_siglip_known_answer():
    s = torch.tensor([[1.0, 0.6], [0.0, 0.8]], dtype=torch.float64)
    # t = 2, b = −1: positives 2·1 − 1 = 1 and 2·0.8 − 1 = 0.6; negatives 2·0.6 − 1 = 0.2 and 2·0 − 1 = −1;
    # −log σ(x) = log(1 + e^−x) for a positive, −log(1 − σ(x)) = log(1 + e^x) for a negative
    expected = math.log1p(math.exp(-1.0)) + math.log1p(math.exp(-0.6)) + math.log1p(math.exp(0.2)) \
        + math.log1p(math.exp(-1.0))
    assert float(siglip_loss(s, 2.0, -1.0)) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_siglip_gradient_through_a_learned_scale_and_bias(seed):
    s = _sims(seed, 4).requires_grad_()
    log_t = torch.tensor(math.log(10.0), dtype=torch.float64, requires_grad=True)
    b = torch.tensor(-10.0 + seed, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s, log_t, b: siglip_loss(s, log_t.exp(), b), (s, log_t, b))
    assert torch.autograd.gradgradcheck(lambda s, log_t, b: siglip_loss(s, log_t.exp(), b), (s, log_t, b))


@pytest.mark.parametrize("batch", [2, 3, 16, 128])
@pytest.mark.parametrize("t, score", [(10.0, 0.42), (1.0, -0.3), (100.0, 1.0)])
def test_siglip_collapsed_value_is_its_least_over_the_bias(batch, t, score):
    equal = torch.full((batch, batch), score, dtype=torch.float64)
    best = -math.log(batch - 1) - t * score  # σ(t·s + b) = 1/B
    collapsed = collapsed_value("siglip", batch, 0.3)
    assert float(siglip_loss(equal, t, best)) == pytest.approx(collapsed, rel=1e-12)
    for step in (-2.0, -0.1, -1e-3, 1e-3, 0.1, 2.0):
        assert float(siglip_loss(equal, t, best + step)) > collapsed
    grid = torch.linspace(best - 20, best + 20, 401, dtype=torch.float64)
    assert min(float(siglip_loss(equal, t, float(b))) for b in grid) >= collapsed * (1 - 1e-12)
    bias = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)  # where gradient descent takes a learned bias
    opt = torch.optim.LBFGS([bias], max_iter=100, tolerance_grad=1e-12, tolerance_change=1e-15,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        value = siglip_loss(equal, t, bias)
        value.backward()
        return value

    opt.step(closure)
    assert float(bias.detach()) == pytest.approx(best, abs=1e-6)
    assert float(siglip_loss(equal, t, bias.detach())) == pytest.approx(collapsed, rel=1e-10)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_siglip_widens_half_precision_scores(dtype):
    s = _sims(6).to(dtype)  # what a bf16 forward pass under autocast hands the loss
    value = siglip_loss(s, torch.tensor(10.0), -10.0)
    assert value.dtype == torch.float32
    assert float(value) == pytest.approx(reference_siglip(s.double(), 10.0, -10.0), rel=1e-6)


def test_siglip_collapsed_value_of_one_pair_is_zero():
    assert collapsed_value("siglip", 1, 0.2) == 0.0
    one = torch.full((1, 1), 0.5, dtype=torch.float64)
    values = [float(siglip_loss(one, 10.0, b)) for b in (-10.0, 0.0, 10.0, 40.0)]
    assert all(v > 0 for v in values) and values == sorted(values, reverse=True)  # falls towards 0 as b grows
    assert values[-1] < 1e-16


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_siglip_stays_finite_at_extreme_logits(dtype):
    n = 4
    wrong = (1 - 2 * torch.eye(n, dtype=dtype)).requires_grad_()  # positives −1, negatives 1: every pair wrong
    scale = torch.tensor(1e4, dtype=dtype, requires_grad=True)
    value = siglip_loss(wrong, scale, 0.0)  # every logit ±1e4 on the wrong side: softplus(1e4) = 1e4 each
    assert torch.isfinite(value) and float(value.detach()) == pytest.approx(n * n * 1e4, rel=1e-6)
    value.backward()
    assert torch.isfinite(wrong.grad).all() and torch.isfinite(scale.grad)
    assert float(scale.grad) == pytest.approx(n * n, rel=1e-6)  # d/dt Σ t·1 over the n² pairs
    right = 2 * torch.eye(n, dtype=dtype) - 1  # every pair right by 1e4: the loss vanishes without underflow trouble
    assert float(siglip_loss(right, 1e4, 0.0)) == 0.0
    huge = siglip_loss(torch.rand(n, n, dtype=dtype) * 2 - 1, 1e30, -1e30)
    assert torch.isfinite(huge)


def test_siglip_learns_its_scale_and_bias():
    params = parse(ContrastiveParams, {"loss": "siglip"}, "t")
    assert (params.siglip_scale, params.siglip_bias) == (10.0, -10.0)  # the paper's t' = log 10, b = −10
    torch.manual_seed(0)
    method = Contrastive({"a": MLP(3, (4,), 5), "b": MLP(3, (4,), 5)}, params)
    own = {n: p for n, p in method.named_parameters() if not n.startswith("encoders.")}
    assert set(own) == {"pair_loss.log_siglip_scale", "pair_loss.siglip_bias"}
    assert float(own["pair_loss.log_siglip_scale"].detach()) == pytest.approx(math.log(10.0))
    assert float(own["pair_loss.siglip_bias"].detach()) == -10.0
    x_a, x_b = torch.randn(8, 3), torch.randn(8, 3)
    loss, logs = method.loss(x_a, x_b)
    sims = method.encode("a", x_a) @ method.encode("b", x_b).T
    torch.testing.assert_close(loss, siglip_loss(sims, 10.0, -10.0))
    assert float(logs["siglip_scale"]) == pytest.approx(10.0) and float(logs["siglip_bias"]) == -10.0
    assert logs["loss@collapsed"] == pytest.approx(collapsed_value("siglip", 8, 0.2))
    from harness.config.spec import TrainSpec
    from harness.run import train as tr

    opt = tr.make_optimizer(method, TrainSpec(lr=0.01))  # the training loop's optimizer takes them up
    before = {n: p.detach().clone() for n, p in own.items()}
    opt.zero_grad()
    loss.backward()
    opt.step()
    assert all(not torch.equal(before[n], p) for n, p in own.items())
    _, after = method.loss(x_a, x_b)
    assert float(after["siglip_scale"]) == pytest.approx(float(own["pair_loss.log_siglip_scale"].detach().exp()))
    assert float(after["siglip_bias"]) == float(own["pair_loss.siglip_bias"].detach()) != -10.0
    assert float(logs["siglip_bias"]) == -10.0  # the earlier log is a copy, not the parameter


def test_siglip_starts_where_it_is_told_and_swamp_trains_it_too():
    pair = PairLoss(parse(ContrastiveParams, {"loss": "siglip", "siglip_scale": 4.0, "siglip_bias": -2.5}, "t"))
    s = _sims(5).float()
    torch.testing.assert_close(pair(s)[0], siglip_loss(s, 4.0, -2.5))
    assert pair(s)[1] == collapsed_value("siglip", 6, 0.2)
    swamp = SwAMP({"a": MLP(3, (4,), 2), "b": MLP(3, (4,), 2)}, SwAMPParams(K=4, queue=10, loss="siglip"))
    assert {"pair_loss.log_siglip_scale", "pair_loss.siglip_bias"} <= {n for n, _ in swamp.named_parameters()}
    _, logs = swamp.loss(torch.randn(4, 3), torch.randn(4, 3))
    assert {"contrastive", "contrastive@collapsed", "siglip_scale", "siglip_bias"} <= set(logs)


@pytest.mark.parametrize("kind", ["contrastive", "contrastive_par", "swamp", "swamp_par"])
def test_every_method_with_a_pair_loss_trains_with_siglip(kind, tiny_task, tiny_image_text_task):
    from harness.run import train as tr
    from tests.test_methods import tiny_method_for

    settings = {"loss": "siglip", **({"contrastive_weight": 1.0} if kind.startswith("swamp") else {})}
    spec, name, data, method = tiny_method_for(kind, tiny_task, tiny_image_text_task, settings=settings)
    own = dict(method.pair_loss.named_parameters())
    before = {n: p.detach().clone() for n, p in own.items()}
    opt = tr.make_optimizer(method, spec.methods[name].train)
    logs = tr.make_step(method, opt, data["train"], torch.device("cpu"), None)(torch.arange(32))
    assert torch.isfinite(logs["loss"]) and float(logs["siglip_scale"]) == pytest.approx(10.0)
    assert set(own) == {"log_siglip_scale", "siglip_bias"}
    assert all(not torch.equal(before[n], p) for n, p in own.items())


def test_siglip_search_space_is_declared_beside_its_settings(tiny_task):
    from harness.config.spec import load_task
    from harness.tune import space

    def dims(overrides):
        return {d.name: d.space for d in space.dimensions(load_task(tiny_task, overrides), "contrastive")}

    siglip = dims(["contrastive.loss=siglip"])
    assert (siglip["siglip_scale"].low, siglip["siglip_scale"].high, siglip["siglip_scale"].log) == (1.0, 100.0, True)
    assert (siglip["siglip_bias"].low, siglip["siglip_bias"].high, siglip["siglip_bias"].log) == (-15.0, 0.0, False)
    assert "margin" not in siglip and "temperature" not in siglip
    hinge = dims([])
    assert "margin" in hinge and "siglip_scale" not in hinge and "siglip_bias" not in hinge


@pytest.mark.parametrize("body, message", [
    ({"loss": "hinge"}, r"unknown value 'hinge'.*valid: infonce, max_violation, siglip, sum"),
    ({"loss": "siglip", "siglip_scale": 0.0}, "siglip_scale must be > 0"),
    ({"loss": "siglip", "learn_temperature": True}, "learn_temperature applies to loss: infonce only"),
    ({"loss": "siglip", "warmup_epochs": 3}, "warmup_epochs .* with loss: siglip set warmup_epochs: 0"),
    ({"loss": "infonce", "warmup_epochs": 5}, "warmup_epochs .* with loss: infonce set warmup_epochs: 0"),
    ({"learn_temperature": True}, "learn_temperature applies to loss: infonce only"),
    ({"loss": "infonce", "temperature": 0.0}, "temperature must be >= 0.01"),
    ({"warmup_epochs": -1}, "warmup_epochs must be >= 0"),
])
def test_bad_loss_settings_are_config_errors(body, message):
    with pytest.raises(ConfigError, match=message):
        parse(ContrastiveParams, body, "methods.contrastive")
