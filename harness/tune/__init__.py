"""Tuning with an equal budget per method (``harness tune``): each method's search space, read from where its
settings are declared and narrowed by the task's ``tune:`` block (``space``), the Optuna studies that search it on
the validation split, shared by every worker and resumable (``study``: what a study is and one worker's loop;
``storage``: where it is kept, its lock, the trials counted against the exact budget and the recovery of dead
workers' trials; ``trial``: one trial trained and told; ``record``: the study as the tuned result files record it),
and the command that runs the studies and then the tuned runs (``command``).

May import: ``run``, ``config``, ``data``, ``store``, ``errors``, and ``report`` for the tables it prints. Never
``cli`` or ``analysis``.
"""
