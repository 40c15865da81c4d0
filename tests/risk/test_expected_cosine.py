"""The natural reconstruction's expected cosine, and the near-exact warning built on it (issue 26 item 4).

ε = 100 at d = 64 gave no warning (a boundary row's RMS error is 0.25·L > 0.1·L), yet the attack of
``ldp risk --attack`` recovers every row to cosine ≥ 0.97. :func:`ldpcli.risk._cosine.expected_cosine`
is checked against a seeded Monte Carlo of that attack (the cosine of each released row with its
raw row) within its sampling error, and PrivUnitG's integral against an independent closed form
(Tricomi's U, in mpmath).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest
from helpers import bonferroni_z, ldp, unit_rows, write_list

from ldpcli.analysis._attack import attack
from ldpcli.mechanisms import Mechanism, MechanismSpec
from ldpcli.release._file import write_file_release
from ldpcli.release._options import ReleaseOptions
from ldpcli.release._safety import NEAR_EXACT_COSINE, near_exact_warning, relative_rms
from ldpcli.release._sidecar import sidecar_path
from ldpcli.risk._cosine import expected_cosine

#: (mechanism, d, ε) for the Monte Carlo: small and large ε, small and moderate d.
CASES = [
    (name, d, eps)
    for name in ("privunit2", "privunitg", "duchi-l2", "gaussian-sign", "separated", "privunit-inf", "duchi-linf")
    for d, eps in ((2, 1.0), (8, 4.0), (64, 100.0))
]
N = 20_000
#: Every Monte Carlo check passes together with probability ≥ 1 − 1e-6 when the formula is right.
Z = bonferroni_z(1e-6, len(CASES))


def calibrated(name: str, d: int, eps: float) -> Mechanism:
    return MechanismSpec(name, eps, None, 1.0, {}).calibrate(d)


def boundary_rows(mech: Mechanism, n: int, seed: int) -> np.ndarray:
    """Rows on the boundary: unit rows on the ball, vertices (random signs) of the box."""
    if mech.domain == "linf-box":
        return np.where(np.random.default_rng(seed).random((n, mech.d)) < 0.5, -1.0, 1.0)
    return unit_rows(n, mech.d, seed=seed)


@pytest.mark.parametrize("name, d, eps", CASES)
def test_the_formula_agrees_with_a_seeded_monte_carlo_of_the_attack(name: str, d: int, eps: float) -> None:
    mech = calibrated(name, d, eps)
    expected = expected_cosine(mech)
    assert expected is not None
    x = boundary_rows(mech, N, seed=d)
    z = mech.privatize(x, np.random.default_rng(int(eps) + d))
    cosines = np.einsum("ij,ij->i", z, x) / (np.linalg.norm(z, axis=1) * np.linalg.norm(x, axis=1))
    error = Z * cosines.std(ddof=1) / math.sqrt(N)  # 0 when every cosine is the same (privunit-inf at ε = 100)
    assert abs(cosines.mean() - expected.value) <= error + 1e-12, (cosines.mean(), expected.value, error)


@pytest.mark.slow
@pytest.mark.parametrize("d, eps", [(2, 1.0), (16, 8.0), (64, 100.0), (1000, 50.0), (10**5, 1e4)])
def test_privunitg_integral_equals_its_closed_form(d: int, eps: float) -> None:
    """E cos = μ/√2 · U(½, 1 − d/2, c²/2): the integral ∫₀^∞ t^{−1/2}(1 + 2t)^{−(d+1)/2}e^{−tc²} dt is
    √(π/2)·U(½, 1 − d/2, c²/2) (DLMF 13.4.4 with t = s/2)."""
    mech = calibrated("privunitg", d, eps)
    with mp.workdps(40):
        reference = mp.exp(mech.log_mu) / mp.sqrt(2) * mp.hyperu(mp.mpf(1) / 2, 1 - mp.mpf(d) / 2,
                                                                  mp.mpf(mech.threshold) ** 2 / 2)
    value = expected_cosine(mech)
    assert value is not None and value.value == pytest.approx(float(reference), rel=1e-9)


def test_the_constant_norm_mechanisms_give_the_inverse_of_their_scale() -> None:
    mech = calibrated("privunit2", 64, 100.0)
    value = expected_cosine(mech)
    assert value is not None and value.value == pytest.approx(1.0 / mech.scale, rel=1e-15)
    assert value.value == pytest.approx(0.9709, abs=5e-5)  # the "cosine ≥ 0.97"
    assert value.value == pytest.approx(1.0 / math.sqrt(1.0 + relative_rms(mech) ** 2), rel=1e-12)


def test_no_formula_for_bcdp_the_baselines_and_one_coordinate() -> None:
    assert expected_cosine(calibrated("laplace", 8, 4.0)) is None
    assert expected_cosine(MechanismSpec("gaussian", 4.0, None, 1.0, {"delta": 1e-6}).calibrate(8)) is None
    assert expected_cosine(MechanismSpec("bcdp", 4.0, None, 1.0, {"q": 0.1}).calibrate(8)) is None
    assert expected_cosine(calibrated("scalar", 1, 4.0)) is None


# --- the near-exact warning ------------------------------------------------------------------------


def test_epsilon_100_at_d_64_warns_with_the_expected_cosine_and_4_does_not() -> None:
    strong = calibrated("privunit2", 64, 100.0)
    assert relative_rms(strong) > 0.1  # the RMS criterion alone said nothing
    text = near_exact_warning(strong)
    assert text is not None
    assert "recovers the raw row's direction to expected cosine 0.971" in text
    assert "essentially publishes the data" in text and "e^100 × 1.06e-24, is ≥ 1" in text
    assert near_exact_warning(calibrated("privunit2", 64, 4.0)) is None
    for name in ("privunitg", "duchi-l2", "gaussian-sign", "separated"):
        assert near_exact_warning(calibrated(name, 64, 4.0)) is None, name


def test_the_bound_alone_says_the_directions_are_unprotected() -> None:
    """d = 3, ε = 4: e⁴·P(⟨Y, v0⟩ ≥ 0.9) = e⁴·0.05 > 1, while the attack's cosine is 0.76 < 0.9."""
    mech = calibrated("privunit2", 3, 4.0)
    cosine = expected_cosine(mech)
    assert cosine is not None and cosine.value < NEAR_EXACT_COSINE
    text = near_exact_warning(mech)
    assert text is not None and "e^4 × 0.05, is ≥ 1" in text
    assert "guarantees nothing about the rows' directions at that accuracy" in text and "essentially publishes" not in text
    laplace = near_exact_warning(calibrated("laplace", 64, 100.0))  # no cosine formula: the bound still speaks
    assert laplace is not None and "e^100 × 1.06e-24, is ≥ 1" in laplace and "expected cosine" not in laplace


def test_privatize_warns_and_records_it_at_epsilon_100_d_64(tmp_path: Path) -> None:
    src = write_list(tmp_path / "emb.parquet", unit_rows(100, 64))
    res = ldp("privatize", src, "--eps", "100", "--seed", "1")
    assert res.exit_code == 0, res.stderr
    assert "expected cosine 0.971" in res.stderr and "essentially publishes the data" in res.stderr
    side = json.loads(sidecar_path(tmp_path / "emb.privatized.parquet").read_text())
    assert any("expected cosine 0.971" in text for text in side["release"]["warnings"])
    moderate = ldp("privatize", src, "-o", tmp_path / "m.parquet", "--eps", "4", "--seed", "1")
    assert moderate.exit_code == 0 and "essentially" not in moderate.stderr and "no such guess" not in moderate.stderr


def test_the_attack_report_states_the_expected_cosine_and_the_rows_agree(tmp_path: Path) -> None:
    n = 2000
    src = write_list(tmp_path / "raw.parquet", unit_rows(n, 16, seed=3))
    out = tmp_path / "out.parquet"
    write_file_release(src, out, epsilon=30.0, options=ReleaseOptions(seed=5))
    report = attack(out, src)
    expected = report.expected_boundary
    assert expected is not None and report.expected_how == "exact, closed form"
    assert expected == expected_cosine(calibrated("privunit2", 16, 30.0)).value  # type: ignore[union-attr]
    # Var(cos) ≤ E(1 − cos)² ≤ 2(1 − E cos) for cosines in [−1, 1]: a bound on the sampling error of the mean.
    mean = report.release["mean"]
    assert mean is not None and abs(mean - expected) <= 5.0 * math.sqrt(2.0 * (1.0 - expected) / n)
    assert attack(out, src, k=8).expected_boundary is None  # a k < d view: not the boundary row's cosine
    shown = ldp("risk", "--attack", out, "--raw", src, "-q")
    assert shown.exit_code == 0 and "for a row on the boundary" in shown.stdout


def test_copies_count_in_the_bound(tmp_path: Path) -> None:
    """Two copies at ε = 50 each: one copy is 50-LDP (bound e^50 × 1.06e-24 < 1), the release 100-LDP."""
    half = calibrated("privunit2", 64, 50.0)
    assert near_exact_warning(half) is None
    both = near_exact_warning(half, copies=2)
    assert both is not None and "e^100 × 1.06e-24, is ≥ 1" in both
    src = write_list(tmp_path / "emb.parquet", unit_rows(50, 64))
    res = ldp("privatize", src, "--eps", "100", "--copies", "2", "--seed", "1")
    assert res.exit_code == 0, res.stderr
    assert "e^100 × 1.06e-24, is ≥ 1" in res.stderr
