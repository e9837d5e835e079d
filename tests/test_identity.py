"""The no-training reference ``identity``: cosine of the raw features, refused when the widths differ."""
from __future__ import annotations

import json

import numpy as np
import torch

from baselines.identity import Identity, IdentityParams
from harness.cli import main
from harness.data.paired import Split
from harness.report import formats
from harness.store.schema import load_results
from tests.conftest import TINY, write_task


def test_scores_are_cosines_of_the_raw_features():
    method = Identity({}, IdentityParams(), 2)
    a = torch.tensor([[3.0, 4.0], [1.0, 0.0]])
    b = torch.tensor([[6.0, 8.0], [0.0, 2.0]])
    method.fit_closed_form(Split(a, b))  # nothing to fit
    sims = method.score(method.encode("a", a), method.encode("b", b))
    torch.testing.assert_close(sims, torch.tensor([[1.0, 0.8], [0.6, 0.0]]))
    assert method.encode("a", torch.ones(3, 2, 2, dtype=torch.float64)).shape == (3, 4)  # flattened, float32 rows


def _aligned_arrays(root, dim_b: int = 16, noise: float = 0.05):
    """Pairs whose b features are the a features plus noise (one space when the widths agree)."""
    rng = np.random.default_rng(0)
    root.mkdir()
    for split, n in (("train", 60), ("val", 20), ("test", 30)):
        a = rng.normal(size=(n, 16)).astype(np.float32)
        b = a[:, :dim_b] + noise * rng.normal(size=(n, dim_b)).astype(np.float32)
        np.save(root / f"{split}_a.npy", a)
        np.save(root / f"{split}_b.npy", b)
        np.save(root / f"{split}_labels.npy", rng.integers(0, 3, n))
    return root


def _task(tmp_path, root):
    return write_task(tmp_path, {**TINY, "name": "own", "dataset": {"source": "paired_arrays", "root": str(root)},
                                 "methods": {"identity": {"method": "identity"},
                                             "cca": {"method": "cca", "dim": 4}}}, "own.yaml")


def test_runner_writes_a_normal_result_and_the_tables_show_it(tmp_path):
    out = tmp_path / "out"
    task = _task(tmp_path, _aligned_arrays(tmp_path / "arrays"))
    assert main(["run", str(task), "--methods", "identity,cca", "--out", str(out), "--no-progress", "--device",
                 "cpu"]) == 0
    result = json.loads((out / "own" / "identity" / "seed0.json").read_text())
    assert result["training"] == "closed_form" and result["best_epoch"] == 1 and result["collapse"] is None
    assert result["metrics"]["a2b/R@1"] == 100.0  # b is a plus a little noise: every query finds its partner
    accuracy = formats.render(load_results(out / "own"), "md")["accuracy"]
    assert any(line.startswith("| pair-based") and "| identity " in line for line in accuracy.splitlines())
    assert "| identity " in (out / "own" / "timing.md").read_text()


def test_different_widths_are_refused_before_anything_trains(tmp_path, capsys):
    out = tmp_path / "out"
    task = _task(tmp_path, _aligned_arrays(tmp_path / "arrays", dim_b=12))
    assert main(["run", str(task), "--methods", "identity", "--out", str(out), "--no-progress", "--device",
                 "cpu"]) == 2
    err = capsys.readouterr().err
    assert "method identity" in err and "16 values" in err and "12 (shape (12,))" in err and "cca" in err
    assert not out.exists() or not any(out.rglob("seed*.json"))  # refused, nothing written
    # beside another method it cannot apply to such data: skipped with a note, the other one runs
    assert main(["run", str(task), "--methods", "identity,cca", "--out", str(out), "--no-progress", "--device",
                 "cpu"]) == 0
    assert "note: identity does not apply to this data and is skipped" in capsys.readouterr().err
    assert [p.parent.name for p in out.rglob("seed*.json")] == ["cca"]
