"""Registered mechanisms. Importing this package registers every mechanism module it lists.

Registration order is the order of ``mechanism_names()`` (and of ``ldp params`` comparisons).
"""

from ldpcli.math._lawtests import LawTest
from ldpcli.mechanisms._base import (
    Mechanism,
    MechanismSpec,
    OptionSpec,
    declare,
    get_mechanism,
    mechanism_names,
    register,
    unregister,
)
from ldpcli.mechanisms._composition import ReleaseCost, release_cost, total_cost
from ldpcli.mechanisms._hooks import RiskEpsilon
from ldpcli.mechanisms._rendering import secured
# Registration order, not alphabetical: the imports below register in this order.
from ldpcli.mechanisms._privunit import PrivUnit2
from ldpcli.mechanisms._privunitg import PrivUnitG
from ldpcli.mechanisms._projunit import ProjUnit
from ldpcli.mechanisms._hemisphere import DuchiL2
from ldpcli.mechanisms._gaussian_sign import GaussianSign
from ldpcli.mechanisms._hypercube import DuchiLinf, PrivUnitInf
from ldpcli.mechanisms._scalar import ScalarDP
from ldpcli.mechanisms._scalar_rel import ScalarRelDP
from ldpcli.mechanisms._separated import Separated
from ldpcli.mechanisms._baselines import Gaussian, Laplace
from ldpcli.mechanisms._bcdp import BCDP
from ldpcli.mechanisms._compressed import SeedReports

__all__ = [
    "BCDP",
    "DuchiL2",
    "DuchiLinf",
    "Gaussian",
    "GaussianSign",
    "Laplace",
    "LawTest",
    "ReleaseCost",
    "RiskEpsilon",
    "Mechanism",
    "MechanismSpec",
    "OptionSpec",
    "PrivUnit2",
    "PrivUnitG",
    "PrivUnitInf",
    "ProjUnit",
    "ScalarDP",
    "ScalarRelDP",
    "SeedReports",
    "Separated",
    "declare",
    "get_mechanism",
    "mechanism_names",
    "register",
    "release_cost",
    "secured",
    "total_cost",
    "unregister",
]
