"""Data sources: one file each, registered in ``harness.api.SOURCES``.

A source is a class with a frozen ``Params`` dataclass and a ``load(params)`` static
method returning :class:`harness.data.paired.PairedData`. Input sizes of the encoders are read
from what ``load`` returns, never from the task file.

Plugins: files here import only :mod:`harness.api` and each other (an import contract checks it).
"""
