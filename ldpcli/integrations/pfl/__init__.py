"""pfl (Apple's ``pfl-research``, the optional extra ``pfl``): ldp's mechanisms as a pfl local privacy mechanism.

``LdpMechanism(mechanism="privunit2", epsilon=…, norm_bound=…)``
    A ``pfl.privacy.LocalPrivacyMechanism``: each user's statistics privatized as one vector (clipped in ℓ2 to
    L, then one release of the mechanism), ε in the metrics pfl collects.

pfl is imported when the name is first used (an ImportError naming the extra when it is missing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ldpcli._lazy import attach

if TYPE_CHECKING:
    from ldpcli.integrations.pfl._mechanism import LdpMechanism as LdpMechanism

__getattr__, __dir__, __all__ = attach(__name__, __file__)
