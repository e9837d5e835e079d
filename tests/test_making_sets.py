"""Carrying a set's studies through the repository (benchmarks/making_sets.py): a consistent copy out, a copy back
only where none is, and the carried studies open with every trial."""
from __future__ import annotations

import optuna
import pytest

from benchmarks import making_sets

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _studies(folder, trials):
    db = folder / "synthetic" / "synthetic" / "_tune" / "studies.db"
    db.parent.mkdir(parents=True)
    study = optuna.create_study(study_name="synthetic.swamp.abc", storage=f"sqlite:///{db}")
    for i in range(trials):
        study.add_trial(optuna.trial.create_trial(params={"x": i / 10},
                                                  distributions={"x": optuna.distributions.FloatDistribution(0, 1)},
                                                  value=float(i)))
    study.ask()  # a trial left running, as a killed worker leaves it
    return db


def _values(db):
    study = optuna.load_study(study_name="synthetic.swamp.abc", storage=f"sqlite:///{db}")
    return [(t.number, t.state.name, t.value, t.params) for t in study.get_trials()]


def test_saved_studies_come_back_with_every_trial_and_never_over_studies_already_there(tmp_path, capsys):
    db = _studies(tmp_path / "made", 3)
    making = tmp_path / "making"
    (saved,) = making_sets.save(tmp_path / "made", "synthetic", making)
    assert saved == making / "synthetic" / "synthetic" / "_tune" / "studies.db"
    assert making_sets.trial_counts(saved) == {"COMPLETE": 3, "RUNNING": 1}
    assert "trials {'COMPLETE': 3, 'RUNNING': 1}" in capsys.readouterr().out
    assert not list(making.rglob("*.part"))

    (back,) = making_sets.restore(tmp_path / "fresh", "synthetic", making)
    assert _values(back) == _values(db) and len(_values(back)) == 4
    # a restore where the set's studies already are, as far or further, leaves them as they are
    optuna.load_study(study_name="synthetic.swamp.abc", storage=f"sqlite:///{back}").ask()
    assert making_sets.restore(tmp_path / "fresh", "synthetic", making) == []
    assert len(_values(back)) == 5 and "they go on" in capsys.readouterr().out
    assert making_sets.restore(tmp_path / "fresh", "wikipedia", making) == []  # nothing carried: nothing done
    (line,) = making_sets.status(making)
    assert line.startswith("synthetic  synthetic.swamp.abc  3 finished") and "'RUNNING': 1" in line
    assert making_sets.main(["status", "--making", str(tmp_path / "none")]) == 0
    assert "no set is being made" in capsys.readouterr().out


def test_finished_tuned_runs_travel_with_the_studies_and_never_replace_a_run_made_here(tmp_path, capsys):
    made = tmp_path / "made"
    _studies(made, 2)
    runs = made / "synthetic" / "synthetic"
    for run, seeds in (("swamp@tuned", (0, 1)), ("contrastive@tuned", (0,))):
        (runs / run).mkdir()
        for seed in seeds:
            (runs / run / f"seed{seed}.json").write_text(f'{{"run": "{run}", "seed": {seed}}}')
            (runs / run / f"seed{seed}.ranks.npz").write_bytes(bytes([seed, 1, 2]))
    (runs / "contrastive@tuned" / "seed1.ranks.npz").write_bytes(b"unfinished")  # a run still training: no result
    (runs / "contrastive@tuned" / "seed1.resume.pt").write_bytes(b"checkpoint")
    making = tmp_path / "making"
    written = making_sets.save(made, "synthetic", making)
    assert making / "synthetic" / "tuned.tar" in written and "saved 3 finished tuned runs" in capsys.readouterr().out
    fresh = tmp_path / "fresh" / "synthetic" / "synthetic"
    (fresh / "swamp@tuned").mkdir(parents=True)
    (fresh / "swamp@tuned" / "seed1.json").write_text("made here")
    back = making_sets.restore(tmp_path / "fresh", "synthetic", making)
    restored = sorted(p.relative_to(fresh).as_posix() for p in back if p.suffix != ".db")
    assert restored == ["contrastive@tuned/seed0.json", "contrastive@tuned/seed0.ranks.npz",
                        "swamp@tuned/seed0.json", "swamp@tuned/seed0.ranks.npz"]
    assert (fresh / "swamp@tuned" / "seed1.json").read_text() == "made here"  # with none of the carried run's files
    assert not (fresh / "swamp@tuned" / "seed1.ranks.npz").exists()
    assert (fresh / "swamp@tuned" / "seed0.json").read_text() == '{"run": "swamp@tuned", "seed": 0}'
    assert not (fresh / "contrastive@tuned" / "seed1.ranks.npz").exists() and not list(fresh.rglob("*.pt"))
    # the archive is the same bytes whenever it is packed: no time or owner of the machine
    first = (making / "synthetic" / "tuned.tar").read_bytes()
    making_sets.save(made, "synthetic", making)
    assert (making / "synthetic" / "tuned.tar").read_bytes() == first


def test_a_restore_over_other_studies_or_fewer_trials_is_refused_and_changes_nothing(tmp_path):
    making = tmp_path / "making"
    _studies(tmp_path / "made", 3)
    making_sets.save(tmp_path / "made", "synthetic", making)
    other = tmp_path / "committed" / "synthetic" / "synthetic" / "_tune" / "studies.db"  # an older making's studies
    other.parent.mkdir(parents=True)
    optuna.create_study(study_name="synthetic.swamp.old", storage=f"sqlite:///{other}")
    before = other.read_bytes()
    with pytest.raises(SystemExit, match=r"lacks the carried studies synthetic.swamp.abc .*Remove .*committed"):
        making_sets.restore(tmp_path / "committed", "synthetic", making)
    assert other.read_bytes() == before
    behind = _studies(tmp_path / "behind", 1)  # the same study, fewer trials finished than carried
    with pytest.raises(SystemExit, match="fewer finished trials than the carried ones"):
        making_sets.restore(tmp_path / "behind", "synthetic", making)
    assert len(_values(behind)) == 2


def test_saving_a_set_whose_studies_have_not_begun_names_what_is_missing(tmp_path):
    (tmp_path / "made" / "synthetic").mkdir(parents=True)
    with pytest.raises(SystemExit, match=r"holds no \*/_tune/studies.db"):
        making_sets.save(tmp_path / "made", "synthetic", tmp_path / "making")
    assert not (tmp_path / "making").exists()
    assert making_sets.main(["restore", str(tmp_path / "made"), "synthetic", "--making",
                             str(tmp_path / "making")]) == 0
