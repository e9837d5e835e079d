"""The README's generated sections, each between a pair of marker comments (``<!-- NAME: start -->`` and
``<!-- NAME: end -->``), computed from the committed results alone:

- ``claims ledger``: the ledger judged (:mod:`harness.report.claims`), its table and its summary line;
- ``reference table``: the reference table of cross-modal losses in brief (:mod:`harness.report.leaderboard`): the
  sets measured, SwAMP against the strongest contrastive loss set by set, and the comparison across sets (the
  Bayesian one as the committed ``reference.json`` records it: it samples for minutes, and ``harness leaderboard``
  computes it, not this).

``python -m harness readme`` rewrites the sections in place; ``--check`` exits 1 naming each section that is not
what the results give (tests/test_docs.py runs the check)."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from harness.errors import ConfigError
from harness.report import claims
from harness.report import leaderboard as lb
from harness.store.io import write_text_atomic

REFERENCE = Path("results") / "reference"  # the committed reference table, relative to the checkout


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}: start -->", f"<!-- {name}: end -->"


def ledger_section(root: Path) -> str:
    """The claims ledger's table and summary line, as ``python -m harness claims --format md`` prints them."""
    lines = claims.judge(root / claims.DEFAULT_LEDGER, root)
    return f"{claims.render(lines, 'md')}\n\n{claims.summary(lines)}."


def reference_section(root: Path) -> str:
    """The reference table in brief: its sets, SwAMP against each set's strongest contrastive loss, and the ranks and
    the Bayesian comparison across sets."""
    folder = root / REFERENCE
    boards = [b for b in lb.load_boards(folder) if b.cells]
    prefix = f"{REFERENCE.as_posix()}/"
    if not boards:
        return f"No set of the reference table has tuned results yet ([{prefix}]({prefix}))."
    primary = [b for b in boards if b.primary]
    record = f"{REFERENCE.as_posix()}/reference.json"
    compared = lb.recorded(folder).get("bayes") or {"skipped": f"no {record} yet"}
    if set(compared.get("sets", [])) - {b.name for b in primary}:
        compared = {"skipped": f"{record} compares other sets: python -m harness leaderboard --out {prefix[:-1]}"}
    found = lb.ranks(primary)
    out = [f"Sets measured so far: {len(primary)} ({', '.join(b.label for b in primary)}); the table, the budgets "
           f"and the costs: [{prefix}reference.md]({prefix}reference.md). SwAMP against the strongest contrastive "
           "loss of each set (chosen on validation), on test:", ""]
    out += [lb.against_line(b) for b in boards]
    out += ["", " ".join(line for line in lb.across_lines(found, compared, prefix) if line)]
    return "\n".join(out)


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


def cmd(args: argparse.Namespace) -> int:
    """``harness readme [README] [--check]``."""
    path = Path(args.readme)
    if not path.is_file():
        raise ConfigError(f"{path} does not exist; give the README whose generated sections to write")
    root = path.resolve().parent
    if args.check:
        behind = stale(path, root)
        for name in behind:
            print(f"warning: {path}: the {name} is stale: python -m harness readme {args.readme}", file=sys.stderr)
        print(f"{len(behind)} stale section(s) in {path}" if behind else
              f"every generated section of {path} is current")
        return 1 if behind else 0
    changed = refresh(path, root)
    print(f"rewrote {', '.join(changed)} in {path}" if changed else f"{path}: every generated section was current")
    return 0
