"""ScalarDP and ScalarRelDP: exact enumeration of the output law against the paper's algorithms,
exact privacy and errors, the errata, the sampler, and the numerics at huge ε."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from ldpcli.errors import UsageError
from ldpcli.mechanisms import get_mechanism, mechanism_names
from ldpcli.mechanisms._scalar import K_MAX, K_REL_MAX, ScalarDP, default_k
from ldpcli.mechanisms._scalar_rel import ALPHA0_MIN, ScalarRelDP

# --- the papers' algorithms, written out independently of the module ---------------------------


def rr_matrix(eps: float, k: int) -> np.ndarray:
    """(k+1)-ary randomized response: the truth w.p. e^ε/(e^ε + k), each other index 1/(e^ε + k)."""
    q = math.exp(eps)
    m = np.full((k + 1, k + 1), 1.0 / (q + k))
    np.fill_diagonal(m, q / (q + k))
    return m


def alg3(r: np.ndarray, eps: float, k: int, r_max: float) -> tuple[np.ndarray, np.ndarray]:
    """Bhowmick Alg. 3: (P(Ĵ = j | r) for each r, the outputs a(j − b))."""
    q = math.exp(eps)
    rounding = np.zeros((r.size, k + 1))
    for row, value in enumerate(r):
        t = k * value / r_max
        lo, hi = math.floor(t), math.ceil(t)
        if lo == hi:
            rounding[row, lo] = 1.0
        else:
            rounding[row, lo] = hi - t
            rounding[row, hi] = t - lo
    a = (q + k) / (q - 1) * r_max / k
    b = k * (k + 1) / (2 * (q + k))
    return rounding @ rr_matrix(eps, k), a * (np.arange(k + 1) - b)


def alg4(r: np.ndarray, eps: float, k: int, alpha: float, nu: float) -> tuple[np.ndarray, np.ndarray]:
    """Bhowmick Alg. 4 with the intervals (27): (P(Ĵ = j | r), the outputs a(J̃ − b))."""
    q = math.exp(eps)
    rounding = np.zeros((r.size, k + 1))
    for row, value in enumerate(r):
        if value <= nu * alpha:  # E_0 = [0, να]
            rounding[row, 0] = (nu * alpha - value) / (nu * alpha)
            rounding[row, 1] = value / (nu * alpha)
            continue
        i = max(i for i in range(1, k) if nu**i * alpha <= value)  # E_i = [ν^i α, ν^{i+1} α]
        width = nu**i * (nu - 1) * alpha
        rounding[row, i] = (nu ** (i + 1) * alpha - value) / width
        rounding[row, i + 1] = (value - nu**i * alpha) / width
    j_tilde = np.array([0.0] + [nu**j for j in range(1, k + 1)])
    a = alpha * (q + k) / (q - 1)
    b = sum(nu**j for j in range(1, k + 1)) / (q + k)
    return rounding @ rr_matrix(eps, k), a * (j_tilde - b)


def check_enumeration(mech, r: np.ndarray, pmf: np.ndarray, z: np.ndarray, scale: float) -> None:
    """pmf sums to 1, the mechanism's own pmf/support agree, worst ratio = e^ε, E = r, Var exact."""
    assert np.allclose(pmf.sum(axis=1), 1.0, rtol=0, atol=1e-14)
    assert np.allclose(mech.pmf(r), pmf, rtol=1e-12, atol=1e-13)
    assert np.allclose(mech.support(), z, rtol=1e-12, atol=1e-12 * scale)
    log_ratio = np.max(np.log(pmf.max(axis=0)) - np.log(pmf.min(axis=0)))
    assert log_ratio == pytest.approx(mech.epsilon, rel=1e-12)
    assert mech.epsilon_exact == mech.epsilon
    assert np.allclose(pmf @ z, r, rtol=0, atol=1e-12 * scale)
    variance = pmf @ z**2 - r**2
    assert np.allclose(mech.error_at(r), variance, rtol=1e-9, atol=1e-12 * scale**2)


# --- ScalarDP ----------------------------------------------------------------------------------

SCALAR_CASES = [(0.5, 1, 1.0), (0.5, 3, 2.5), (2.0, 5, 1.0), (4.0, None, 1.0), (8.0, None, 3.0), (12.0, None, 1.0)]


@pytest.mark.parametrize("eps, k, r_max", SCALAR_CASES)
def test_scalar_exact_enumeration(eps: float, k: int | None, r_max: float) -> None:
    """All grid inputs and off-grid ones (the rounding mixture), all outputs, against Alg. 3."""
    mech = ScalarDP.calibrate(1, eps, norm_bound=r_max, k=k)
    k = mech.k
    rng = np.random.default_rng(7)
    r = np.concatenate([np.arange(k + 1) * r_max / k, (np.arange(k) + 0.5) * r_max / k, rng.uniform(0, r_max, 50)])
    pmf, z = alg3(r, eps, k, r_max)
    check_enumeration(mech, r, pmf, z, r_max)
    # the boundary value and the sup, by brute force over a fine grid of inputs
    assert mech.expected_error == pytest.approx(float(pmf[k] @ (z - r_max) ** 2), rel=1e-10)
    dense = np.linspace(0.0, r_max, 200_001)
    dense_pmf, _ = alg3(dense[:: 1000], eps, k, r_max)  # exact enumeration on a sub-grid
    assert np.allclose(mech.error_at(dense[::1000]), dense_pmf @ z**2 - dense[::1000] ** 2, rtol=1e-9)
    brute = float(np.max(mech.error_at(dense)))
    lipschitz = 4 * mech.expected_error_max / mech.grid_step * (r_max / 200_000)
    assert brute <= mech.expected_error_max * (1 + 1e-12)
    assert mech.expected_error_max <= brute + lipschitz
    worst = mech.worst_rounding_fraction * mech.grid_step
    worst_pmf, _ = alg3(np.array([worst]), eps, k, r_max)
    assert mech.expected_error_max == pytest.approx(float(worst_pmf[0] @ z**2) - worst**2, rel=1e-9)


def test_scalar_sup_is_inside_when_e_eps_exceeds_k_squared() -> None:
    """f* = (e^ε − k²)/(2(e^ε − 1)): the sup is interior iff e^ε > k² (default k, large ε)."""
    mech = ScalarDP.calibrate(1, 8.0)  # k = 15, e^8 = 2981 > 225
    q, k = math.exp(8.0), mech.k
    assert mech.worst_rounding_fraction == pytest.approx((q - k * k) / (2 * (q - 1)), rel=1e-12)
    assert mech.expected_error_max > mech.expected_error
    flat = ScalarDP.calibrate(1, 2.0, k=5)  # e^2 < 25: the ends are the worst case
    assert flat.worst_rounding_fraction == 0.0
    assert flat.expected_error_max == flat.expected_error


@pytest.mark.parametrize("eps", [0.01, 0.5, 3.0, 20.0, 700.0])
@pytest.mark.parametrize("r_max", [1.0, 5.0])
def test_k1_is_binary_randomized_response(eps: float, r_max: float) -> None:
    """k = 1: keep the bit w.p. e^ε/(e^ε + 1); Z ∈ r_max·{−1, e^ε}/(e^ε − 1); error q/(q−1)² r_max²."""
    mech = ScalarDP.calibrate(1, eps, norm_bound=r_max, k=1)
    q_over = 1.0 / math.expm1(eps)
    assert np.allclose(mech.support(), r_max * np.array([-q_over, 1.0 + q_over]), rtol=1e-13)
    keep, lie = 1.0 / (1.0 + math.exp(-eps)), 1.0 / (1.0 + math.exp(eps))
    assert np.allclose(mech.pmf([0.0, r_max]), [[keep, lie], [lie, keep]], rtol=1e-13, atol=1e-300)
    exact = r_max**2 * math.exp(-eps) / (-math.expm1(-eps)) ** 2
    assert mech.expected_error == pytest.approx(exact, rel=1e-12)
    assert mech.expected_error_max == pytest.approx(exact + r_max**2 / 4, rel=1e-12)


def test_errata_7_default_k() -> None:
    """ERRATA 7: the MNIST text's k = ⌈e^{2ε2/3}⌉ = 29 is wrong; 29 = ⌈e^{ε2/3}⌉ at ε2 = 10."""
    assert default_k(10.0) == 29 == math.ceil(math.exp(10 / 3))
    assert math.ceil(math.exp(20 / 3)) == 786
    assert ScalarDP.calibrate(1, 10.0).k == 29
    for eps in [0.01, 1.0, 3.0, 7.5, 50.0, 100.0]:
        assert ScalarDP.calibrate(1, eps).k == math.ceil(math.exp(eps / 3))


def test_errata_10_negative_outputs_are_kept() -> None:
    """Ĵ = 0 gives Z = −a·b < 0; taking |Z| would bias the mean of r = 0 upwards."""
    mech = ScalarDP.calibrate(1, 1.0, norm_bound=2.0)
    assert mech.support()[0] < 0
    rng = np.random.default_rng(10)
    n = 200_000
    z = mech.privatize(np.zeros((n, 1)), rng)[:, 0]
    assert np.any(z < 0) and z.min() == pytest.approx(mech.support()[0], rel=1e-14)
    se = z.std(ddof=1) / math.sqrt(n)
    assert abs(z.mean()) <= 6 * se
    assert np.abs(z).mean() > 20 * se
    rel = ScalarRelDP.calibrate(1, 1.0)
    assert rel.support()[0] < 0
    assert np.any(rel.privatize(np.zeros((1000, 1)), rng) < 0)


@pytest.mark.parametrize("eps", [120.0, 800.0, 10_000.0])
def test_huge_epsilon_is_finite_and_capped(eps: float) -> None:
    mech = ScalarDP.calibrate(1, eps, norm_bound=3.0)
    assert mech.k == K_MAX == 2**52
    info = mech.describe()
    json.dumps(info, allow_nan=False)
    assert 0.0 <= mech.expected_error <= mech.expected_error_max
    assert mech.expected_error_max == pytest.approx((mech.grid_step / 2) ** 2, rel=1e-6)
    rng = np.random.default_rng(3)
    r = rng.uniform(0, 3.0, 10_000)
    z = mech.privatize(r[:, None].copy(), rng)[:, 0]
    assert np.all(np.isfinite(z)) and np.all(np.abs(z - r) <= mech.grid_step * (1 + 1e-9))
    small = ScalarDP.calibrate(1, eps, k=3)  # the truth probability carried as a logit
    assert small.parameters()["p_truth_logit"] == pytest.approx(eps - math.log(3))
    z = small.privatize(np.full((5000, 1), 1 / 3), rng)[:, 0]
    assert np.allclose(z, 1 / 3, rtol=1e-12)


def test_default_k_below_the_cap_matches_the_rule() -> None:
    eps = 3 * 52 * math.log(2) - 0.01
    assert default_k(eps) == math.ceil(math.exp(eps / 3)) <= K_MAX
    assert default_k(3 * 52 * math.log(2) + 0.01) == K_MAX


def sampled_indices(z: np.ndarray, support: np.ndarray) -> np.ndarray:
    idx = np.argmin(np.abs(z[:, None] - support[None, :]), axis=1)
    assert np.allclose(z, support[idx], rtol=1e-12, atol=1e-12 * np.abs(support).max())
    return idx


@pytest.mark.parametrize(
    "make, values",
    [
        (lambda: ScalarDP.calibrate(1, 2.0, norm_bound=1.5, k=5), [0.0, 0.37, 0.6, 1.5]),
        (lambda: ScalarDP.calibrate(1, 6.0), [0.0, 0.5, 0.9]),
        (lambda: ScalarRelDP.calibrate(1, 3.0, norm_bound=2.0, alpha=0.05, nu=1.6), [0.0, 0.01, 0.3, 1.7, 2.0]),
    ],
)
def test_sampler_matches_the_enumerated_law(make, values) -> None:
    """Chi-square goodness of fit of privatize's outputs to the exact pmf (seeded, α = 1e−6)."""
    mech = make()
    rng = np.random.default_rng(2024)
    n = 100_000
    support = mech.support()
    for value in values:
        z = mech.privatize(np.full((n, 1), value), rng)[:, 0]
        counts = np.bincount(sampled_indices(z, support), minlength=support.size)
        expected = n * mech.pmf(value)[0]
        keep = expected > 5
        observed = np.append(counts[keep], counts[~keep].sum())
        wanted = np.append(expected[keep], expected[~keep].sum())
        if wanted[-1] == 0:
            observed, wanted = observed[:-1], wanted[:-1]
        assert stats.chisquare(observed, wanted * observed.sum() / wanted.sum()).pvalue > 1e-6


def test_monte_carlo_unbiased_with_the_exact_error() -> None:
    mech = ScalarDP.calibrate(1, 4.0, norm_bound=2.0)
    rng = np.random.default_rng(5)
    n = 200_000
    for value in [0.0, 0.1, 1.0, 1.93, 2.0]:
        z = mech.privatize(np.full((n, 1), value), rng)[:, 0]
        assert abs(z.mean() - value) <= 6 * z.std(ddof=1) / math.sqrt(n)
        sq = (z - value) ** 2
        assert abs(sq.mean() - float(mech.error_at(value))) <= 6 * sq.std(ddof=1) / math.sqrt(n)


# --- ScalarRelDP -------------------------------------------------------------------------------

REL_CASES = [
    (0.5, {"alpha": 0.2, "nu": 2.0}, 1.0),
    (2.0, {"alpha": 0.05, "nu": 1.3}, 2.0),  # top point 0.05·1.3^15 = 2.04 > r_max: truncated top cell
    (4.0, {"alpha": 0.01, "nu": 1.5}, 1.0),
    (8.0, {"alpha": 0.3, "nu": 1.1, "k": 16}, 1.0),  # k larger than needed: points beyond r_max
]


@pytest.mark.parametrize("eps, options, r_max", REL_CASES)
def test_rel_exact_enumeration(eps: float, options: dict, r_max: float) -> None:
    """All grid inputs and off-grid ones, all outputs, against Alg. 4 (intervals (27))."""
    mech = ScalarRelDP.calibrate(1, eps, norm_bound=r_max, **options)
    alpha, nu, k = mech.alpha, mech.nu, mech.k
    assert alpha == options["alpha"] and nu == options["nu"]
    if "k" not in options:
        assert nu ** (k - 1) * alpha < r_max <= nu**k * alpha  # the smallest covering k (App. B.2)
    grid = np.array([0.0] + [alpha * nu**j for j in range(1, k + 1)])
    rng = np.random.default_rng(11)
    on_grid = grid[grid <= r_max]
    r = np.concatenate([on_grid, [r_max], (on_grid[:-1] + on_grid[1:]) / 2, rng.uniform(0, r_max, 60)])
    pmf, z = alg4(r, eps, k, alpha, nu)
    check_enumeration(mech, r, pmf, z, r_max)
    assert mech.expected_error == pytest.approx(float(pmf[len(on_grid)] @ z**2) - r_max**2, rel=1e-9)
    dense = np.unique(np.concatenate([np.linspace(0.0, r_max, 400_001), on_grid]))
    errors = mech.error_at(dense)
    assert float(errors.max()) <= mech.expected_error_max * (1 + 1e-12)
    assert mech.expected_error_max <= float(errors.max()) * (1 + 1e-6)
    relative = errors / np.maximum(dense, alpha) ** 2
    rel_max = mech.parameters()["relative_error_max"]
    assert float(relative.max()) <= rel_max * (1 + 1e-12)
    assert rel_max <= float(relative.max()) * (1 + 1e-5)


@pytest.mark.parametrize("eps", [0.01, 0.5, 2.0, 4.0, 8.0, 20.0])
def test_rel_defaults_follow_appendix_b2(eps: float) -> None:
    """α₀ = e^{−ε/4}, Δ = α₀^{−2/3}e^{−ε/3} = e^{−ε/6}; the smallest k; α then lowered so ν^k α = r_max."""
    r_max = 3.0
    mech = ScalarRelDP.calibrate(1, eps, norm_bound=r_max)
    assert mech.nu == pytest.approx(1 + math.exp(-eps / 6), rel=1e-14)
    k = math.ceil(math.log(1 / math.exp(-eps / 4)) / math.log(mech.nu))
    assert mech.k == max(k, 1)
    assert mech.grid[-1] == pytest.approx(r_max, rel=1e-13)
    assert r_max * math.exp(-eps / 4) / mech.nu <= mech.alpha <= r_max * math.exp(-eps / 4) * (1 + 1e-13)
    assert mech.epsilon_exact == eps
    again = ScalarRelDP.calibrate(1, eps, norm_bound=r_max, **mech.option_values())
    assert again == mech


def test_rel_k1_is_scalar_k1() -> None:
    """α = r_max/ν gives the grid {0, r_max}: binary randomized response, like ScalarDP with k = 1."""
    for eps, nu in [(0.3, 2.0), (5.0, 1.7)]:
        rel = ScalarRelDP.calibrate(1, eps, norm_bound=2.0, alpha=2.0 / nu, nu=nu)
        flat = ScalarDP.calibrate(1, eps, norm_bound=2.0, k=1)
        assert rel.k == 1
        r = np.array([0.0, 0.7, 2.0])
        assert np.allclose(rel.support(), flat.support(), rtol=1e-13)
        assert np.allclose(rel.pmf(r), flat.pmf(r), rtol=1e-13)
        assert rel.expected_error_max == pytest.approx(flat.expected_error_max, rel=1e-12)
        assert np.allclose(rel.error_at(r), flat.error_at(r), rtol=1e-12)


def test_rel_exact_epsilon_when_the_grid_overshoots() -> None:
    """α·ν > r_max (k = 1): the bit J = 1 is never sure, ε_exact < ε; checked by enumeration."""
    eps = 2.0
    mech = ScalarRelDP.calibrate(1, eps, norm_bound=1.0, alpha=2.0, nu=1.5)
    assert mech.k == 1
    r = np.linspace(0.0, 1.0, 11)
    pmf, _ = alg4(r, eps, 1, 2.0, 1.5)
    ratio = np.max(np.log(pmf.max(axis=0)) - np.log(pmf.min(axis=0)))
    assert mech.epsilon_exact == pytest.approx(ratio, rel=1e-12)
    assert mech.epsilon_exact < eps


@pytest.mark.parametrize("eps", [100.0, 1000.0, 10_000.0])
def test_rel_huge_epsilon_is_finite(eps: float) -> None:
    mech = ScalarRelDP.calibrate(1, eps, norm_bound=2.0)
    assert mech.k <= K_REL_MAX
    assert 2.0 * ALPHA0_MIN / mech.nu <= mech.alpha <= 2.0 * ALPHA0_MIN
    info = mech.describe()
    json.dumps(info, allow_nan=False)
    assert 0.0 <= mech.expected_error <= mech.expected_error_max < 1e-9
    rng = np.random.default_rng(8)
    r = rng.uniform(0, 2.0, 5000)
    z = mech.privatize(r[:, None].copy(), rng)[:, 0]
    assert np.all(np.isfinite(z)) and np.all(np.abs(z - r) <= 2.0 * (mech.nu - 1))


# --- interface ----------------------------------------------------------------------------------


def test_registry_and_flags() -> None:
    for cls in (ScalarDP, ScalarRelDP):
        assert cls.name in mechanism_names() and get_mechanism(cls.name) is cls
        assert cls.domain == "interval" and cls.vector is False


@pytest.mark.parametrize("cls", [ScalarDP, ScalarRelDP])
def test_one_column_only(cls) -> None:
    with pytest.raises(UsageError, match="privatizes one column"):
        cls.calibrate(2, 1.0)


@pytest.mark.parametrize(
    "cls, options, match",
    [
        (ScalarDP, {"k": 0}, r"^k\b"),
        (ScalarDP, {"k": 2.5}, r"^k\b"),
        (ScalarDP, {"k": True}, r"^k\b"),
        (ScalarDP, {"k": K_MAX + 1}, r"^k\b"),
        (ScalarDP, {"alpha": 0.1}, "takes no option alpha"),
        (ScalarRelDP, {"alpha": 0.0}, r"^alpha\b"),
        (ScalarRelDP, {"alpha": -1.0}, r"^alpha\b"),
        (ScalarRelDP, {"nu": 1.0}, r"^nu\b"),
        (ScalarRelDP, {"nu": float("nan")}, r"^nu\b"),
        (ScalarRelDP, {"alpha": 0.1, "nu": 2.0, "k": 2}, "does not reach r_max"),
        (ScalarRelDP, {"alpha": 1e-12, "nu": 1.000001}, "larger alpha or nu"),
        (ScalarRelDP, {"eps_split": 0.5}, "takes no option eps_split"),
    ],
)
def test_bad_options_are_usage_errors(cls, options: dict, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        cls.calibrate(1, 2.0, **options)


def test_calibration_names() -> None:
    with pytest.raises(UsageError, match="no calibration 'optimal'"):
        ScalarDP.calibrate(1, 1.0, calibration="optimal")
    assert ScalarDP.calibrate(1, 1.0, calibration="bhowmick").calibration == "bhowmick"


@pytest.mark.parametrize(
    "mech",
    [
        ScalarDP.calibrate(1, 3.0, norm_bound=4.0),
        ScalarDP.calibrate(1, 3.0, k=7),
        ScalarRelDP.calibrate(1, 6.0, norm_bound=2.0),
        ScalarRelDP.calibrate(1, 6.0, alpha=0.01),
        ScalarRelDP.calibrate(1, 6.0, nu=1.2),
        ScalarRelDP.calibrate(1, 6.0, k=5),
    ],
)
def test_describe_recreates_the_mechanism(mech) -> None:
    """What a sidecar does: calibrate(d, ε, norm_bound, calibration, **recorded options)."""
    info = json.loads(json.dumps(mech.describe(), allow_nan=False))
    again = type(mech).calibrate(
        info["d"], info["epsilon"], norm_bound=info["norm_bound"], calibration=info["calibration"],
        **{name: info[name] for name in type(mech).options},
    )
    assert again == mech and again.describe() == mech.describe()
    assert info["domain"] == "interval" and info["scale"] is None


def test_clip_and_privatize_shapes() -> None:
    mech = ScalarDP.calibrate(1, 2.0, norm_bound=1.0)
    x = np.array([[-0.5], [0.3], [1.0 + 1e-12], [7.0]])
    x, moved = mech.project(x)
    assert moved == 2 and x.min() >= 0.0 and x.max() <= 1.0 + 1e-9
    z = mech.privatize(x, np.random.default_rng(0))
    assert z.shape == (4, 1)
    a = mech.privatize(x, np.random.default_rng(1))
    b = mech.privatize(x, np.random.default_rng(1))
    assert np.array_equal(a, b)
