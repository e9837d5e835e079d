"""The README's generated sections, each between a pair of marker comments (``<!-- NAME: start -->`` and
``<!-- NAME: end -->``), computed from the committed results alone:

- ``claims ledger``: the ledger judged (:mod:`harness.report.claims`), its table and its summary line;
- ``reference table``: the reference table of cross-modal losses in brief (:mod:`harness.report.reference_table`):
  the sets measured, the comparisons each claim makes set by set, and the comparisons across sets (the Bayesian ones
  as the committed ``reference.json`` records them: they sample for minutes, and ``harness leaderboard`` computes
  them, not this).

``python -m harness readme`` rewrites the sections in place; ``--check`` exits 1 naming each section that is not
what the results give (tests/test_docs.py runs the check)."""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.report import claims
from harness.report import reference_table as rt
from harness.report.reference_table import page as rt_page
from harness.report.reference_table import record as rt_record
from harness.store.io import write_text_atomic

REFERENCE = Path("results") / "reference"  # the committed reference table, relative to the checkout


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}: start -->", f"<!-- {name}: end -->"


def ledger_section(root: Path) -> str:
    """The claims ledger's table and summary line, as ``python -m harness claims --format md`` prints them."""
    lines = claims.judge(root / claims.DEFAULT_LEDGER, root)
    return f"{claims.render(lines, 'md')}\n\n{claims.summary(lines)}."


def reference_section(root: Path) -> str:
    """The reference table in brief: its sets, each set's answer (SwAMP alone against the strongest contrastive loss,
    or X + SwAMP against X where SwAMP's row is an add-on), and the ranks and the Bayesian comparisons across sets."""
    folder = root / REFERENCE
    boards = [b for b in rt.load_boards(folder) if b.cells]
    prefix = f"{REFERENCE.as_posix()}/"
    if not boards:
        return f"No set of the reference table has tuned results yet ([{prefix}]({prefix}))."
    primary = [b for b in boards if b.column]
    compared = rt_record.kept_bayes(folder, primary)
    found = rt.ranks(primary)
    out = [f"Sets measured so far: {len(primary)} ({', '.join(b.label for b in primary)}); the table, every "
           f"comparison, the budgets and the costs: [{prefix}reference.md]({prefix}reference.md). Each set's answer on "
           "test (SwAMP alone against the strongest contrastive loss chosen on validation; where the set's SwAMP row "
           "adds SwAMP's term to a contrastive loss X, X + SwAMP against X):", ""]
    out += [rt.against_line(b) for b in boards]
    out += ["", rt_page.rank_line(found, prefix), "", bayes_brief(compared, prefix)]
    return "\n".join(out)


def bayes_brief(compared: dict[str, Any], prefix: str) -> str:
    """The Bayesian comparisons across sets in one paragraph: each comparison's three probabilities in pooled seed
    SDs and its sets' count; the raw-point version and the model's description stay on the page."""
    if "skipped" in compared:
        return f"Bayesian comparison across sets: not computed ({compared['skipped']})."
    parts = []
    for which, found in compared.items():
        scaled = found.get("scaled", {})
        name = rt_page.family_name(which)
        if "skipped" in scaled:
            parts.append(f"{name}: not computed ({scaled['skipped']})")
            continue
        parts.append(f"{name} {scaled['p_better']:.3f} / {scaled['p_equivalent']:.3f} / {scaled['p_worse']:.3f} "
                     f"({len(scaled['sets'])} sets, equivalent within ±{scaled['rope']:g})")
    return ("Bayesian hierarchical comparisons across sets (baycomp; the seeds as replicates on one test split), "
            "P(better) / P(equivalent) / P(worse) in units of each set's pooled seed-to-seed standard deviation: "
            f"{'; '.join(parts)}. The raw-point version and the model: "
            f"[{prefix}reference.md#across-sets]({prefix}reference.md#across-sets).")


SECTIONS: dict[str, Callable[[Path], str]] = {"claims ledger": ledger_section, "reference table": reference_section}


def _split(text: str, name: str, path: Path) -> tuple[str, str, str]:
    start, end = markers(name)
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise ConfigError(f"{path} needs one '{start}' line and, after it, one '{end}' line around its generated "
                          f"{name}; add them where the section belongs")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return head + start, rest.split(end, 1)[0], end + tail


def stale(path: Path, root: Path) -> list[str]:
    """The sections of ``path`` that differ from what the results under ``root`` give."""
    text = path.read_text(encoding="utf-8")
    return [name for name, make in SECTIONS.items() if _split(text, name, path)[1].strip() != make(root).strip()]


def refresh(path: Path, root: Path) -> list[str]:
    """Rewrite every generated section of ``path`` (atomically, all or none); the names of those that changed."""
    text = path.read_text(encoding="utf-8")
    changed = []
    for name, make in SECTIONS.items():
        head, shown, tail = _split(text, name, path)
        made = make(root)
        if shown.strip() != made.strip():
            changed.append(name)
        text = f"{head}\n{made}\n{tail}"
    write_text_atomic(path, text)
    return changed


@dataclass(frozen=True)
class Options:
    """What ``harness readme`` asks: the README holding the marked sections, and whether only to check them."""

    readme: Path = Path("README.md")
    check: bool = False


def main(options: Options) -> int:
    """Rewrite the README's generated sections, or with ``check`` write nothing and return 1 when one is stale.

    Example: ``main(Options(Path("README.md"), check=True))`` returns 0 when every section is current."""
    path = options.readme
    if not path.is_file():
        raise ConfigError(f"{path} does not exist; give the README whose generated sections to write")
    root = path.resolve().parent
    if options.check:
        behind = stale(path, root)
        for name in behind:
            print(f"warning: {path}: the {name} is stale: python -m harness readme {path}", file=sys.stderr)
        print(f"{len(behind)} stale section(s) in {path}" if behind else
              f"every generated section of {path} is current")
        return 1 if behind else 0
    changed = refresh(path, root)
    print(f"rewrote {', '.join(changed)} in {path}" if changed else f"{path}: every generated section was current")
    return 0
