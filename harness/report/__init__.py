"""Reporting from result files: accuracy and timing tables (``tables``), significance over seeds and
queries (``stats``) and sweep figures (``plot``).

May import: ``errors``, ``ops``, ``store``, ``config``. Reads result files; never trains.
"""
