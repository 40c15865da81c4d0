"""Reconstruction of a direction under a diffuse prior (Bhowmick et al. 2018, Sec. 2.3.1, Lemma 2.2, Prop. 1).

The uniform cap probability is checked against two arbitrary-precision routes that do not use
spheremath's incomplete beta: mpmath's betainc (k ≤ 100) and the positive hypergeometric series
of the incomplete beta (DLMF 8.17.8), summed term by term in mpmath (every k, up to 10⁷).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import mpmath as mp
import pytest

from ldpcli.errors import UsageError
from ldpcli.mechanisms import RiskEpsilon
from ldpcli.risk import _diffuse as df
from ldpcli.risk._section import reconstruction_for

#: A bare 2-LDP release, for the section tests.
RELEASE = RiskEpsilon("release", 2.0, "any 2-LDP release, any prior", True)

KS = [4, 16, 100, 10**4, 10**7]
AS = [0.1, 0.3, 0.5, 0.9]
EPSILONS = [1.0, 8.0, 100.0]


def mp_log_cap_betainc(a: float, k: int) -> float:
    """log I_{(1−a)/2}((k−1)/2, (k−1)/2) by mpmath's betainc at 60 digits."""
    with mp.workdps(60):
        alpha = mp.mpf(k - 1) / 2
        x = (1 - mp.mpf(a)) / 2
        return float(mp.log(mp.betainc(alpha, alpha, 0, x, regularized=True)))


def mp_log_cap_series(a: float, k: int) -> float:
    """log I_x(α, α), x = (1−a)/2, α = (k−1)/2, by DLMF 8.17.8 summed in 50-digit arithmetic.

    I_x(α, β) = x^α (1 − x)^β / (α B(α, β)) · Σ_{n≥0} (α + β)_n/(α + 1)_n x^n: all terms positive, the
    ratio of consecutive terms is x(α + β + n)/(α + 1 + n) < 1 for x < 1/2 (a > 0), so the sum is
    stopped once a term is below 1e−45 of the partial sum and the ratio has fallen below 1.
    """
    with mp.workdps(50):
        alpha = mp.mpf(k - 1) / 2
        x = (1 - mp.mpf(a)) / 2
        log_beta = 2 * mp.loggamma(alpha) - mp.loggamma(2 * alpha)
        log_pre = alpha * mp.log(x) + alpha * mp.log1p(-x) - mp.log(alpha) - log_beta
        total = mp.mpf(1)
        term = mp.mpf(1)
        n = 0
        while True:
            ratio = x * (2 * alpha + n) / (alpha + 1 + n)
            term *= ratio
            total += term
            n += 1
            if term < total * mp.mpf(10) ** -45 and ratio < 1:
                break
        return float(log_pre + mp.log(total))


@pytest.mark.parametrize("k", [4, 16, 100])
@pytest.mark.parametrize("a", AS)
def test_series_oracle_agrees_with_mpmath_betainc(k: int, a: float) -> None:
    """The two oracles agree where mpmath's betainc is quick: the series may stand in for it at large k."""
    assert mp_log_cap_series(a, k) == pytest.approx(mp_log_cap_betainc(a, k), rel=1e-14)


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("a", AS)
def test_log_uniform_cap_matches_mpmath(k: int, a: float) -> None:
    ref = mp_log_cap_betainc(a, k) if k <= 100 else mp_log_cap_series(a, k)
    assert math.isfinite(ref)
    assert df.log_uniform_cap(a, k) == pytest.approx(ref, rel=1e-9)


def test_log_uniform_cap_closed_forms_and_ends() -> None:
    for a in (0.0, 0.1, 0.3, 0.5, 0.9, 0.999):
        assert math.exp(df.log_uniform_cap(a, 2)) == pytest.approx(math.acos(a) / math.pi, rel=1e-12)
        assert math.exp(df.log_uniform_cap(a, 3)) == pytest.approx((1.0 - a) / 2.0, rel=1e-12)
    for k in (2, 3, 4, 10**7):
        assert df.log_uniform_cap(0.0, k) == -math.log(2.0)
        assert df.log_uniform_cap(1.0, k) == -math.inf


def mp_prop1(epsilon: float, k: int, a: float, rho0: float) -> tuple[float | None, float | None]:
    """The two printed branches of Prop. 1 in 50-digit arithmetic (None outside their range)."""
    with mp.workdps(50):
        e, kk, aa, r = mp.mpf(epsilon), mp.mpf(k), mp.mpf(a), mp.mpf(rho0)
        small = e + r + kk / 2 * mp.log(1 - aa**2) if aa <= 1 / mp.sqrt(2) else None
        large = (
            e + r + (kk - 1) / 2 * mp.log(1 - aa**2) - mp.log(2 * aa * mp.sqrt(kk)) if aa >= mp.sqrt(2 / kk) else None
        )
        return (None if small is None else float(small)), (None if large is None else float(large))


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("a", AS)
def test_prop1_branches_match_printed_formulas_and_bound_the_exact_cap(epsilon: float, k: int, a: float) -> None:
    for rho0 in (0.0, 0.5):
        risk = df.diffuse_risk(epsilon, k=k, a=a, rho0=rho0)
        small, large = mp_prop1(epsilon, k, a, rho0)
        for mine, ref in ((risk.log_prop1_small, small), (risk.log_prop1_large, large)):
            if ref is None:
                assert mine is None
            else:
                assert mine == pytest.approx(ref, rel=1e-12, abs=1e-12)
                # Lemma D.1: the exact cap probability is never above either applicable branch
                assert risk.log_exact <= mine + 1e-12 * max(1.0, abs(mine))
        applicable = [v for v in (risk.log_prop1_small, risk.log_prop1_large) if v is not None]
        assert risk.log_prop1 == (min(applicable) if applicable else None)
        assert risk.log_exact == epsilon + rho0 + risk.log_prior


def test_prop1_needs_k_at_least_4() -> None:
    for k in (2, 3):
        risk = df.diffuse_risk(1.0, k=k, a=0.5)
        assert risk.log_prop1_small is None and risk.log_prop1_large is None and risk.log_prop1 is None
        assert risk.to_dict()["log_prop1"] is None


def test_finite_at_extreme_epsilon_and_dimension() -> None:
    risk = df.diffuse_risk(1e4, k=10**7, a=0.9)
    for value in (risk.log_prior, risk.log_exact, risk.log_bound, risk.log_prop1_large):
        assert value is not None and math.isfinite(value)
    assert risk.log_exact < -8e6 and risk.guarantee
    assert risk.probability_bound == 0.0  # underflows; the log is the answer
    json.dumps(risk.to_dict(), allow_nan=False)
    # and the other way: no guarantee at ε = 1e4, k = 4
    weak = df.diffuse_risk(1e4, k=4, a=0.9)
    assert not weak.guarantee and weak.log_bound == 0.0 and weak.probability_bound == 1.0
    assert weak.log_exact > 0.0  # unclipped


def test_to_dict_at_a_equal_1_is_impossible_and_json_clean() -> None:
    risk = df.diffuse_risk(5.0, k=16, a=1.0)
    info = risk.to_dict()
    assert info["impossible"] is True and info["guarantee"] is True
    assert info["log_prior"] is None and info["log_exact"] is None and info["log_bound"] is None
    assert info["probability_bound"] == 0.0
    assert info["log_prop1_small"] is None and info["log_prop1_large"] is None
    json.dumps(info, allow_nan=False)
    assert df.diffuse_risk(5.0, k=16, a=0.5).to_dict()["impossible"] is False


@pytest.mark.parametrize("k", [4, 100, 10**4, 10**7])
@pytest.mark.parametrize("a", AS)
@pytest.mark.parametrize("max_risk", [1e-300, 1e-6, 0.01, 0.5, 1.0])
@pytest.mark.parametrize("rho0", [0.0, 1.0])
def test_max_epsilon_round_trips(k: int, a: float, max_risk: float, rho0: float) -> None:
    budget = df.max_epsilon_for_risk(max_risk, k=k, a=a, rho0=rho0)
    target = math.log(max_risk)
    eps = budget.epsilon_max
    if eps is None:
        assert budget.reason and "ε = 0" in budget.reason
        assert rho0 + df.log_uniform_cap(a, k) > target
    else:
        assert df.diffuse_risk(eps, k=k, a=a, rho0=rho0).log_exact <= target
        assert df.diffuse_risk(eps + 1e-9 * max(1.0, eps), k=k, a=a, rho0=rho0).log_exact > target
    eps1 = budget.epsilon_max_prop1
    if eps1 is not None:
        assert eps is not None and eps1 <= eps
        prop1 = df.diffuse_risk(eps1, k=k, a=a, rho0=rho0).log_prop1
        assert prop1 is not None and prop1 <= target
        above = df.diffuse_risk(eps1 + 1e-9 * max(1.0, eps1), k=k, a=a, rho0=rho0).log_prop1
        assert above is not None and above > target
    json.dumps(budget.to_dict(), allow_nan=False)


def test_max_epsilon_unreachable_and_unbounded() -> None:
    budget = df.max_epsilon_for_risk(0.01, k=4, a=0.1)  # the prior alone: ≈ 0.44 > 0.01
    assert budget.epsilon_max is None and budget.epsilon_max_prop1 is None
    assert budget.reason is not None and "ε = 0" in budget.reason
    # ρ0 alone can exceed the target
    assert df.max_epsilon_for_risk(0.01, k=100, a=0.3, rho0=10.0).epsilon_max is None
    assert df.max_epsilon_for_risk(0.01, k=100, a=0.3, rho0=0.0).epsilon_max == pytest.approx(
        math.log(0.01) - df.log_uniform_cap(0.3, 100), rel=1e-15
    )
    free = df.max_epsilon_for_risk(0.01, k=16, a=1.0)
    assert free.epsilon_max == math.inf and free.reason is not None
    info = free.to_dict()
    assert info["epsilon_max"] is None and info["unbounded"] is True
    json.dumps(info, allow_nan=False)
    # k < 4: no Prop. 1 variant, said in the reason
    small_k = df.max_epsilon_for_risk(0.5, k=3, a=0.3)
    assert small_k.epsilon_max is not None and small_k.epsilon_max_prop1 is None
    assert small_k.reason is not None and "Prop. 1" in small_k.reason


@pytest.mark.parametrize(
    "call, flag",
    [
        (lambda: df.diffuse_risk(1.0, k=1, a=0.5), "k"),
        (lambda: df.diffuse_risk(1.0, k=2.0, a=0.5), "k"),
        (lambda: df.diffuse_risk(1.0, k=True, a=0.5), "k"),
        (lambda: df.diffuse_risk(1.0, k=11, a=0.5, d=10), "k"),
        (lambda: df.diffuse_risk(1.0, k=4, a=-0.1), "a"),
        (lambda: df.diffuse_risk(1.0, k=4, a=1.1), "a"),
        (lambda: df.diffuse_risk(1.0, k=4, a=math.nan), "a"),
        (lambda: df.diffuse_risk(1.0, k=4, a=0.5, rho0=-1.0), "rho0"),
        (lambda: df.diffuse_risk(1.0, k=4, a=0.5, rho0=math.inf), "rho0"),
        (lambda: df.diffuse_risk(-1.0, k=4, a=0.5), "epsilon"),
        (lambda: df.diffuse_risk(math.inf, k=4, a=0.5), "epsilon"),
        (lambda: df.diffuse_risk(math.nan, k=4, a=0.5), "epsilon"),
        (lambda: df.diffuse_risks(1.0, k=4, a=[0.5, 2.0]), "a"),
        (lambda: df.max_epsilon_for_risk(0.0, k=4, a=0.5), "max_risk"),
        (lambda: df.max_epsilon_for_risk(-0.1, k=4, a=0.5), "max_risk"),
        (lambda: df.max_epsilon_for_risk(1.5, k=4, a=0.5), "max_risk"),
        (lambda: df.max_epsilon_for_risk(math.nan, k=4, a=0.5), "max_risk"),
        (lambda: df.max_epsilon_for_risk(0.1, k=1, a=0.5), "k"),
        (lambda: df.max_epsilon_for_risk(0.1, k=4, a=1.5), "a"),
        (lambda: df.max_epsilon_for_risk(0.1, k=4, a=0.5, rho0=-0.5), "rho0"),
        (lambda: reconstruction_for([RELEASE], k=1, d=8), "k"),
        (lambda: reconstruction_for([RELEASE], k=9, d=8), "k"),
    ],
)
def test_bad_arguments_raise_usage_error_naming_the_flag(call: Callable[[], object], flag: str) -> None:
    with pytest.raises(UsageError) as info:
        call()
    message = str(info.value)
    assert message.startswith(flag + " ") and "\n" not in message


def test_flags_can_be_renamed_for_other_commands() -> None:
    with pytest.raises(UsageError, match=r"^risk_k must be an integer >= 2 and <= d = 3, got 5$"):
        df.diffuse_risk(1.0, k=5, a=0.5, d=3, names={"k": "risk_k"})


def test_reconstruction_section() -> None:
    section = reconstruction_for([RELEASE], k=8, d=8)
    assert section["k"] == 8 and section["levels"][0]["epsilon"] == 2.0 and section["rho0"] == 0.0
    assert "Sec. 2.3.1" in section["target"]
    bounds = section["levels"][0]["bounds"]
    assert [b["a"] for b in bounds] == list(df.STANDARD_A)
    first = bounds[0]
    assert "epsilon" not in first and first["log_exact"] == pytest.approx(2.0 + df.log_uniform_cap(0.1, 8))
    json.dumps(section, allow_nan=False)
    with_k = reconstruction_for([RELEASE], k=3, d=8, rho0=0.5, a=(0.2, 1.0))
    assert with_k["k"] == 3 and len(with_k["levels"][0]["bounds"]) == 2
    assert with_k["levels"][0]["bounds"][1]["impossible"] is True
    json.dumps(with_k, allow_nan=False)
