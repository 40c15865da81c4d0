"""Registered mechanisms. Importing this package registers every mechanism module it lists.

Registration order is the order of ``mechanism_names()`` (and of ``ldp params`` comparisons).
"""

from ldpcli.math.lawtests import LawTest
from ldpcli.mechanisms.base import (
    Mechanism,
    MechanismSpec,
    OptionSpec,
    declare,
    get_mechanism,
    mechanism_names,
    register,
    unregister,
)
from ldpcli.mechanisms.hooks import RiskEpsilon
# Registration order, not alphabetical: the imports below register in this order.
from ldpcli.mechanisms.privunit import PrivUnit2
from ldpcli.mechanisms.privunitg import PrivUnitG
from ldpcli.mechanisms.hemisphere import DuchiL2
from ldpcli.mechanisms.gaussian_sign import GaussianSign
from ldpcli.mechanisms.hypercube import DuchiLinf, PrivUnitInf
from ldpcli.mechanisms.scalar import ScalarDP
from ldpcli.mechanisms.scalar_rel import ScalarRelDP
from ldpcli.mechanisms.separated import Separated
from ldpcli.mechanisms.baselines import Gaussian, Laplace
from ldpcli.mechanisms.bcdp import BCDP

__all__ = [
    "BCDP",
    "DuchiL2",
    "DuchiLinf",
    "Gaussian",
    "GaussianSign",
    "Laplace",
    "LawTest",
    "RiskEpsilon",
    "Mechanism",
    "MechanismSpec",
    "OptionSpec",
    "PrivUnit2",
    "PrivUnitG",
    "PrivUnitInf",
    "ScalarDP",
    "ScalarRelDP",
    "Separated",
    "declare",
    "get_mechanism",
    "mechanism_names",
    "register",
    "unregister",
]
