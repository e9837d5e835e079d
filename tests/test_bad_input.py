"""The bad-input matrix: every row exits with status 2 and one error line naming the problem and the fix,
writes nothing under the results folder and raises no traceback; docs/bad-input-matrix.md is current."""
from __future__ import annotations

import pytest

from harness import cli  # noqa: F401 (imported before the rows run: no import-time warnings)
from harness.config import plan  # noqa: F401
from harness.run import preflight, runner  # noqa: F401
from tests import bad_input_matrix as matrix
from tests.bad_input_cases import CASES
from tests.error_lines import error_line

OBSERVED: dict[str, str | None] = {}  # case id -> error line, for the document check below
CAN_MOUNT = matrix.mount_available()


# a row on a read-only mount runs in a subprocess of its own (seconds): it belongs to the slow set
ROWS = [pytest.param(c, marks=pytest.mark.slow) if c.read_only_mount else c for c in CASES]


@pytest.mark.parametrize("case", ROWS, ids=lambda c: c.id)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(case, tmp_path):
    if case.read_only_mount and not CAN_MOUNT:
        pytest.skip("this machine cannot mount a read-only tmpfs in a user namespace (unshare)")
    obs = matrix.observe(case, tmp_path)
    assert obs.raised is None, f"an exception escaped: {obs.raised}"
    assert obs.status == 2, obs.stderr
    line = error_line(obs.stderr, alone=True)
    assert case.problem in line and case.fix in line, line
    if case.suggestion is not None:
        assert f"(did you mean {case.suggestion!r}?)" in line, line
    assert not obs.warnings, obs.warnings
    assert not obs.written, f"written under the results folder: {obs.written}"
    OBSERVED[case.id] = matrix.error_line(obs, tmp_path)


def test_the_matrix_has_at_least_30_rows_with_distinct_ids():
    assert len(CASES) >= 30 and len({c.id for c in CASES}) == len(CASES)
    assert {c.group for c in CASES} == {"task file", "plugins", "command line", "data"}


def test_the_committed_document_is_current(tmp_path_factory):
    """docs/bad-input-matrix.md equals what the rows print now (rows not run above are run here, but for those on
    a read-only mount: they are compared when the slow set ran them in this session)."""
    for case in CASES:
        if case.id not in OBSERVED and not case.read_only_mount:
            folder = tmp_path_factory.mktemp(case.id)
            OBSERVED[case.id] = matrix.error_line(matrix.observe(case, folder), folder)
    committed = matrix.DOC.read_text().splitlines()
    fresh = matrix.render(OBSERVED).splitlines()
    skipped = {f"`{c.id}`" for c in CASES if c.id not in OBSERVED}
    keep = [i for i, line in enumerate(fresh) if not any(f"| {s} |" in line for s in skipped)]
    assert len(committed) == len(fresh), "rows were added or removed: run python -m tests.bad_input_matrix"
    assert [committed[i] for i in keep] == [fresh[i] for i in keep], \
        "docs/bad-input-matrix.md is out of date: run python -m tests.bad_input_matrix"
