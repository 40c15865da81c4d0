"""The version of ldp (one place: the sidecar, the manifest and the CLI read it)."""

__version__ = "0.1.0"
