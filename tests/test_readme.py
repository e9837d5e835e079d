"""The README's generated sections (harness readme): the committed README is what the committed results give, a
stale section is named by --check and rewritten by the command, and a README without the markers is refused."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import ConfigError
from harness.report import readme
from tests.conftest import ROOT


def test_the_committed_readme_shows_what_the_results_give():
    assert readme.stale(ROOT / "README.md", ROOT) == [], \
        "the README's generated sections are stale: python -m harness readme (then commit README.md)"


def _fake_sections(monkeypatch) -> dict[str, str]:
    made = {"claims ledger": "| a | b |\n|---|---|\n| 1 | 2 |\n\n1 claim.", "reference table": "the table\n\n- one set"}
    monkeypatch.setattr(readme, "SECTIONS", {name: (lambda root, text=text: text) for name, text in made.items()})
    return made


def test_a_stale_section_is_named_then_rewritten_in_place(tmp_path: Path, monkeypatch, capsys):
    made = _fake_sections(monkeypatch)
    path = tmp_path / "README.md"
    start_l, end_l = readme.markers("claims ledger")
    start_r, end_r = readme.markers("reference table")
    path.write_text(f"# T\n\nintro\n{start_l}\nold ledger\n{end_l}\n\nmiddle\n\n{start_r}\n{made['reference table']}"
                    f"\n{end_r}\n\ntail\n", encoding="utf-8")
    assert main(["readme", str(path), "--check"]) == 1
    assert "the claims ledger is stale" in capsys.readouterr().err
    assert readme.stale(path, tmp_path) == ["claims ledger"]
    assert main(["readme", str(path)]) == 0 and "rewrote claims ledger" in capsys.readouterr().out
    text = path.read_text(encoding="utf-8")
    assert text == (f"# T\n\nintro\n{start_l}\n{made['claims ledger']}\n{end_l}\n\nmiddle\n\n{start_r}\n"
                    f"{made['reference table']}\n{end_r}\n\ntail\n")  # only the marked text changed
    assert main(["readme", str(path), "--check"]) == 0
    assert main(["readme", str(path)]) == 0 and "every generated section was current" in capsys.readouterr().out


def test_a_readme_without_the_markers_is_refused_and_left_alone(tmp_path: Path, monkeypatch, capsys):
    _fake_sections(monkeypatch)
    path = tmp_path / "README.md"
    start, end = readme.markers("claims ledger")
    original = f"# T\n{start}\nold\n{end}\n"  # the reference table's markers are missing
    path.write_text(original, encoding="utf-8")
    with pytest.raises(ConfigError, match="<!-- reference table: start -->"):
        readme.refresh(path, tmp_path)
    assert main(["readme", str(path)]) == 2 and "error:" in capsys.readouterr().err
    assert path.read_text(encoding="utf-8") == original  # nothing half-written
    path.write_text(f"# T\n{end}\nold\n{start}\n", encoding="utf-8")  # in the wrong order
    with pytest.raises(ConfigError, match="after it"):
        readme.stale(path, tmp_path)
    assert main(["readme", str(tmp_path / "absent.md")]) == 2


def test_the_reference_section_reads_the_committed_sets():
    text = readme.reference_section(ROOT)
    assert "Sets measured so far:" in text and "SwAMP − " in text
    assert "results/reference/reference.md" in text


def test_the_reference_sections_bayesian_comparisons_are_one_paragraph_of_their_own():
    """The ranks and the Bayesian comparisons are two paragraphs, each comparison named once with its three
    probabilities and set count, the page's section linked for the rest."""
    text = readme.reference_section(ROOT)
    paragraphs = text.split("\n\n")
    ranks = [p for p in paragraphs if p.startswith("Mean ranks over")]
    bayes = [p for p in paragraphs if p.startswith("Bayesian hierarchical comparisons")]
    assert len(ranks) == 1 and len(bayes) == 1 and "P(better)" not in ranks[0]
    assert "\n" not in bayes[0] and "reference.md#across-sets" in bayes[0]
    assert "SwAMP alone against each set's strongest contrastive loss " in bayes[0]
    assert re.search(r"InfoNCE \+ SwAMP against InfoNCE (\d\.\d{3} / ){2}\d\.\d{3} "
                     r"\(\d+ sets, equivalent within ±0\.5\)", bayes[0])


def test_a_skipped_bayesian_comparison_says_why_in_the_readme():
    assert readme.bayes_brief({"skipped": "baycomp is not installed"}, "r/") == \
        "Bayesian comparison across sets: not computed (baycomp is not installed)."
