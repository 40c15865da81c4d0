"""The version of ldp (one place: the sidecar, the manifest and ``ldp --version`` read it)."""

__version__ = "0.1.0"
