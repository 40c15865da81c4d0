"""The math layer: log-space special functions and sphere geometry, exact samplers, domains,
compiled kernels and the goodness-of-fit tests of a mechanism's exact law. numpy and scipy only:
nothing here reads a file or knows a mechanism."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ldpcli._lazy import attach

if TYPE_CHECKING:
    from ldpcli.math._bitgen import describe_generator as describe_generator
    from ldpcli.math._bitgen import require_randomgen as require_randomgen
    from ldpcli.math._bitgen import secure_generator as secure_generator
    from ldpcli.math._chacha20 import release_key as release_key
    from ldpcli.math._counter_rng import CounterGenerator as CounterGenerator
    from ldpcli.math._devices import device_namespace as device_namespace
    from ldpcli.math._devices import device_normals as device_normals
    from ldpcli.math._devices import device_of as device_of
    from ldpcli.math._domains import INTERVAL as INTERVAL
    from ldpcli.math._domains import L2_BALL as L2_BALL
    from ldpcli.math._domains import LINF_BOX as LINF_BOX
    from ldpcli.math._domains import Domain as Domain
    from ldpcli.math._domains import get_domain as get_domain
    from ldpcli.math._kernels import KERNEL_ENV as KERNEL_ENV
    from ldpcli.math._lawtests import LawTest as LawTest

__getattr__, __dir__, __all__ = attach(__name__, __file__)
