"""What the harness writes: atomic file writes (``io``), the result file's schema with its one writer and
one reader (``schema``), and provenance: machine, versions, commit and source hashes (``provenance``).

May import: ``harness.errors`` only.
"""
