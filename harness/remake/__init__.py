"""Re-making runs from their result files and judging them again (``harness reproduce``): the evidence of a claims
ledger re-made at this checkout, each verdict judged again beside the committed one (``evidence``), and the
reference table's tuned runs re-made, the table computed again (``reference``). Each run is rebuilt from the
settings, seeds and threads its result file records (:func:`harness.run.grid.rerun`); ``--write`` replaces the
committed result files and tables.

It sits above the report layer, whose rules judge what it makes, so that the report layer trains nothing.

May import: ``analysis``, ``report``, ``run``, ``config``, ``store``, ``errors``. Never ``tune``, ``cli`` or
``worker``.
"""
