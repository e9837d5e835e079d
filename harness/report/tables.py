"""The names of the tables' modules that callers outside the report layer's own modules still import from here: the
command line's check of ``--test-stat`` and two test modules. The tables themselves live in
:mod:`harness.report.accuracy` (the accuracy table), :mod:`harness.report.timing` (the timing table),
:mod:`harness.report.formats` (the tables as text) and :mod:`harness.report.files` (the written files and their
recorded options); no module of the report layer imports this one."""
from __future__ import annotations

from harness.report.accuracy import accuracy_footnote, accuracy_rows, tested_column
from harness.report.files import TableOptions, record_options

__all__ = ["TableOptions", "accuracy_footnote", "accuracy_rows", "record_options", "tested_column"]
