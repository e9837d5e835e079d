"""Text–video encoders and losses on known inputs; fixed word vectors; starting from a HowTo100M state dict."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from baselines.mmr import MaxMarginParams, MaxMarginRanking, max_margin_ranking_loss
from baselines.swamp_mmr import SwAMPMMR, SwAMPMMRParams
from harness.config.spec import MetricSpec, load_task
from harness.encoders.gated import HOWTO100M_KEYS, GatedEmbeddingUnit, WordMaxPool
from harness.errors import ConfigError
from harness.ops.metrics import rank_metrics
from harness.run import build, runner
from harness.run import checkpoint as ckpt
from harness.run import evaluate as ev
from harness.run import train as tr


def naive_mmr(s: torch.Tensor, margin: float) -> float:
    """HowTo100M's loss as a double loop over the matrix, diagonal included."""
    n = len(s)
    total = sum(max(0.0, margin + s[i, j] - s[i, i]) + max(0.0, margin + s[i, j] - s[j, j])
                for i in range(n) for j in range(n))
    return float(total) / n ** 2


def test_mmr_known_answer():
    s = torch.tensor([[0.9, 0.5], [0.2, 0.4]])
    # rows: (0.1+0.5-0.9)+ = 0, (0.1+0.2-0.4)+ = 0 ; cols: (0.1+0.5-0.4)+ = 0.2, (0.1+0.2-0.9)+ = 0 ; diagonal 4 × 0.1
    assert float(max_margin_ranking_loss(s, 0.1)) == pytest.approx((0.2 + 0.4) / 4)


def test_mmr_matches_the_loop_and_counts_every_negative():
    s = torch.randn(7, 7)
    assert float(max_margin_ranking_loss(s, 0.3)) == pytest.approx(naive_mmr(s, 0.3), rel=1e-5)
    perfect = 2 * torch.eye(5)  # every positive beats every negative by more than the margin
    assert float(max_margin_ranking_loss(perfect, 0.1)) == pytest.approx(2 * 0.1 / 5)  # only the diagonal constant


def test_gated_embedding_unit_is_linear_then_context_gating_then_l2():
    torch.manual_seed(0)
    unit = GatedEmbeddingUnit(6, 4)
    x = torch.randn(3, 6)
    z = x @ unit.fc.weight.T + unit.fc.bias
    gated = z * torch.sigmoid(z @ unit.cg.fc.weight.T + unit.cg.fc.bias)
    torch.testing.assert_close(unit(x), F.normalize(gated, dim=1))
    assert torch.allclose(unit(x).norm(dim=1), torch.ones(3))


def test_word_maxpool_max_includes_the_padding_as_howto100m():
    torch.manual_seed(0)
    enc = WordMaxPool(vocab_size=5, word_dim=3, hidden=4, dim=2)
    ids = torch.tensor([[1, 2, 0, 0], [0, 0, 0, 0], [1, 2, 3, 4]])
    words = F.relu(enc.pool(enc.embed.weight[ids]))  # pad rows are zero vectors -> ReLU(bias)
    expected = enc.gate(words.amax(1))
    torch.testing.assert_close(enc((ids, torch.tensor([2, 0, 4]))), expected)
    torch.testing.assert_close(enc((ids[1:2], torch.tensor([0]))), enc.gate(F.relu(enc.pool.bias)[None]))
    assert not enc.embed.weight[0].any()


def _encoders(vocab: int = 9, video_dim: int = 10, dim: int = 8) -> dict:
    return {"a": GatedEmbeddingUnit(video_dim, dim), "b": WordMaxPool(vocab, 5, dim, dim)}


def test_swamp_mmr_adds_the_ranking_loss_to_lambda_times_swamp():
    torch.manual_seed(0)
    method = SwAMPMMR(_encoders(), SwAMPMMRParams(K=4, queue=16, tau=0.25, eta=5.0, lam=0.25))
    videos, ids = torch.randn(6, 10), torch.randint(1, 9, (6, 5))
    total, logs = method.loss(videos, (ids, torch.full((6,), 5)))
    emb_a, emb_b = method.encode("a", videos), method.encode("b", (ids, None))
    torch.testing.assert_close(logs["contrastive"], max_margin_ranking_loss(emb_a @ emb_b.T, 0.1))
    torch.testing.assert_close(total, logs["contrastive"] + 0.25 * logs["swamp"])


def test_swamp_mmr_refuses_pair_loss_settings_it_would_ignore():
    from harness.config.params import parse

    with pytest.raises(ConfigError, match="loss choose SwAMP.s pair loss"):
        parse(SwAMPMMRParams, {"K": 4, "queue": 16, "loss": "infonce"}, "methods.swamp")
    with pytest.raises(ConfigError, match="siglip_bias choose SwAMP.s pair loss"):
        parse(SwAMPMMRParams, {"K": 4, "queue": 16, "siglip_bias": -5.0}, "methods.swamp")
    assert parse(SwAMPMMRParams, {"K": 4, "queue": 16, "margin": 0.2}, "methods.swamp").margin == 0.2


def test_t2v_is_the_caption_query_direction():
    sims = torch.randn(3, 6)  # 3 videos, 6 captions; caption j belongs to video j // 2
    owner = torch.tensor([0, 0, 1, 1, 2, 2])
    split = type("S", (), {"b_to_a": owner, "labels_a": None, "labels_b": None})
    metrics = ev.rank_split(sims, split, MetricSpec(directions=("t2v", "v2t", "a2b", "b2a")))
    relevant = torch.arange(3)[:, None] == owner[None, :]
    expected = rank_metrics(sims.T, relevant.T)
    assert all(metrics[f"t2v/{k}"] == v == metrics[f"b2a/{k}"] for k, v in expected.items())
    assert metrics["v2t/R@1"] == metrics["a2b/R@1"]


def test_fixed_word_vectors_are_frozen_into_the_text_encoder(tiny_video_text_task):
    spec = load_task(tiny_video_text_task)
    data = runner.load_data(spec)
    method = runner.build_method(spec, "contrastive", data, torch.device("cpu"))
    table = data.fixed_weights["b"]["embed.weight"]
    assert torch.equal(method.encoders["b"].embed.weight, table) and not method.encoders["b"].embed.weight.requires_grad
    opt = tr.make_optimizer(method, spec.methods["contrastive"].train)
    tr.make_step(method, opt, data["train"], torch.device("cpu"), None)(torch.arange(16))
    assert torch.equal(method.encoders["b"].embed.weight, table)


def test_fixed_weights_of_the_wrong_shape_are_refused():
    with pytest.raises(ConfigError, match="cannot take the data's fixed embed.weight"):
        build.fix_weights(WordMaxPool(9, 5, 8, 8), {"embed.weight": torch.zeros(9, 300)}, "encoders.b")


def _howto100m_state(dim: int = 8, video_dim: int = 10, word_dim: int = 5) -> dict[str, torch.Tensor]:
    """HowTo100M's Net state dict (model.py names), including its unused BatchNorm entries."""
    shapes = {"GU_video.fc.weight": (dim, video_dim), "GU_video.fc.bias": (dim,), "GU_video.cg.fc.weight": (dim, dim),
              "GU_video.cg.fc.bias": (dim,), "text_pooling.fc.weight": (dim, word_dim), "text_pooling.fc.bias": (dim,),
              "GU_text.fc.weight": (dim, dim), "GU_text.fc.bias": (dim,), "GU_text.cg.fc.weight": (dim, dim),
              "GU_text.cg.fc.bias": (dim,), "GU_video.cg.batch_norm.running_mean": (dim,)}
    return {k: torch.randn(s) for k, s in shapes.items()}


def test_init_from_a_howto100m_state_dict(tmp_path):
    state = _howto100m_state()
    torch.save(state, tmp_path / "howto100m_pt_model.pth")
    method = MaxMarginRanking(_encoders(), MaxMarginParams())
    method.encoders["b"].embed.weight.requires_grad_(False)  # word2vec: fixed, not in HowTo100M's file
    copied = ckpt.load_encoders(method, tmp_path / "howto100m_pt_model.pth")
    assert len(copied) == len(HOWTO100M_KEYS)
    assert torch.equal(method.encoders["a"].cg.fc.weight, state["GU_video.cg.fc.weight"])
    assert torch.equal(method.encoders["b"].pool.weight, state["text_pooling.fc.weight"])
    assert torch.equal(method.encoders["b"].gate.fc.bias, state["GU_text.fc.bias"])
    assert ckpt.init_label(tmp_path / "howto100m_pt_model.pth") == "howto100m_pt_model"


def test_init_errors_name_the_missing_keys(tmp_path):
    torch.save(_howto100m_state(), tmp_path / "m.pth")
    learned = MaxMarginRanking(_encoders(), MaxMarginParams())  # a learned word table HowTo100M's file lacks
    with pytest.raises(ConfigError, match="embed.weight.*set dataset.word_vectors"):
        ckpt.load_encoders(learned, tmp_path / "m.pth")
    torch.save(_howto100m_state(dim=16), tmp_path / "wide.pth")
    frozen = MaxMarginRanking(_encoders(), MaxMarginParams())
    frozen.encoders["b"].embed.weight.requires_grad_(False)
    with pytest.raises(ConfigError, match="shape mismatch.*\\(16, 10\\) vs \\(8, 10\\)"):
        ckpt.load_encoders(frozen, tmp_path / "wide.pth")
    torch.save({"unrelated.weight": torch.zeros(2)}, tmp_path / "other.pth")
    with pytest.raises(ConfigError, match="no encoder weights found"):
        ckpt.load_encoders(frozen, tmp_path / "other.pth")
    torch.save({"encoders.a.fc.weight": [1, 2]}, tmp_path / "notflat.pth")
    with pytest.raises(ConfigError, match="flat state dict"):
        ckpt.load_encoders(frozen, tmp_path / "notflat.pth")
