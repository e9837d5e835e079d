"""Data sources: one file each, registered in ``harness.config.registry.SOURCES``.

A source is a class with a frozen ``Params`` dataclass and a ``load(params)`` static
method returning :class:`harness.data.paired.PairedData`. Input sizes of the encoders are read
from what ``load`` returns, never from the task file.
"""
