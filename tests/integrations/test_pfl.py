"""pfl (issue 41 item 3): ``LdpMechanism`` is a pfl ``LocalPrivacyMechanism`` that pfl's own per-user hook calls;
the statistics come back privatized (same keys, shapes, dtypes, weight), with ε in pfl's metrics."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pfl")

from pfl.context import UserContext  # noqa: E402
from pfl.privacy.privacy_mechanism import LocalPrivacyMechanism  # noqa: E402
from pfl.stats import MappedVectorStatistics  # noqa: E402

from ldpcli.integrations.pfl import LdpMechanism  # noqa: E402
from ldpcli.mechanisms import MechanismSpec  # noqa: E402


def test_pfl_calls_it_per_user_and_gets_privatized_statistics_with_epsilon() -> None:
    mechanism = LdpMechanism(epsilon=4.0, norm_bound=1.0)
    assert isinstance(mechanism, LocalPrivacyMechanism)
    stats = MappedVectorStatistics({"w": np.full((3, 4), 0.01, np.float32), "b": np.full(5, 0.02, np.float32)},
                                   weight=7)
    private, metrics = mechanism.postprocess_one_user(stats=stats, user_context=UserContext(num_datapoints=7, seed=3))
    assert set(private.keys()) == {"w", "b"} and private.weight == 7
    assert private["w"].shape == (3, 4) and private["w"].dtype == np.float32
    mech = MechanismSpec("privunit2", 4.0, None, 1.0).validated().calibrate(17)
    norm = np.sqrt(sum(float(np.sum(private[k].astype(np.float64) ** 2)) for k in private.keys()))
    assert mech.scale is not None and norm == pytest.approx(mech.scale, rel=1e-5)
    values = {str(name): value for name, value in metrics}
    assert values["Local DP | ldp epsilon"].overall_value == mech.epsilon_exact
    again, _ = mechanism.postprocess_one_user(stats=stats, user_context=UserContext(num_datapoints=7, seed=3))
    assert np.array_equal(again["w"], private["w"])  # pfl's per-user seed seeds the release


def test_a_bad_spec_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="epsilon"):
        LdpMechanism(epsilon=-1.0, norm_bound=1.0)
