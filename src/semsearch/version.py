"""The version, in a module of its own: everything may import it without importing the package's
entry points (`semsearch.connect` sits above every layer)."""

__version__ = "0.1.0"
