"""CCA: the closed form against scikit-learn and known properties; the runner's closed-form path
(one fit timed as the training epoch, a normal result file) and a rebuild from the checkpoint."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from baselines.cca import CCA, CCAParams, cca_fit, inverse_sqrt
from harness.cli import main
from harness.data.paired import Split
from harness.errors import ConfigError
from harness.config.params import parse
from harness.analysis.restore import restore_run


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
