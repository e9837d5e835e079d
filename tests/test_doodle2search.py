"""Doodle2Search and Doodle2Search+SwAMP: gradient reversal and its ramp, each loss term on known inputs,
the SwAMP term, and the word-vector requirement."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from baselines.doodle2search import (
    Doodle2Search,
    Doodle2SearchParams,
    cosine_regression,
    domain_loss,
    grad_reverse,
    ramp,
)
from baselines.doodle2search_swamp import Doodle2SearchSwAMP, Doodle2SearchSwAMPParams
from harness.config.spec import load_task
from harness.errors import ConfigError
from harness.run import runner


@pytest.mark.parametrize("weight", [0.0, 0.5, 1.0, 2.0])
def test_gradient_reversal_flips_and_scales_the_gradient(weight):
    x = torch.randn(4, 3, requires_grad=True)
    y = grad_reverse(x, weight)
    assert torch.equal(y, x)  # identity forward
    upstream = torch.randn(4, 3)
    y.backward(upstream)
    assert torch.allclose(x.grad, -weight * upstream)


def test_ramp_follows_doodle2search_schedule():
    assert [ramp(s, 5, 25) for s in (0, 4, 5, 15, 24, 25, 1000)] == [0.0, 0.0, 0.0, 0.5, 0.95, 1.0, 1.0]


def test_cosine_regression_and_domain_loss_known_answers():
    pred = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0]])
    target = torch.tensor([[2.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    assert cosine_regression(pred, target).tolist() == pytest.approx([0.0, 0.5, 1.0])
    zero = torch.zeros(5)
    assert float(domain_loss(zero, zero, zero)) == pytest.approx(math.log(2))
    big = torch.full((5,), 30.0)
    assert float(domain_loss(-big, big, big)) == pytest.approx(0.0, abs=1e-6)  # a perfect discriminator


def make(cls=Doodle2Search, params=None, dim=4, word_dim=3):
    torch.manual_seed(0)
    encoders = {m: torch.nn.Linear(5, dim) for m in ("a", "b")}
    for e in encoders.values():
        e.out_dim = dim
    return cls(encoders, params or cls.Params(), word_dim)


@torch.no_grad()
def test_terms_match_their_definitions():
    method = make().eval()  # no dropout
    s, p, n, w = torch.randn(6, 4), torch.randn(6, 4), torch.randn(6, 4), torch.randn(6, 3)
    terms = method.terms(s, p, n, w)
    triplet = ((s - p).norm(dim=1) - (s - n).norm(dim=1) + 1.0).clamp_min(0).mean()
    assert float(terms["triplet"][1]) == pytest.approx(float(triplet), rel=1e-4)
    sem = method.semantic
    expected = (cosine_regression(sem(s), w) + cosine_regression(sem(p), w) + cosine_regression(sem(n), w)).mean()
    assert float(terms["semantic"][1]) == pytest.approx(float(expected))
    dom = method.domain
    assert float(terms["domain"][1]) == pytest.approx(float(domain_loss(dom(s)[:, 0], dom(p)[:, 0], dom(n)[:, 0])))
    assert {k: w for k, (w, _) in terms.items()} == {"triplet": 1.0, "domain": 1.0, "semantic": 1.0}


def test_domain_gradient_to_the_encoder_is_reversed_and_ramped():
    method = make(params=Doodle2SearchParams(w_triplet=0.0, w_semantic=0.0, ramp_start=2, ramp_end=4)).eval()
    s = torch.randn(6, 4, requires_grad=True)
    p, n, w = torch.randn(6, 4), torch.randn(6, 4), torch.randn(6, 3)

    def grad_on_sketch() -> torch.Tensor:
        s.grad = None
        sum(wt * v for wt, v in method.terms(s, p, n, w).values()).backward()
        return s.grad.clone()

    logits = [method.domain(e)[:, 0] for e in (s, p, n)]
    plain = torch.autograd.grad(domain_loss(*logits), s)[0]  # the gradient without reversal
    assert torch.count_nonzero(grad_on_sketch()) == 0  # step 0: weight 0
    method.steps.fill_(3)  # halfway through the ramp
    assert torch.allclose(grad_on_sketch(), -0.5 * plain, atol=1e-7)
    method.steps.fill_(10)
    assert torch.allclose(grad_on_sketch(), -plain, atol=1e-7)


def test_negative_semantic_term_pushes_the_negative_away():
    method = make(params=Doodle2SearchParams(w_triplet=0.0, w_domain=0.0, negative_reversal=0.5)).eval()
    s, p, w = torch.randn(6, 4), torch.randn(6, 4), torch.randn(6, 3)
    n = torch.randn(6, 4, requires_grad=True)
    sum(wt * v for wt, v in method.terms(s, p, n, w).values()).backward()
    n2 = n.detach().clone().requires_grad_(True)
    cosine_regression(method.semantic(n2), w).mean().backward()
    assert torch.allclose(n.grad, -0.5 * n2.grad, atol=1e-7)


def test_loss_logs_every_term_and_counts_steps():
    method = make().train()
    x_a, x_b = torch.randn(6, 5), (torch.randn(6, 5), torch.randn(6, 5), torch.randn(6, 3))
    total, logs = method.loss(x_a, x_b)
    assert set(logs) == {"triplet", "domain", "semantic", "loss", "reversal_weight"}
    assert float(total.detach()) == pytest.approx(float(logs["triplet"] + logs["domain"] + logs["semantic"]))
    assert int(method.steps) == 1


def test_swamp_variant_adds_lambda_times_swapped_loss():
    params = Doodle2SearchSwAMPParams(K=3, queue=8, lam=0.1)
    method = make(Doodle2SearchSwAMP, params).eval()
    s, p, n, w = torch.randn(6, 4), torch.randn(6, 4), torch.randn(6, 4), torch.randn(6, 3)
    terms = method.terms(s, p, n, w)
    assert terms["swamp"][0] == 0.1 and set(terms) == {"triplet", "domain", "semantic", "swamp"}
    assert int(method.queue.filled) == 6  # the (sketch, positive) pair entered SwAMP's queue
    assert torch.allclose(method.queue.a[:6], F.normalize(s, dim=1))


def test_retrieval_is_by_euclidean_distance():
    method = make()
    a, b = torch.tensor([[0.0, 0.0, 0.0, 0.0]]), torch.tensor([[3.0, 4.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    assert method.score(a, b).tolist() == [[-5.0, -1.0]]


def test_methods_refuse_data_without_word_vectors(tmp_path, tiny_sketch_task):
    spec = load_task(tiny_sketch_task)
    data = runner.load_data(spec)
    data["train"].b.word_vectors = None
    with pytest.raises(ConfigError, match="dataset.word_vectors"):
        runner.build_method(spec, "doodle2search_swamp", data, torch.device("cpu"))
