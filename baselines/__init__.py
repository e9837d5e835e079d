"""Methods compared by the harness: one file per method, each registered in ``harness.config.registry.METHODS``."""
