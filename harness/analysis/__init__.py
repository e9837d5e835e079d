"""Analyses of finished runs that rebuild their models: cluster reports of SwAMP's prototypes
(``clusters``), ensembles of two runs (``ensemble``) and the rebuild itself (``restore``).

May import: everything below the command line (``run``, ``report``, ``store``, ``data``, ``config``, ``ops``).
"""
