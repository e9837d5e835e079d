"""Data: what every source returns (``paired``: :class:`PairedData` of train/val/test :class:`Split` s) and
readers of the on-disk formats the shipped sources share (``images``, ``text``, ``words``, ``videotext``,
``word_vectors``, ``npy``). The sources themselves, one file each, are plugins in ``sources/``.

May import: ``harness.errors``, ``harness.ops``, ``harness.config`` (parameter checks) and ``harness.store``
(atomic writes of caches). ``sources/`` imports only ``harness.api`` and other sources.
"""
