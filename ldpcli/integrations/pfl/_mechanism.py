"""ldp's mechanisms in pfl: :class:`LdpMechanism`, a ``pfl.privacy.LocalPrivacyMechanism``.

pfl calls a local mechanism once per user on that user's statistics (``postprocess_one_user`` →
:meth:`LdpMechanism.privatize`); here they are privatized as one vector by
:func:`ldpcli.integrations.privatize_update` (the arrays of ``statistics.get_weights()``, numpy or the tensors of
pfl's framework on their device: clipped in ℓ2 to L, one release of the mechanism, the same shapes and dtypes
back). The statistics' metadata (pfl's weight, a count of data points) is passed through as it is: public, as
Flower's ``num-examples``. The metrics pfl aggregates get the exact ε of the release and L, never anything of the
clip (PrivUnit2 had been pfl's own until pfl-research removed it; its Gaussian and Laplace mechanisms remain).

pfl's privacy accountants account central mechanisms (noise on the sum); a local release's ε is per user and
round: users compose over the rounds they take part in (basic composition; a server can keep
:class:`~ldpcli.integrations.ClientLedger`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ldpcli.integrations._model_update import checked_spec, privatize_update

try:
    from pfl.metrics import Metrics, StringMetricName, Weighted
    from pfl.privacy.privacy_mechanism import LocalPrivacyMechanism
    from pfl.stats import TrainingStatistics
except ImportError:  # pragma: no cover - exercised by the missing-extra test in a subprocess
    from ldpcli.errors import install_hint

    raise ImportError(f"ldpcli.integrations.pfl needs pfl: {install_hint('pfl')}") from None


class LdpMechanism(LocalPrivacyMechanism):
    """A pfl local privacy mechanism backed by a registered ldp mechanism (PrivUnit2 by default).

    Parameters
    ----------
    mechanism : str
        A registered vector mechanism.
    epsilon : float
        The ε of each user's release (per round).
    norm_bound : float
        The public ℓ2 bound L the statistics are clipped to.
    **options
        The mechanism's own options.

    pfl's per-user ``seed`` (a simulation's) seeds the release (numpy's PCG64); without one, ldp's ChaCha20
    stream keyed from the OS draws it.
    """

    def __init__(self, mechanism: str = "privunit2", *, epsilon: float, norm_bound: float, **options: Any) -> None:
        spec = checked_spec(mechanism, epsilon, norm_bound, options)
        self.mechanism, self.epsilon, self.norm_bound = spec.name, float(spec.epsilon), float(spec.norm_bound)
        self.options = dict(options)

    def privatize(self, statistics: TrainingStatistics,
                  name_formatting_fn: Callable[[str], Any] = lambda n: StringMetricName(n),
                  seed: int | None = None) -> tuple[TrainingStatistics, Metrics]:
        """``statistics`` privatized as one vector, and the metrics of the release (its exact ε and L)."""
        metadata, weights = statistics.get_weights()
        private, record = privatize_update(list(weights), mechanism=self.mechanism, epsilon=self.epsilon,
                                           norm_bound=self.norm_bound, rng=seed, **self.options)
        metrics = Metrics([(name_formatting_fn("ldp epsilon"), Weighted.from_unweighted(record.epsilon)),
                           (name_formatting_fn("l2 norm bound"), Weighted.from_unweighted(self.norm_bound))])
        return statistics.from_weights(metadata, private), metrics
