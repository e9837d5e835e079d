"""SwAMP Bench: a harness for comparing cross-modal retrieval methods on accuracy, time and memory."""
__version__ = "0.1.0"
