"""Reporting from result files: the model of a results folder (``model``), the accuracy and timing tables
(``accuracy``, ``timing``, written by ``formats`` and ``files``), seeds and significance (``stats``), the claims
ledger (``claims``), sweep figures (``plot``) and the results site (``site``).

May import: the layers below it (``run``, ``method``, ``data``, ``config``, ``store``, ``ops``, ``errors``). Reads
result files; never trains.
"""
