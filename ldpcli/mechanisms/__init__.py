"""Registered mechanisms. Importing this package registers every mechanism module it lists."""

from ldpcli.mechanisms.base import Mechanism, get_mechanism, mechanism_names, register
from ldpcli.mechanisms.privunit import PrivUnit2

__all__ = ["Mechanism", "PrivUnit2", "get_mechanism", "mechanism_names", "register"]
