"""Carries (harness.remake.carry, harness.report.carried): a change of executed code that the canaries show to move no
number is recorded, and the results that executed the old version read as carried instead of stale.

Every test works on a temporary git repository holding a copy of the project and one result file whose record says
it executed ``harness/ops/losses.py`` (the contrastive losses: the contrastive canaries and the end-to-end run go
through them), so that nothing depends on the real history. The tests that run the command itself (the canaries in
two trees, twice) take seconds each and are marked slow.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.remake import carry as cy
from harness.report import carried as ca
from harness.report import freshness as fr
from harness.store import executed as ex
from harness.store.schema import SCHEMA

ROOT = Path(__file__).resolve().parent.parent
LOSSES = "harness/ops/losses.py"
TRAIN = "harness/run/train.py"
SHUFFLE = "torch.randperm(n, generator=generator)"
ORIGINAL = "    return cost_b.amax(1).sum() + cost_a.amax(0).sum()\n"
# the same arithmetic in the same order, written another way: behaviour-preserving refactors, one after the other
REFACTOR_1 = "    worst_b, worst_a = cost_b.amax(1), cost_a.amax(0)\n    return worst_b.sum() + worst_a.sum()\n"
REFACTOR_2 = ("    worst_b, worst_a = cost_b.amax(1), cost_a.amax(0)\n    total = worst_b.sum() + worst_a.sum()\n"
              "    return total\n")
# a change far below anything a table shows, that the canaries must still see
NUDGE = "    return (cost_b.amax(1).sum() + cost_a.amax(0).sum()) * (1 + 1e-7)\n"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=test", "-c", "user.email=test@example.org", *args], cwd=repo,
                          capture_output=True, text=True, check=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with a copy of the project and one committed result that executed ``LOSSES`` and
    ``TRAIN``."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for part in ("harness", "baselines", "tests", "tasks"):
        shutil.copytree(ROOT / part, repo / part, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
    shutil.copyfile(ROOT / "pyproject.toml", repo / "pyproject.toml")
    (repo / "claims" / "carried.yaml").unlink(missing_ok=True)
    text = (repo / LOSSES).read_text()
    assert text.count(ORIGINAL) == 1, "the test's edits of max_violation_loss no longer apply: update ORIGINAL"
    assert (repo / TRAIN).read_text().count(SHUFFLE) == 1, "the test's edit of train.batches no longer applies"
    contents = {name: (repo / name).read_bytes() for name in (LOSSES, TRAIN)}
    record = {"files": {n: ex.sha256(b) for n, b in contents.items()},
              "blobs": {n: ex.git_blob_sha1(b) for n, b in contents.items()}}
    folder = repo / "results" / "tiny" / "contrastive"
    folder.mkdir(parents=True)
    (folder / "seed0.json").write_text(json.dumps({"schema": SCHEMA, "task": "tiny", "run_name": "contrastive",
                                                   "seed": 0, "executed": record}))
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "copy")
    return repo


def _edit(repo: Path, new: str, old: str = ORIGINAL, file: str = LOSSES) -> None:
    path = repo / file
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))


def _judge(repo: Path) -> fr.Freshness:
    result = json.loads((repo / "results" / "tiny" / "contrastive" / "seed0.json").read_text())
    return fr.judge(result, fr.Checkout(repo))


def _version(data: bytes) -> ca.Version:
    return ca.Version(ex.sha256(data), ex.git_blob_sha1(data))


def _committed_version(repo: Path, message: str) -> ca.Version:
    _git(repo, "add", LOSSES)
    _git(repo, "commit", "-q", "-m", message)
    return _version((repo / LOSSES).read_bytes())


def _hand_carry(before: ca.Version, after: ca.Version, canary: str) -> ca.Carry:
    return ca.Carry(LOSSES, before, after, (canary,), "", "test machine", "2026-11-29", "0" * 40)


# --- without running canaries ----------------------------------------------------------------------------------

def test_a_cosmetic_change_needs_no_carry(repo):
    _edit(repo, "    # the hardest negative of each row and each column\n" + ORIGINAL)
    todo, passed = cy.changes(repo)
    assert todo == [] and passed == [f"{LOSSES}: a cosmetic edit (comments, docstrings, layout): no carry needed"]
    judged = _judge(repo)
    assert judged.state == fr.FRESH and judged.cosmetic == (LOSSES,) and not judged.carried


def test_a_changed_file_without_a_carry_stays_stale(repo):
    _edit(repo, REFACTOR_1)
    judged = _judge(repo)
    assert judged.state == fr.STALE and judged.changed == (LOSSES,) and not judged.carried
    assert judged.functions[LOSSES] == ("max_violation_loss",)
    todo, _ = cy.changes(repo)
    assert [c.file for c in todo] == [LOSSES]


def test_a_chain_of_two_carries_reaches_the_current_version(repo):
    v0 = _version((repo / LOSSES).read_bytes())
    _edit(repo, REFACTOR_1)
    v1 = _committed_version(repo, "one")
    _edit(repo, REFACTOR_2, REFACTOR_1)
    v2 = _committed_version(repo, "two")
    record = repo / ca.RECORD
    record.parent.mkdir(exist_ok=True)
    record.write_text(ca.dump([_hand_carry(v1, v2, "second"), _hand_carry(v0, v1, "first")]))
    judged = _judge(repo)
    assert judged.state == fr.FRESH and judged.changed == ()
    assert judged.carried == {LOSSES: ("first", "second")}
    assert judged.label() == "carried (by canaries first, second)"
    assert judged.why() == f"every file it ran is unchanged or carried; carried: {LOSSES} (by canaries first, second)"
    # several results together (a folder's seeds): still carried, the canaries of each named
    both = fr.combine([judged, judged])
    assert both.state == fr.FRESH and both.carried == {LOSSES: ("first", "second")}
    # without its first link the chain does not reach the recorded version: stale, as before
    record.write_text(ca.dump([_hand_carry(v1, v2, "second")]))
    assert _judge(repo).state == fr.STALE


def test_a_carry_from_a_cosmetic_variant_of_the_recorded_version_applies(repo):
    """The version a carry starts from may differ from the recorded one in comments only (the cosmetic rule)."""
    _edit(repo, "    # a comment\n" + ORIGINAL)
    variant = _committed_version(repo, "comment")
    _edit(repo, "    # a comment\n" + REFACTOR_1, "    # a comment\n" + ORIGINAL)
    after = _committed_version(repo, "refactor")
    (repo / ca.RECORD).parent.mkdir(exist_ok=True)
    (repo / ca.RECORD).write_text(ca.dump([_hand_carry(variant, after, "contrastive")]))
    assert _judge(repo).carried == {LOSSES: ("contrastive",)}


def test_a_carry_of_another_change_does_not_cover_this_one(repo):
    v0 = _version((repo / LOSSES).read_bytes())
    (repo / ca.RECORD).parent.mkdir(exist_ok=True)
    (repo / ca.RECORD).write_text(ca.dump([_hand_carry(v0, _version(b"something else\n"), "contrastive")]))
    _edit(repo, REFACTOR_1)
    judged = _judge(repo)
    assert judged.state == fr.STALE and not judged.carried


def test_the_carry_record_round_trips_and_rejects_a_malformed_entry(tmp_path):
    path = tmp_path / "carried.yaml"
    made = [_hand_carry(_version(b"a"), _version(b"b"), "swamp")]
    path.write_text(ca.dump(made))
    assert ca.load(path) == made
    path.write_text("- file: harness/ops/losses.py\n  from: {sha256: abc}\n  to: {sha256: d, blob: e}\n"
                    "  canaries: [swamp]\n")
    with pytest.raises(ConfigError, match="entry 1 from: must be a mapping with sha256: and blob:"):
        ca.load(path)
    path.write_text("- file: harness/ops/losses.py\n  from: {sha256: a, blob: b}\n  to: {sha256: d, blob: e}\n")
    with pytest.raises(ConfigError, match="canaries: must name the canaries"):
        ca.load(path)


def test_files_that_no_result_executed_cannot_be_carried(repo):
    with pytest.raises(ConfigError, match="harness/run/runner.py: no committed result executed it"):
        cy.changes(repo, ["harness/run/runner.py"])


def test_first_difference_names_the_first_number_that_moved():
    old = {"steps": [{"loss": 1.0, "swamp": 0.5}], "metrics": {"R@1": 10.0}}
    assert cy.first_difference(old, json.loads(json.dumps(old))) is None
    new = {"steps": [{"loss": 1.0, "swamp": 0.5000000000000001}], "metrics": {"R@1": 10.0}}
    assert cy.first_difference(old, new) == "steps.0.swamp: 0.5 -> 0.5000000000000001"
    assert cy.first_difference({"x": [1.0, 2.0]}, {"x": [1.0]}) == "x: 2 items -> 1"
    assert cy.first_difference({"x": float("nan")}, {"x": float("nan")}) is None
    assert cy.first_difference({"a": 1}, {"b": 1}) == "a: 1 -> 'absent'"


# --- the command: canaries in two trees -------------------------------------------------------------------------

@pytest.mark.slow  # four fresh processes per carry (the canaries and the end-to-end run, old and new), twice
def test_a_behaviour_preserving_refactor_is_carried_and_a_second_one_chains(repo):
    _edit(repo, REFACTOR_1)
    assert _judge(repo).state == fr.STALE
    outcome = cy.carry(repo, log=lambda line: None)
    assert outcome.difference == ""
    [made] = outcome.carries
    assert made.file == LOSSES and made.end_to_end == cy.END_TO_END
    # shared machinery: every canary's run loaded it, so every canary covers it
    from tests.test_canaries import CASES

    assert made.canaries == (*sorted(CASES), ca.END_TO_END_CANARY)
    assert ca.load(repo / ca.RECORD) == [made]
    judged = _judge(repo)
    assert judged.state == fr.FRESH and set(judged.carried) == {LOSSES}
    assert judged.label().startswith("carried (by canaries ") and "contrastive" in judged.label()
    assert cy.changes(repo)[1] == [f"{LOSSES}: already carried to this version"]

    _git(repo, "add", LOSSES, str(ca.RECORD))
    _git(repo, "commit", "-q", "-m", "refactor one, carried")
    _edit(repo, REFACTOR_2, REFACTOR_1)
    second = cy.carry(repo, log=lambda line: None)
    assert second.difference == "" and len(second.carries) == 1
    assert len(ca.load(repo / ca.RECORD)) == 2
    assert _judge(repo).state == fr.FRESH and set(_judge(repo).carried) == {LOSSES}  # recorded -> 1 -> 2


@pytest.mark.slow  # two fresh processes (the method canaries, old and new)
def test_a_change_that_moves_a_number_is_refused_naming_the_canary(repo, capsys):
    _edit(repo, NUDGE)
    assert cy.cmd(repo, None, "HEAD", write=True) == 1
    err = capsys.readouterr().err
    assert "not carried: method canary contrastive" in err and "step" in err and "must be re-made" in err
    assert not (repo / ca.RECORD).exists()
    assert _judge(repo).state == fr.STALE


@pytest.mark.slow  # four fresh processes (the method canaries and the end-to-end run, old and new)
def test_a_change_only_the_end_to_end_canary_sees_is_refused(repo, capsys):
    """Batches in another order: no method canary goes through the training loop's batching (they feed fixed
    batches to the step), the end-to-end run does, and its first epoch's loss moves."""
    _edit(repo, f"{SHUFFLE}.flip(0)", SHUFFLE, TRAIN)
    assert cy.cmd(repo, [TRAIN], "HEAD", write=True) == 1
    err = capsys.readouterr().err
    assert "not carried: end-to-end canary" in err and "run contrastive: history.0." in err, err
    assert not (repo / ca.RECORD).exists()
