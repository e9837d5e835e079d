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
the strongest contrastive loss of a reference-table set (:mod:`harness.report.reference_table`), each tuned with the
same trials on validation for the difference's metric, the strongest chosen on validation, both trained with the
same seeds; the same rule gives the second verdict.

Each computed verdict is one of :data:`VERDICTS`; the file records the verdict expected of each piece of
evidence, and :func:`check` lists those that differ, so that a change of science fails a build the way
the benchmark gate's change of speed does.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.errors import ConfigError
from harness.report import accuracy, stats
from harness.report import freshness as fr
from harness.store.schema import load_results

REPRODUCED, DIRECTION, NOT_REPRODUCED, NOT_MEASURED = "reproduced", "direction only", "not reproduced", \
    "not measured here"
UNINFORMATIVE = "uninformative for tuning"  # a verdict under equal tuning only: validation saturated for every row
VERDICTS = (REPRODUCED, DIRECTION, NOT_REPRODUCED, NOT_MEASURED)
TUNED_VERDICTS = (*VERDICTS, UNINFORMATIVE)
DEFAULT_LEDGER = Path("claims") / "swamp-aistats2023.yaml"
RULES = {"alpha": stats.ALPHA, "ratio_tolerance": 2.0, "value_tolerance": 1.0}  # a ledger's rules: may set their own
EVIDENCE_KINDS = ("ratio", "difference", "value", "not_measured")
TUNED_KEYS = ("results", "verdict", "flagged_ok", "base")


def refuses(verdict: str, flags: str, flagged_ok: str) -> bool:
    """Whether a verdict that says the claim holds (reproduced, direction only) rests on flagged runs without a
    stated reason: ``claims --check`` refuses it."""
    return bool(flags) and not flagged_ok and verdict in (REPRODUCED, DIRECTION)


@dataclass(frozen=True)
class Tuned:
    """A difference judged again under an equal tuning budget, by the comparison the claim makes: SwAMP alone against
    the set's strongest contrastive loss, or X + SwAMP against X (the ledger's ``tuned: base: X``)."""

    verdict: str
    recorded: str | None
    ours: str
    interval: str
    rival: str  # the row compared against (its label): the strongest contrastive loss, or X
    budget: str  # trials per method and the trials' minutes
    why: str
    evidence: str  # the set's folder
    freshness: fr.Freshness | None = None
    value: float | None = None  # the difference ``ours`` writes
    flags: str = ""  # tuned runs of the compared rows that collapsed or were warned: 'SwAMP collapse warned 5/5'
    flagged_ok: str = ""  # why the ledger lets this verdict rest on them (its tuned: flagged_ok:)
    of: str = "SwAMP"  # the row with SwAMP's term (its label)
    pair: bool = False  # X + SwAMP − X (else SwAMP alone − the strongest)
    beside: str = ""  # the best row with SwAMP's term − the best without, shown beside a pair's verdict

    @property
    def state(self) -> str:
        return self.freshness.state if self.freshness is not None else ""

    def shown(self) -> str:
        """'not reproduced: −0.97 vs InfoNCE [−1.80, −0.14]', or for X + SwAMP − X 'direction only: max-violation hinge
        (VSE++) + SwAMP − max-violation hinge (VSE++) = +1.57 [−5.11, +8.24]'; marked when its runs are not fresh and
        when they collapsed or were warned ('... [SwAMP collapse warned 5/5]'), the best-with − best-without beside."""
        mark = f" ({self.state})" if self.state and self.state != fr.FRESH else ""
        flagged = f" [{self.flags}{'; reason stated' if self.flagged_ok else ''}]" if self.flags else ""
        interval = f" {self.interval}" if self.interval else ""
        if self.ours == "–":
            return self.verdict
        what = f"{self.of} − {self.rival} = {self.ours}" if self.pair else f"{self.ours} vs {self.rival}"
        beside = f"; beside it, {self.beside}" if self.beside else ""
        return f"{self.verdict}{mark}: {what}{interval}{flagged}{beside}"

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
            kinds = [k for k in EVIDENCE_KINDS if k in (item or {})]
            if len(kinds) != 1:
                raise ConfigError(f"{where} ({claim['id']}) evidence[{j}] needs exactly one of "
                                  f"{', '.join(EVIDENCE_KINDS)}")
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
                if not isinstance(tuned, dict) or not tuned.get("results") or \
                        tuned.get("verdict") not in TUNED_VERDICTS:
                    raise ConfigError(f"{where} ({claim['id']}) evidence[{j}]: tuned: needs results: (a reference-"
                                      f"table set) and verdict: among {', '.join(TUNED_VERDICTS)}")
                extra = sorted(set(tuned) - set(TUNED_KEYS))
                if extra:
                    raise ConfigError(f"{where} ({claim['id']}) evidence[{j}]: tuned: unknown key(s) "
                                      f"{', '.join(extra)}; keys: {', '.join(TUNED_KEYS)} (base: X judges X + SwAMP "
                                      "− X)")
                if "flagged_ok" in tuned and not (isinstance(tuned["flagged_ok"], str) and tuned["flagged_ok"].strip()):
                    raise ConfigError(f"{where} ({claim['id']}) evidence[{j}]: tuned: flagged_ok: must say why the "
                                      "verdict may rest on tuned runs that collapsed or were warned (one sentence)")
    return data


Loader = Callable[[Path], list[dict[str, Any]]]  # a results folder -> the result dicts under it


def load_evidence(folder: Path) -> list[dict[str, Any]]:
    """The result files a piece of evidence naming ``folder`` reads: every one under it (a reference-table set holds
    its runs a level deeper, ``<set>/<task>/<run>``); none when it is not a folder."""
    return load_results(folder) if folder.is_dir() else []


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
