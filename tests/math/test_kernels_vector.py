"""The fused samplers of privunitg, gaussian-sign and the hypercube mechanisms (issue 27 item 3).

Each runs chunk by chunk in numpy or as one compiled loop per row with numba (``ldp[fast]``,
:mod:`ldpcli.math._kernels`). Both draw the same numbers in the same order: privunitg's and
gaussian-sign's agree to rounding (their inner products sum in different orders). The hypercube
mechanisms' compiled loop, from a numpy Generator, draws each row's agreeing positions from fewer numbers
than the numpy reference's d keys a row (``ldpcli.math._subsets.uniform_subsets``), so it is checked against
the channel's exact law instead; from the ChaCha20 stream it reads the reference's own uniforms and keys and
gives the reference's output bit for bit, ties at the cut and chunk boundaries included. The numpy forms match their unfused formulas bit for bit for rows x ≠ 0; both
kernels are then checked for the law itself (the audit's law tests, unbiasedness, E‖Z − x‖² against
the closed form, zero rows included) and for seeded outputs that do not depend on batches or threads.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import bonferroni_z, write_list

from ldpcli.math import _kernels as kernels
from ldpcli.math import _logspace as logspace
from ldpcli.math import _rows as rowmath
from ldpcli.math import _subsets as subsets
from ldpcli.math._counter_rng import CounterGenerator
from ldpcli.mechanisms import _hypercube as hypercube
from ldpcli.mechanisms import _privunitg as privunitg
from ldpcli.mechanisms import get_mechanism
from ldpcli.release._file import write_file_release
from ldpcli.release._options import ReleaseOptions, Resources

numba_only = pytest.mark.skipif(not kernels._numba_installed(), reason="numba is not installed (pip install 'ldp[fast]')")
KERNELS = ["numpy", pytest.param("numba", marks=numba_only)]
NORMAL_BASED = ["privunitg", "gaussian-sign"]
HYPERCUBE = ["privunit-inf", "duchi-linf"]


@pytest.fixture
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(kernels.KERNEL_ENV, request.param)
    return str(request.param)


def ball_rows(n: int, d: int, seed: int) -> np.ndarray:
    """Rows inside the unit ball, on the sphere, tiny (1e−300: a direction, not a zero row) and zero."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    x *= (rng.random(n) / np.linalg.norm(x, axis=1))[:, None]
    x[::7] /= np.linalg.norm(x[::7], axis=1)[:, None]
    x[3::11] *= 1e-300
    x[5::13] = 0.0
    return x


def box_rows(n: int, d: int, seed: int) -> np.ndarray:
    """Rows in the ℓ∞ box, some on its vertices."""
    x = np.random.default_rng(seed).uniform(-1.0, 1.0, (n, d))
    x[::5] = np.sign(x[::5])
    return x


def unfused(name: str, x: np.ndarray, d: int, eps: float, seed: int) -> np.ndarray:
    """The formulas of privunitg (Asi et al. Alg. 2) and gaussian-sign (Błasiok et al. Def. 5.5)
    on whole arrays, with the fused samplers' draw order and row dots (numpy's vecdot); rows x ≠ 0 only."""
    mech = get_mechanism(name).calibrate(d, eps)
    rng = np.random.default_rng(seed)
    n = len(x)
    flips = rng.random(n)
    norms = rowmath.row_norms(x)
    u = x / np.where(flips < (1.0 + norms) / 2.0, norms, -norms)[:, None]
    if name == "privunitg":
        upper = logspace.bernoulli_logit(mech.logit_p, n, rng)
        z = privunitg.sample_split_normal(upper, mech.threshold, mech.log_q, mech.log_one_minus_q, rng)
        g = rng.standard_normal((n, d))
        return (g + u * (z - np.vecdot(g, u))[:, None]) * math.exp(-mech.log_mu)
    keep = logspace.bernoulli_logit(eps, n, rng)
    g = rng.standard_normal((n, d))
    s = mech.gaussian_scale
    return g * np.where((np.vecdot(g, u) >= 0.0) == keep, s, -s)[:, None]


@pytest.mark.parametrize("kernel", ["numpy"], indirect=True)
@pytest.mark.parametrize("name", NORMAL_BASED)
@pytest.mark.parametrize("d", [1, 2, 3, 500])
def test_numpy_chunks_match_the_unfused_formula_bit_for_bit(
    kernel: str, name: str, d: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = ball_rows(300, d, seed=d)
    x[np.linalg.norm(x, axis=1) == 0.0, 0] = 0.5  # the formula has no zero rows
    want = unfused(name, x, d, 4.0, seed=7)
    mech = get_mechanism(name).calibrate(d, 4.0)
    for chunk in (1, 3 * d, rowmath.FUSED_CHUNK_VALUES):  # one row per chunk, three, the default
        monkeypatch.setattr(rowmath, "FUSED_CHUNK_VALUES", chunk)
        assert np.array_equal(mech.privatize(x, np.random.default_rng(7)), want), f"chunk of {chunk} values"


@numba_only
@pytest.mark.parametrize("name", NORMAL_BASED)
@pytest.mark.parametrize("d, eps", [(1, 2.0), (2, 1.0), (3, 4.0), (10, 1000.0), (500, 8.0), (20_000, 8.0)])
def test_numba_matches_numpy_to_rounding(monkeypatch: pytest.MonkeyPatch, name: str, d: int, eps: float) -> None:
    """Same generator, same draws in the same order: a few ulps of the output's scale apart,
    zero and tiny rows included."""
    mech = get_mechanism(name).calibrate(d, eps)
    x = ball_rows(max(20, 40_000 // d), d, seed=d + 1)
    outputs = {}
    for which in ("numpy", "numba"):
        monkeypatch.setenv(kernels.KERNEL_ENV, which)
        outputs[which] = mech.privatize(x, np.random.default_rng(3))
    size = float(np.max(np.abs(outputs["numpy"])))
    assert np.all(np.isfinite(outputs["numba"]))
    np.testing.assert_allclose(outputs["numba"], outputs["numpy"], rtol=0, atol=1e-11 * size)


@pytest.mark.slow
@numba_only
@pytest.mark.parametrize("d", [1, 2, 8, 9])
def test_the_compiled_subset_is_uniform_among_subsets_of_its_size(d: int) -> None:
    """``_uniform_subset`` for every size 0…d (both of its routes and the complement): each
    size-k subset of d positions equally likely (χ² over the C(d, k) subsets, 20 000 seeded draws
    per size, family level 1e−6), and always of size k."""
    from scipy import stats

    from ldpcli.math import _numba_kernels

    rng = np.random.default_rng(d)
    mask = np.empty(d, dtype=bool)
    weights = 1 << np.arange(d)
    for size in range(d + 1):
        counts: dict[int, int] = {}
        for _ in range(20_000):
            _numba_kernels._uniform_subset(mask, size, rng)
            assert mask.sum() == size
            key = int(mask @ weights)
            counts[key] = counts.get(key, 0) + 1
        cells = math.comb(d, size)
        assert len(counts) <= cells
        observed = np.array(list(counts.values()) + [0] * (cells - len(counts)))
        if cells > 1:
            assert stats.chisquare(observed).pvalue > 1e-6 / (d + 1)


@pytest.mark.parametrize("kernel", KERNELS, indirect=True)
@pytest.mark.parametrize("name", HYPERCUBE)
def test_each_kernel_draws_the_exact_channel_at_a_vertex(kernel: str, name: str) -> None:
    """At a vertex s the output z ∈ {±1}^d has the channel's exact law (module docstring of
    ``hypercube``): p/N_in for each z with ⟨z, s⟩ > κ, (1 − p)/N_out for the others. χ² over all 2^d
    outputs, 40 000 seeded rows, d = 6, p-value above 1e−6."""
    from scipy import stats

    d, n = 6, 40_000
    mech = get_mechanism(name).calibrate(d, 1.5)
    s = np.array([1.0, -1.0, 1.0, 1.0, -1.0, -1.0])
    z = mech.privatize(np.tile(s, (n, 1)), np.random.default_rng(9)) > 0.0
    keys = z @ (1 << np.arange(d))
    observed = np.bincount(keys, minlength=2**d)
    vertices = (np.arange(2**d)[:, None] >> np.arange(d)) & 1
    agreements = np.sum((2 * vertices - 1) == s, axis=1)
    in_cap = agreements >= mech.agree_min
    p = mech.parameters()["p"]
    expected = np.where(in_cap, p / in_cap.sum(), (1.0 - p) / (~in_cap).sum()) * n
    assert stats.chisquare(observed, expected).pvalue > 1e-6


@numba_only
@pytest.mark.parametrize("name, kernel_function", [
    ("privunitg", "gaussian_about_cosines"), ("gaussian-sign", "gaussian_with_private_sign"),
    ("privunit-inf", "hypercube_vertices"), ("duchi-linf", "hypercube_vertices"),
])
def test_each_mechanism_runs_its_compiled_kernel_when_chosen(
    monkeypatch: pytest.MonkeyPatch, name: str, kernel_function: str
) -> None:
    """``LDP_KERNEL=numba`` (or ``auto`` with numba installed) runs the mechanism's compiled loop;
    ``numpy``, or ``auto`` without numba, never touches it."""
    from ldpcli.math import _numba_kernels

    calls = []
    real = getattr(_numba_kernels, kernel_function)
    monkeypatch.setattr(_numba_kernels, kernel_function, lambda *args: calls.append(1) or real(*args))
    mech = get_mechanism(name).calibrate(6, 2.0)
    x = box_rows(50, 6, seed=1) / 3.0
    monkeypatch.setenv(kernels.KERNEL_ENV, "numpy")
    mech.privatize(x, np.random.default_rng(0))
    assert calls == []
    monkeypatch.setenv(kernels.KERNEL_ENV, "auto")
    with monkeypatch.context() as without:
        without.setattr(kernels, "_numba_installed", lambda: False)
        mech.privatize(x, np.random.default_rng(0))
    assert calls == []
    for choice in ("auto", "numba"):
        monkeypatch.setenv(kernels.KERNEL_ENV, choice)
        mech.privatize(x, np.random.default_rng(0))
    assert calls == [1, 1]


def three_valued_keys(calls: list[int]):
    """Keys in {0, 1, 2} only (i.i.d. uniform): most rows tie at their cut and are drawn again, often twice."""

    def keys(rows: int, d: int, rng: CounterGenerator) -> np.ndarray:
        calls.append(rows)
        return np.asarray(rng.integers(0, 3, size=(rows, d))).astype(np.uint32)

    return keys


@numba_only
@pytest.mark.parametrize("name", HYPERCUBE)
@pytest.mark.parametrize("d, eps, chunk, few_values", [
    (1, 2.0, 1 << 20, False), (2, 1.0, 7, True), (5, 2.0, 1 << 20, False), (5, 0.5, 33, True),
    (500, 8.0, 1 << 20, False), (500, 8.0, 1500, False), (3000, 4.0, 1 << 20, False), (64, 1.0, 700, True),
])
def test_the_compiled_sampler_gives_the_references_bits_from_the_stream(
    monkeypatch: pytest.MonkeyPatch, name: str, d: int, eps: float, chunk: int, few_values: bool
) -> None:
    """One ChaCha20 key, ``LDP_KERNEL=numpy`` against ``numba``: the same output bit for bit, for rows inside
    the box, on its vertices and zero; over several chunks (``_CHUNK_ELEMENTS``); with keys that tie at their
    cut in most rows (redrawn in rounds); at d = 3000 (the reference finds its cuts by selection). And the
    compiled sampler really ran, as one pass per chunk plus one per round of redraws."""
    from ldpcli.math import _numba_kernels

    monkeypatch.setattr(hypercube, "_CHUNK_ELEMENTS", chunk)
    mech = get_mechanism(name).calibrate(d, eps)
    x = box_rows(max(40, 30_000 // d), d, seed=d)
    x[7] = 0.0
    calls: list[int] = []
    if few_values:
        monkeypatch.setattr(subsets, "_uniform_keys", three_valued_keys(calls))
    passes: list[int] = []
    real = _numba_kernels.hypercube_vertices_given
    monkeypatch.setattr(_numba_kernels, "hypercube_vertices_given", lambda *args: passes.append(1) or real(*args))
    outputs = {}
    for which in ("numpy", "numba"):
        monkeypatch.setenv(kernels.KERNEL_ENV, which)
        outputs[which] = mech.privatize(x, CounterGenerator(bytes(range(32))))
        assert len(passes) == (0 if which == "numpy" else len(calls) // 2 if few_values else -(-len(x) // max(1, chunk // d)))
    assert np.array_equal(outputs["numpy"].view(np.uint64), outputs["numba"].view(np.uint64))
    if few_values:
        assert len(calls) // 2 > -(-len(x) // max(1, chunk // d))  # redraw rounds ran


@pytest.mark.parametrize("kernel", KERNELS, indirect=True)
@pytest.mark.parametrize("name, d, eps, n", [
    ("privunitg", 1, 2.0, 100_000), ("privunitg", 4, 1.0, 100_000), ("privunitg", 40, 8.0, 20_000),
    ("gaussian-sign", 3, 2.0, 100_000), ("gaussian-sign", 40, 8.0, 20_000),
    ("privunit-inf", 5, 2.0, 100_000), ("duchi-linf", 6, 1.0, 100_000),
])
def test_each_kernel_is_unbiased_with_the_predicted_error(kernel: str, name: str, d: int, eps: float, n: int) -> None:
    """E[Z] = x and E‖Z − x‖² = expected_error_max − ‖x‖², for an inside row and the zero row
    (seeded; Bonferroni z over the coordinates at family level 1e−6, 6 standard errors for the error)."""
    mech = get_mechanism(name).calibrate(d, eps)
    rng = np.random.default_rng(60 + d)
    x = rng.uniform(-0.5, 0.5, d) if name in HYPERCUBE else rng.standard_normal(d)
    if name not in HYPERCUBE:
        x *= 0.6 / np.linalg.norm(x)
    for row in (x, np.zeros(d)):
        z = mech.privatize(np.tile(row, (n, 1)), rng)
        se = z.std(axis=0, ddof=1) / math.sqrt(n)
        assert np.all(np.abs(z.mean(axis=0) - row) <= bonferroni_z(1e-6, d) * se)
        sq = np.sum((z - row) ** 2, axis=1)
        predicted = mech.expected_error_max - float(row @ row)
        assert abs(sq.mean() - predicted) <= 6 * sq.std(ddof=1) / math.sqrt(n) + 1e-12 * predicted


@pytest.mark.parametrize("kernel", KERNELS, indirect=True)
@pytest.mark.parametrize("name, d, eps", [
    ("privunitg", 1, 1.0), ("privunitg", 5, 3.0), ("gaussian-sign", 5, 3.0),
    ("privunit-inf", 5, 2.0), ("duchi-linf", 4, 1.0),
])
def test_the_audits_law_tests_accept_each_kernel(kernel: str, name: str, d: int, eps: float) -> None:
    """The mechanism's own exact-law tests (KS with exact p-values, ``law_tests``) on 20 000 seeded
    rows of one input inside the domain and of the zero row: every p-value above 1e−6/tests."""
    mech = get_mechanism(name).calibrate(d, eps)
    rng = np.random.default_rng(80 + d)
    inside = np.full(d, 0.3) if name in HYPERCUBE else np.full(d, 0.5 / math.sqrt(d))
    for row in (inside, np.zeros(d)):
        tests = [t for t in mech.law_tests(row, mech.privatize(np.tile(row, (20_000, 1)), rng)) if not t.skipped]
        assert tests and min(t.p_value for t in tests) > 1e-6 / len(tests), [(t.name, t.p_value) for t in tests]


@pytest.mark.parametrize("kernel", KERNELS, indirect=True)
@pytest.mark.parametrize("name", [*NORMAL_BASED, *HYPERCUBE])
def test_seeded_output_does_not_depend_on_batches_or_threads(kernel: str, name: str, tmp_path: Path) -> None:
    """Keyed blocks (``release._randomness``) hand each kernel the same generator per block of rows,
    so one seed gives one table whatever the batch size (memory budget) and thread count."""
    src = tmp_path / "x.parquet"
    x = box_rows(3000, 8, seed=2) / math.sqrt(8)
    x[17] = 0.0
    write_list(src, x)
    tables = []
    for threads, memory in ((1, 2**20), (2, 2**20), (3, 2**24)):
        out = tmp_path / f"{threads}-{memory}.parquet"
        options = ReleaseOptions(seed=11, resources=Resources(threads=threads, memory=memory))
        write_file_release(src, out, mechanism=name, epsilon=2.0, options=options)
        tables.append(pq.read_table(out))
    assert pq.ParquetFile(tmp_path / f"1-{2**20}.parquet").num_row_groups > 1  # really several batches
    assert all(table.equals(tables[0]) for table in tables[1:])
