"""Methods compared by the harness: one file per method, each registered with ``@harness.api.METHODS.register``.

Plugins: files here import only :mod:`harness.api` and each other (an import contract checks it). A new file
here is discovered automatically; see docs/methods.md for a complete minimal method.
"""
