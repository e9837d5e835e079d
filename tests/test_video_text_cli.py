"""The text–video tasks end to end on the command line: every task file on generated data in its own
layout (tiny widths, one epoch), starting from a HowTo100M state dict, and bad data stopping the run."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from harness.cli import main
from tests import videotext_fixtures as fx
from tests.conftest import TASKS
from tests.test_video_text_models import _howto100m_state

pytestmark = pytest.mark.slow

TINY = ["--epochs", "1", "--set", "encoders.a.dim=8", "--set", "encoders.b.dim=8", "--set", "encoders.b.word_dim=8",
        "--set", "swamp.K=4", "--set", "swamp.queue=16", "--device", "cpu", "--no-progress"]
LAYOUTS = {  # task -> (fixture writer, the task's validation-size setting)
    "msrvtt": (fx.msrvtt, "dataset.val_videos=3"),
    "youcook2": (fx.youcook2, "dataset.val_videos=2"),
    "lsmdc": (fx.lsmdc, "dataset.val_clips=3"),
}


def run(task: str, root: Path, out: Path, *extra: str) -> int:
    return main(["run", str(TASKS / f"{task}.yaml"), "--data-root", str(root), "--out", str(out), *TINY, *extra])


@pytest.mark.parametrize("task", sorted(LAYOUTS))
def test_task_runs_on_its_layout_with_word2vec(task, tmp_path, capsys):
    write, val = LAYOUTS[task]
    write(tmp_path / "data")
    fx.write_word2vec(tmp_path / "data" / "GoogleNews-vectors-negative300.bin", fx.word_vectors(dim=8))
    assert run(task, tmp_path / "data", tmp_path / "out", "--set", val, "--methods", "contrastive,swamp") == 0
    printed = capsys.readouterr().out
    assert "t2v R@1" in printed and "swamp (No PT) (SwAMP paper" in printed
    result = json.loads(next((tmp_path / "out" / task).glob("swamp@*/seed0.json")).read_text())
    assert {"t2v/R@1", "t2v/MedR", "v2t/R@10", "t2v/MeanR"} <= set(result["metrics"])
    assert result["dataset"]["word_vectors"].endswith("GoogleNews-vectors-negative300.bin")
    assert "contrastive" in result["history"][0] and "swamp" in result["history"][0]
    assert (tmp_path / "out" / task / "timing.md").exists()


def test_pt_starts_from_a_howto100m_state_dict(tmp_path):
    fx.msrvtt(tmp_path / "data")
    fx.write_word2vec(tmp_path / "data" / "GoogleNews-vectors-negative300.bin", fx.word_vectors(dim=8))
    torch.save(_howto100m_state(dim=8, video_dim=sum(fx.DIMS), word_dim=8), tmp_path / "howto100m_pt_model.pth")
    assert run("msrvtt", tmp_path / "data", tmp_path / "out", "--set", "dataset.val_videos=3", "--methods",
               "contrastive", "--init", str(tmp_path / "howto100m_pt_model.pth")) == 0
    result = json.loads(next((tmp_path / "out" / "msrvtt").glob("contrastive@*/seed0.json")).read_text())
    assert result["init"].endswith("howto100m_pt_model.pth") and result["varied"]["init"] == "howto100m_pt_model"


def test_msrvtt_vgg128_task_on_the_per_video_layout(tmp_path, capsys):
    fx.video_npy(tmp_path / "data", n_videos=20, frames=50, dim=128)
    assert run("msrvtt_vgg128", tmp_path / "data", tmp_path / "out", "--set", "dataset.split_sizes=[12,4,4]",
               "--set", f"dataset.vocab_cache={tmp_path / 'cache'}", "--methods", "contrastive,swamp") == 0
    result = json.loads(next((tmp_path / "out" / "msrvtt_vgg128").glob("contrastive@*/seed0.json")).read_text())
    assert result["dataset"]["text"] == "learned embeddings over the training vocabulary"
    assert result["dataset"]["videos"] == [12, 4, 4] and "rsum" in result["metrics"]
    written = sorted((tmp_path / "out" / "msrvtt_vgg128").glob("*.md"))
    assert main(["table", str(tmp_path / "out" / "msrvtt_vgg128"), "--split", "val", "--write"]) == 0
    printed = capsys.readouterr().out.split("Accuracy (val)")[1].split("Timing")[0]
    assert f"{result['val_at_best']['rsum']:.2f}" in printed and "SwAMP paper" not in printed
    folder = tmp_path / "out" / "msrvtt_vgg128"
    assert sorted(folder.glob("*.md")) == sorted([*written, folder / "validation.md"])  # test tables untouched


@pytest.mark.parametrize("task", ["msrvtt_shapes", "youcook2_shapes", "lsmdc_shapes"])
def test_shapes_tasks_run_tiny(task, tmp_path):
    assert main(["run", str(TASKS / f"{task}.yaml"), "--out", str(tmp_path / "out"), *TINY, "--methods",
                 "contrastive,swamp", "--set", "dataset.videos=[32,8,8]", "--set", "dataset.feature_dim=16",
                 "--set", "dataset.word_dim=8", "--set", "dataset.vocab_size=50"]) == 0
    result = json.loads(next((tmp_path / "out" / task).glob("swamp@*/seed0.json")).read_text())
    assert result["dataset"]["timing_only"] and {"train_step", "test_total"} <= set(result["profile"]["timing"])


@pytest.mark.parametrize("task", sorted(LAYOUTS))
def test_bad_data_exits_2_and_writes_nothing(task, tmp_path, capsys):
    write, val = LAYOUTS[task]
    write(tmp_path / "data")
    (tmp_path / "data" / "GoogleNews-vectors-negative300.bin").write_text("not word2vec\n")
    rc = run(task, tmp_path / "data", tmp_path / "out", "--set", val, "--set",
             f"dataset.vocab_cache={tmp_path / 'cache'}")
    err = capsys.readouterr().err
    assert rc == 2 and "is not a word2vec file" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()
    rc = run(task, tmp_path / "nowhere", tmp_path / "out")
    err = capsys.readouterr().err
    assert rc == 2 and "missing" in err and "antoine77340/howto100m" in err and not (tmp_path / "out").exists()
