"""A ledger of a paper's claims, each judged from committed result files by a stated rule: the ledger file and its
types (:mod:`.ledger`), the rule of each kind of evidence (:mod:`.kinds`), the verdict under equal tuning
(:mod:`.tuned`), judging and checking (:mod:`.judging`) and the table (:mod:`.rendering`). What a ledger holds and the
rules: :mod:`harness.report.claims.ledger` and docs/claims.md."""
from __future__ import annotations

from harness.report.claims.judging import check, evidence_runs, flags, judge, run_names
from harness.report.claims.kinds import difference_verdict
from harness.report.claims.ledger import (
    DEFAULT_LEDGER,
    DIRECTION,
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    RULES,
    TUNED_VERDICTS,
    UNINFORMATIVE,
    VERDICTS,
    Line,
    Loader,
    Tuned,
    flag_text,
    load,
    load_evidence,
    refuses,
)
from harness.report.claims.rendering import Options, main, render, summary

__all__ = [
    "DEFAULT_LEDGER", "DIRECTION", "NOT_MEASURED", "NOT_REPRODUCED", "REPRODUCED", "RULES", "TUNED_VERDICTS",
    "UNINFORMATIVE", "VERDICTS", "Line", "Loader", "Options", "Tuned", "check", "difference_verdict",
    "evidence_runs", "flag_text", "flags", "judge", "load", "load_evidence", "main", "refuses", "render", "run_names",
    "summary",
]
