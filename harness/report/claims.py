"""A ledger of a paper's claims, each judged from committed result files by a stated rule.

A ledger is a YAML file (``claims/<paper>.yaml``): the paper's title, the rules' settings, and a list of
claims, each a finding of the paper in one line with its published number and one or more pieces of
evidence. A piece of evidence names a results folder and one statistic measured there:

* ``ratio: {of: RUN, to: RUN, phase: test|step, protocol: 5folds}``: the ratio of the two runs' mean time
  (whole test retrieval per fold, or median training step), as the timing table computes it;
* ``difference: {of: RUN, to: RUN, metric: a2b/R@1, expect: higher|lower}``: the mean over common seeds of
  RUN − RUN on a test metric (the difference of the two means where the test is Welch's), tested by the test the
  significance policy chooses for the runs' seeds (:func:`harness.report.stats.choose_test`: a paired t-test over
  two or more common seeds, Welch's t-test when they share fewer but each has two or more, a paired bootstrap over
  test queries when they share a single seed);
* ``value: {run: RUN, metric: a2b/R@1}``: the mean over seeds of RUN's test metric against the paper's own number
  (where the protocol is the paper's): reproduced when the paper's number lies inside the 95% interval over
  seeds, or within the ledger's ``value_tolerance`` points of the mean; not reproduced otherwise;
* ``not_measured: WHY``: the claim cannot be measured here (no data, no GPU), and why.

A piece of evidence whose runs are not fresh against the checkout (:mod:`harness.report.freshness`) is marked, and
``--check`` refuses it unless the evidence says why it may stand (``stale_ok: WHY``). Likewise a piece whose runs
recorded a collapse (any seed) or settings warned as not fitting the data is marked with them, and ``--check`` refuses
a *reproduced* or *direction only* verdict resting on it unless the evidence says why (``flagged_ok: WHY``).

A difference may also be judged under an equal tuning budget (``tuned: {results: SET, verdict: ...}``): SwAMP against
the strongest contrastive loss of a reference-table set (:mod:`harness.report.leaderboard`), each tuned with the
same trials on validation for the difference's metric, the strongest chosen on validation, both trained with the
same seeds; the same rule gives the second verdict.

Each computed verdict is one of :data:`VERDICTS`; the file records the verdict expected of each piece of
evidence, and :func:`check` lists those that differ, so that a change of science fails a build the way
the benchmark gate's change of speed does.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from tabulate import tabulate

from harness.errors import ConfigError
from harness.report import accuracy, model, stats
from harness.report import freshness as fr
from harness.report import leaderboard as board
from harness.store.schema import load_results

REPRODUCED, DIRECTION, NOT_REPRODUCED, NOT_MEASURED = "reproduced", "direction only", "not reproduced", \
    "not measured here"
VERDICTS = (REPRODUCED, DIRECTION, NOT_REPRODUCED, NOT_MEASURED)
DEFAULT_LEDGER = Path("claims") / "swamp-aistats2023.yaml"
RULES = {"alpha": stats.ALPHA, "ratio_tolerance": 2.0, "value_tolerance": 1.0}  # a ledger's rules: may set their own
_EVIDENCE_KINDS = ("ratio", "difference", "value", "not_measured")


def refuses(verdict: str, flags: str, flagged_ok: str) -> bool:
    """Whether a verdict that says the claim holds (reproduced, direction only) rests on flagged runs without a
    stated reason: ``claims --check`` refuses it."""
    return bool(flags) and not flagged_ok and verdict in (REPRODUCED, DIRECTION)


@dataclass(frozen=True)
class Tuned:
    """A difference judged again under an equal tuning budget: SwAMP against the set's strongest contrastive loss."""

    verdict: str
    recorded: str | None
    ours: str
    interval: str
    rival: str  # the strongest contrastive loss (its row label), chosen on validation
    budget: str  # trials per method and the trials' minutes
    why: str
    evidence: str  # the set's folder
    freshness: fr.Freshness | None = None
    value: float | None = None  # the difference ``ours`` writes
    flags: str = ""  # tuned runs of SwAMP or the rival that collapsed or were warned: 'SwAMP collapse warned 5/5'
    flagged_ok: str = ""  # why the ledger lets this verdict rest on them (its tuned: flagged_ok:)

    @property
    def state(self) -> str:
        return self.freshness.state if self.freshness is not None else ""

    def shown(self) -> str:
        """'not reproduced: −0.97 vs InfoNCE [−1.80, −0.14]', marked when its runs are not fresh and when they
        collapsed or were warned ('... [SwAMP collapse warned 5/5]')."""
        mark = f" ({self.state})" if self.state and self.state != fr.FRESH else ""
        flagged = f" [{self.flags}{'; reason stated' if self.flagged_ok else ''}]" if self.flags else ""
        interval = f" {self.interval}" if self.interval else ""
        return f"{self.verdict}{mark}: {self.ours} vs {self.rival}{interval}{flagged}" if self.ours != "–" \
            else self.verdict

    @property
    def refused_flags(self) -> bool:
        """The rule of :func:`refuses`, applied to the tuned runs."""
        return refuses(self.verdict, self.flags, self.flagged_ok)


@dataclass(frozen=True)
class Line:
    """One piece of evidence for one claim, judged."""

    claim_id: str
    claim: str
    paper: str
    ours: str
    interval: str
    verdict: str
    recorded: str | None
    why: str
    hardware: str
    evidence: str  # the results folder ('' when not measured)
    freshness: fr.Freshness | None = None  # the evidence's runs against the checkout (None: not measured)
    accepted: str = ""  # why the ledger accepts this evidence though it is not fresh (its `stale_ok:`)
    flags: str = ""  # the evidence's flagged runs: 'contrastive collapsed 2/5, collapse warned 5/5'
    flagged_ok: str = ""  # why the ledger lets a verdict rest on flagged runs (its `flagged_ok:`)
    tuned: Tuned | None = None  # the same difference under an equal tuning budget (its `tuned:`)
    value: float | None = None  # the number ``ours`` writes (a ratio, a difference, a mean)
    paper_value: float | None = None  # the number ``paper`` writes, where the ledger gives one

    @property
    def state(self) -> str:
        """fresh, stale, dirty or unverifiable; '' when nothing was measured."""
        return self.freshness.state if self.freshness is not None else ""

    def shown_verdict(self) -> str:
        """The verdict, marked when its evidence is not fresh (``reproduced (stale)``) and when its runs collapsed or
        were warned (``reproduced [contrastive collapsed 2/5, collapse warned 5/5; reason stated]``)."""
        out = self.verdict
        if self.freshness is not None and self.state != fr.FRESH:
            out += f" ({self.state}{', accepted' if self.accepted else ''})"
        if self.flags:
            out += f" [{self.flags}{'; reason stated' if self.flagged_ok else ''}]"
        return out

    @property
    def refused_flags(self) -> bool:
        """The rule of :func:`refuses`, applied to the evidence's runs."""
        return refuses(self.verdict, self.flags, self.flagged_ok)


def load(path: Path) -> dict[str, Any]:
    """The ledger at ``path``, checked: every claim has an id, a one-line claim, and evidence of a known kind
    with a recorded verdict among :data:`VERDICTS`."""
    if not path.is_file():
        raise ConfigError(f"no claims ledger at {path}; give its path (e.g. {DEFAULT_LEDGER})")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list) or not data["claims"]:
        raise ConfigError(f"{path} must hold a mapping with a non-empty list under claims:")
    unknown_rules = set(data.get("rules") or {}) - set(RULES)
    if unknown_rules:
        raise ConfigError(f"{path}: unknown rule setting(s) {sorted(unknown_rules)}; valid: {sorted(RULES)}")
    seen: set[str] = set()
    for i, claim in enumerate(data["claims"]):
        where = f"{path}: claims[{i}]"
        if not isinstance(claim, dict) or not claim.get("id") or not claim.get("claim"):
            raise ConfigError(f"{where} needs an id: and a one-line claim:")
        if claim["id"] in seen:
            raise ConfigError(f"{where}: id {claim['id']!r} is used twice; give each claim its own id")
        seen.add(claim["id"])
        evidence = claim.get("evidence")
        if not isinstance(evidence, list) or not evidence:
            raise ConfigError(f"{where} ({claim['id']}) needs a list under evidence:")
        for j, item in enumerate(evidence):
            kinds = [k for k in _EVIDENCE_KINDS if k in (item or {})]
            if len(kinds) != 1:
                raise ConfigError(f"{where} ({claim['id']}) evidence[{j}] needs exactly one of "
                                  f"{', '.join(_EVIDENCE_KINDS)}")
            if item.get("verdict") not in VERDICTS:
                raise ConfigError(f"{where} ({claim['id']}) evidence[{j}] records verdict {item.get('verdict')!r}; "
                                  f"valid: {', '.join(VERDICTS)}")
            if kinds[0] != "not_measured" and not item.get("results"):
                raise ConfigError(f"{where} ({claim['id']}) evidence[{j}] needs results: (a results folder)")
            if "stale_ok" in item and not (isinstance(item["stale_ok"], str) and item["stale_ok"].strip()):
                raise ConfigError(f"{where} ({claim['id']}) evidence[{j}]: stale_ok: must say why this evidence "
                                  "may stand though it is not fresh (one sentence)")
            if "flagged_ok" in item and not (isinstance(item["flagged_ok"], str) and item["flagged_ok"].strip()):
                raise ConfigError(f"{where} ({claim['id']}) evidence[{j}]: flagged_ok: must say why the verdict may "
                                  "rest on runs that collapsed or whose settings were warned (one sentence)")
            tuned = item.get("tuned")
            if tuned is not None:
                if "difference" not in item:
                    raise ConfigError(f"{where} ({claim['id']}) evidence[{j}]: tuned: judges a difference again; "
                                      "only difference evidence has one")
                if not isinstance(tuned, dict) or not tuned.get("results") or tuned.get("verdict") not in VERDICTS:
                    raise ConfigError(f"{where} ({claim['id']}) evidence[{j}]: tuned: needs results: (a reference-"
                                      f"table set) and verdict: among {', '.join(VERDICTS)}")
                if "flagged_ok" in tuned and not (isinstance(tuned["flagged_ok"], str) and tuned["flagged_ok"].strip()):
                    raise ConfigError(f"{where} ({claim['id']}) evidence[{j}]: tuned: flagged_ok: must say why the "
                                      "verdict may rest on tuned runs that collapsed or were warned (one sentence)")
    return data


Loader = Callable[[Path], list[dict[str, Any]]]  # a results folder -> the result dicts under it


def load_evidence(folder: Path) -> list[dict[str, Any]]:
    """The result files a piece of evidence naming ``folder`` reads: every one under it (a reference-table set holds
    its runs a level deeper, ``<set>/<task>/<run>``); none when it is not a folder."""
    return load_results(folder) if folder.is_dir() else []


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
            line = _judge_one(claim, item, rules, results_of)
            if line.evidence:
                used = evidence_runs(results_of(Path(line.evidence)), item)
                line = dataclasses.replace(line, freshness=fr.combine(fr.judge(r, checkout) for r in used),
                                           accepted=str(item.get("stale_ok") or "").strip(), flags=flags(item, used),
                                           flagged_ok=str(item.get("flagged_ok") or "").strip())
            if item.get("tuned"):
                line = dataclasses.replace(line, tuned=_tuned(item, root, rules, checkout))
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


def flag_text(name: str, runs: list[dict[str, Any]]) -> str:
    """'contrastive collapsed 2/5, collapse warned 5/5; swamp settings warned 5/5' for one run's seeds, in the
    accuracy tables' terms (:func:`harness.report.accuracy.collapse_flag`): the seeds whose collapse signal held at
    the selected epoch, those that recorded one at all (a slow start at chance included), and those whose settings
    were warned as not fitting their data; '' when none."""
    at_best, recorded = accuracy.collapse_counts(runs)
    warned = sum(1 for r in runs if r.get("warnings"))
    collapse = [f"collapsed {at_best}/{len(runs)}"] * bool(at_best) + [f"collapse warned {recorded}/{len(runs)}"]
    out = [f"{name} {', '.join(collapse)}"] * bool(recorded)
    out += [f"{name} settings warned {warned}/{len(runs)}"] * bool(warned)
    return "; ".join(out)


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


def render(lines: list[Line], fmt: str = "simple", link_prefix: str = "") -> str:
    """The ledger as a table: claim, paper, ours (with its interval), verdict, hardware and evidence;
    ``link_prefix`` turns the evidence folders into Markdown links (relative to where the table is shown)."""
    rows = []
    for line in lines:
        evidence = _link(line.evidence, fmt, link_prefix)
        ours = line.ours + (f" {line.interval}" if line.interval else "")
        state = (line.state + (" (accepted)" if line.accepted and line.state != fr.FRESH else "")) or "–"
        t = line.tuned
        if t is None:
            tuned = "–"
        elif t.verdict == NOT_MEASURED:  # its set is not made yet: named, not linked
            tuned = f"{t.verdict} ({t.evidence})"
        else:
            tuned = f"{t.shown()} ({t.budget}; {_link(t.evidence, fmt, link_prefix)})"
        rows.append([line.claim, line.paper, ours, line.shown_verdict(), tuned, line.hardware or "–", evidence, state])
    header = ["claim", "paper", "ours (95% CI or range)", "verdict (as published)",
              "under equal tuning: SwAMP − the strongest contrastive loss", "hardware", "evidence", "evidence is"]
    table: str = tabulate(rows, header, tablefmt="github" if fmt == "md" else fmt, disable_numparse=True)
    return table


def _link(folder: str, fmt: str, prefix: str) -> str:
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
        again = {v: sum(1 for t in tuned if t.verdict == v) for v in VERDICTS}
        out += f"; under equal tuning, {len(tuned)} of them: " + ", ".join(f"{n} {v}" for v, n in again.items() if n)
    flagged = sum(1 for line in lines if line.flags)
    if flagged:
        out += f"; {flagged} rest on runs that collapsed or were warned"
    return out


# --- one piece of evidence -----------------------------------------------------------------------------------

def _judge_one(claim: dict[str, Any], item: dict[str, Any], rules: dict[str, Any],
               results_of: Callable[[Path], list[dict[str, Any]]]) -> Line:
    paper = claim.get("paper")
    base = dict(claim_id=str(claim["id"]), claim=str(claim["claim"]), recorded=item["verdict"],
                paper_value=float(paper) if isinstance(paper, (int, float)) and not isinstance(paper, bool) else None)
    if "not_measured" in item:
        kinds = {k for other in claim["evidence"] for k in ("ratio", "difference") if k in other}
        unit = "×" if kinds == {"ratio"} else "pp" if kinds == {"difference"} else ""
        return Line(**base, paper=_paper(claim, unit), ours="–", interval="", verdict=NOT_MEASURED,
                    why=str(item["not_measured"]), hardware="", evidence="")
    folder = Path(item["results"])
    results = results_of(folder)
    try:
        if "ratio" in item:
            return _ratio(base, claim, item["ratio"], results, folder, rules)
        if "value" in item:
            return _value(base, claim, item["value"], results, folder, rules)
        return _difference(base, claim, item["difference"], results, folder, rules)
    except _Missing as missing:
        return Line(**base, paper=_paper(claim), ours="–", interval="", verdict=NOT_MEASURED, why=str(missing),
                    hardware="", evidence=str(folder))


class _Missing(Exception):
    """The evidence's runs are not among the result files."""


def _runs(results: list[dict[str, Any]], name: str, folder: Path) -> list[dict[str, Any]]:
    """The result files of run ``name`` under ``folder``: all made on one machine and owned by one folder (a verdict
    never averages machines, nor runs of one name in two folders); ConfigError otherwise."""
    runs = [r for r in results if r["run_name"] == name]
    if not runs:
        raise _Missing(f"{folder} has no result files of run {name!r}")
    model.one_machine(runs, f"{folder}: the result files of {name}")
    owners = sorted({str(model.owner(r)) for r in runs})
    if len(owners) > 1:
        raise ConfigError(f"{folder}: run {name!r} lies in {len(owners)} folders ({'; '.join(owners)}); name one of "
                          "them under results:")
    return runs


def _hardware(runs: list[dict[str, Any]]) -> str:
    return "; ".join(dict.fromkeys(model.hardware_name(r) for r in runs))


def _paper(claim: dict[str, Any], unit: str = "") -> str:
    value = claim.get("paper")
    if value is None:
        return "–"
    if isinstance(value, (int, float)):
        return f"{value:+.2f}" if unit == "pp" else f"{value:.1f}×" if unit == "×" else f"{value:g}"
    return str(value)


def _ratio(base: dict[str, Any], claim: dict[str, Any], spec: dict[str, Any], results: list[dict[str, Any]],
           folder: Path, rules: dict[str, Any]) -> Line:
    phase, protocol = spec.get("phase", "test"), spec.get("protocol", "")
    if phase not in ("test", "step"):
        raise ConfigError(f"claim {base['claim_id']}: ratio phase {phase!r}; valid: test, step")
    tag = f"@{protocol}" if protocol else ""
    of, to = _runs(results, spec["of"], folder), _runs(results, spec["to"], folder)
    ratio = model.timing_ratio(of, to, phase, tag)  # the timing table's ratio of the same runs
    if ratio.value is None:
        missing = spec["of"] if not model.seconds(of, phase, tag)[0] else spec["to"]
        raise _Missing(f"{folder}: no {phase} time{f' ({protocol})' if protocol else ''} for {missing}")
    ours = ratio.value
    interval = f"[{min(ratio.per_seed):.1f}, {max(ratio.per_seed):.1f}]" if len(ratio.per_seed) >= 2 else ""
    paper = float(claim["paper"])
    tolerance = float(spec.get("tolerance", rules["ratio_tolerance"]))
    if paper / tolerance <= ours <= paper * tolerance:
        verdict, why = REPRODUCED, f"within a factor {tolerance:g} of the paper's {paper:g}×"
    elif (ours > 1) == (paper > 1):
        verdict, why = DIRECTION, f"same side of 1× as the paper's {paper:g}×, beyond a factor {tolerance:g}"
    else:
        verdict, why = NOT_REPRODUCED, f"the other side of 1× from the paper's {paper:g}×"
    estimated = ratio.estimated
    if estimated:
        why += "; extrapolated from a time budget"
    mark = ratio.mark
    if ratio.contended:
        why += (f"; {ratio.contended} of the {ratio.runs} runs timed their {model.PHASES[phase]} phase while other "
                "work kept the machine busy: the ratio may be off")
    return Line(**base, paper=_paper(claim, "×"), ours=("≈" if estimated else "") + f"{ours:.1f}×{mark}",
                interval=interval, verdict=verdict, why=why, hardware=_hardware(of), evidence=str(folder), value=ours)


def _difference(base: dict[str, Any], claim: dict[str, Any], spec: dict[str, Any], results: list[dict[str, Any]],
                folder: Path, rules: dict[str, Any]) -> Line:
    expect = spec.get("expect", "higher")
    if expect not in ("higher", "lower"):
        raise ConfigError(f"claim {base['claim_id']}: expect {expect!r}; valid: higher, lower")
    metric, alpha = spec["metric"], float(rules["alpha"])
    of, to = _runs(results, spec["of"], folder), _runs(results, spec["to"], folder)
    model.one_machine(of + to, f"{folder}: the result files of {spec['of']} and {spec['to']}")
    tested = stats.significance(of, to, metric)  # the policy's test
    if tested.seeds.diff is None:
        raise _Missing(f"{folder}: {spec['of']} and {spec['to']} share no seed with {metric}")
    diff = tested.diff if tested.diff is not None else tested.seeds.diff  # the chosen test's difference
    verdict, why = difference_verdict(diff, tested.p, expect, alpha, f"{metric} of {spec['of']} against {spec['to']}",
                                      tested.how)
    paper = _paper(claim, "pp") if isinstance(claim.get("paper"), (int, float)) else _paper(claim)
    return Line(**base, paper=paper, ours=f"{diff:+.2f}", interval=stats.interval_text(tested.ci), verdict=verdict,
                why=why, hardware=_hardware(of), evidence=str(folder), value=diff)


def difference_verdict(diff: float, p: float | None, expect: str, alpha: float, what: str,
                       how: str) -> tuple[str, str]:
    """The difference rule: reproduced in the expected direction with p < ``alpha``, direction only in the expected
    direction without it, not reproduced otherwise; and the reason, naming ``what`` and the test (``how``)."""
    sign = 1 if expect == "higher" else -1
    p_text = "no test" if p is None else f"p {stats.p_text(p, relation=True)}"
    if diff * sign > 0 and p is not None and p < alpha:
        return REPRODUCED, f"{what}: {expect} as the paper says, {p_text} ({how})"
    if diff * sign > 0:
        return DIRECTION, f"{what}: {expect} as the paper says, but {p_text} ({how}) is not below {alpha:g}"
    significant = p is not None and p < alpha and diff != 0
    return NOT_REPRODUCED, (f"{what}: {'lower' if expect == 'higher' else 'higher'} than the paper says"
                            f"{', significantly' if significant else ''}, {p_text} ({how})")


def _tuned(item: dict[str, Any], root: Path, rules: dict[str, Any], checkout: fr.Checkout) -> Tuned:
    """The difference of ``item`` judged again on its ``tuned:`` set: SwAMP against the strongest contrastive loss
    (chosen on validation), over the seeds both were trained with, by the same rule."""
    spec, folder = item["difference"], Path(item["tuned"]["results"])
    metric, expect, alpha = spec["metric"], spec.get("expect", "higher"), float(rules["alpha"])
    base = dict(recorded=item["tuned"]["verdict"], evidence=str(folder))

    def missing(why: str) -> Tuned:
        return Tuned(verdict=NOT_MEASURED, ours="–", interval="", rival="–", budget="–", why=why, **base)

    if not (root / folder / board.MANIFEST).is_file():
        return missing(f"{folder} holds no reference-table set yet (python -m harness leaderboard)")
    b = board.load_set(root / folder)
    if b.metric != metric:
        raise ConfigError(f"tuned: {folder} was tuned for {b.metric}, the difference measures {metric}; name the set "
                          f"tuned for {metric} (python -m harness leaderboard TASK --metric {metric})")
    if board.SWAMP not in b.cells:
        return missing(f"{folder}: SwAMP has no tuned runs yet")
    try:
        candidates = board.tied(b)
        trials = board.equal_budget(b, (board.SWAMP, *board.CONTRASTIVE))
    except ConfigError as err:
        return missing(str(err))
    found = board.against_strongest(b)  # the policy's test: paired t over the seeds
    if found is None:
        return missing(f"{folder}: SwAMP and {' or '.join(board.ROLES[r] for r in candidates)} share fewer than 2 "
                       "seeds; the rule needs 2")
    rival = found.rival  # where validation ties several losses, the least favourable to SwAMP of them
    tested, chose, mine, theirs = found.tested, found.chose, b.cells[board.SWAMP], b.cells[rival]
    values = ", ".join(f"{board.ROLES[r]} {v:.2f}" for r, v in chose.items())
    which = (f"of the losses validation tied ({values}), the least favourable to SwAMP on test" if found.tied else
             f"the strongest contrastive loss on validation ({values})")
    what = f"{metric} of SwAMP ({mine.method}@tuned) against {board.ROLES[rival]} ({theirs.method}@tuned), {which}"
    diff = tested.diff if tested.diff is not None else math.nan
    verdict, why = difference_verdict(diff, tested.p, expect, alpha, what, tested.how)
    minutes = {r: c.trial_minutes for r, c in b.cells.items()
               if r in (board.SWAMP, *board.CONTRASTIVE) and c.trial_minutes is not None}
    budget = f"{trials} trials per method" + (f", {min(minutes.values()):.1f}–{max(minutes.values()):.1f} trial-min"
                                              if minutes else "")
    why += "; trial-min: " + ", ".join(f"{board.ROLES[r]} {m:.1f}" for r, m in minutes.items())
    used = mine.results + theirs.results
    flagged = "; ".join(filter(None, (flag_text(board.ROLES[r], b.cells[r].results) for r in (board.SWAMP, rival))))
    return Tuned(verdict=verdict, ours=f"{diff:+.2f}", interval=stats.interval_text(tested.ci),
                 rival=board.ROLES[rival], budget=budget, why=why,
                 freshness=fr.combine(fr.judge(r, checkout) for r in used), value=diff, flags=flagged,
                 flagged_ok=str(item["tuned"].get("flagged_ok", "")), **base)


def _value(base: dict[str, Any], claim: dict[str, Any], spec: dict[str, Any], results: list[dict[str, Any]],
           folder: Path, rules: dict[str, Any]) -> Line:
    metric = spec["metric"]
    runs = _runs(results, spec["run"], folder)
    values = stats.seed_values(runs, metric)
    if not values:
        raise _Missing(f"{folder}: {spec['run']} has no {metric}")
    if not isinstance(claim.get("paper"), (int, float)):
        raise ConfigError(f"claim {base['claim_id']}: a value needs the paper's number under paper:")
    paper, tolerance = float(claim["paper"]), float(spec.get("tolerance", rules["value_tolerance"]))
    summary = stats.summarize(list(values.values()))
    ci = summary.ci
    inside = ci is not None and ci[0] <= paper <= ci[1]
    near = abs(summary.mean - paper) <= tolerance
    what = f"{metric} of {spec['run']} over {summary.n} seed(s), mean {summary.mean:.2f}"
    if inside or near:
        verdict = REPRODUCED
        why = f"{what}: the paper's {paper:g} lies " + ("inside the 95% interval" if inside else
                                                         f"within {tolerance:g} points of the mean")
    else:
        verdict = NOT_REPRODUCED
        why = (f"{what}: {'above' if summary.mean > paper else 'below'} the paper's {paper:g}, outside the 95% "
               f"interval and beyond {tolerance:g} points")
    interval = f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
    return Line(**base, paper=f"{paper:.2f}", ours=f"{summary.mean:.2f}", interval=interval, verdict=verdict, why=why,
                hardware=_hardware(runs), evidence=str(folder), value=summary.mean)


def cmd(args: argparse.Namespace) -> int:
    """``harness claims [LEDGER] [--check]``: the ledger judged, each verdict's reason, and with --check exit 1
    when a verdict differs from the recorded one."""
    ledger = Path(args.ledger) if args.ledger else DEFAULT_LEDGER
    lines = judge(ledger, Path(args.root) if args.root else None)
    print(render(lines, args.format))
    print(f"\n{summary(lines)}. Why:")
    for line in lines:
        print(f"  {line.claim_id} ({line.evidence or 'not measured'}): {line.verdict}: {line.why}")
        if line.flags:
            print(f"    its runs: {line.flags}" + (f" [reason stated: {line.flagged_ok}]" if line.flagged_ok else ""))
        if line.tuned is not None:
            print(f"    under equal tuning ({line.tuned.evidence}): {line.tuned.verdict}: {line.tuned.why}")
            if line.tuned.flags:
                print(f"    its tuned runs: {line.tuned.flags}"
                      + (f" [reason stated: {line.tuned.flagged_ok}]" if line.tuned.flagged_ok else ""))
    stale = [line for line in lines if line.freshness is not None and line.state != fr.FRESH]
    if stale:
        print("\nEvidence that is not fresh against this checkout (docs/claims.md, 'Evidence and code'):")
        for line in stale:
            print(f"  {line.claim_id} ({line.evidence}): {line.state}: {line.freshness.why() if line.freshness else ''}"
                  + (f" [accepted: {line.accepted}]" if line.accepted else ""))
    if not args.check:
        return 0
    failures = check(lines)
    for message in failures:
        print(f"warning: claims check: {message}", file=sys.stderr)
    print(f"\n{len(failures)} problem(s) with {ledger}" if failures else
          f"\nevery verdict matches {ledger} and rests on fresh (or accepted) evidence")
    return 1 if failures else 0
