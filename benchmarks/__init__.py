"""asv benchmark suite of SwAMP Bench (see docs/benchmarks.md).

Every benchmark imports ``harness`` and ``baselines`` from ``sys.path``; the regression
gate (``python -m harness bench``) puts the checkout being measured first on PYTHONPATH,
so this one suite times any revision.
"""
