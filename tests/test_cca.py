"""CCA: the closed form against scikit-learn and known properties; the runner's closed-form path
(one fit timed as the training epoch, a normal result file) and a rebuild from the checkpoint."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from baselines.cca import CCA, CCAParams, cca_fit, inverse_sqrt, ledoit_wolf_shrinkage
from harness.analysis.restore import restore_run
from harness.cli import main
from harness.config.params import parse
from harness.data.paired import Split
from harness.errors import ConfigError


def _views(n: int = 400, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two noisy linear views (8-d, 6-d) of a shared 3-d latent."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, 3, generator=g)
    x = torch.cat([z, torch.randn(n, 5, generator=g)], 1) @ torch.randn(8, 8, generator=g)
    y = torch.cat([z, torch.randn(n, 3, generator=g)], 1) @ torch.randn(6, 6, generator=g)
    return (x + 0.5 * torch.randn(n, 8, generator=g), y + 0.5 * torch.randn(n, 6, generator=g))


def test_canonical_correlations_match_scikit_learn():
    cross_decomposition = pytest.importorskip("sklearn.cross_decomposition")
    x, y = _views()
    mx, my, wx, wy, corr = cca_fit(x, y, dim=4, reg=0.0)
    sk = cross_decomposition.CCA(n_components=4, scale=False, max_iter=2000, tol=1e-10).fit(x.numpy(), y.numpy())
    xs, ys = sk.transform(x.numpy(), y.numpy())
    expected = [np.corrcoef(xs[:, i], ys[:, i])[0, 1] for i in range(4)]
    np.testing.assert_allclose(corr.numpy(), expected, rtol=1e-6)
    u = ((x.double() - mx) @ wx).numpy()
    for i in range(4):  # the same canonical variates, up to sign and scale
        assert abs(np.corrcoef(u[:, i], xs[:, i])[0, 1]) == pytest.approx(1.0, abs=1e-6)


def test_variates_are_white_and_correlated_as_reported():
    x, y = _views(seed=1)
    mx, my, wx, wy, corr = cca_fit(x, y, dim=10, reg=0.0)
    assert wx.shape == (8, 6) and wy.shape == (6, 6) and len(corr) == 6  # k = min(dim, d_x, d_y)
    u, v = (x.double() - mx) @ wx, (y.double() - my) @ wy
    torch.testing.assert_close(torch.cov(u.T), torch.eye(6, dtype=torch.float64), atol=1e-8, rtol=0)
    torch.testing.assert_close(torch.cov(torch.cat([u, v], 1).T)[:6, 6:].diagonal(), corr, atol=1e-8, rtol=0)
    assert bool((corr[:-1] >= corr[1:]).all()) and float(corr[0]) > 0.8


def test_singular_covariance_is_handled():
    x, y = _views(seed=2)
    y = torch.softmax(y, 1)  # rows sum to 1: the covariance is singular, as with topic proportions
    _, _, _, wy, corr = cca_fit(x, y, dim=3, reg=0.0)
    assert torch.isfinite(wy).all() and float(corr.max()) <= 1.0 + 1e-9
    c = torch.tensor([[2.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(inverse_sqrt(c), torch.tensor([[2 ** -0.5, 0.0], [0.0, 0.0]], dtype=torch.float64))


def test_method_retrieves_pairs_and_reloads_from_its_state():
    x, y = _views(n=300, seed=3)
    method = CCA({}, parse(CCAParams, {"dim": 3}, "cca"))
    with pytest.raises(RuntimeError, match="not fitted"):
        method.encode("a", x)
    method.fit_closed_form(Split(x, y))
    emb = method.encode("a", x[:5])
    assert emb.shape == (5, 3) and emb.dtype == torch.float32
    torch.testing.assert_close(emb.norm(dim=1), torch.ones(5))
    fresh = CCA({}, method.params)
    fresh.load_state_dict(method.state_dict())  # an unfitted CCA takes the fitted shapes
    torch.testing.assert_close(fresh.encode("b", y[:5]), method.encode("b", y[:5]))
    with pytest.raises(ConfigError, match="dim must be >= 1"):
        parse(CCAParams, {"dim": 0}, "cca")


def test_runner_fits_once_and_writes_a_normal_result(tiny_task, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(tiny_task), "--methods", "cca", "--out", str(out), "--no-progress", "--device", "cpu"]) == 0
    result = json.loads((out / "tiny" / "cca" / "seed0.json").read_text())
    assert result["training"] == "closed_form" and result["best_epoch"] == 1 and result["collapse"] is None
    assert result["history"][0]["epoch"] == 1 and "val/a2b/R@1" in result["history"][0]
    assert result["profile"]["timing"]["train_epoch"]["n"] == 1 and "train_step" not in result["profile"]["timing"]
    assert result["metrics"]["a2b/class_R@1"] > 50.0  # the synthetic classes are linearly recoverable
    method, _, _ = restore_run(out / "tiny" / "cca" / "seed0.json", torch.device("cpu"))
    assert method.proj_a.shape == (100, 4)
    assert "cca" in capsys.readouterr().out


def _naive_ledoit_wolf(x: torch.Tensor) -> float:
    """Ledoit & Wolf (2004)'s shrinkage written out: one d × d outer product per sample."""
    n, d = x.shape
    xc = x.double() - x.double().mean(0)
    s = xc.T @ xc / n
    mu = torch.trace(s) / d
    dist = torch.linalg.matrix_norm(s - mu * torch.eye(d, dtype=torch.float64)) ** 2 / d
    spread = sum(torch.linalg.matrix_norm(torch.outer(row, row) - s) ** 2 for row in xc) / (n * n * d)
    return min(1.0, float(spread / dist))


@pytest.mark.parametrize("n, d, seed", [(7, 4, 0), (40, 6, 1), (3, 8, 2)])
def test_ledoit_wolf_shrinkage_matches_the_formula_written_out(n, d, seed):
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed)) * torch.arange(1, d + 1)
    delta = ledoit_wolf_shrinkage(x.double() - x.double().mean(0))
    assert 0.0 <= delta <= 1.0
    assert delta == pytest.approx(_naive_ledoit_wolf(x), rel=1e-10, abs=1e-12)


def test_ledoit_wolf_shrinkage_matches_scikit_learn():
    try:
        from sklearn.covariance import ledoit_wolf
    except ImportError:
        pytest.skip("scikit-learn is not installed (a test extra): the written-out formula above still checks it")
    for n, d, seed in ((7, 4, 0), (40, 6, 1), (30, 50, 2)):
        x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        _, shrinkage = ledoit_wolf(x.numpy())
        assert ledoit_wolf_shrinkage(x - x.mean(0)) == pytest.approx(shrinkage, rel=1e-8, abs=1e-12)


def _fitted(x: torch.Tensor, y: torch.Tensor, reg, dim: int = 3) -> CCA:
    method = CCA({}, parse(CCAParams, {"dim": dim, "reg": reg}, "cca"))
    method.fit_closed_form(Split(x, y))
    return method


def test_auto_ridge_stops_an_exact_fit_of_pure_noise():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(60, 80, generator=g), torch.randn(60, 80, generator=g)  # 60 pairs, 80-d views: no signal
    small, auto = _fitted(x, y, 1e-3), _fitted(x, y, "auto")
    assert float(small.correlations[0]) >= 0.999
    [line] = small.fitted_warnings()
    assert ("training canonical correlations 1.000, 1.000, 1.000" in line
            and "60 training pairs of 80-d a and 80-d b" in line)
    assert "reproduce the training pairs exactly" in line and "set reg: auto" in line
    assert float(auto.correlations[0]) < 0.5 and auto.fitted_warnings() == []
    assert auto.ridges.shape == (2,) and bool((auto.ridges > 1).all())  # strong shrinkage: the covariance is noise
    assert auto.encode("a", x[:4]).isfinite().all()
    fresh = CCA({}, auto.params)
    fresh.load_state_dict(auto.state_dict())  # the chosen ridges travel with the fitted state
    assert torch.equal(fresh.ridges, auto.ridges) and int(fresh.n_pairs) == 60


def test_auto_ridge_generalises_better_on_few_pairs_with_a_shared_signal():
    """100 pairs of 60-d views sharing a 3-d latent (fewer pairs than the two widths together, so an exact fit
    exists): the held-out canonical correlations and R@10 of 100 held-out pairs, auto against reg 1e-3."""
    g = torch.Generator().manual_seed(1)
    load_a, load_b = (torch.randn(3, 60, generator=g) * 3 / 60 ** 0.5 for _ in range(2))

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        z = torch.randn(n, 3, generator=g)
        return z @ load_a + torch.randn(n, 60, generator=g), z @ load_b + torch.randn(n, 60, generator=g)

    (x, y), (x_held, y_held) = draw(100), draw(100)

    def held_out(method: CCA) -> tuple[float, float]:
        u, v = (x_held.double() - method.mean_a) @ method.proj_a, (y_held.double() - method.mean_b) @ method.proj_b
        corr = np.mean([np.corrcoef(u[:, i].numpy(), v[:, i].numpy())[0, 1] for i in range(3)])
        top = (method.encode("a", x_held) @ method.encode("b", y_held).T).topk(10, dim=1).indices
        return float(corr), float((top == torch.arange(100)[:, None]).any(1).float().mean())

    small, auto = _fitted(x, y, 1e-3), _fitted(x, y, "auto")
    (corr_small, r10_small), (corr_auto, r10_auto) = held_out(small), held_out(auto)
    assert corr_auto > corr_small + 0.15 and r10_auto > r10_small + 0.15  # measured: 0.58 -> 0.84, 0.36 -> 0.71
    assert len(small.fitted_warnings()) == 1 and auto.fitted_warnings() == []


def test_no_warning_on_well_conditioned_data():
    x, y = _views(n=400, seed=4)  # 400 pairs of 8-d and 6-d views
    for reg in (1e-3, "auto"):
        method = _fitted(x, y, reg)
        assert float(method.correlations[0]) < 0.999 and method.fitted_warnings() == []


def test_reg_auto_is_parsed_and_a_misspelling_names_the_choice():
    assert parse(CCAParams, {"reg": "auto"}, "x").reg == "auto"
    assert parse(CCAParams, {}, "x").reg == 1e-3 and parse(CCAParams, {"reg": 0}, "x").reg == 0.0
    with pytest.raises(ConfigError) as err:
        parse(CCAParams, {"reg": "autoo"}, "x")
    assert "x.reg" in str(err.value) and "'autoo'" in str(err.value) and "(did you mean 'auto'?)" in str(err.value)
    with pytest.raises(ConfigError, match="reg must be >= 0 or auto, got -1"):
        parse(CCAParams, {"reg": -1}, "x")
