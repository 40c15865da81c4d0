"""The secure rendering (``secure=True``, ``--secure``; docs/floating-point.md): what it releases, bit for
bit, its unbiasedness and error, the δ it reports and where that δ goes (sidecar, ledger, params).

Monte-Carlo tolerances are five standard errors of the seeded sample (or a Bonferroni z over the
coordinates), computed from the exact variance where it is known.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pyarrow.parquet as pq
import pytest

import ldpcli
from ldpcli.errors import UsageError
from ldpcli.mechanisms import _rendering as rd
from ldpcli.math import _extended as extended
from ldpcli.math import _roundoff as roundoff
from ldpcli.mechanisms._base import get_mechanism
from ldpcli.mechanisms._composition import release_cost
from ldpcli.release._ledger import Ledger
from ldpcli.release._options import ReleaseOptions
from tests.helpers import bonferroni_z, ldp, unit_rows

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "ldpcli" / "schemas" / "sidecar-v2.schema.json").read_text())
NEGATIVE_ZERO = np.float64(-0.0).view(np.uint64)


def bits(z: np.ndarray) -> np.ndarray:
    """The raw 64-bit patterns (so −0.0 and +0.0 differ)."""
    return np.ascontiguousarray(z, dtype=np.float64).view(np.uint64)


def inputs(n: int, d: int, seed: int) -> np.ndarray:
    """Rows on the sphere, inside the ball, and zero rows."""
    x = unit_rows(n, d, seed)
    x[1::3] *= 0.37
    x[2::7] = 0.0
    return x


# --------------------------------------------------------------------------- what is released


@pytest.mark.parametrize("kernel", ["numpy", "numba"])
@pytest.mark.parametrize(("name", "d", "eps"), [("privunit2", 2, 0.5), ("privunit2", 16, 8.0), ("duchi-l2", 3, 2.0),
                                                ("privunit2", 200, 1.0)])
def test_grid_outputs_are_exact_multiples_of_g(monkeypatch: pytest.MonkeyPatch, kernel: str, name: str, d: int,
                                               eps: float) -> None:
    """Every released coordinate is an integer multiple of the power of two g, below 2⁵³·g, never −0.0;
    and the secure output is the same whichever kernel is chosen (its arithmetic is its own)."""
    pytest.importorskip("numba") if kernel == "numba" else None
    monkeypatch.setenv("LDP_KERNEL", kernel)
    mech = rd.secured(get_mechanism(name).calibrate(d, eps))
    z = mech.privatize(inputs(300, d, 1), np.random.default_rng(2))
    g = mech.rendering.grid
    assert g == 2.0 ** np.round(np.log2(g))
    steps = z / g
    assert np.all(steps == np.round(steps)) and np.all(np.abs(steps) < 2.0**53)
    assert not np.any(bits(z) == NEGATIVE_ZERO)
    monkeypatch.setenv("LDP_KERNEL", "numpy")
    again = mech.privatize(inputs(300, d, 1), np.random.default_rng(2))
    assert np.array_equal(bits(z), bits(again))


@pytest.mark.parametrize("kernel", ["numpy", "numba"])
@pytest.mark.parametrize(("name", "d", "eps", "options"), [
    ("privunit-inf", 5, 1.0, {}), ("duchi-linf", 4, 2.0, {}), ("privunit-inf", 64, 8.0, {}),
    ("scalar", 1, 2.0, {"k": 7}), ("scalar", 1, 8.0, {}), ("scalar-rel", 1, 4.0, {"k": 5}),
    ("privunit2", 1, 1.0, {}), ("duchi-l2", 1, 3.0, {}),
])
def test_finite_outputs_are_the_public_values(monkeypatch: pytest.MonkeyPatch, kernel: str, name: str, d: int,
                                              eps: float, options: dict[str, int]) -> None:
    """A finite-valued mechanism's every output is, bit for bit, one of the values computed from its
    public parameters alone; δ = 0 and ε is unchanged."""
    pytest.importorskip("numba") if kernel == "numba" else None
    monkeypatch.setenv("LDP_KERNEL", kernel)
    plain = get_mechanism(name).calibrate(d, eps, **options)
    mech = rd.secured(plain)
    assert mech.rendering.kind == "finite" and mech.delta_exact == 0.0 and mech.epsilon_exact == plain.epsilon_exact
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, (4000, 1)) if plain.domain == "interval" else inputs(4000, d, 3)
    z = mech.privatize(x, rng)
    finite = rd.finite_outputs(plain)
    scale = plain.norm_bound * (plain.scale or 0.0)
    values = finite.output_value(np.arange(finite.output_count)) if finite is not None else np.array([-scale, scale])
    assert np.all(np.isin(bits(z), bits(values)))


def test_finite_values_do_not_depend_on_the_input_arithmetic() -> None:
    """ScalarDP's output is ``output_value(Ĵ)``: rows that land on the same index give the same double
    whatever their value (here every row is rounded to index 0 or 1 and answered truthfully or not)."""
    mech = get_mechanism("scalar").calibrate(1, 3.0, k=2)
    z = mech.privatize(np.linspace(0, 1, 5001)[:, None], np.random.default_rng(4))
    assert set(bits(z).ravel()) <= set(bits(mech.output_value(np.arange(3))))


# --------------------------------------------------------------------------- exact unbiased rounding


class Bits:
    """A generator stand-in that hands out given 64-bit integers, to drive :func:`exact_bernoulli`."""

    def __init__(self, *blocks: int) -> None:
        self.blocks = list(blocks)

    def integers(self, low: int, high: int, size: int, dtype: type) -> np.ndarray:
        assert (low, high, dtype) == (0, 2**64, np.uint64)
        return np.array([self.blocks.pop(0) for _ in range(size)], dtype=np.uint64)


def test_exact_bernoulli_reads_bits_beyond_the_first_64() -> None:
    """f = (k + ½)·2⁻⁶⁴ needs 65 bits: a first block equal to k moves on to the next one, whose
    comparison with 2⁶³ decides; a rounded f (k or k + 1 over 2⁶⁴) would decide from the first block alone."""
    k = 123456789
    f = np.array([(np.longdouble(k) + np.longdouble(0.5)) * np.longdouble(2.0) ** -64])
    assert extended.exact_bernoulli(f, Bits(k, 2**63 - 1))[0]
    assert not extended.exact_bernoulli(f, Bits(k, 2**63))[0]
    assert extended.exact_bernoulli(f, Bits(k - 1))[0]
    assert not extended.exact_bernoulli(f, Bits(k + 1))[0]
    assert not extended.exact_bernoulli(np.array([np.longdouble(0)]), Bits(0))[0]


def test_round_to_grid_is_unbiased_with_the_binomial_variance() -> None:
    """E[R] = z and E(R − z)² = g²f(1 − f), each within five exact standard errors, for values of both
    signs, tiny and near a grid point; all results multiples of g and no −0.0."""
    g = 0.25
    z0 = np.array([0.3 * g, -2.7 * g, 5.5 * g, 1e-30, -1e-30, -3 * g + 1e-12], dtype=np.longdouble)
    n = 200_000
    r = extended.round_to_grid(np.tile(z0, (n, 1)), g, np.random.default_rng(6))
    assert np.all(r / g == np.round(r / g)) and not np.any(bits(r) == NEGATIVE_ZERO)
    f = np.abs(z0.astype(np.float64)) / g % 1.0
    var = g * g * f * (1 - f)
    mean_err = r.mean(axis=0) - z0.astype(np.float64)
    assert np.all(np.abs(mean_err) <= 5 * np.sqrt(var / n) + 1e-15)
    sq = (r - z0.astype(np.float64)) ** 2
    sq_sd = g * g * np.sqrt(f * (1 - f)) * np.abs(1 - 2 * f)  # (R − z)² takes g²(1 − f)² or g²f²
    assert np.all(np.abs(sq.mean(axis=0) - var) <= 5 * sq_sd / np.sqrt(n) + 1e-15)


def test_secure_release_is_unbiased_and_its_error_is_the_formula_plus_the_rounding() -> None:
    """On a coarse grid (g = 1/4, so the rounding term shows): the mean of n secure outputs of one input
    is within a Bonferroni z of x per coordinate, and E‖R − x‖² lies between the mechanism's exact
    L²/m² − ‖x‖² and that plus d·g²/4, up to five standard errors of the sample."""
    plain = get_mechanism("privunit2").calibrate(3, 1.0)
    rendering = rd.Rendering("grid", 1e-10, 0.25, 0.0, 0.0, 3 * 0.25**2 / 4, 1.0, "longdouble")
    x = np.array([0.6, -0.3, 0.2])
    n = 200_000
    r = rd.secure_privatize(plain, rendering, np.tile(x, (n, 1)), np.random.default_rng(8))
    exact_error = plain.expected_error_max - x @ x  # L²/m² − ‖x‖²
    sd = np.sqrt((exact_error + rendering.added_error) / n)
    assert np.all(np.abs(r.mean(axis=0) - x) <= bonferroni_z(1e-4, 3) * sd)
    err = np.sum((r - x) ** 2, axis=1)
    slack = 5 * err.std() / np.sqrt(n)
    assert exact_error - slack <= err.mean() <= exact_error + rendering.added_error + slack


# --------------------------------------------------------------------------- δ, and where it goes


def test_delta_is_at_most_the_target_and_counted_in_the_cost() -> None:
    """δ = (1 + e^ε)·c·cap_error_sum/g ≤ the target, g the finest power of two that meets it (half of g
    would not); the release's cost adds it per copy; the error ratio is (E_max + d·g²/4)/E_max."""
    for d, eps, target in [(2, 0.5, 1e-10), (64, 8.0, 1e-10), (1000, 2.0, 1e-12)]:
        plain = get_mechanism("privunit2").calibrate(d, eps)
        mech = rd.secured(plain, target)
        r = mech.rendering
        c = plain.norm_bound * plain.scale
        tau = c * roundoff.cap_error_sum(d, roundoff.unit_roundoff()) / r.grid
        assert r.delta == pytest.approx((1 + np.exp(eps)) * tau, rel=1e-12) and r.delta <= target
        assert (1 + np.exp(eps)) * 2 * tau > target  # g/2 would miss the target
        assert r.error_ratio == pytest.approx((plain.expected_error_max + d * r.grid**2 / 4) / plain.expected_error_max)
        assert release_cost(mech, copies=2).delta == 2 * r.delta
        assert mech.expected_error_max == plain.expected_error_max + r.added_error


def test_privatize_secure_in_memory_records_its_rendering() -> None:
    """``ldpcli.privatize(..., secure=True)``: the release's mechanism carries the rendering, its δ and a
    ``rendering`` section; the description round-trips; the plain call is unchanged."""
    x = unit_rows(500, 8, 9) * 0.5
    z, release = ldpcli.privatize(x, eps=2.0, secure=True, rng=1)
    rendering = release.mechanism.describe()["rendering"]
    assert rendering["kind"] == "secure" and rendering["rendering"] == "grid" and rendering["proof"] == "docs/floating-point.md"
    assert release.mechanism.delta_exact == rendering["delta"] > 0
    assert np.all(z / rendering["grid"] == np.round(z / rendering["grid"]))
    again = type(release).from_dict(json.loads(json.dumps(release.to_dict())))
    assert again.mechanism == release.mechanism
    plain_z, plain = ldpcli.privatize(x, eps=2.0, rng=1)
    assert "rendering" not in plain.mechanism.describe() and plain.mechanism.delta_exact == 0.0


def test_file_release_sidecar_and_ledger(tmp_path: Path) -> None:
    """A secure file release: ``release.rendering`` in the sidecar (valid against the shipped schema), the
    ledger entry's δ the rendering's, times the copies."""
    src = tmp_path / "x.npy"
    np.save(src, unit_rows(200, 6, 10) * 0.8)
    ledger = Ledger.open(tmp_path / "ledger.json")
    release = ldpcli.privatize_file(src, tmp_path / "z.parquet", mechanism="privunit2", epsilon=4.0,
                                    options=ReleaseOptions(secure=True, copies=2, budget=ldpcli.Budget(ledger)))
    side = json.loads((tmp_path / "z.parquet.ldp.json").read_text())
    jsonschema.validate(side, SCHEMA)
    rendering = side["release"]["rendering"]
    assert rendering["rendering"] == "grid" and rendering["delta"] == release.mechanism.rendering.delta
    (entry,) = Ledger.open(tmp_path / "ledger.json").entries
    assert entry.delta == 2 * rendering["delta"]
    table = pq.read_table(tmp_path / "z.parquet")
    z = np.concatenate([np.stack(table.column(name).to_numpy(zero_copy_only=False)) for name in table.column_names])
    assert z.size == 2 * 200 * 6 and np.all(z / rendering["grid"] == np.round(z / rendering["grid"]))


def test_cli_privatize_params_and_audit(tmp_path: Path) -> None:
    """``--secure`` on privatize (the 'wrote' line states δ), params (grid, δ, error ratio) and audit (its
    law tests check the grid and pass)."""
    src = tmp_path / "x.npy"
    np.save(src, unit_rows(100, 4, 12) * 0.9)
    wrote = ldp("privatize", src, "-o", tmp_path / "z.npy", "--eps", 1, "--secure", "--secure-delta", "1e-9")
    assert wrote.exit_code == 0, wrote.stderr
    assert "secure rendering with δ ≤" in wrote.stdout
    assert json.loads((tmp_path / "z.npy.ldp.json").read_text())["release"]["rendering"]["delta_target"] == 1e-9
    params = ldp("params", "--d", 1000, "--eps", 8, "-m", "privunit2", "--secure", "--json")
    info = json.loads(params.stdout)["rendering"]
    assert info["delta"] <= 1e-10 and info["error_ratio"] > 1.0 and info["grid"] > 0
    audit = ldp("audit", "-m", "privunit2", "--d", 2, "--eps", 0.5, "--secure", "--seed", 3, "--json",
                "--trials", 2000, "--lower-bound-trials", 2000)
    assert audit.exit_code == 0, audit.stdout
    tests = [row["test"] for row in json.loads(audit.stdout)["law_tests"]]
    assert any(name.startswith("Z ∈ gℤ^d") for name in tests)


def test_refusals() -> None:
    """A mechanism without a secure rendering, ``secure_delta`` alone, a δ outside (0, 1), and a target
    that would need a grid above the output's norm are UsageErrors saying what to do."""
    with pytest.raises(UsageError, match="no secure rendering yet"):
        rd.secured(get_mechanism("laplace").calibrate(3, 1.0))
    with pytest.raises(UsageError, match="in \\(0, 1\\)"):
        rd.secured(get_mechanism("privunit2").calibrate(3, 1.0), 0.0)
    with pytest.raises(UsageError, match="above the output norm"):
        rd.secured(get_mechanism("privunit2").calibrate(10**5, 50.0), 1e-300)
    with pytest.raises(ValueError, match="secure_delta"):
        ldpcli.privatize(unit_rows(10, 3, 0) * 0.5, eps=1.0, secure_delta=1e-9)
    result = ldp("params", "--d", 3, "--eps", 1, "--secure")
    assert result.exit_code == 2 and "--mechanism" in result.stderr


# --------------------------------------------------------------------------- gaussian-sign: only a sign


@pytest.mark.parametrize(("d", "eps"), [(1, 1.0), (3, 0.5), (64, 8.0)])
def test_gaussian_sign_secure_is_the_plain_draws_with_an_extended_precision_sign(
    monkeypatch: pytest.MonkeyPatch, d: int, eps: float
) -> None:
    """The secure gaussian-sign draws what the numpy reference draws and releases ±fl(s·Z_j): on rows
    without a zero row, the same doubles bit for bit (the signs agree); δ = (1 + e^ε)·τ with τ the
    bound on a wrong sign, 0 at d = 1."""
    monkeypatch.setenv("LDP_KERNEL", "numpy")
    plain = get_mechanism("gaussian-sign").calibrate(d, eps)
    mech = rd.secured(plain)
    x = unit_rows(2000, d, 13) * 0.7
    assert np.array_equal(bits(mech.privatize(x, np.random.default_rng(5))), bits(plain.privatize(x, np.random.default_rng(5))))
    r = mech.rendering
    assert r.kind == "sign" and r.delta == pytest.approx((1 + np.exp(eps)) * r.tau) and r.delta <= rd.SECURE_DELTA
    assert (r.tau == 0.0) == (d == 1)


def test_gaussian_sign_secure_is_unbiased() -> None:
    """The mean of n secure outputs of one input (zero rows included) is within a Bonferroni z of x."""
    mech = rd.secured(get_mechanism("gaussian-sign").calibrate(3, 1.0))
    n = 100_000
    for x in (np.array([0.5, 0.2, -0.1]), np.zeros(3)):
        z = mech.privatize(np.tile(x, (n, 1)), np.random.default_rng(14))
        assert np.all(np.abs(z.mean(axis=0) - x) <= bonferroni_z(1e-4, 6) * np.sqrt(mech.expected_error_max / n))
        assert not np.any(bits(z) == NEGATIVE_ZERO)


# --------------------------------------------------------------------------- separated: direction × magnitude


def test_separated_secure_renders_its_direction() -> None:
    """separated's δ is its direction's (PrivUnit2 at ε₁; the magnitude is finite-valued, pure ε₂), its
    added error that of the direction times the largest squared magnitude value; unbiased; and
    ``audit --secure`` passes, its first law test the norm check against the magnitude values."""
    plain = get_mechanism("separated").calibrate(3, 4.0)
    mech = rd.secured(plain)
    part = rd.secure_rendering(plain.direction)
    top = np.max(np.abs(plain.magnitude.output_value(np.array([0, plain.magnitude.k]))))
    assert (mech.rendering.grid, mech.rendering.delta) == (part.grid, part.delta)
    assert mech.rendering.added_error == pytest.approx(top**2 * part.added_error)
    assert mech.epsilon_exact == plain.epsilon_exact and release_cost(mech).delta == part.delta
    x = np.array([0.5, 0.2, -0.1])
    n = 100_000
    z = mech.privatize(np.tile(x, (n, 1)), np.random.default_rng(15))
    assert np.all(np.abs(z.mean(axis=0) - x) <= bonferroni_z(1e-4, 3) * np.sqrt(mech.expected_error_max / n))
    audit = ldp("audit", "-m", "separated", "--d", 3, "--eps", 4, "--secure", "--seed", 2, "--json",
                "--trials", 2000, "--lower-bound-trials", 2000)
    assert audit.exit_code == 0, audit.stdout
    assert json.loads(audit.stdout)["law_tests"][0]["test"].startswith("|‖Z‖ − |R̂|·c₁|")


def test_bit_audit_finds_the_leak_only_on_the_default_rendering() -> None:
    """``ldp audit --bits`` (its events read the raw doubles: the computed norm, last bits, exact values)
    finds ε_lb above ε = 0.5 on privunit2's default rendering at d = 2, and nothing above ε on the
    secure one, with the same seed and trials (the lower bound's own confidence is 1 − 1e-4)."""
    runs = {}
    for extra in ((), ("--secure",)):
        result = ldp("audit", "-m", "privunit2", "--d", 2, "--eps", 0.5, "--bits", "--seed", 0, "--json", *extra)
        runs[extra] = json.loads(result.stdout)
    assert runs[()]["epsilon_lower_bound"] > 0.5 and not runs[()]["lower_bound_ok"]
    assert runs[("--secure",)]["epsilon_lower_bound"] <= 0.5 and runs[("--secure",)]["passed"]


def test_only_computing_a_secure_release_needs_extended_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where numpy's longdouble is a plain double (macOS arm64, Windows), params and reading a secure release
    back still work (the proof's u = 2⁻⁶⁴ is a constant), and only privatizing refuses, with one message."""
    monkeypatch.setattr(extended, "WORK", np.float64)
    plain = ldpcli.mechanisms.PrivUnit2.calibrate(8, 2.0)
    mech = rd.secured(plain)
    assert mech.rendering.delta > 0.0  # type: ignore[attr-defined]
    assert rd.as_recorded(plain, mech.describe()["rendering"]).delta_exact == mech.delta_exact
    with pytest.raises(UsageError, match="extended long double"):
        mech.privatize(np.eye(8)[:2], np.random.default_rng(0))
