"""PrivUnitG's secure rendering (docs/floating-point.md §8): its per-row floating-point bound against a
400-bit recomputation, its grid, its unbiasedness and error, its δ, and the CLI end to end.

Monte-Carlo tolerances are five standard errors of the seeded sample (or a Bonferroni z over the
coordinates), from the exact variance where it is known.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import jsonschema
import mpmath
import numpy as np
import pytest

from ldpcli.math import _lawtests as lawtests
from ldpcli.mechanisms import _rendering as rd
from ldpcli.math import _extended as extended
from ldpcli.math import _roundoff as roundoff
from ldpcli.mechanisms._base import get_mechanism
from ldpcli.mechanisms._composition import release_cost
from ldpcli.release._sidecar import load_sidecar
from tests.helpers import bonferroni_z, ldp, unit_rows

U = roundoff.unit_roundoff()
PREC = 400
SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "ldpcli" / "schemas" / "sidecar-v2.schema.json").read_text())


def mp(value: object) -> mpmath.mpf:
    """A float64 or long double, exactly, at 400 bits."""
    num, den = Fraction(*np.longdouble(value).as_integer_ratio()).as_integer_ratio()
    return mpmath.mpf(num) / den


def raw(z: np.ndarray) -> np.ndarray:
    """The 64-bit patterns of a float64 array (−0.0 and +0.0 differ)."""
    return np.ascontiguousarray(z, dtype=np.float64).view(np.uint64)


def hard_rows(d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs (random, all equal, tiny, coordinates spread over 320 decades, one big coordinate among
    subnormals) and normals for them (random, huge and tiny, and almost along each row's direction)."""
    rng = np.random.default_rng(seed)
    spread = rng.standard_normal(d) * 10.0 ** rng.integers(-320, 0, size=d)
    spread[-1] = -0.6
    spike = np.full(d, 5e-324)
    spike[0] = 0.9
    x = np.stack([rng.standard_normal(d) / (2 * np.sqrt(d)), np.full(d, -1 / np.sqrt(d)), np.full(d, 3e-310),
                  spread, spike])
    g = rng.standard_normal(x.shape)
    g[1] *= 1e150
    g[2] *= 1e-150
    g[3] = 4.0 * x[3] / np.linalg.norm(x[3]) + 1e-12 * g[3]  # ⟨g, u⟩ ≈ ‖g‖: the orthogonal part cancels
    g[4] = -x[4] / np.linalg.norm(x[4])
    return x, g


#: Adversarial values of the truncated normal z along u (any double is covered by the bound).
Z_VALUES = [0.0, 1e-300, -2.5e-7, 1.0, -3.75, 41.0, 1e150]


@pytest.mark.slow
@pytest.mark.parametrize("d", [2, 3, 5, 64, 257])
def test_each_step_within_its_bound(d: int) -> None:
    """‖Ẑ − Z‖₂ ≤ s·(along·|z| + across·‖g‖) (GaussianBounds) row by row, Z = s·(z·u + g − ⟨g, u⟩u) at 400
    bits from the exact values of the computed û, the given normals g and z (u = û/‖û‖: Lemma 1); and the
    orthogonal part alone within e_w·‖g‖ (step 4, here at d = 2 too)."""
    mpmath.mp.prec = PREC
    bounds = roundoff.gaussian_bounds(d, U)
    e_w = roundoff.step_bounds(d, U).e_w
    x, normals = hard_rows(d, seed=d)
    u = extended.secure_unit_rows(x, np.zeros(len(x)), 1.0, np.random.default_rng(0))
    w = extended.orthogonal_part(normals.astype(extended.WORK), u)
    worst = 0.0
    for s in (get_mechanism("privunitg").calibrate(d, 2.0).output_scale, 3e-7, 7.5e40):
        for z in Z_VALUES:
            out = extended.gaussian_combine(u, w, np.full(len(x), z), s)
            for i in range(len(x)):
                u_hat = [mp(v) for v in u[i]]
                size = mpmath.sqrt(mpmath.fsum(v * v for v in u_hat))
                u_ref = [v / size for v in u_hat]
                g = [mp(v) for v in normals[i]]
                along = mpmath.fsum(a * b for a, b in zip(g, u_ref))
                perp = [a - along * b for a, b in zip(g, u_ref)]
                g_norm = mpmath.sqrt(mpmath.fsum(v * v for v in g))
                assert mpmath.sqrt(mpmath.fsum((mp(a) - b) ** 2 for a, b in zip(w[i], perp))) <= e_w * g_norm
                exact = [mp(s) * (mp(z) * a + b) for a, b in zip(u_ref, perp)]
                err = mpmath.sqrt(mpmath.fsum((mp(a) - b) ** 2 for a, b in zip(out[i], exact)))
                limit = mp(s) * (bounds.along * abs(mp(z)) + bounds.across * g_norm)
                assert err <= limit, (d, s, z, i, float(err), float(limit))
                worst = max(worst, float(err / limit))
    assert 0.0 < worst <= 1.0


def test_d1_output_is_a_function_of_the_exact_one() -> None:
    """At d = 1, û = ±1 and w̃ = 0 exactly, so Ẑ = ±fl(s·z) bit for bit (never −0.0), whatever the
    input's magnitude: a function of the exact output z·u, hence τ = δ = 0."""
    x = np.array([[0.7], [-0.7], [5e-324], [-3e-200], [1.0], [0.0]])
    rng = np.random.default_rng(1)
    u = extended.secure_unit_rows(x, np.zeros(len(x)), 1.0, rng)
    assert np.all(np.abs(u) == 1)
    w = extended.orthogonal_part(rng.standard_normal(u.shape).astype(extended.WORK), u)
    assert np.all(w == 0)
    z = np.array([0.3, 0.3, -1.7, 0.0, 2.5, 1e-310])
    s = 2.75
    out = extended.gaussian_combine(u, w, z, s)
    expected = (extended.WORK(s) * z.astype(extended.WORK)) * u[:, 0]
    assert np.array_equal(out[:, 0], expected) and not np.any(np.signbit(out[z == 0]))
    mech = rd.secured(get_mechanism("privunitg").calibrate(1, 1.0))
    assert mech.rendering.tau == 0.0 and mech.rendering.delta == 0.0 and mech.delta_exact == 0.0


def test_error_sum_dominates_the_rows() -> None:
    """``gaussian_error_sum`` is E over z and g of the per-row bound √d·(along·|z| + across·‖g‖) (with
    E|z| ≤ √E[z²]): above the seeded mean of that per-row bound by more than five standard errors, with z
    drawn by the mechanism itself."""
    rng = np.random.default_rng(2)
    n = 200_000
    for d, eps in [(2, 0.5), (3, 8.0), (64, 2.0)]:
        mech = get_mechanism("privunitg").calibrate(d, eps)
        b = roundoff.gaussian_bounds(d, U)
        per_row = np.sqrt(d) * (b.along * np.abs(mech.split_normals(n, rng))
                                + b.across * np.linalg.norm(rng.standard_normal((n, d)), axis=1))
        assert per_row.mean() + 5 * per_row.std() / np.sqrt(n) <= rd.gaussian_error_sum(mech, d, U)


# --------------------------------------------------------------------------- the grid, and the release


@pytest.mark.parametrize("kernel", ["numpy", "numba"])
@pytest.mark.parametrize(("d", "eps"), [(1, 1.0), (2, 0.5), (16, 8.0), (300, 2.0)])
def test_outputs_are_exact_multiples_of_g(monkeypatch: pytest.MonkeyPatch, kernel: str, d: int, eps: float) -> None:
    """Every released coordinate is an integer multiple of the power of two g, below 2⁵³·g, never −0.0
    (zero rows included), and the output does not depend on the kernel (its arithmetic is its own)."""
    pytest.importorskip("numba") if kernel == "numba" else None
    monkeypatch.setenv("LDP_KERNEL", kernel)
    mech = rd.secured(get_mechanism("privunitg").calibrate(d, eps))
    x = unit_rows(400, d, 3) * 0.8
    x[::9] = 0.0
    z = mech.privatize(x, np.random.default_rng(4))
    g = mech.rendering.grid
    assert g == 2.0 ** np.round(np.log2(g))
    steps = z / g
    assert np.all(steps == np.round(steps)) and np.all(np.abs(steps) < 2.0**53)
    assert not np.any(raw(z) == raw(np.array([-0.0]))[0])
    monkeypatch.setenv("LDP_KERNEL", "numpy")
    assert np.array_equal(raw(z), raw(mech.privatize(x, np.random.default_rng(4))))


def test_clip_at_the_largest_exact_count() -> None:
    """A value beyond (2⁵³ − 1)·g (an unbounded coordinate could be, in principle) is released as ±(2⁵³ − 1)·g
    exactly, a grid point, instead of an overflowed integer; values below are unchanged."""
    g = 2.0**-20
    z = np.array([[1e300, -1e300, 2.0**32 * 1.5, -(2.0**32) + g]], dtype=extended.WORK)
    r = extended.round_to_grid(z, g, np.random.default_rng(5))
    top = (2.0**53 - 1) * g
    assert list(r[0]) == [top, -top, 2.0**32 * 1.5, -(2.0**32) + g]


def test_unbiased_and_its_error_is_the_formula_plus_the_rounding() -> None:
    """On a coarse grid (g = 1/2, so the rounding term shows): the mean of n secure outputs of one input
    (and of the zero input) is within a Bonferroni z of it per coordinate, and E‖R − x‖² lies between
    PrivUnitG's exact E‖Z‖² − ‖x‖² (Prop. 4) and that plus d·g²/4, up to five standard errors."""
    plain = get_mechanism("privunitg").calibrate(3, 1.0)
    g = 0.5
    rendering = rd.Rendering("grid", 1e-10, g, 0.0, 0.0, 3 * g * g / 4, 1.0, "longdouble")
    n = 200_000
    for seed, x in enumerate([np.array([0.6, -0.3, 0.2]), np.zeros(3)]):
        r = rd.secure_privatize(plain, rendering, np.tile(x, (n, 1)), np.random.default_rng(6 + seed))
        assert np.all(r / g == np.round(r / g))
        exact_error = plain.expected_error_max - x @ x
        sd = np.sqrt((exact_error + rendering.added_error) / n)
        assert np.all(np.abs(r.mean(axis=0) - x) <= bonferroni_z(1e-4, 6) * sd)
        err = np.sum((r - x) ** 2, axis=1)
        slack = 5 * err.std() / np.sqrt(n)
        assert exact_error - slack <= err.mean() <= exact_error + rendering.added_error + slack


# --------------------------------------------------------------------------- δ, and where it goes


@pytest.mark.parametrize(("d", "eps", "target"), [(2, 0.5, 1e-10), (16, 8.0, 1e-10), (1000, 8.0, 1e-10),
                                                  (3, 2.0, 1e-16), (10_000, 8.0, 1e-10)])
def test_delta_is_at_most_the_target(d: int, eps: float, target: float) -> None:
    """δ = (1 + e^ε)·s·gaussian_error_sum/g ≤ the target; g is the finest power of two that meets it unless
    the floor 2^{⌈log₂ρ⌉−22} (ρ² = E‖Z‖²) is coarser; the error ratio is (E_max + d·g²/4)/E_max; the
    release's cost counts δ per copy; the claim says what the δ rests on."""
    plain = get_mechanism("privunitg").calibrate(d, eps)
    mech = rd.secured(plain, target)
    r = mech.rendering
    tau = plain.output_scale * rd.gaussian_error_sum(plain, d, U) / r.grid
    assert r.kind == "grid" and r.tau == pytest.approx(tau, rel=1e-12)
    assert r.delta == pytest.approx((1 + np.exp(eps)) * tau, rel=1e-12) and 0 < r.delta <= target
    floor = 2.0 ** (np.frexp(np.sqrt(plain.expected_error_max))[1] - 22)
    assert r.grid >= floor and (r.grid == floor or (1 + np.exp(eps)) * 2 * tau > target)
    assert r.error_ratio == pytest.approx((plain.expected_error_max + d * r.grid**2 / 4) / plain.expected_error_max)
    assert mech.expected_error_max == plain.expected_error_max + r.added_error
    assert release_cost(mech, copies=3).delta == 3 * r.delta and mech.epsilon_exact == plain.epsilon_exact
    assert "expected floating-point error" in mech.describe()["rendering"]["claim"]


def test_a_target_needing_a_grid_above_the_output_is_refused() -> None:
    with pytest.raises(rd.UsageError, match="above the output's root-mean-square norm"):
        rd.secured(get_mechanism("privunitg").calibrate(10_000, 8.0), 1e-300)


# --------------------------------------------------------------------------- the CLI


def test_cli_privatize_and_params(tmp_path: Path) -> None:
    """``ldp privatize -m privunitg --secure``: the 'wrote' line states δ, the sidecar records the rendering
    (schema-valid, read back to the same secured mechanism), the released values are on its grid;
    ``ldp params -m privunitg --secure --json`` reports g, δ ≤ the target and the error ratio."""
    src = tmp_path / "x.npy"
    np.save(src, unit_rows(300, 5, 7) * 0.9)
    wrote = ldp("privatize", src, "-o", tmp_path / "z.npy", "-m", "privunitg", "--eps", 2, "--secure", "--seed", 1)
    assert wrote.exit_code == 0, wrote.stderr
    assert "secure rendering with δ ≤" in wrote.stdout
    side = json.loads((tmp_path / "z.npy.ldp.json").read_text())
    jsonschema.validate(side, SCHEMA)
    rendering = side["release"]["rendering"]
    assert rendering["rendering"] == "grid" and 0 < rendering["delta"] <= rendering["delta_target"] == 1e-10
    z = np.load(tmp_path / "z.npy")
    assert z.shape == (300, 5) and np.all(z / rendering["grid"] == np.round(z / rendering["grid"]))
    assert load_sidecar(tmp_path / "z.npy.ldp.json").mechanism.rendering.delta == rendering["delta"]
    params = ldp("params", "-m", "privunitg", "--d", 1000, "--eps", 8, "--secure", "--json")
    assert params.exit_code == 0, params.stderr
    info = json.loads(params.stdout)["rendering"]
    assert info["grid"] == 2.0**-5 and 0 < info["delta"] <= 1e-10 and info["error_ratio"] > 1.0


def test_bit_audit_of_the_secure_rendering_passes() -> None:
    """``ldp audit -m privunitg --d 2 --eps 0.5 --bits --secure``: the law tests (the grid first) pass and
    the bit-reading lower bound stays at most ε (its own confidence is 1 − 1e-4)."""
    result = ldp("audit", "-m", "privunitg", "--d", 2, "--eps", 0.5, "--bits", "--secure", "--seed", 0, "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0 and report["passed"], result.stdout
    assert report["epsilon_lower_bound"] <= 0.5
    assert report["law_tests"][0]["test"].startswith("Z ∈ gℤ^d")


def test_a_direction_within_rounding_of_a_test_direction_does_not_fail_the_law() -> None:
    """Zero-input law of PrivUnitG (d = 2): a release whose direction is −e_k up to rounding (``audit
    --secure --seed 0`` at d = 2, ε = 2 drew one) gives ‖v − e‖²/4 = 1 + 2⁻⁵²; the cosine CDF must read it
    as 1, not as nan (which failed the KS test)."""
    v = lawtests.unit_rows(np.random.default_rng(8).standard_normal((2000, 2)))[0]
    e = lawtests.fixed_directions(2)[1]
    v[0] = -e * (1 + 2.0**-52)
    assert np.einsum("j,j->", v[0] - e, v[0] - e) / 4.0 > 1.0
    for test in lawtests.uniform_direction_tests(v, 2):
        assert np.isfinite(test.statistic) and test.p_value > 1e-3
