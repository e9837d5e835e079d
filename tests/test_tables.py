"""Accuracy table against a reference run: markers, test columns, footnote (hand-made result dicts)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.errors import ConfigError
from harness.report import accuracy, files, formats, model, stats, timing

METRICS = {"directions": ["a2b"], "relevance": ["pair"], "ks": [1, 5], "folds": [1], "rsum": False}
TEST_COLUMNS = ["Δ vs contrastive", "95% CI", "p (seeds, paired t)", "p (queries, bootstrap)"]


def _ranks(hit_rate: float, seed: int, n: int = 300) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.where(rng.random(n) < hit_rate, 1, rng.integers(2, 4, n)).astype(np.int64)


def _result(folder: Path, run: str, seed: int, ranks: np.ndarray | None, **metrics: float) -> dict:
    """A result dict as load_results returns it; ranks, when given, saved as ``seed<k>.npz`` beside it."""
    path = folder / run / f"seed{seed}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    r = {"task": "tiny", "task_version": "test", "run_name": run, "method": run, "seed": seed, "_path": str(path),
         "config": {"metrics": METRICS}, "dataset": {},
         "metrics": {"a2b/R@1": 0.0, "a2b/R@5": 0.0, "a2b/MedR": 1.0, **metrics},
         "profile": {"timing": {"test_total": {"median_s": 0.5}}, "memory": {}},
         "environment": {"hardware": {"cpu": "cpu", "cores": 2, "torch_threads": 1, "device": "cpu", "gpu": {}},
                         "versions": {"torch": "2"}}}
    if ranks is not None:
        np.savez(path.with_suffix(".npz"), **{"a2b/pair": ranks})
        r["ranks"] = path.with_suffix(".npz").name
        r["metrics"].update({"a2b/R@1": stats.recall(ranks, 1), "a2b/R@5": stats.recall(ranks, 5)})
    return r


@pytest.fixture
def results(tmp_path: Path) -> list[dict]:
    """contrastive hits 50% of queries at rank 1, swamp 90%, three seeds each, ranks saved."""
    return ([_result(tmp_path, "contrastive", s, _ranks(0.5, s)) for s in range(3)]
            + [_result(tmp_path, "swamp", s, _ranks(0.9, 10 + s)) for s in range(3)])


def _rows(text: str) -> dict[str, list[str]]:
    """Method name -> cells of a github-format table's rows."""
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]
    return {row[1]: row for row in rows[2:]}


def test_reference_adds_markers_columns_and_footnote(results):
    header, _ = accuracy.accuracy_rows(results, reference="contrastive")
    assert header[-4:] == TEST_COLUMNS
    text = formats.render(results, "md", reference="contrastive")["accuracy"]
    rows = _rows(text)
    swamp, ref = rows["swamp"], rows["contrastive"]
    assert swamp[3].endswith("*") and not swamp[5].endswith("*")  # R@1 differs, MedR is never marked
    assert not any(c.endswith("*") for c in ref)
    assert swamp[-4].startswith("+") and swamp[-3].startswith("[")
    assert swamp[-2] != "–" and swamp[-1].endswith("(3/3)")
    assert ref[-4:] == ["–", ref[-3], "–", "–"] and ref[-3].startswith("[")
    assert "Cells marked * differ from contrastive at p < 0.05" in text.split("\n\n", 1)[1]


def test_footnote_in_every_format(results, tmp_path):
    assert "paired bootstrap" in formats.render(results, "simple", reference="contrastive")["accuracy"]
    tex = formats.render(results, "tex", reference="contrastive")["accuracy"]
    assert "\\end{tabular}\n\\par\\smallskip{\\footnotesize Cells marked * differ" in tex
    assert "p $<$ 0.05" in tex
    paths = files.write_tables(results, tmp_path, reference="contrastive")
    assert all("Δ vs contrastive" in p.read_text() for p in paths if p.stem == "accuracy")


def test_without_reference_no_significance(results):
    header, rows = accuracy.accuracy_rows(results)
    assert header == ["error type", "method", "seeds", "a2b R@1", "a2b R@5", "a2b MedR"]
    text = formats.render(results, "md")["accuracy"]
    assert "*" not in text and "Δ" not in text and "p (" not in text
    assert text.rstrip().endswith("|")  # no footnote under the table


def test_old_result_files_without_ranks(results):
    for r in results:
        del r["ranks"]
    swamp = _rows(formats.render(results, "md", reference="contrastive")["accuracy"])["swamp"]
    assert swamp[-1] == "–" and swamp[-2] != "–"


def test_single_seed_has_no_seed_level_p(tmp_path):
    results = [_result(tmp_path, "contrastive", 0, _ranks(0.5, 0)), _result(tmp_path, "swamp", 0, _ranks(0.9, 1))]
    swamp = _rows(formats.render(results, "md", reference="contrastive")["accuracy"])["swamp"]
    assert swamp[3].endswith("*") is False
    assert swamp[-3:-1] == ["–", "–"] and swamp[-1] == "<0.001 (1/1)"


def test_published_rows_get_empty_test_cells(results):
    results[0]["reference"] = {"label": "paper", "methods": {"swamp": {"a2b/R@1": 90.8, "a2b/R@5": 99.95}}}
    rows = _rows(formats.render(results, "md", reference="contrastive")["accuracy"])
    assert rows["swamp (paper)"][3:] == ["90.80", "99.95", "–", "–", "–", "–", "–"]


def test_unknown_reference_names_the_runs(results, tmp_path):
    with pytest.raises(ConfigError, match="'swmap'.*valid: contrastive, swamp"):
        formats.render(results, "md", reference="swmap")
    with pytest.raises(ConfigError, match="valid: contrastive, swamp"):
        files.write_tables(results, tmp_path, reference="nope")


def test_mismatched_rank_lengths_name_the_runs(results):
    np.savez(Path(results[3]["_path"]).with_suffix(".npz"), **{"a2b/pair": _ranks(0.9, 0, n=10)})
    with pytest.raises(ConfigError, match="swamp vs contrastive, seed 0: .*same test queries"):
        formats.render(results, "md", reference="contrastive")


def test_timing_caption_and_ratios_follow_the_precision(tmp_path):
    runs = []
    for run, method, precision, step in [("swamp_par", "swamp_par", "fp32", 0.2), ("scan", "scan", "fp32", 0.4),
                                         ("swamp_par@bf16", "swamp_par", "bf16", 0.1),
                                         ("scan@bf16", "scan", "bf16", 0.3)]:
        r = _result(tmp_path, run, 0, None)
        r.update(method=method, config={"metrics": METRICS, "train": {"precision": precision}},
                 reference={"timing": {"relative_to": "swamp_par", "methods": {}}})
        r["profile"]["timing"]["train_step"] = {"median_s": step, "p90_s": step}
        runs.append(r)
    header, rows = timing.timing_rows(runs)
    ratio = {row[0]: row[header.index("step / swamp_par")] for row in rows}
    assert ratio == {"swamp_par": "1.00×", "scan": "2.00×", "swamp_par@bf16": "1.00×", "scan@bf16": "3.00×"}
    assert "Ratios compare runs of the same train.precision." in formats.render(runs, "md")["timing"]
    assert model.machine_line(runs[:1]) == "cpu (2 cores, 1 torch threads); torch 2; device cpu; precision fp32"
    assert model.machine_line(runs) == "cpu (2 cores, 1 torch threads); torch 2; device cpu; precision fp32, bf16"


def _with_ap(results: list[dict], gain: float) -> list[dict]:
    """Add per-query average precisions (swamp's higher by ``gain``) and their mean as 'a2b/mAP'."""
    metrics = {**METRICS, "map": True}
    for r in results:
        ap = np.clip(np.random.default_rng(r["seed"]).random(300) + (gain if r["run_name"] == "swamp" else 0), 0, 1)
        path = Path(r["_path"]).with_suffix(".npz")
        np.savez(path, **{**dict(np.load(path)), "a2b/pair/AP": ap})
        r["config"] = {"metrics": metrics}
        r["metrics"]["a2b/mAP"] = float(ap.mean() * 100)
    return results


def test_significance_columns_can_test_map(results):
    results = _with_ap(results, 0.2)
    text = formats.render(results, "md", reference="contrastive", test_stat="mAP")["accuracy"]
    swamp = _rows(text)["swamp"]
    assert swamp[6].endswith("*")  # the mAP cell is marked too
    delta = float(swamp[-4])
    expected = np.mean([r["metrics"]["a2b/mAP"] for r in results[3:]]) - np.mean(
        [r["metrics"]["a2b/mAP"] for r in results[:3]])
    assert delta == pytest.approx(expected, abs=0.01)
    assert swamp[-1].endswith("(3/3)") and "a2b mAP column" in text and "and mAP cells" in text
    medr = _rows(formats.render(results, "md", reference="contrastive", test_stat="MedR")["accuracy"])["swamp"]
    assert medr[-1] == "–" and medr[-2] != "–"  # a median has a test over seeds, none over queries
    with pytest.raises(ConfigError, match=r"unknown statistic to test 'R@10'.*valid: .*MedR.*a2b/mAP"):
        formats.render(results, "md", reference="contrastive", test_stat="R@10")


def test_test_stat_names_a_direction_or_rsum(results):
    metrics = {"directions": ["i2t", "t2i"], "ks": [1, 5], "rsum": True}
    assert accuracy.tested_column(metrics, None) == 0
    assert accuracy.tested_column(metrics, "MedR") == 2
    assert accuracy.tested_column(metrics, "t2i/R@5") == 4
    assert accuracy.tested_column(metrics, "rsum") == 6  # after both directions' R@1, R@5, MedR
    assert accuracy.tested_label(metrics, "t2i/R@5") == "t2i R@5" and accuracy.tested_label(metrics, None) == "i2t R@1"
    with pytest.raises(ConfigError, match="rsum"):
        accuracy.tested_column({**metrics, "rsum": False}, "rsum")


def test_validation_view_shows_the_selected_epochs_validation_metrics(results, tmp_path):
    for r in results:
        r["val_at_best"] = {"a2b/R@1": 10.0 + r["seed"], "a2b/R@5": 50.0, "a2b/MedR": 3.0}
        r["reference"] = {"label": "paper", "methods": {"swamp": {"a2b/R@1": 99.0}}}
    rows = _rows(formats.render(accuracy.validation_view(results), "md")["accuracy"])
    assert rows["swamp"][3] == "11.00 ± 1.00" and not any("paper" in name for name in rows)
    (path_md, path_tex, record) = files.write_tables(results, tmp_path, split="val")
    assert path_md.name == "validation.md" and "--split val" in path_md.read_text()
    assert "11.00 ± 1.00" in path_md.read_text() and path_tex.suffix == ".tex"
    assert json.loads(record.read_text()) == {"val": {"reference": None, "test_stat": None}}
    assert files.recorded_options(tmp_path) == files.TableOptions(None, None, "val")
    files.write_tables(results, tmp_path, reference="swamp", test_stat="R@5")  # the test tables' record joins it
    assert files.recorded_options(tmp_path) == files.TableOptions("swamp", "R@5", "test")
    assert set(json.loads(record.read_text())) == {"test", "val"}


def test_table_options_come_from_the_record_not_from_the_tables_text(results, tmp_path):
    files.write_tables(results, tmp_path, reference="swamp")
    text = (tmp_path / "accuracy.md").read_text()
    (tmp_path / "accuracy.md").write_text(text.replace("--reference swamp", "--reference contrastive"))
    assert files.recorded_options(tmp_path).reference == "swamp"  # a hand-edited first line changes nothing
    (tmp_path / files.OPTIONS_FILE).unlink()
    assert files.recorded_options(tmp_path) is None


def test_timing_ratios_follow_the_reference_run(results):
    header, rows = timing.timing_rows(results, reference="swamp")
    assert "step / swamp" in header
    assert timing.timing_rows(results)[0][5] == "step / contrastive"  # the first run by default


def test_caption_names_the_data_origin(results, tmp_path):
    for r in results:
        r["dataset"] = {"origin": "QMUL-Shoe, yuqian1023/Deep_SBIR_tf @ 838c17c"}
    files.write_tables(results, tmp_path)
    for name in ("accuracy.md", "timing.tex"):
        assert "Data: QMUL-Shoe, yuqian1023/Deep_SBIR_tf @ 838c17c." in (tmp_path / name).read_text()


def test_a_reference_may_name_the_method_of_exactly_one_run():
    from harness.config.plan import resolve_reference
    from harness.errors import ConfigError

    runs = [("contrastive@train.epochs=5", "contrastive"), ("swamp@train.epochs=5", "swamp"),
            ("swamp@K=200,train.epochs=5", "swamp")]
    assert resolve_reference("contrastive", runs) == "contrastive@train.epochs=5"
    assert resolve_reference("swamp@K=200,train.epochs=5", runs) == "swamp@K=200,train.epochs=5"
    assert resolve_reference(None, runs) is None
    with pytest.raises(ConfigError, match=r"'swamp' is the method of 2 runs here .*name one of them"):
        resolve_reference("swamp", runs)
    with pytest.raises(ConfigError, match=r"unknown reference run 'contrastiv'.*did you mean"):
        resolve_reference("contrastiv", runs)
