"""The own-features template (tasks/own_features.yaml): encoders and SwAMP settings sized from the data, the
no-training floor, epoch-0 selection, and one refused method not stopping the others."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from baselines.swamp import auto_K, auto_queue
from harness.cli import main
from harness.config import params as P
from harness.config.spec import load_task
from harness.encoders.linear import LinearParams
from harness.errors import ConfigError
from harness.report import formats
from harness.run import build, runner
from harness.store.schema import load_results
from tests.conftest import ROOT, write_task
from tests.error_lines import error_line

TEMPLATE = ROOT / "tasks" / "own_features.yaml"


def arrays(root: Path, width_a: int, width_b: int, sizes=(200, 60, 60), noise: float = 0.05, labels: bool = False,
           seed: int = 0) -> Path:
    """Paired arrays; with equal widths b is a plus noise (already aligned: training cannot beat their cosine)."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True)
    for split, n in zip(("train", "val", "test"), sizes):
        a = rng.normal(size=(n, width_a)).astype(np.float32)
        if width_a == width_b:
            b = a + noise * rng.normal(size=(n, width_b)).astype(np.float32)
        else:
            b = (a @ rng.normal(size=(width_a, width_b)) / math.sqrt(width_a)).astype(np.float32)
        np.save(root / f"{split}_a.npy", a)
        np.save(root / f"{split}_b.npy", b)
        if labels:
            np.save(root / f"{split}_labels.npy", rng.integers(0, 4, n))
    return root


def run(task: Path, root: Path, out: Path, *extra: str) -> int:
    return main(["run", str(task), "--data-root", str(root), "--out", str(out), "--no-progress", "--device", "cpu",
                 *extra])


@pytest.mark.parametrize("widths, expected", [((32, 32), 32), ((20, 300), 64), ((8, 10), 10), ((768, 768), 768),
                                              ((2000, 1500), 1024), ((76, 240), 76)])
def test_auto_width_follows_the_inputs(widths, expected):
    assert build.auto_width({"a": (widths[0],), "b": (widths[1],)}) == expected


@pytest.mark.parametrize("width_a, width_b", [(24, 24), (20, 90), (70, 70)])
def test_the_template_sizes_its_encoders_from_the_data(tmp_path, width_a, width_b):
    root = arrays(tmp_path / "arrays", width_a, width_b)
    spec = load_task(TEMPLATE, [f"dataset.root={root}"])
    data = runner.load_data(spec)
    method = runner.build_method(spec, "contrastive", data, torch.device("cpu"))
    width = build.auto_width(data.input_shapes())
    assert method.embed_dim == width
    assert build.resolved_settings(spec, "contrastive", data) == {"encoders.a.dim": width, "encoders.b.dim": width}
    x = data["val"].a[:5]
    if width_a == width_b:  # starts as the identity: the untrained model is the features' own cosine
        torch.testing.assert_close(method.encode("a", x), torch.nn.functional.normalize(x, dim=-1))
    else:
        assert not torch.allclose(method.encode("a", x)[:, :1], torch.nn.functional.normalize(x, dim=-1)[:, :1])


@pytest.mark.parametrize("n_pairs, batch", [(150, 32), (200, 128), (700, 128), (1400, 128), (7000, 128),
                                            (20000, 128), (100000, 256)])
def test_auto_K_and_queue_follow_the_number_of_pairs(n_pairs, batch):
    K = auto_K(n_pairs)
    queue = auto_queue(n_pairs, batch, K)
    assert K == min(1000, max(2, round(n_pairs / 7)))
    assert queue > K  # the uniform class marginal needs more rows than prototypes
    if n_pairs >= 2 * batch + K:
        assert queue + batch <= n_pairs and queue % batch == 0 and queue <= 10 * batch
    assert (auto_K(7000), auto_queue(7000, 128, 1000)) == (1000, 1280)  # the paper's synthetic settings


def test_the_template_resolves_swamp_settings_and_records_them(tmp_path):
    root = arrays(tmp_path / "arrays", 16, 16, sizes=(700, 60, 60))
    spec = load_task(TEMPLATE, [f"dataset.root={root}"])
    data = runner.load_data(spec)
    params = build.settled_params(spec, "swamp", data)
    assert (params.K, params.queue) == (100, 512)
    method = runner.build_method(spec, "swamp", data, torch.device("cpu"))
    assert method.prototypes.shape == (100, 16) and method.queue.size == 512
    assert build.resolved_settings(spec, "swamp", data) == {"encoders.a.dim": 16, "encoders.b.dim": 16,
                                                             "method.K": 100, "method.queue": 512}


def test_auto_is_refused_with_the_valid_words():
    with pytest.raises(ConfigError, match=r"dim must be a number or one of auto, got 'autoo' \(did you mean 'auto'"):
        P.parse(LinearParams, {"dim": "autoo"}, "encoders.a")
    assert P.parse(LinearParams, {"dim": "auto"}, "encoders.a").dim == "auto"


def test_K_with_fewer_than_two_pairs_per_prototype_warns(tmp_path, capsys):
    root = arrays(tmp_path / "arrays", 16, 16)
    task = write_task(tmp_path, {"base": str(TEMPLATE), "train": {"epochs": 1}}, "t.yaml")
    assert run(task, root, tmp_path / "out", "--methods", "swamp", "--set", "swamp.K=150",
               "--set", "swamp.queue=160") == 0
    err = capsys.readouterr().err
    assert "K = 150 prototypes leave 1.3 training pairs per prototype" in err and "K: auto (29 here" in err


def test_training_that_cannot_help_is_marked_below_the_floor(tmp_path, capsys):
    """Already-aligned features through 4-d MLP encoders: the trained rows cannot reach the features' own cosine."""
    root = arrays(tmp_path / "arrays", 24, 24)
    task = write_task(tmp_path, {"base": str(TEMPLATE), "train": {"epochs": 3, "lr": 0.001},
                                 "encoders": {"a": {"type": "mlp", "hidden": [16], "dim": 4},
                                              "b": {"type": "mlp", "hidden": [16], "dim": 4}}}, "t.yaml")
    out = tmp_path / "out"
    assert run(task, root, out, "--methods", "identity,contrastive") == 0
    result = json.loads((out / "own_features" / "contrastive" / "seed0.json").read_text())
    floor = result["floor"]
    assert floor["kind"] == "identity" and floor["below"] and floor["selected"] < floor["value"]
    identity = json.loads((out / "own_features" / "identity" / "seed0.json").read_text())
    assert floor["value"] == identity["val_at_best"]["a2b/R@1"] and "floor" not in identity
    assert "is below the no-training floor" in capsys.readouterr().out  # beside the progress bars, as collapse's
    rendered = formats.render(load_results(out / "own_features"), "md")["accuracy"]
    assert "contrastive [below floor 1/1]" in rendered and "identity [below" not in rendered
    assert "[below floor j/n]: in j of the n seeds" in rendered


def test_selection_keeps_the_untrained_model_when_training_only_hurts(tmp_path):
    """Identity-initialised linear encoders on aligned features: epoch 0 is the floor, and a huge learning rate
    only makes it worse, so epoch 0 is kept and the tables say so."""
    root = arrays(tmp_path / "arrays", 24, 24, noise=1.5)
    task = write_task(tmp_path, {"base": str(TEMPLATE), "train": {"epochs": 2, "lr": 5.0}}, "t.yaml")
    out = tmp_path / "out"
    assert run(task, root, out, "--methods", "contrastive") == 0
    result = json.loads((out / "own_features" / "contrastive" / "seed0.json").read_text())
    assert result["best_epoch"] == 0 and result["val_at_best"] == result["untrained"]
    assert 0 < result["untrained"]["a2b/R@1"] < 100
    assert all(r["val/a2b/R@1"] < result["untrained"]["a2b/R@1"] for r in result["history"])
    assert result["floor"]["kind"] == "identity" and not result["floor"]["below"]
    assert result["untrained"]["a2b/R@1"] == result["floor"]["value"]  # identity start = the floor
    assert "contrastive [epoch 0 1/1]" in formats.render([result], "md")["accuracy"]
    off = tmp_path / "off"  # the old rule: the best trained epoch, below the floor
    assert run(task, root, off, "--methods", "contrastive", "--set", "train.select_untrained=false") == 0
    old = json.loads(next((off / "own_features").glob("contrastive*/seed0.json")).read_text())
    assert old["best_epoch"] >= 1 and old["floor"]["below"]


def test_widths_that_differ_skip_identity_and_the_floor_is_the_untrained_model(tmp_path, capsys):
    root = arrays(tmp_path / "arrays", 12, 30)
    task = write_task(tmp_path, {"base": str(TEMPLATE), "train": {"epochs": 1}}, "t.yaml")
    out = tmp_path / "out"
    assert run(task, root, out, "--methods", "identity,contrastive") == 0
    assert "note: identity does not apply to this data and is skipped" in capsys.readouterr().err
    assert not (out / "own_features" / "identity").exists()
    result = json.loads((out / "own_features" / "contrastive" / "seed0.json").read_text())
    assert result["floor"]["kind"] == "untrained" and result["floor"]["value"] == result["untrained"]["a2b/R@1"]
    assert main(["run", str(task), "--data-root", str(root), "--out", str(tmp_path / "alone"), "--methods",
                 "identity"]) == 2  # alone, it is an error like any other
    assert "same width" in capsys.readouterr().err


def test_an_oversized_K_refuses_that_method_only(tmp_path, capsys):
    root = arrays(tmp_path / "arrays", 16, 16)
    task = write_task(tmp_path, {"base": str(TEMPLATE), "train": {"epochs": 1}}, "t.yaml")
    out = tmp_path / "out"
    status = run(task, root, out, "--methods", "identity,contrastive,swamp", "--set", "swamp.K=500",
                 "--set", "swamp.queue=600")
    err = capsys.readouterr().err
    assert status == 2
    assert "swamp@K=500,queue=600 is refused and does not run; the other methods do" in err
    assert error_line(err).startswith("error: 1 run folder(s) refused, the others ran: swamp@K=500")
    assert {p.name for p in (out / "own_features").iterdir() if p.is_dir()} == {"identity", "contrastive"}
    assert (out / "own_features" / "accuracy.md").exists()
    alone = tmp_path / "alone"  # nothing else to run: one error line, nothing written
    assert run(task, root, alone, "--methods", "swamp", "--set", "swamp.K=500", "--set", "swamp.queue=600") == 2
    assert not alone.exists()


def test_a_registered_method_the_task_does_not_declare_runs_with_its_defaults(tmp_path, capsys):
    root = arrays(tmp_path / "arrays", 16, 16)
    body = {**yaml.safe_load(TEMPLATE.read_text()), "methods": {"contrastive": {"method": "contrastive"}}}
    task = write_task(tmp_path, {**body, "train": {**body["train"], "epochs": 1}}, "t.yaml")
    out = tmp_path / "out"
    assert run(task, root, out, "--methods", "cca") == 0
    assert "note: cca is a registered method" in capsys.readouterr().err
    result = json.loads((out / "own_features" / "cca" / "seed0.json").read_text())
    assert result["config"]["method"]["method"] == "cca"
    assert run(task, root, out, "--methods", "identty") == 2
    err = capsys.readouterr().err
    assert "unknown method 'identty' (did you mean 'identity'?)" in err and "registered methods" in err


def test_a_component_given_another_type_names_its_folder_by_its_own_settings(tmp_path):
    """--set encoders.a.type=mlp drops the linear encoder's keys: they do not appear in the folder name as null."""
    from harness.config import plan

    root = arrays(tmp_path / "arrays", 16, 16)
    (run,) = plan.plan(TEMPLATE, [f"dataset.root={root}", "encoders.a.type=mlp", "encoders.a.hidden=[8]"], [],
                       ["contrastive"], [0])
    assert run.run_name == "contrastive@encoders.a.hidden=[8],encoders.a.type=mlp"
    assert run.varied == {"encoders.a.hidden": [8], "encoders.a.type": "mlp"}
