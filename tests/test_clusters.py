"""Cluster reports of trained SwAMP models: restoring a run, the numbers against naive recounts, the files."""
from __future__ import annotations

import json
import re
import shutil
from collections import Counter

import pytest
import torch

from harness.analysis import clusters as C
from harness.analysis.restore import restore_run
from harness.cli import main
from harness.config.params import parse
from harness.config.spec import MetricSpec
from harness.data.text import TokenCaptions
from harness.errors import ConfigError
from harness.run.evaluate import evaluate
from tests.conftest import TASKS, TINY, write_task
from tests.test_image_text_data import WORDS, write_precomp


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Result folder of the tiny synthetic task with a trained swamp and a contrastive run."""
    folder = tmp_path_factory.mktemp("runs")
    task = write_task(folder, TINY)
    assert main(["run", str(task), "--methods", "swamp,contrastive", "--device", "cpu",
                 "--out", str(folder / "r"), "--no-progress"]) == 0
    return folder / "r" / "tiny"


def report_of(folder):
    return json.loads((folder / "clusters.json").read_text())


def naive_purity(assignments, labels):
    groups: dict[int, list[int]] = {}
    for c, y in zip(assignments, labels):
        groups.setdefault(c, []).append(y)
    return sum(max(Counter(ys).values()) for ys in groups.values()) / len(assignments)


def test_report_of_a_result_file(runs, capsys):
    assert main(["clusters", str(runs / "swamp" / "seed0.json"), "--device", "cpu"]) == 0
    out = runs / "swamp" / "clusters-seed0"
    assert all((out / f"clusters.{ext}").stat().st_size > 0 for ext in ("md", "html", "json"))
    printed = capsys.readouterr().out
    assert str(out / "clusters.html") in printed and "prototypes used" in printed
    report = report_of(out)
    _, data, _ = restore_run(runs / "swamp" / "seed0.json", torch.device("cpu"))
    split = data["test"]
    assert report["K"] == 16 and report["items"] == {"a": 80, "b": 80}
    for m in ("a", "b"):
        stats = report["modalities"][m]
        assert len(stats["sizes"]) == 16 and sum(stats["sizes"]) == 80 == len(stats["assignments"])
        assert 0 <= stats["purity"] <= 1
        labels = getattr(split, f"labels_{m}").tolist()
        assert stats["purity"] == pytest.approx(naive_purity(stats["assignments"], labels))
        assert 0 <= stats["entropy"] <= 1 and stats["used"] == sum(n > 0 for n in stats["sizes"])
    a, b = (report["modalities"][m]["assignments"] for m in ("a", "b"))
    assert report["agreement"] == pytest.approx(sum(a[i] == b[i] for i in range(80)) / 80)  # one to one pairs


def test_html_is_self_contained(runs):
    assert main(["clusters", str(runs / "swamp" / "seed0.json"), "--device", "cpu"]) == 0
    page = (runs / "swamp" / "clusters-seed0" / "clusters.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page and "Largest clusters" in page
    assert not re.search(r"https?:|<script|<link|src=|@import|url\(", page)


def test_checkpoint_works_like_the_result_file(runs, tmp_path):
    assert main(["clusters", str(runs / "swamp" / "seed0.json"), "--out", str(tmp_path / "j")]) == 0
    assert main(["clusters", str(runs / "swamp" / "seed0.pt"), "--out", str(tmp_path / "p")]) == 0
    assert report_of(tmp_path / "j") == report_of(tmp_path / "p")
    assert (tmp_path / "j" / "clusters.md").read_text() == (tmp_path / "p" / "clusters.md").read_text()


def test_restored_model_reproduces_the_stored_test_metrics(runs):
    method, data, result = restore_run(runs / "swamp" / "seed0.pt", torch.device("cpu"))
    metrics = evaluate(method, data["test"], parse(MetricSpec, result["config"]["metrics"], "metrics"),
                       torch.device("cpu"), 1024)
    assert metrics == pytest.approx(result["metrics"])


def test_method_without_prototypes_is_refused(runs, capsys):
    assert main(["clusters", str(runs / "contrastive" / "seed0.json")]) == 2
    err = capsys.readouterr().err
    assert "'contrastive'" in err and "no prototypes" in err
    assert {"swamp", "swamp_par"} <= set(err.split("methods with prototypes: ")[1].strip().split(", "))


def test_missing_files_are_named(runs, tmp_path, capsys):
    assert main(["clusters", str(tmp_path / "seed0.json")]) == 2
    assert str(tmp_path / "seed0.json") in capsys.readouterr().err
    copy = tmp_path / "swamp"
    shutil.copytree(runs / "swamp", copy)
    (copy / "seed0.pt").unlink()
    assert main(["clusters", str(copy / "seed0.json")]) == 2
    assert str(copy / "seed0.pt") in capsys.readouterr().err
    (copy / "seed0.json").rename(copy / "seed1.json")
    shutil.copy(runs / "swamp" / "seed0.pt", copy / "seed0.pt")
    assert main(["clusters", str(copy / "seed0.pt")]) == 2  # a checkpoint without its result file
    assert str(copy / "seed0.json") in capsys.readouterr().err
    (copy / "seed1.pt").write_bytes(b"not a checkpoint")
    assert main(["clusters", str(copy / "seed1.pt")]) == 2
    assert "checkpoint" in capsys.readouterr().err


def test_bad_options_exit_2(runs, capsys):
    assert main(["clusters", str(runs / "swamp" / "seed0.json"), "--members", "-1"]) == 2
    assert "--members" in capsys.readouterr().err
    assert main(["clusters", str(runs / "swamp" / "seed0.json"), "--split", "dev"]) == 2
    assert "'dev'" in capsys.readouterr().err


def test_caption_clusters_list_words(tiny_image_text_task, tmp_path):
    assert main(["run", str(tiny_image_text_task), "--methods", "swamp_par", "--device", "cpu",
                 "--out", str(tmp_path / "r"), "--no-progress"]) == 0
    run = tmp_path / "r" / "tiny_image_text" / "swamp_par"
    assert main(["clusters", str(run / "seed0.json"), "--top-words", "3"]) == 0
    report = report_of(run / "clusters-seed0")
    assert report["items"] == {"a": 10, "b": 50} and sum(report["modalities"]["b"]["sizes"]) == 50
    assert "purity" not in report["modalities"]["a"]  # no hidden labels
    listed = [w for ws in report["top_words"]["b"].values() for w in ws]
    assert listed and all(len(ws) <= 3 for ws in report["top_words"]["b"].values())
    assert all(re.fullmatch(r"w\d+", w) for w, _ in listed)  # generated captions: ids shown as w<id>
    md, page = ((run / "clusters-seed0" / f"clusters.{e}").read_text() for e in ("md", "html"))
    assert all(w in md and w in page for w, _ in listed) and "top words (b)" in md


def test_real_captions_give_their_words_without_stop_words(tmp_path):
    data = tmp_path / "f30k_precomp"
    data.mkdir()
    write_precomp(data, sizes=(8, 5, 10), regions=3, features=6)
    task = write_task(tmp_path, {
        "base": str(TASKS / "flickr30k.yaml"), "name": "tiny_f30k", "version": "test",
        "dataset": {"root": str(data), "val_images": 5, "vocab_cache": str(tmp_path / "cache")},
        "encoders": {"a": {"dim": 16}, "b": {"word_dim": 8, "dim": 16}},
        "train": {"epochs": 1, "batch_size": 10, "eval_batch_size": 8},
        "methods": {"swamp_par": {"method": "swamp_par", "K": 4, "queue": 20, "tau": 0.1, "eta": 5.0, "p": 2, "H": 2}},
    })
    assert main(["run", str(task), "--device", "cpu", "--out", str(tmp_path / "r"), "--no-progress"]) == 0
    assert main(["clusters", str(tmp_path / "r" / "tiny_f30k" / "swamp_par" / "seed0.json")]) == 0
    report = report_of(tmp_path / "r" / "tiny_f30k" / "swamp_par" / "clusters-seed0")
    listed = {w for ws in report["top_words"]["b"].values() for w, _ in ws}
    assert listed and listed <= set(WORDS) - C.STOP_WORDS


# ---- pure helpers ----------------------------------------------------------------------------------------------

def test_entropy_is_one_when_balanced_and_zero_when_collapsed():
    assert C.normalized_entropy(torch.tensor([5, 5, 5, 5])) == pytest.approx(1.0)
    assert C.normalized_entropy(torch.tensor([0, 20, 0, 0])) == 0.0
    assert 0 < C.normalized_entropy(torch.tensor([1, 2, 3, 0])) < 1


def test_purity_of_a_hand_made_assignment():
    clusters = torch.tensor([0, 0, 0, 1, 1, 3])
    labels = torch.tensor([7, 7, 2, 5, 9, 2])
    mean, majority, share = C.purity(clusters, labels, k=4)
    assert mean == pytest.approx((2 + 1 + 1) / 6)
    assert majority == [7, 5, None, 2] and share == [pytest.approx(2 / 3), 0.5, None, 1.0]  # tie: smallest class


def test_pair_agreement_follows_the_pairing():
    clusters_a = torch.tensor([0, 1])
    clusters_b = torch.tensor([0, 0, 1, 0])  # two captions per image
    assert C.pair_agreement(clusters_a, clusters_b, torch.tensor([0, 0, 1, 1])) == 0.75


def test_top_words_count_captions_and_skip_specials_stop_words_and_punctuation():
    words = ["<pad>", "<start>", "<end>", "<unk>", "kite", "flying", "the", ".", "dog"]
    captions = TokenCaptions.from_ids([[1, 4, 4, 5, 6, 7, 2], [1, 4, 2], [1, 8, 5, 2]], len(words))
    found = C.top_words(captions, torch.tensor([3, 3, 0]), words, n=5)
    assert found == {3: [("kite", 2), ("flying", 1)], 0: [("flying", 1), ("dog", 1)]}  # ties in vocabulary order


def test_members_are_the_most_confident_first():
    clusters = torch.tensor([1, 0, 1, 1])
    confidence = torch.tensor([0.5, 0.9, 0.8, 0.1])
    assert C.members(clusters, confidence, 1, 2) == [2, 0] and C.members(clusters, confidence, 2, 3) == []


def test_sketch_clusters_on_a_class_only_split(tiny_sketch_task, tmp_path):
    assert main(["run", str(tiny_sketch_task), "--methods", "doodle2search_swamp", "--device", "cpu",
                 "--out", str(tmp_path / "r"), "--no-progress"]) == 0
    run = tmp_path / "r" / "tiny_sketch" / "doodle2search_swamp"
    assert main(["clusters", str(run / "seed0.json")]) == 0  # rebuilt through Doodle2SearchSwAMP.build
    report = report_of(run / "clusters-seed0")
    assert report["agreement"] is None and report["items"] == {"a": 12, "b": 15}  # no pairing to agree on
    assert "purity" in report["modalities"]["a"]
    assert "no pairing" in (run / "clusters-seed0" / "clusters.md").read_text()


COMMITTED_REPORTS = sorted((TASKS.parent / "results").glob("*/*/clusters-seed*/clusters.json"))


@pytest.mark.parametrize("folder", [p.parent for p in COMMITTED_REPORTS], ids=lambda p: p.parent.parent.name)
def test_committed_reports_render_identically_from_their_numbers(folder):
    """clusters.md and clusters.html are the templates' rendering of clusters.json: the committed files, byte for
    byte."""
    report = report_of(folder)
    assert C.to_markdown(report) == (folder / "clusters.md").read_text()
    assert C.to_html(report) == (folder / "clusters.html").read_text()


def test_the_report_escapes_what_its_cells_hold():
    report = report_of(COMMITTED_REPORTS[0].parent)
    report = dict(report, run="a|b <i>")
    assert "Clusters of a|b <i>" in C.to_markdown(report).splitlines()[0]
    assert "| run | a\\|b <i> |" in C.to_markdown(report)  # a pipe would split the cell
    page = C.to_html(report)
    assert "<td>a|b &lt;i&gt;</td>" in page and "<i>" not in page


def test_the_typed_entry_point_writes_the_report(runs, tmp_path, capsys):
    paths = C.report_clusters(C.ClusterOptions(runs / "swamp" / "seed0.json", out=tmp_path / "c", device="cpu",
                                               top_words=2, members=1))
    assert [p.name for p in paths] == ["clusters.md", "clusters.html", "clusters.json"]
    largest = report_of(tmp_path / "c")["largest"]
    assert largest and all(len(row["members"][m]) == min(1, row["size"][m]) for row in largest for m in "ab")
    assert "prototypes used" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="--members \\(-1\\) must be >= 0"):
        C.report_clusters(C.ClusterOptions(runs / "swamp" / "seed0.json", members=-1))
