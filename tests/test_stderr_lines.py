"""What a command writes to stderr: every line starts with ``error: ``, ``warning: `` or ``note: ``, and a command
that fails ends with its one ``error: `` line, also when notes and warnings came before it; Python warnings and
library log records become one ``warning:`` line each (docs/reliability.md, "What a failing command prints")."""
from __future__ import annotations

import logging
import warnings

import pytest

from harness import cli, worker
from harness.cli import listing
from harness.errors import ConfigError
from harness.store import provenance
from tests.error_lines import error_line, prefixed
from tests.test_plugins import write_plugin

AVX2 = ["sse4_2", "avx", "avx2", "fma", "f16c"]


def test_notes_and_warnings_before_an_error_leave_it_the_one_error_line_and_the_last(tiny_task, tmp_path, capsys):
    """A registered method the task does not declare (a note), a plugin file that fails to import (a warning), then
    --out naming a file (the error)."""
    plugins = tmp_path / "plugins"
    write_plugin(plugins, "broken", "import no_such_module_here\n")
    (tmp_path / "taken").write_text("a file")
    code = cli.main(["run", str(tiny_task), "--methods", "contrastive,mmr", "--include", str(plugins),
                     "--out", str(tmp_path / "taken"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    line = error_line(err)
    assert "is a file, not a folder" in line
    note, warning = err.splitlines()[:-1]
    assert note.startswith("note: mmr is a registered method that") and "does not declare" in note
    assert warning.startswith("warning: skipped plugin file") and "broken.py" in warning


def test_a_machine_warning_then_missing_data_keeps_the_contract(tmp_path, capsys, monkeypatch):
    """bf16 asked of a CPU without native bf16 (the flags of an AVX2-only CPU) warns before anything is loaded;
    the data root then turns out to be missing: the error still comes last, alone of its kind."""
    monkeypatch.setattr(provenance, "cpu_flags", lambda: list(AVX2))
    monkeypatch.setattr(provenance, "cpu_model", lambda: "AMD EPYC 7B12")
    out = tmp_path / "out"
    code = cli.main(["run", "own_features", "--data-root", str(tmp_path / "missing"), "--methods", "contrastive",
                     "--set", "train.precision=bf16", "--device", "cpu", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "file(s) missing under" in error_line(err)
    (warning,) = err.splitlines()[:-1]
    assert warning.startswith("warning: train.precision bf16 on the CPU AMD EPYC 7B12") and "fp32" in warning


def _failing_after(monkeypatch, emit) -> None:
    """``harness list`` made to call ``emit`` and then fail as bad input does."""
    def cmd_list(args):
        emit()
        raise ConfigError("the command's own error")

    monkeypatch.setattr(listing, "handle", cmd_list)


def test_a_python_warning_is_one_warning_line(monkeypatch, capsys):
    _failing_after(monkeypatch, lambda: warnings.warn("first line of it\n  and a second line", UserWarning,
                                                      stacklevel=1))
    shown_before = warnings.showwarning
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert cli.main(["list"]) == 2
    err = capsys.readouterr().err
    assert error_line(err) == "error: the command's own error"
    assert err.splitlines()[0] == "warning: UserWarning: first line of it"
    assert len(err.splitlines()) == 2
    assert warnings.showwarning is shown_before  # restored when the command ends


def test_a_library_log_record_is_one_warning_line(monkeypatch, capsys):
    _failing_after(monkeypatch, lambda: logging.getLogger("somelibrary.part").warning("it went %s\nmore", "odd"))
    handlers = list(logging.getLogger().handlers)
    assert cli.main(["list"]) == 2
    err = capsys.readouterr().err
    error_line(err)
    assert err.splitlines()[0] == "warning: somelibrary.part: it went odd"
    assert len(err.splitlines()) == 2
    assert logging.getLogger().handlers == handlers  # removed when the command ends


def test_a_successful_command_prints_only_prefixed_lines(monkeypatch, capsys):
    def cmd_list(args):
        warnings.warn("multi\nline", DeprecationWarning, stacklevel=1)
        return 0

    monkeypatch.setattr(listing, "handle", cmd_list)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert cli.main(["list"]) == 0
    assert prefixed(capsys.readouterr().err) == ["warning: DeprecationWarning: multi"]


def test_the_worker_s_own_lines_are_error_lines(capsys):
    assert worker.main(["--nonsense"]) == 2
    assert error_line(capsys.readouterr().err, alone=True).startswith("error: usage: python -m harness.worker")
    answer = worker.answer("{not json")
    assert answer["returncode"] != 0 and answer["last_line"].startswith("error: ")


@pytest.mark.parametrize("stderr, problem", [
    ("error: a\nerror: b\n", "2 error: lines"),
    ("error: a\nnote: later\n", "not the last line"),
    ("Traceback (most recent call last):\nerror: a\n", "without error:/warning:/note:"),
    ("warning: w\n", "0 error: lines"),
])
def test_the_helper_refuses_what_breaks_the_contract(stderr, problem):
    with pytest.raises(AssertionError, match=problem):
        error_line(stderr)


def test_the_helper_passes_progress_frames_only_when_asked():
    frames = "note: n\r  0%|          | 0/2 [00:00<?, ?epoch/s]\r 50%|#####     | 1/2\n"
    assert error_line(frames + "error: e\n", progress=True) == "error: e"
    with pytest.raises(AssertionError):
        error_line(frames + "error: e\n")
    with pytest.raises(AssertionError, match="before the error"):
        error_line("note: n\nerror: e\n", alone=True)
