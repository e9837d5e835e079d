"""The rule of each kind of evidence: a timing ratio against the paper's, a difference between two runs tested by the
significance policy, a value against the paper's number; and a claim that is not measured here."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.report import model, stats
from harness.report.claims.ledger import DIRECTION, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED, Line


def judge_one(claim: dict[str, Any], item: dict[str, Any], rules: dict[str, Any],
               results_of: Callable[[Path], list[dict[str, Any]]]) -> Line:
    paper = claim.get("paper")
    base = dict(claim_id=str(claim["id"]), claim=str(claim["claim"]), recorded=item["verdict"],
                paper_value=float(paper) if isinstance(paper, (int, float)) and not isinstance(paper, bool) else None)
    if "not_measured" in item:
        kinds = {k for other in claim["evidence"] for k in ("ratio", "difference") if k in other}
        unit = "×" if kinds == {"ratio"} else "pp" if kinds == {"difference"} else ""
        return Line(**base, paper=paper_text(claim, unit), ours="–", interval="", verdict=NOT_MEASURED,
                    why=str(item["not_measured"]), hardware="", evidence="")
    folder = Path(item["results"])
    results = results_of(folder)
    try:
        if "ratio" in item:
            return ratio_line(base, claim, item["ratio"], results, folder, rules)
        if "value" in item:
            return value_line(base, claim, item["value"], results, folder, rules)
        return difference_line(base, claim, item["difference"], results, folder, rules)
    except Missing as missing:
        return Line(**base, paper=paper_text(claim), ours="–", interval="", verdict=NOT_MEASURED, why=str(missing),
                    hardware="", evidence=str(folder))


class Missing(Exception):
    """The evidence's runs are not among the result files."""


def runs_of(results: list[dict[str, Any]], name: str, folder: Path) -> list[dict[str, Any]]:
    """The result files of run ``name`` under ``folder``: all made on one machine and owned by one folder (a verdict
    never averages machines, nor runs of one name in two folders); ConfigError otherwise."""
    runs = [r for r in results if r["run_name"] == name]
    if not runs:
        raise Missing(f"{folder} has no result files of run {name!r}")
    model.one_machine(runs, f"{folder}: the result files of {name}")
    owners = sorted({str(model.owner(r)) for r in runs})
    if len(owners) > 1:
        raise ConfigError(f"{folder}: run {name!r} lies in {len(owners)} folders ({'; '.join(owners)}); name one of "
                          "them under results:")
    return runs


def hardware_of(runs: list[dict[str, Any]]) -> str:
    return "; ".join(dict.fromkeys(model.hardware_name(r) for r in runs))


def paper_text(claim: dict[str, Any], unit: str = "") -> str:
    value = claim.get("paper")
    if value is None:
        return "–"
    if isinstance(value, (int, float)):
        return f"{value:+.2f}" if unit == "pp" else f"{value:.1f}×" if unit == "×" else f"{value:g}"
    return str(value)


def ratio_line(base: dict[str, Any], claim: dict[str, Any], spec: dict[str, Any], results: list[dict[str, Any]],
           folder: Path, rules: dict[str, Any]) -> Line:
    phase, protocol = spec.get("phase", "test"), spec.get("protocol", "")
    if phase not in ("test", "step"):
        raise ConfigError(f"claim {base['claim_id']}: ratio phase {phase!r}; valid: test, step")
    tag = f"@{protocol}" if protocol else ""
    of, to = runs_of(results, spec["of"], folder), runs_of(results, spec["to"], folder)
    ratio = model.timing_ratio(of, to, phase, tag)  # the timing table's ratio of the same runs
    if ratio.value is None:
        missing = spec["of"] if not model.seconds(of, phase, tag)[0] else spec["to"]
        raise Missing(f"{folder}: no {phase} time{f' ({protocol})' if protocol else ''} for {missing}")
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
    return Line(**base, paper=paper_text(claim, "×"), ours=("≈" if estimated else "") + f"{ours:.1f}×{mark}",
                interval=interval, verdict=verdict, why=why, hardware=hardware_of(of), evidence=str(folder), value=ours)


def difference_line(base: dict[str, Any], claim: dict[str, Any], spec: dict[str, Any], results: list[dict[str, Any]],
                folder: Path, rules: dict[str, Any]) -> Line:
    expect = spec.get("expect", "higher")
    if expect not in ("higher", "lower"):
        raise ConfigError(f"claim {base['claim_id']}: expect {expect!r}; valid: higher, lower")
    metric, alpha = spec["metric"], float(rules["alpha"])
    of, to = runs_of(results, spec["of"], folder), runs_of(results, spec["to"], folder)
    model.one_machine(of + to, f"{folder}: the result files of {spec['of']} and {spec['to']}")
    tested = stats.significance(of, to, metric)  # the policy's test
    if tested.seeds.diff is None:
        raise Missing(f"{folder}: {spec['of']} and {spec['to']} share no seed with {metric}")
    diff = tested.diff if tested.diff is not None else tested.seeds.diff  # the chosen test's difference
    verdict, why = difference_verdict(diff, tested.p, expect, alpha, f"{metric} of {spec['of']} against {spec['to']}",
                                      tested.how)
    paper = paper_text(claim, "pp") if isinstance(claim.get("paper"), (int, float)) else paper_text(claim)
    return Line(**base, paper=paper, ours=f"{diff:+.2f}", interval=stats.interval_text(tested.ci), verdict=verdict,
                why=why, hardware=hardware_of(of), evidence=str(folder), value=diff)


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


def value_line(base: dict[str, Any], claim: dict[str, Any], spec: dict[str, Any], results: list[dict[str, Any]],
           folder: Path, rules: dict[str, Any]) -> Line:
    metric = spec["metric"]
    runs = runs_of(results, spec["run"], folder)
    values = stats.seed_values(runs, metric)
    if not values:
        raise Missing(f"{folder}: {spec['run']} has no {metric}")
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
                hardware=hardware_of(runs), evidence=str(folder), value=summary.mean)


