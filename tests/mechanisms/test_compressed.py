"""Seed-compressed reports (Feldman & Talwar 2021, Alg. 1): the exact law of the sampler by exhaustive
enumeration over a toy seed domain, the exact ε at d = 1, 2, 3 by enumeration, the public-index variant
shown non-private, unbiasedness and the exact error by seeded Monte Carlo (a forced small T where leaving out
the fallback's 1/(1 − f) fails), decoding bit-identical across batches and kernels, and the refusals.

Toy domains: the orbit of a generic vector under the signed permutations of ℝ^d (2^d·d! seeds). The inputs
are the orbit of a generic unit vector under the same group, so every input's set holds the same number of
seeds: the domain's P̂ replaces P, and the formula's ε (computed with P̂) must be what enumeration gives.
Monte Carlo tolerances are the sampling error times the Bonferroni threshold at family level 10⁻⁶; seeded.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import numpy as np
import pytest
from helpers import bonferroni_z, ldp
from scipy import stats

from ldpcli.audit._claims import audit
from ldpcli.audit._reports import reported
from ldpcli.errors import UsageError
from ldpcli.math import _seed_prg as prg
from ldpcli.mechanisms import MechanismSpec, PrivUnit2, PrivUnitG
from ldpcli.mechanisms._compressed import (
    FALLBACK_TARGET,
    SeedReports,
    compressed_epsilon,
    fallback_tries,
    seed_law,
    select_seeds,
)

ALPHA = 1e-6


def signed_permutations(d: int) -> list[np.ndarray]:
    """The 2^d·d! signed permutation matrices of ℝ^d."""
    out = []
    for perm in itertools.permutations(range(d)):
        for signs in itertools.product((1.0, -1.0), repeat=d):
            m = np.zeros((d, d))
            m[np.arange(d), perm] = signs
            out.append(m)
    return out


def orbit(v: np.ndarray) -> np.ndarray:
    """The orbit of ``v`` under the signed permutations, one row per group element."""
    return np.stack([g @ v for g in signed_permutations(v.size)])


def generic(d: int, shift: float) -> np.ndarray:
    v = np.arange(1.0, d + 1.0) + shift
    return v / np.linalg.norm(v)


def toy(base: PrivUnit2 | PrivUnitG, domain: np.ndarray, inputs: np.ndarray) -> tuple[SeedReports, np.ndarray]:
    """Seed reports of ``base`` with its reference probability replaced by the toy domain's, and the in-set
    table (inputs × seeds); the count per input is checked to be the same (the orbit argument)."""
    probe = SeedReports.build(base)
    in_set = np.stack([probe._in_set(domain, u[None, :]) for u in inputs])
    counts = in_set.sum(axis=1)
    assert np.all(counts == counts[0]) and 0 < counts[0] < domain.shape[0], counts
    log_hat = math.log(counts[0] / domain.shape[0])
    field = "log_cap_probability" if isinstance(base, PrivUnit2) else "log_one_minus_q"
    toy_base = dataclasses.replace(base, **{field: log_hat})
    if isinstance(base, PrivUnitG):  # q̂ = 1 − P̂ as well
        toy_base = dataclasses.replace(toy_base, log_q=math.log1p(-counts[0] / domain.shape[0]))
    return SeedReports.build(toy_base), in_set


def enumerated_law(in_set: np.ndarray, keep: float, tries: int) -> np.ndarray:
    """The report's law by exhaustive enumeration of every sequence of ``tries`` candidates and every
    acceptance pattern, the fallback a further uniform seed."""
    n = in_set.size
    law = np.zeros(n)
    for seq in itertools.product(range(n), repeat=tries):
        weight = n ** -tries
        for s in seq:
            if in_set[s]:
                law[s] += weight
                break
            law[s] += weight * keep
            weight *= 1.0 - keep
        else:
            law += weight / n
    return law


def test_fallback_tries_is_the_least_t_under_the_target() -> None:
    for m in (1.0001, 1.5, 2.718281828, 12.18, 293.7, 99_999.0):
        tries, log_f = fallback_tries(math.log(m))
        log_miss = math.log1p(-1.0 / m)
        assert log_f == pytest.approx(tries * log_miss, rel=1e-12)
        assert tries * log_miss <= math.log(FALLBACK_TARGET) < (tries - 1) * log_miss
    assert fallback_tries(0.0) == (1, -math.inf)


def test_compressed_epsilon_is_the_mixtures_ratio() -> None:
    """ε of (1 − f)·R + f·ρ against the direct ratio of its extreme densities, and its two limits."""
    for eps, m, f in ((1.0, 1.7, 0.3), (4.0, 12.2, 1e-3), (8.0, 293.7, 0.05), (0.01, 1.01, 0.5)):
        direct = math.log(((1 - f) * m + f) / ((1 - f) * m * math.exp(-eps) + f))
        assert compressed_epsilon(eps, math.log(m), math.log(f)) == pytest.approx(direct, rel=1e-12)
        assert compressed_epsilon(eps, math.log(m), math.log(f)) < eps
    assert compressed_epsilon(3.0, math.log(5.0), -math.inf) == 3.0


def test_seed_law_is_the_exhaustive_enumeration() -> None:
    """seed_law's closed form against every candidate sequence (d = 2: 8 seeds, T = 1, 2, 3)."""
    domain = orbit(generic(2, 0.3))
    base = PrivUnit2.calibrate(2, 1.5)
    reports, in_set = toy(base, domain, orbit(generic(2, 0.71)))
    keep = math.exp(-reports.base.epsilon_exact)
    for tries in (1, 2, 3):
        np.testing.assert_allclose(seed_law(in_set[0], reports.base.epsilon_exact, tries),
                                   enumerated_law(in_set[0], keep, tries), rtol=1e-12)


def toy_candidates(domain_size: int, in_set: np.ndarray, rng: np.random.Generator):  # noqa: ANN201
    """select_seeds' candidates over a toy domain: uniform seed indices and their in-set flags (one input)."""
    def candidates(rows: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
        seeds = rng.integers(0, domain_size, size=(rows.size, b, 1)).astype(np.uint64)
        return seeds, in_set[seeds[..., 0].astype(np.intp)]
    return candidates


@pytest.mark.parametrize("d,tries", [(1, 2), (2, 2), (3, 3)])
def test_the_sampler_draws_the_seed_law(d: int, tries: int) -> None:
    """select_seeds over a toy domain against seed_law by a chi-square test (small T: the fallback shows)."""
    domain = orbit(generic(d, 0.3))
    reports, in_set = toy(PrivUnit2.calibrate(d, 2.0), domain, orbit(generic(d, 0.71)))
    rng = np.random.default_rng([5, d])
    n = 200_000
    eps0 = reports.base.epsilon_exact
    keep_logit = -eps0 - math.log(-math.expm1(-eps0))
    seeds, used = select_seeds(
        n, tries, keep_logit, toy_candidates(domain.shape[0], in_set[0], rng),
        lambda rows: rng.integers(0, domain.shape[0], size=(rows.size, 1)).astype(np.uint64), rng, per_round=2)
    counts = np.bincount(seeds[:, 0].astype(np.intp), minlength=domain.shape[0])
    expected = n * seed_law(in_set[0], eps0, tries)
    assert stats.chisquare(counts, expected).pvalue > ALPHA
    assert used.min() >= 1 and used.max() == tries


@pytest.mark.parametrize("name,d", [("privunit2", 1), ("privunit2", 2), ("privunit2", 3), ("privunitg", 2),
                                    ("privunitg", 3)])
def test_exact_epsilon_by_enumeration(name: str, d: int) -> None:
    """The largest log ratio of the report's law between any two inputs and any seed, enumerated over the toy
    domain, is SeedReports.epsilon_exact (with P̂) at T = 1, 4 and the T of the target, for ε = 0.5, 2, 6."""
    domain = orbit(generic(d, 0.3)) * (1.3 if name == "privunitg" else 1.0)
    inputs = orbit(generic(d, 0.71))
    checked = 0
    for eps in (0.5, 2.0, 6.0):
        base = (PrivUnit2 if name == "privunit2" else PrivUnitG).calibrate(d, eps)
        try:
            reports, in_set = toy(base, domain, inputs)
        except AssertionError:  # this ε's set holds no seed or every seed of the small orbit
            continue
        for tries in (1, 4, reports.tries):
            r = dataclasses.replace(reports, tries=tries,
                                    log_fallback=tries * math.log1p(-math.exp(-reports.log_ratio)))
            laws = np.stack([seed_law(row, r.base.epsilon_exact, tries) for row in in_set])
            enumerated = float(np.max(np.log(laws.max(axis=0)) - np.log(laws.min(axis=0))))
            assert enumerated == pytest.approx(r.epsilon_exact, rel=1e-9, abs=1e-12), (eps, tries)
            assert enumerated <= r.base.epsilon_exact * (1 + 1e-12)
            checked += 1
    assert checked >= 6  # at least two of the three ε had a set strictly inside the domain


def test_a_public_index_into_candidates_is_not_private() -> None:
    """The trap of the issue: candidates c₁, c₂, … public, the report the index of the first accepted. An index
    after a candidate that lies in x's set has probability 0 under x and not under x′: ε = ∞. The seed report
    of the same toy domain has a finite ε."""
    d = 2
    domain = orbit(generic(d, 0.3))
    reports, in_set = toy(PrivUnit2.calibrate(d, 2.0), domain, orbit(generic(d, 0.71)))
    keep = math.exp(-reports.base.epsilon_exact)
    public = np.arange(domain.shape[0])  # the public list: every seed once, in order

    def index_law(flags: np.ndarray) -> np.ndarray:
        alive, law = 1.0, np.zeros(public.size + 1)
        for i, s in enumerate(public):
            a = 1.0 if flags[s] else keep
            law[i], alive = alive * a, alive * (1.0 - a)
        law[-1] = alive
        return law

    laws = np.stack([index_law(row) for row in in_set])
    assert np.any((laws.min(axis=0) == 0.0) & (laws.max(axis=0) > 0.0))  # ε = ∞
    seed_laws = np.stack([seed_law(row, reports.base.epsilon_exact, reports.tries) for row in in_set])
    assert seed_laws.min() > 0.0
    assert np.log(seed_laws.max(0) / seed_laws.min(0)).max() == pytest.approx(reports.epsilon_exact, rel=1e-9)


def test_the_keep_probability_is_e_to_minus_the_exact_epsilon() -> None:
    """Off the cap a candidate is kept with probability ((1 − p)/(1 − P))·(P/p) = e^{−ε_exact}: with the
    printed sign of Bhowmick's m (docs/errata.md §1) or a ratio to ε instead of ε_exact this would differ."""
    base = PrivUnit2.calibrate(500, 8.0, calibration="bhowmick")
    p, big_p = base.p, base.cap_probability
    ratio = ((1 - p) / (1 - big_p)) * (big_p / p)
    assert ratio == pytest.approx(math.exp(-base.epsilon_exact), rel=1e-9)
    assert base.epsilon_exact < 8.0 - 1e-3  # bhowmick is loose: e^{−ε} would be the wrong keep probability
    reports = SeedReports.build(base)
    assert reports.log_ratio == pytest.approx(math.log(p / big_p), rel=1e-12)


def inputs(d: int, bound: float) -> dict[str, np.ndarray]:
    g = np.linspace(1.0, 2.0, d)
    return {
        "vertex": bound * np.eye(d)[0],
        "boundary": bound * g / np.linalg.norm(g),
        "interior": 0.4 * bound * g / np.linalg.norm(g),
        "all-ones": bound * np.ones(d) / math.sqrt(d),
        "origin": np.zeros(d),
    }


def check_mean_and_error(reports: SeedReports, n: int, seed: int, correct: bool = True) -> list[str]:
    """The inputs whose mean or error fails the Bonferroni z-test (``correct``: decode as shipped; else
    without the fallback's factor 1/(1 − f))."""
    d, bound = reports.base.d, reports.base.norm_bound
    cases = inputs(d, bound)
    threshold = bonferroni_z(ALPHA, len(cases) * (d + 1))
    failed = []
    for i, (name, x) in enumerate(cases.items()):
        z = reports.decode(reports.encode(np.tile(x, (n, 1)), np.random.default_rng([seed, i])))
        if not correct:
            z *= -math.expm1(reports.log_fallback)
        scores = (z.mean(axis=0) - x) / (z.std(axis=0, ddof=1) / math.sqrt(n))
        errors = np.sum((z - x) ** 2, axis=1)
        exact = reports.expected_error_max - float(x @ x)
        se = errors.std(ddof=1) / math.sqrt(n)
        if np.abs(scores).max() > threshold or abs(errors.mean() - exact) > threshold * se + 1e-9 * exact:
            failed.append(name)
    return failed


@pytest.mark.slow
@pytest.mark.parametrize("cls,d,eps", [(PrivUnit2, 1, 1.0), (PrivUnit2, 3, 2.0), (PrivUnit2, 8, 3.0),
                                       (PrivUnitG, 3, 2.0), (PrivUnitG, 8, 3.0)])
def test_reports_are_unbiased_with_the_exact_error(cls: type, d: int, eps: float) -> None:
    reports = SeedReports.build(cls.calibrate(d, eps, norm_bound=1.5))
    assert check_mean_and_error(reports, 20_000, seed=d) == []


@pytest.mark.slow
@pytest.mark.parametrize("cls", [PrivUnit2, PrivUnitG])
def test_a_forced_small_t_stays_unbiased_and_fails_without_the_fallback_factor(cls: type) -> None:
    """T = 1 (f = 1 − 1/M ≈ 0.6 at d = 4, ε = 2): the mean and the error formula with the fallback hold; the same
    reports decoded without 1/(1 − f) are biased toward 0 and fail."""
    built = SeedReports.build(cls.calibrate(4, 2.0))
    reports = dataclasses.replace(built, tries=1, log_fallback=math.log1p(-math.exp(-built.log_ratio)))
    assert reports.fallback_probability > 0.5
    assert check_mean_and_error(reports, 20_000, seed=40) == []
    assert "vertex" in check_mean_and_error(reports, 20_000, seed=40, correct=False)


def test_decoding_is_the_same_bits_whatever_the_batch_and_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    reports = SeedReports.build(PrivUnit2.calibrate(16, 3.0))
    x = np.tile(np.eye(16)[0], (300, 1))
    seeds = reports.encode(x, np.random.default_rng(3))
    whole = reports.decode(seeds)
    parts = np.concatenate([reports.decode(seeds[i:i + 7]) for i in range(0, 300, 7)])
    assert whole.tobytes() == parts.tobytes()
    monkeypatch.setenv("LDP_KERNEL", "numpy")
    assert reports.decode(seeds).tobytes() == whole.tobytes()
    assert np.allclose(np.linalg.norm(whole, axis=1), reports.base.scale / -math.expm1(reports.log_fallback))


def test_reports_are_the_seeds_and_128_bits_have_their_own_key() -> None:
    x = np.tile(np.eye(8)[0], (50, 1))
    short = SeedReports.build(PrivUnitG.calibrate(8, 2.0))
    long = SeedReports.build(PrivUnitG.calibrate(8, 2.0), bits=128)
    a, b = short.encode(x, np.random.default_rng(9)), long.encode(x, np.random.default_rng(9))
    assert a.shape == (50, 1) and b.shape == (50, 2) and a.dtype == b.dtype == np.uint64
    assert np.array_equal(a, short.encode(x, np.random.default_rng(9)))  # seeded: reproducible
    # the same 64 bits under the 128-bit tag (second word 0) expand to other normals
    padded = np.concatenate([a, np.zeros_like(a)], axis=1)
    assert not np.array_equal(prg.expand(a, 8), prg.expand(padded, 8))
    assert short.describe()["bytes_per_report"] == 8 and long.describe()["bytes_per_report"] == 16


def test_describe_states_the_public_facts() -> None:
    reports = SeedReports.build(PrivUnit2.calibrate(500, 4.0))
    block = reports.describe()
    assert block["kind"] == "seed" and block["bits"] == 64 and "ChaCha20" in block["prg"]
    assert "pseudo-random function" in block["assumption"]
    assert block["fallback_probability"] <= FALLBACK_TARGET
    assert block["expected_tries"] == pytest.approx(12.18, rel=1e-3)
    assert 0 < reports.base.epsilon_exact - block["epsilon_exact"] < 1e-9
    assert 0 < block["expected_error"] - reports.base.expected_error < 1e-9 * reports.base.expected_error


@pytest.mark.parametrize("kwargs,words", [
    ({"base": "duchi"}, ("privunit2 and privunitg", "duchi-l2")),
    ({"bits": 32}, ("report_bits", "64 or 128", "32")),
    ({"eps": 16.0}, ("3.69e+05 tries per row", "the cap is 1e+05", "smaller epsilon")),
])
def test_refusals_name_the_problem(kwargs: dict, words: tuple[str, ...]) -> None:
    from ldpcli.mechanisms import DuchiL2

    eps = kwargs.get("eps", 2.0)
    base = DuchiL2.calibrate(500, eps) if kwargs.get("base") else PrivUnit2.calibrate(500, eps)
    with pytest.raises(UsageError) as info:
        SeedReports.build(base, kwargs.get("bits", 64))
    for word in words:
        assert word in str(info.value)


def test_params_describes_the_compressed_reports() -> None:
    import json

    from helpers import ldp

    result = ldp("params", "--d", "500", "--eps", "4", "-m", "privunitg", "--compress-reports", "--report-bits",
                 "128", "--json")
    assert result.exit_code == 0, result.output
    block = json.loads(result.stdout)["reports"]
    assert block == SeedReports.build(PrivUnitG.calibrate(500, 4.0), 128).describe()
    table = ldp("params", "--d", "500", "--eps", "4", "-m", "privunit2", "--compress-reports")
    assert table.exit_code == 0 and "64 bits" in table.stdout and "tries T" in table.stdout
    for args, words in (
        (("--eps", "16", "-m", "privunit2"), "3.69e+05 tries per row"),
        (("--eps", "4", "-m", "duchi-l2"), "not duchi-l2"),
        (("--eps", "4",), "give --mechanism"),
        (("--eps", "4", "-m", "privunit2", "--secure"), "drop --secure"),
        (("--eps", "4", "-m", "privunit2", "--report-bits", "32"), "64 or 128"),
    ):
        result = ldp("params", "--d", "500", *args, "--compress-reports")
        assert result.exit_code == 2 and words in result.stderr, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1


def test_the_release_generator_draws_the_seeds() -> None:
    """A default release's generator (ldp's ChaCha20 stream, no seed) encodes; seeded by a key, the same reports."""
    from ldpcli.math import CounterGenerator

    reports = SeedReports.build(PrivUnit2.calibrate(8, 2.0))
    x = np.tile(np.eye(8)[0], (40, 1))
    key = bytes(range(32))
    a = reports.encode(x, CounterGenerator(key))  # type: ignore[arg-type]
    assert np.array_equal(a, reports.encode(x, CounterGenerator(key)))  # type: ignore[arg-type]
    assert len(np.unique(a)) == 40


# --- the audit of seed reports (ldp audit --compress-reports) -------------------------------------------------


@pytest.mark.parametrize("name", ["privunit2", "privunitg"])
def test_the_audit_of_seed_reports_passes_with_their_own_epsilon_and_errors(name: str) -> None:
    reports = SeedReports.build(MechanismSpec(name, 2.0).calibrate(3))
    result = audit(reported(reports), trials=4000, seed=3, lower_bound_trials=4000)
    assert result.passed, result.to_dict()
    summary = result.to_dict()
    assert summary["epsilon_exact"] == reports.epsilon_exact < reports.base.epsilon_exact
    assert summary["epsilon_second_route"] == pytest.approx(reports.epsilon_exact, abs=1e-9)
    assert summary["reports"] == reports.describe()
    boundary = next(check for check in result.inputs if check.boundary)
    assert boundary.predicted == reports.expected_error


def test_the_audit_sees_a_decoder_without_its_fallback_factor_and_a_wrong_law() -> None:
    """A forced T = 1 (f ≈ 0.37 at d = 3, ε = 2): the honest decoder stays unbiased with its exact error, but
    the law is the mixture, which the base's law tests reject; a decoder that drops 1/(1 − f) is biased."""
    base = PrivUnit2.calibrate(3, 2.0)
    forced = SeedReports(base, 64, 1, math.log1p(-math.exp(-SeedReports.build(base).log_ratio)))
    honest = audit(reported(forced), trials=4000, seed=4, lower_bound_trials=200)
    assert all(check.ok for check in honest.inputs) and honest.privacy_ok
    assert not honest.law_ok  # the law tests have the power to see a mixture with the reference

    class Uncorrected(SeedReports):
        def decode(self, reports: np.ndarray) -> np.ndarray:
            return self.expand(reports)

    dropped = Uncorrected(base, 64, 1, forced.log_fallback)
    biased = audit(reported(dropped), trials=4000, seed=4, lower_bound_trials=200)
    assert not all(check.unbiased for check in biased.inputs if check.boundary)


def test_ldp_audit_takes_compress_reports() -> None:
    result = ldp("audit", "-m", "privunitg", "--d", 2, "--eps", 1, "--compress-reports", "--report-bits", 128,
                 "--trials", 2000, "--lower-bound-trials", 2000, "--seed", 1, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["reports"]["bits"] == 128
    refused = ldp("audit", "-m", "privunit2", "--d", 2, "--eps", 1, "--compress-reports", "--secure")
    assert refused.exit_code == 2 and "drop --secure" in refused.stderr


def test_a_secure_rendering_has_no_seed_reports() -> None:
    """The decoder renders nothing, so seed reports of a secured mechanism would not be the release it claims."""
    from ldpcli.mechanisms._rendering import secured

    with pytest.raises(UsageError, match="no secure rendering"):
        SeedReports.build(secured(PrivUnit2.calibrate(3, 2.0)))
