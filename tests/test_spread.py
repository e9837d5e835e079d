"""One meaning of "±" in every table the project writes: the mean over seeds ± their sample standard deviation
(n − 1 in the denominator), and the tables and captions say so."""
from __future__ import annotations

import statistics

from harness.report import cells, compare, formats, stats
from harness.store.schema import load_results
from tests.conftest import ROOT


def test_a_cell_over_seeds_is_the_mean_and_the_sample_std():
    values = [1.0, 2.0, 4.0]
    cell = cells.mean_std(values)
    assert cell == f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}" == "2.33 ± 1.53"
    assert cell != f"2.33 ± {statistics.pstdev(values):.2f}"  # not the population's std (1.25)
    assert cells.mean_std([3.0]) == "3.00" and cells.mean_std([]) == cells.EMPTY
    summary = stats.summarize(values)
    assert compare._cell(summary) == f"2.33 ± {summary.std:.2f} (n=3)" and summary.std == statistics.stdev(values)


def test_the_tables_a_command_prints_say_what_the_spread_is_and_tables_without_one_do_not(capsys):
    from harness.report import folders

    results = load_results(ROOT / "results" / "synthetic")
    for fmt in ("md", "tex", "simple"):
        rendered = formats.render(results, fmt, spread_note=True)
        for name in ("accuracy", "timing"):
            assert "sample standard deviation over seeds" in rendered[name], (fmt, name)
    assert "sample standard deviation" not in formats.render(results, "md")["accuracy"]  # the committed files' text
    folders.print_tables(results)
    printed = capsys.readouterr().out
    assert f"Accuracy (test split, %; {cells.SPREAD})" in printed and printed.count(cells.SPREAD_NOTE) == 2
    one_seed = [r for r in results if r["seed"] == 0]
    table = cells.with_spread_note(formats.table_data(one_seed, None)["accuracy"])
    assert not any(" ± " in str(c) for row in table.rows for c in row) and cells.SPREAD_NOTE not in table.footnote
    twice = cells.with_spread_note(cells.with_spread_note(formats.table_data(results, None)["accuracy"]))
    assert twice.footnote.count(cells.SPREAD_NOTE) == 1 and twice.footnote[0] == cells.SPREAD_NOTE


def test_compare_s_table_says_what_its_spread_is():
    results = load_results(ROOT / "results" / "synthetic")
    changes, _ = compare.compare(results, results, metrics=["a2b/R@1"])
    text = compare.render(changes)
    assert f"OLD, NEW: {cells.SPREAD} (n: seeds)" in text and " ± " in text
    assert cells.SPREAD == "mean ± sample std over seeds"
