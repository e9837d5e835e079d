"""Every registered method: one CPU training step and an evaluation (the contract), plus known answers."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml
from torch.utils._python_dispatch import TorchDispatchMode

from baselines.contrastive import hinge_max_violation
from baselines.swamp import EmbeddingQueue, SwAMP, SwAMPParams, swamp_loss, swapped_targets
from harness.config.registry import METHODS
from harness.config.spec import load_task
from harness.data.paired import take, to_device
from harness.encoders.mlp import MLP
from harness.errors import ConfigError
from harness.ops import precision as prec
from harness.ops.ot import sinkhorn
from harness.ops.precision import PRECISIONS
from harness.run import evaluate as ev
from harness.run import runner
from harness.run import train as tr


def tiny_spec_for(method_kind: str, *task_paths, settings: dict | None = None):
    """The first tiny task declaring a method of the given registered kind, and that method's name. A method
    no tiny task declares (a new plugin) joins the first tiny task whose data it can be built for, with the
    settings of its ``tiny_settings()`` (its Params defaults unless it says otherwise). ``settings``: the
    method's settings changed on top of the task's (``{"loss": "siglip"}``)."""
    changes = settings or {}
    for path in task_paths:
        spec = load_task(path)
        for name, m in spec.methods.items():
            if m.method == method_kind:
                if changes:
                    spec = load_task(path, [f"{name}.{k}={v}" for k, v in changes.items()])
                return spec, name
    settings = {"method": method_kind, **METHODS.get(method_kind).tiny_settings(), **changes}
    reasons = []
    for path in task_paths:
        added = Path(path).with_name(f"{Path(path).stem}+{method_kind}.yaml")
        added.write_text(yaml.safe_dump({"base": str(path), "methods": {method_kind: settings}}, sort_keys=False))
        try:
            spec = load_task(added)
            data = runner.load_data(spec)
            with torch.device("meta"):
                runner.build_method(spec, method_kind, data, torch.device("meta"))
            return spec, method_kind
        except ConfigError as err:
            reasons.append(f"{Path(path).name}: {err}")
    raise AssertionError(f"method {method_kind!r} builds on none of the tiny test tasks: {'; '.join(reasons)}")


def tiny_method_for(method_kind: str, *task_paths, settings: dict | None = None):
    """(spec, method name, data, method built on the CPU with seed 0) of :func:`tiny_spec_for`'s task."""
    spec, name = tiny_spec_for(method_kind, *task_paths, settings=settings)
    data = runner.load_data(spec)
    torch.manual_seed(0)
    return spec, name, data, runner.build_method(spec, name, data, torch.device("cpu"))


@pytest.mark.parametrize("kind", METHODS.names())
def test_contract_every_method_trains_one_step_and_evaluates(kind, tiny_task, tiny_image_text_task,
                                                            tiny_video_text_task, tiny_sketch_task):
    spec, name, data, method = tiny_method_for(kind, tiny_task, tiny_image_text_task, tiny_video_text_task,
                                               tiny_sketch_task)
    if method.trains_by_gradient:
        before = [p.detach().clone() for p in method.parameters()]
        opt = tr.make_optimizer(method, spec.methods[name].train)
        logs = tr.make_step(method, opt, data["train"], torch.device("cpu"), None)(torch.arange(32))
        assert torch.isfinite(logs["loss"])
        assert any(not torch.equal(b, p) for b, p in zip(before, method.parameters()))
    else:
        before = {k: v.clone() for k, v in method.state_dict().items()}
        method.fit_closed_form(data["train"])
        assert not before or any(before[k].shape != v.shape or not torch.equal(before[k], v)  # identity: no state
                                 for k, v in method.state_dict().items())
    metrics = ev.evaluate(method, data["test"], spec.metrics, torch.device("cpu"), 64)
    assert set(metrics) == set(spec.metrics.names())
    first = spec.metrics.names()[0]  # e.g. a2b/R@1 or i2t/R@1
    assert 0 <= metrics[first] <= 100


def test_hinge_known_answer():
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    b = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    # s = [[1, .6], [0, .8]]; rows: [m+.6-1]+ + [m+0-.8]+ ; cols: [m+0-1]+ + [m+.6-.8]+
    assert float(hinge_max_violation(a, b, margin=0.5)) == pytest.approx(0.1 + 0.0 + 0.0 + 0.3)
    assert float(hinge_max_violation(a, a, margin=0.5)) == 0.0  # perfect alignment, margin met


def test_hinge_uses_hardest_negative_only():
    a = F.normalize(torch.randn(6, 4), dim=1)
    b = F.normalize(torch.randn(6, 4), dim=1)
    s = a @ b.T
    expected = 0.0
    for i in range(6):
        expected += max(max(0.2 + s[i, j] - s[i, i], 0) for j in range(6) if j != i)
        expected += max(max(0.2 + s[j, i] - s[i, i], 0) for j in range(6) if j != i)
    assert float(hinge_max_violation(a, b, 0.2)) == pytest.approx(float(expected), rel=1e-5)


def test_targets_are_swapped_between_modalities():
    logp_a = torch.log_softmax(torch.randn(40, 8), 1)
    logp_b = torch.log_softmax(torch.randn(40, 8), 1)
    q_a, q_b = swapped_targets(logp_a, logp_b, eta=3.0, n_iters=3, hard=False)
    torch.testing.assert_close(q_a, sinkhorn(logp_b, 3.0, 3))
    torch.testing.assert_close(q_b, sinkhorn(logp_a, 3.0, 3))
    h_a, _ = swapped_targets(logp_a, logp_b, eta=3.0, n_iters=3, hard=True)
    assert torch.equal(h_a.argmax(1), q_a.argmax(1)) and torch.equal(h_a.sum(1), torch.ones(40))


def test_swamp_loss_is_cross_entropy():
    logp = torch.log_softmax(torch.randn(5, 3), 1)
    q = torch.softmax(torch.randn(5, 3), 1)
    expected = -(q * logp).sum(1).mean() * 2
    torch.testing.assert_close(swamp_loss(logp, logp, q, q), expected)


def test_queue_is_fifo_and_bounded():
    queue = EmbeddingQueue(size=5, dim=2)
    first, second = torch.ones(3, 2), 2 * torch.ones(3, 2)
    a, _ = queue.with_batch(first, first)
    assert len(a) == 3  # empty queue: the batch alone
    queue.push(first, first)
    queue.push(second, second)
    assert int(queue.filled) == 5
    assert queue.a[:3].eq(2).all() and queue.a[3:].eq(1).all()  # newest first, oldest dropped
    a, b = queue.with_batch(3 * torch.ones(2, 2), torch.zeros(2, 2))
    assert a.shape == (7, 2) and a[:2].eq(3).all() and b[:2].eq(0).all()


def test_swamp_sinkhorn_sees_batch_plus_queue(monkeypatch):
    seen = []
    import baselines.swamp as swamp_module

    real = swamp_module.sinkhorn
    monkeypatch.setattr(swamp_module, "sinkhorn", lambda logits, *a: seen.append(len(logits)) or real(logits, *a))
    params = SwAMPParams(K=4, queue=10, contrastive_weight=0.0, sinkhorn_compile=False)  # the eager path
    method = SwAMP({"a": MLP(3, (4,), 2), "b": MLP(3, (4,), 2)}, params)
    for _ in range(4):
        method.loss(torch.randn(4, 3), torch.randn(4, 3))
    assert seen == [4, 4, 8, 8, 12, 12, 14, 14]  # batch, then batch + min(queue, pushed so far)


def test_swamp_alone_does_not_touch_contrastive():
    params = SwAMPParams(K=4, queue=10, contrastive_weight=0.0)
    method = SwAMP({"a": MLP(3, (4,), 2), "b": MLP(3, (4,), 2)}, params)
    _, logs = method.loss(torch.randn(4, 3), torch.randn(4, 3))
    assert "contrastive" not in logs and torch.equal(logs["loss"], logs["swamp"])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("kind", METHODS.names())
def test_every_method_trains_and_scores_under_each_precision(kind, precision, tiny_task, tiny_image_text_task,
                                                             tiny_video_text_task, tiny_sketch_task):
    spec, name, data, method = tiny_method_for(kind, tiny_task, tiny_image_text_task, tiny_video_text_task,
                                               tiny_sketch_task)
    cpu = torch.device("cpu")
    check_precision(method, spec, name, data, precision)
    with prec.scope(precision, cpu):
        emb = method.encode("a", to_device(take(data["test"].a, torch.arange(4)), cpu))
    # autocast reached the encoders; a closed-form method (CCA) computes in float64 and returns float32
    bf16 = precision == "bf16" and method.trains_by_gradient
    assert emb.dtype == (torch.bfloat16 if bf16 else torch.float32)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_scan_original_trains_and_scores_under_each_precision(precision, tiny_image_text_task):
    spec = load_task(tiny_image_text_task, ["scan.scorer=original"])
    data = runner.load_data(spec)
    torch.manual_seed(0)
    check_precision(runner.build_method(spec, "scan", data, torch.device("cpu")), spec, "scan", data, precision)


def check_precision(method, spec, name, data, precision):
    """One training step wrapped as the runner wraps it, then validation-style scoring, under ``precision``."""
    cpu = torch.device("cpu")
    if not method.trains_by_gradient:
        with prec.scope(precision, cpu):
            method.fit_closed_form(data["train"])
            metrics = ev.evaluate(method, data["test"], spec.metrics, cpu, 64)
        assert all(0 <= metrics[m] <= 100 for m in spec.metrics.names() if "R@" in m)
        return
    before = [p.detach().clone() for p in method.parameters()]
    opt = tr.make_optimizer(method, spec.methods[name].train)
    step = prec.wrap_step(tr.make_step(method, opt, data["train"], cpu, None,
                                       loss_fn=prec.wrap_forward(method.loss, precision, cpu)), precision)
    logs = step(torch.arange(32))
    assert torch.isfinite(logs["loss"])
    assert any(not torch.equal(b, p) for b, p in zip(before, method.parameters()))
    with prec.scope(precision, cpu):
        metrics = ev.evaluate(method, data["test"], spec.metrics, cpu, 64)
    assert all(0 <= metrics[m] <= 100 for m in spec.metrics.names() if "R@" in m)


def test_tf32_switches_cover_the_step_and_are_restored():
    seen = []
    probe = lambda: seen.append((torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32))  # noqa: E731
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    prec.wrap_step(probe, "tf32")()
    prec.wrap_step(probe, "fp32")()
    assert seen == [(True, True), (False, False)]  # fp32 also turns cuDNN's default TF32 off
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before
    assert prec.wrap_forward(probe, "fp32", torch.device("cpu")) is probe


def test_unknown_precision_names_the_choices(tiny_task):
    with pytest.raises(ConfigError, match="unknown precision 'fp16'.*valid: bf16, fp32, tf32"):
        load_task(tiny_task, ["train.precision=fp16"])


class _HostReads(TorchDispatchMode):
    """Counts reads of a tensor's value back to the host (item(), int(), float(), bool()): on a GPU each
    is a host–device synchronisation."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func is torch.ops.aten._local_scalar_dense.default
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("kind, settings", [("swamp", {}), ("swamp_par", {}), ("contrastive", {}),
                                            ("contrastive_par", {}), ("contrastive", {"loss": "siglip"})],
                         ids=["swamp", "swamp_par", "contrastive", "contrastive_par", "contrastive-siglip"])
def test_loss_reads_nothing_back_from_the_device(kind, settings, tiny_task, tiny_image_text_task):
    """Past the encoders (the word GRU hands its lengths to pack_padded_sequence, which reads them on the
    host), a training loss never waits for a value computed on the device; SwAMP's queue count and SigLIP's
    logged scale and bias included."""
    spec, name, data, method = tiny_method_for(kind, tiny_task, tiny_image_text_task, settings=settings)
    x_a, x_b = data["train"].pair_batch(torch.arange(32))
    embedded = {"a": method.encode("a", x_a).detach(), "b": method.encode("b", x_b).detach()}
    method.encode = lambda modality, x: embedded[modality].requires_grad_(True)
    for _ in range(3):  # the queue fills, then wraps around
        with _HostReads() as reads:
            method.loss(x_a, x_b)
        assert reads.count == 0


def test_queue_count_survives_a_checkpoint():
    queue = EmbeddingQueue(size=5, dim=2)
    queue.push(torch.ones(3, 2), torch.ones(3, 2))
    fresh = EmbeddingQueue(size=5, dim=2)
    fresh.load_state_dict(queue.state_dict())
    assert fresh.n_filled == 3 and len(fresh.with_batch(torch.zeros(1, 2), torch.zeros(1, 2))[0]) == 4
    method = SwAMP({"a": MLP(3, (4,), 2), "b": MLP(3, (4,), 2)}, SwAMPParams(K=4, queue=10, contrastive_weight=0.0))
    method.loss(torch.randn(4, 3), torch.randn(4, 3))
    other = SwAMP({"a": MLP(3, (4,), 2), "b": MLP(3, (4,), 2)}, SwAMPParams(K=4, queue=10, contrastive_weight=0.0))
    other.load_state_dict(method.state_dict())  # the hook runs for a submodule of the loaded model too
    assert other.queue.n_filled == 4
