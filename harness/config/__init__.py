"""Configuration: task files read into frozen, typed specs (``spec``), their checks (``checks``), the
``Params`` dataclass machinery every plugin uses (``params``), the plan of runs a command asks for (seeds ×
sweep grid, run folder names: ``plan``) and the plugin registries with their discovery (``registry``).

May import: ``harness.errors`` and ``harness.ops``. Nothing here trains, loads data or writes files.
"""
