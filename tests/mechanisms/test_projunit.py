"""projunit: the Haar projection (its law, against a non-Haar one), α = E‖Wu‖, and the mechanism's exact
mean, error, privacy level, choice of k, bad k and a release end to end in real processes.

Monte Carlo tolerances are the sampling error of the mean tested (sample deviation/√n) times the Bonferroni
threshold of all the tests of one function at family level 10⁻⁶ (``bonferroni_z``); every test is seeded.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from helpers import bonferroni_z, ldp, ldp_process, write_list
from scipy import special, stats

from ldpcli.math import _projection as projection
from ldpcli.mechanisms import PrivUnit2, PrivUnitG, get_mechanism
from ldpcli.mechanisms._projunit import ERROR_TARGET, ProjUnit, default_k, projected_errors

ALPHA = 1e-6
Sampler = Callable[[int, int, int, np.random.Generator], np.ndarray]


def haar(m: int, k: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """ldp's W (m, k, d): row j of W is Wᵀe_j."""
    transforms = projection.haar_projections(m, k, d, rng)
    return np.stack([transforms.lift(np.tile(e, (m, 1))) for e in np.eye(k)], axis=1)


def uniform_qr(m: int, k: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """apple/ml-projunit's construction (not Haar): Qᵀ of the QR of a d × k matrix of uniform [0, 1) entries."""
    q, _ = np.linalg.qr(rng.random((m, d, k)))
    return np.transpose(q, (0, 2, 1))


def second_moment_scores(sampler: Sampler, m: int, k: int, d: int, seed: int) -> np.ndarray:
    """z-scores of (d/k)·WᵀW against I: every entry, and the quadratic form along the all-ones direction."""
    w = sampler(m, k, d, np.random.default_rng(seed))
    gram = (d / k) * np.einsum("mki,mkj->mij", w, w)
    ones = np.ones(d) / math.sqrt(d)
    along = np.einsum("i,mij,j->m", ones, gram, ones)
    iu = np.triu_indices(d)
    entries = gram[:, iu[0], iu[1]]
    target = np.eye(d)[iu]
    scores = (entries.mean(axis=0) - target) / (entries.std(axis=0, ddof=1) / math.sqrt(m))
    return np.append(scores, (along.mean() - 1.0) / (along.std(ddof=1) / math.sqrt(m)))


@pytest.mark.slow
def test_haar_projection_has_second_moment_k_over_d_and_the_uniform_qr_does_not() -> None:
    """E[WᵀW] = (k/d)·I for a Haar W (E[W_{ia}W_{ib}] = δ_ab/d for each of the k orthonormal rows)."""
    d, k, m = 64, 8, 4000
    threshold = bonferroni_z(ALPHA, d * (d + 1) // 2 + 1)
    scores = second_moment_scores(haar, m, k, d, seed=1)
    assert np.abs(scores).max() < threshold, np.abs(scores).max()
    # ml-projunit's W: along the all-ones direction (d/k)·E‖W1/√d‖² is about 7.7, not 1.
    bad = second_moment_scores(uniform_qr, m, k, d, seed=1)
    assert bad[-1] > 100 * threshold
    w = uniform_qr(m, k, d, np.random.default_rng(2))
    along = (d / k) * np.sum((w @ (np.ones(d) / math.sqrt(d))) ** 2, axis=1)
    assert 7.0 < along.mean() < 8.5


@pytest.mark.parametrize(("k", "d"), [(1, 2), (3, 7), (8, 64)])
def test_haar_projection_is_rotation_invariant(k: int, d: int) -> None:
    """‖Wq‖² ~ Beta(k/2, (d − k)/2) for every fixed unit q (the law of WQ is the law of W): KS at e₁, the all-ones
    direction and a seeded one; the uniform QR fails at the all-ones direction."""
    m = 4000
    q = np.stack([np.eye(d)[0], np.ones(d) / math.sqrt(d), (g := np.random.default_rng([5, d]).standard_normal(d))
                  / np.linalg.norm(g)])
    law = stats.beta(k / 2, (d - k) / 2)
    for i, direction in enumerate(q):
        w = haar(m, k, d, np.random.default_rng([d, i]))
        pvalue = stats.kstest(np.sum((w @ direction) ** 2, axis=1), law.cdf).pvalue
        assert pvalue > ALPHA / len(q), (i, pvalue)
    bad = uniform_qr(m, k, d, np.random.default_rng(3))
    assert stats.kstest(np.sum((bad @ q[1]) ** 2, axis=1), law.cdf).pvalue < 1e-12


def test_projection_has_orthonormal_rows_and_lift_is_its_transpose() -> None:
    rng = np.random.default_rng(4)
    m, k, d = 50, 5, 33
    transforms = projection.haar_projections(m, k, d, rng)
    w = np.stack([transforms.project(np.tile(e, (m, 1))) for e in np.eye(d)], axis=2)
    assert np.abs(w @ np.transpose(w, (0, 2, 1)) - np.eye(k)).max() < 1e-13
    z = rng.standard_normal((m, k))
    assert np.abs(transforms.lift(z) - np.einsum("mkd,mk->md", w, z)).max() < 1e-13


def test_alpha_closed_form_against_direct_cases_and_monte_carlo() -> None:
    assert math.exp(projection.log_projection_mean(1, 2)) == pytest.approx(2 / math.pi, rel=1e-15)  # E|cos θ|
    assert projection.log_projection_mean(9, 9) == 0.0
    for k, d in [(1, 3), (5, 17), (100, 2001), (1500, 5000)]:
        direct = (special.gammaln((k + 1) / 2) + special.gammaln(d / 2) - special.gammaln(k / 2)
                  - special.gammaln((d + 1) / 2))
        assert projection.log_projection_mean(k, d) == pytest.approx(direct, rel=1e-10, abs=1e-12)
    m, k, d = 20_000, 3, 10
    lengths = np.sqrt(np.sum(haar(m, k, d, np.random.default_rng(6))[:, :, 0] ** 2, axis=1))
    alpha = math.exp(projection.log_projection_mean(k, d))
    assert abs(lengths.mean() - alpha) < bonferroni_z(ALPHA, 1) * lengths.std(ddof=1) / math.sqrt(m)


def test_alpha_keeps_its_precision_near_k_equal_d() -> None:
    """1/α² − 1 for k = d − 1 at d = 10⁷ against 50-digit arithmetic (a cancellation of log Γ of size 10⁸)."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    for k, d in [(10**7 - 1, 10**7), (999, 1000), (2500, 3000)]:
        log_alpha = (mpmath.loggamma(mpmath.mpf(k + 1) / 2) + mpmath.loggamma(mpmath.mpf(d) / 2)
                     - mpmath.loggamma(mpmath.mpf(k) / 2) - mpmath.loggamma(mpmath.mpf(d + 1) / 2))
        exact = float(mpmath.expm1(-2 * log_alpha))
        assert projection.inverse_square_excess(k, d) == pytest.approx(exact, rel=1e-12)


def inputs(d: int) -> dict[str, np.ndarray]:
    generic = np.linspace(1.0, 2.0, d)
    return {
        "axis (a vertex of the box, on the sphere)": np.eye(d)[0],
        "boundary": generic / np.linalg.norm(generic),
        "interior": 0.4 * generic / np.linalg.norm(generic),
        "all-ones": np.ones(d) / math.sqrt(d),
        "origin": np.zeros(d),
    }


@pytest.mark.slow
@pytest.mark.parametrize("base", ["privunitg", "privunit2"])
def test_projunit_is_unbiased_with_its_exact_error(base: str) -> None:
    """E[x̂] = x and E‖x̂ − x‖² = E₀/α² − ‖x‖² at each input (d = 6, k = 3, ε = 2, L = 1.5)."""
    d, n, bound = 6, 40_000, 1.5
    mech = ProjUnit.calibrate(d, 2.0, norm_bound=bound, k=3, base=base)
    cases = inputs(d)
    threshold = bonferroni_z(ALPHA, len(cases) * (d + 1))
    for i, (name, unit) in enumerate(cases.items()):
        x = bound * unit
        z = mech.privatize(np.tile(x, (n, 1)), np.random.default_rng([11, i]))
        scores = (z.mean(axis=0) - x) / (z.std(axis=0, ddof=1) / math.sqrt(n))
        assert np.abs(scores).max() < threshold, (name, scores)
        errors = np.sum((z - x) ** 2, axis=1)
        exact = mech.expected_error_max - float(x @ x)
        se = errors.std(ddof=1) / math.sqrt(n)  # 0 up to rounding for privunit2: its ‖x̂‖ is constant
        assert abs(errors.mean() - exact) <= threshold * se + 1e-12 * exact, (name, errors.mean(), exact)


def test_errors_are_the_bases_divided_by_alpha_squared() -> None:
    for base in (PrivUnitG, PrivUnit2):
        for d, k, eps, bound in [(2, 1, 1.0, 1.0), (50, 7, 4.0, 3.0), (10**5, 1000, 8.0, 0.5)]:
            mech = ProjUnit.calibrate(d, eps, norm_bound=bound, k=k, base=base.name)
            inner = base.calibrate(k, eps, norm_bound=bound)
            assert mech.inner == inner and mech.epsilon_exact == inner.epsilon_exact
            alpha2 = math.exp(2 * projection.log_projection_mean(k, d))
            assert mech.expected_error_max == pytest.approx(inner.expected_error_max / alpha2, rel=1e-13)
            assert mech.expected_error == pytest.approx(inner.expected_error_max / alpha2 - bound**2, rel=1e-12)


@pytest.mark.parametrize("base", ["privunitg", "privunit2"])
@pytest.mark.parametrize(("d", "eps"), [(16, 0.5), (16, 4.0), (200, 1.0), (200, 16.0)])
def test_error_decreases_in_k_and_the_default_k_is_the_smallest_within_target(base: str, d: int, eps: float) -> None:
    cls = get_mechanism(base)
    errors = [projected_errors(cls.calibrate(k, eps), k, d)[0] for k in range(1, d)]
    assert all(b <= a for a, b in zip(errors, errors[1:])), np.flatnonzero(np.diff(errors) > 0)
    target = ERROR_TARGET * cls.calibrate(d, eps).expected_error
    within = [k for k, error in enumerate(errors, start=1) if error <= target]
    assert default_k(d, eps, base) == (within[0] if within else d - 1)


def test_params_shows_k_alpha_and_the_error_ratios() -> None:
    result = ldp("params", "--mechanism", "projunit", "--d", 32768, "--eps", 4, "--json")
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["k"] == default_k(32768, 4.0, "privunitg") and info["base"] == "privunitg"
    assert info["alpha"] == pytest.approx(math.exp(projection.log_projection_mean(info["k"], 32768)))
    assert 1.0 < info["error_ratio_privunitg"] <= ERROR_TARGET
    assert info["error_ratio_privunit2"] == pytest.approx(
        info["expected_error"] / PrivUnit2.calibrate(32768, 4.0).expected_error)
    given = json.loads(ldp("params", "-m", "projunit", "--d", 32768, "--eps", 4, "--k", 1000, "--json").stdout)
    assert given["k"] == 1000 and given["error_ratio_privunitg"] < info["error_ratio_privunitg"]


def test_a_wrong_normalisation_fails_the_law_tests() -> None:
    """The audit's norm test sees a decoder off by 10 % (ml-projunit omits 1/α altogether)."""
    d, n = 8, 4000
    x = np.ones(d) / math.sqrt(d)
    for base in ("privunitg", "privunit2"):
        honest = ProjUnit.calibrate(d, 2.0, k=3, base=base)
        wrong = dataclasses.replace(honest, log_alpha=honest.log_alpha + math.log(1.1))
        good = honest.law_tests(x, honest.privatize(np.tile(x, (n, 1)), np.random.default_rng(8)))
        bad = honest.law_tests(x, wrong.privatize(np.tile(x, (n, 1)), np.random.default_rng(8)))
        assert min(t.p_value for t in good) > ALPHA and bad[0].p_value < 1e-12, (base, good, bad[0])


def write_rows(path: Path, d: int, n: int = 600) -> np.ndarray:
    g = np.random.default_rng(9).standard_normal((n, d))
    rows = 0.8 * g / np.linalg.norm(g, axis=1, keepdims=True)
    write_list(path, rows, column="v")
    return rows


@pytest.mark.slow
@pytest.mark.parametrize(("k", "words"), [(8, ("--k", "k = 8", "d = 8", "between 1 and 7")), (0, ("--k", "k = 0", "d = 8"))])
def test_a_bad_k_is_one_line_from_the_command(tmp_path: Path, k: int, words: tuple[str, ...]) -> None:
    src = tmp_path / "x.parquet"
    write_rows(src, 8)
    run = ldp_process("privatize", src, "--eps", 2, "--mechanism", "projunit", "--k", k, module=True,
                      env={"LDP_LEDGER": str(tmp_path / "ledger.json")}, cwd=tmp_path)
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ldp: error:"), run.stderr
    assert all(word in lines[0] for word in words), lines[0]
    assert not (tmp_path / "x.privatized.parquet").exists()


@pytest.mark.slow
def test_privatize_then_estimate_mean_in_real_processes(tmp_path: Path) -> None:
    src, out = tmp_path / "x.parquet", tmp_path / "x.privatized.parquet"
    rows = write_rows(src, 16, n=3000)
    env = {"LDP_LEDGER": str(tmp_path / "ledger.json")}
    run = ldp_process("privatize", src, "--eps", 4, "-m", "projunit", "--k", 6, "--seed", 3, "-o", out,
                      module=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    sidecar = json.loads(Path(f"{out}.ldp.json").read_text())
    spec = sidecar["mechanism"]["spec"]
    assert spec["name"] == "projunit" and spec["options"]["k"] == 6 and sidecar["mechanism"]["parameters"]["alpha"] > 0
    est = ldp_process("estimate-mean", out, "--json", module=True, env=env, cwd=tmp_path)
    assert est.returncode == 0, est.stderr
    result = json.loads(est.stdout)
    assert result["n"] == 3000 and result["d"] == 16
    mech = ProjUnit.calibrate(16, 4.0, k=6)
    gap = np.sum((np.array(result["mean"]) - rows.mean(axis=0)) ** 2)
    # E gap = (E₀/α² − mean ‖x‖²)/n ≤ expected_error_max/n; a seeded run, within a generous factor of it
    assert gap < 5.0 * mech.expected_error_max / 3000, (gap, mech.expected_error_max / 3000)
