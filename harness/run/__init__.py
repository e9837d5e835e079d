"""Running: one run's orchestration (``runner``), building device, data and method (``build``), the checks
before anything trains (``preflight``), the training loop (``train``), evaluation (``evaluate``), guards for
non-finite losses and out-of-memory (``guards``), collapse detection (``collapse``), checkpoints and resume
(``checkpoint``), run locks (``locks``), multi-process training (``distributed``), timing and memory
(``profiling``), how busy the machine was while timing (``contention``) and the no-training floor (``floor``).

May import: ``errors``, ``ops``, ``store``, ``config``, ``data``, ``method``. Never ``report``, ``analysis`` or
``cli``.
"""
