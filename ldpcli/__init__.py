"""ldp: privatize vector datasets under local differential privacy."""

__version__ = "0.1.0"
