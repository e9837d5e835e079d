"""Tuning with an equal budget per method (``harness tune``) and the reference table's sets (``harness leaderboard
TASK``): each method's search space, read from where its settings are declared and narrowed by the task's ``tune:``
block (``space``), the Optuna studies that search it, shared by every worker and resumable (``study``: what a study
is and one worker's loop, a row's trials in order with a sampler seeded by the row's name; ``storage``: where it is
kept, its lock, the claim on a whole row, the trials counted against the exact budget, the recovery of dead workers'
trials and the storage named relative to a result folder; ``trial``: one trial trained and told; ``folds``: the mean
over folds of the training split where a validation split is too small; ``record``: the study as the tuned result
files record it), the command that runs the studies and then the tuned runs (``command``, its workers in
``workers``, its typed options in ``options``), and the reference table's sets (``reference_sets``, with the budget
extended equally while a row still rises: ``budget``).

May import: ``run``, ``config``, ``data``, ``store``, ``errors``, and ``report`` for the tables it prints and the
rows and convergence rule of the reference table. Never ``cli`` or ``analysis``.
"""
