"""The ledger rendered: its table (claim, paper, ours, the verdicts as published and under equal tuning, hardware,
evidence), its summary line, and the entry point of ``harness claims``."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from harness.report import freshness as fr
from harness.report.claims.judging import check, judge
from harness.report.claims.ledger import DEFAULT_LEDGER, NOT_MEASURED, TUNED_VERDICTS, VERDICTS, Line
from harness.report.formats import format_table


def render(lines: list[Line], fmt: str = "simple", link_prefix: str = "") -> str:
    """The ledger as a table: claim, paper, ours (with its interval), verdict, hardware and evidence;
    ``link_prefix`` turns the evidence folders into Markdown links (relative to where the table is shown)."""
    rows = []
    for line in lines:
        evidence = link(line.evidence, fmt, link_prefix)
        ours = line.ours + (f" {line.interval}" if line.interval else "")
        state = (line.state + (" (accepted)" if line.accepted and line.state != fr.FRESH else "")) or "–"
        t = line.tuned
        if t is None:
            tuned = "–"
        elif t.verdict == NOT_MEASURED:  # its set is not made yet: named, not linked
            tuned = f"{t.verdict} ({t.evidence})"
        else:
            tuned = f"{t.shown()} ({t.budget}; {link(t.evidence, fmt, link_prefix)})"
        rows.append([line.claim, line.paper, ours, line.shown_verdict(), tuned, line.hardware or "–", evidence, state])
    header = ["claim", "paper", "ours (95% CI or range)", "verdict (as published)",
              "under equal tuning: the comparison the claim makes", "hardware", "evidence", "evidence is"]
    table = format_table(header, rows, [], fmt)
    return table


def link(folder: str, fmt: str, prefix: str) -> str:
    if not folder:
        return "–"
    return f"[{folder}]({prefix}{folder}/)" if fmt in ("md", "github") else folder


def summary(lines: list[Line]) -> str:
    """'12 pieces of evidence: 4 reproduced, ...' in the order of :data:`VERDICTS`; then the verdicts under equal
    tuning, and the verdicts resting on flagged runs."""
    counts = {v: sum(1 for line in lines if line.verdict == v) for v in VERDICTS}
    out = f"{len(lines)} pieces of evidence for {len({line.claim_id for line in lines})} claims: " + \
        ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    tuned = [line.tuned for line in lines if line.tuned is not None]
    if tuned:
        again = {v: sum(1 for t in tuned if t.verdict == v) for v in TUNED_VERDICTS}
        out += f"; under equal tuning, {len(tuned)} of them: " + ", ".join(f"{n} {v}" for v, n in again.items() if n)
    flagged = sum(1 for line in lines if line.flags)
    if flagged:
        out += f"; {flagged} rest on runs that collapsed or were warned"
    return out


@dataclass(frozen=True)
class Options:
    """What ``harness claims`` asks: the ledger (default :data:`DEFAULT_LEDGER`), the folder its results paths are
    relative to (default: the one above its ``claims/``), whether to check the recorded verdicts, the table format."""

    ledger: Path | None = None
    root: Path | None = None
    check: bool = False
    format: str = "simple"


def main(options: Options) -> int:
    """The ledger judged and printed, each verdict's reason; with ``check``, 1 when a verdict differs from the recorded
    one (or rests on stale or flagged runs without a reason).

    Example: ``main(Options(check=True))`` judges ``claims/swamp-aistats2023.yaml`` and returns 0 when it holds."""
    ledger = options.ledger or DEFAULT_LEDGER
    lines = judge(ledger, options.root)
    print(render(lines, options.format))
    print(f"\n{summary(lines)}. Why:")
    for line in lines:
        _explain(line)
    stale = [line for line in lines if line.freshness is not None and line.state != fr.FRESH]
    if stale:
        print("\nEvidence that is not fresh against this checkout (docs/claims.md, 'Evidence and code'):")
        for line in stale:
            print(f"  {line.claim_id} ({line.evidence}): {line.state}: {line.freshness.why() if line.freshness else ''}"
                  + (f" [accepted: {line.accepted}]" if line.accepted else ""))
    if not options.check:
        return 0
    failures = check(lines)
    for message in failures:
        print(f"warning: claims check: {message}", file=sys.stderr)
    print(f"\n{len(failures)} problem(s) with {ledger}" if failures else
          f"\nevery verdict matches {ledger} and rests on fresh (or accepted) evidence")
    return 1 if failures else 0


def _explain(line: Line) -> None:
    print(f"  {line.claim_id} ({line.evidence or 'not measured'}): {line.verdict}: {line.why}")
    if line.flags:
        print(f"    its runs: {line.flags}" + (f" [reason stated: {line.flagged_ok}]" if line.flagged_ok else ""))
    if line.tuned is not None:
        print(f"    under equal tuning ({line.tuned.evidence}): {line.tuned.verdict}: {line.tuned.why}")
        if line.tuned.beside:
            print(f"    beside it: {line.tuned.beside}")
        if line.tuned.flags:
            print(f"    its tuned runs: {line.tuned.flags}"
                  + (f" [reason stated: {line.tuned.flagged_ok}]" if line.tuned.flagged_ok else ""))
