"""Checking a mechanism's claims by independent routes: ``ldp audit``'s checks
(:mod:`~ldpcli.audit._claims`) and empirical privacy lower bounds (:mod:`~ldpcli.audit._lower_bound`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ldpcli._lazy import attach

if TYPE_CHECKING:
    from ldpcli.audit._bits import LabelSet as LabelSet
    from ldpcli.audit._bits import bit_labels as bit_labels
    from ldpcli.audit._claims import LOWER_BOUND_BETA as LOWER_BOUND_BETA
    from ldpcli.audit._claims import MIN_TRIALS as MIN_TRIALS
    from ldpcli.audit._claims import AuditResult as AuditResult
    from ldpcli.audit._claims import audit as audit
    from ldpcli.audit._lower_bound import LowerBound as LowerBound
    from ldpcli.audit._lower_bound import privacy_lower_bound as privacy_lower_bound

__getattr__, __dir__, __all__ = attach(__name__, __file__)
