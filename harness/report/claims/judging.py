"""The ledger judged: every piece of evidence measured from the result files by its kind's rule
(:mod:`.kinds`), its runs' freshness and flags, its verdict under equal tuning (:mod:`.tuned`), and the check that
compares each verdict with the one the ledger records."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from harness.report import freshness as fr
from harness.report.claims.kinds import judge_one
from harness.report.claims.ledger import RULES, Line, Loader, flag_text, load, load_evidence
from harness.report.claims.tuned import judge_tuned


def judge(path: Path, root: Path | None = None, checkout: fr.Checkout | None = None,
          loader: Loader = load_evidence) -> list[Line]:
    """Every piece of evidence of the ledger at ``path``, measured from the result files under ``root``
    (default: the folder holding the ledger's ``claims/`` folder), judged, and its runs' freshness taken
    against ``checkout`` (default: the checkout of the running harness). ``loader`` gives the results of each
    evidence folder (default: :func:`load_evidence`; a reader that has loaded them already passes its own), once
    per folder."""
    ledger = load(path)
    root = path.resolve().parent.parent if root is None else root
    checkout = checkout or fr.Checkout()
    rules = {**RULES, **(ledger.get("rules") or {})}
    cache: dict[Path, list[dict[str, Any]]] = {}

    def results_of(folder: Path) -> list[dict[str, Any]]:
        if folder not in cache:
            cache[folder] = loader(root / folder)
        return cache[folder]

    lines = []
    for claim in ledger["claims"]:
        for item in claim["evidence"]:
            line = judge_one(claim, item, rules, results_of)
            if line.evidence:
                used = evidence_runs(results_of(Path(line.evidence)), item)
                line = dataclasses.replace(line, freshness=fr.combine(fr.judge(r, checkout) for r in used),
                                           accepted=str(item.get("stale_ok") or "").strip(), flags=flags(item, used),
                                           flagged_ok=str(item.get("flagged_ok") or "").strip())
            if item.get("tuned"):
                line = dataclasses.replace(line, tuned=judge_tuned(item, root, rules, checkout))
            lines.append(line)
    return lines


def run_names(item: dict[str, Any]) -> set[str]:
    """The runs a piece of evidence reads."""
    if "value" in item:
        return {str(item["value"].get("run"))}
    spec = item.get("ratio") or item.get("difference") or {}
    return {str(spec.get("of")), str(spec.get("to"))}


def evidence_runs(results: list[dict[str, Any]], item: dict[str, Any]) -> list[dict[str, Any]]:
    """The result dicts (of the evidence's folder) that a piece of evidence rests on: every seed of its runs."""
    names = run_names(item)
    return [r for r in results if r["run_name"] in names]


def flags(item: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    """The evidence's runs that recorded a collapse (any seed) or settings warned as not fitting their data:
    'contrastive collapsed 2/5, collapse warned 5/5; swamp settings warned 5/5' ('' when none)."""
    return "; ".join(filter(None, (flag_text(name, [r for r in runs if r["run_name"] == name])
                                   for name in sorted(run_names(item)))))


def check(lines: list[Line]) -> list[str]:
    """One message per piece of evidence whose verdict (or verdict under equal tuning) differs from the one the
    ledger records; one per piece whose runs are stale, dirty or unverifiable unless the ledger accepts it
    (``stale_ok:``); and one per verdict that says the claim holds on runs that collapsed or were warned unless the
    ledger says why (``flagged_ok:``)."""
    messages = [f"{line.claim_id} ({line.evidence or 'not measured'}): the ledger records {line.recorded!r}, the "
                f"results now give {line.verdict!r} ({line.why})" for line in lines if line.verdict != line.recorded]
    for line in lines:
        if line.freshness is not None and line.state != fr.FRESH and not line.accepted:
            messages.append(f"{line.claim_id} ({line.evidence}): its evidence is {line.state}: "
                            f"{line.freshness.why(limit=20)}; re-make it (python -m harness reproduce "
                            f"{line.claim_id} --write), or say under stale_ok: in the ledger why it may stand")
        if line.refused_flags:
            messages.append(f"{line.claim_id} ({line.evidence}): its verdict {line.verdict!r} rests on flagged runs "
                            f"({line.flags}); say under flagged_ok: in the ledger why it may, or judge it on other "
                            "runs")
        t = line.tuned
        if t is not None and t.verdict != t.recorded:
            messages.append(f"{line.claim_id} ({t.evidence}, under equal tuning): the ledger records {t.recorded!r}, "
                            f"the results now give {t.verdict!r} ({t.why})")
        if t is not None and t.refused_flags:
            messages.append(f"{line.claim_id} ({t.evidence}, under equal tuning): its verdict {t.verdict!r} rests "
                            f"on flagged tuned runs ({t.flags}); say under tuned: flagged_ok: in the ledger why it may")
        if t is not None and t.freshness is not None and t.state != fr.FRESH:
            messages.append(f"{line.claim_id} ({t.evidence}, under equal tuning): its tuned runs are {t.state}: "
                            f"{t.freshness.why(limit=20)}; make the set again (python -m harness leaderboard)")
    return messages


