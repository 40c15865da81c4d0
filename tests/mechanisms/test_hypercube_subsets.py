"""The numpy reference's agreeing sets of the hypercube mechanisms (issue 27 item 3).

``ldpcli.math._subsets.uniform_subsets`` marks, per row, the A smallest of d uniform 32-bit keys, and draws a
row's keys again when they tie at the cut (the A-th and (A + 1)-th smallest equal): exactly a
uniform A-subset (the exchangeability argument in its docstring). Checked here: every size-A
subset equally likely, exhaustively over the C(d, A) subsets for small d and every A = 0…d (both
routes that find the cut: sorting and selection); the same with a key source of three values, so
that most rows tie and are redrawn, several times; the keys uniform on 32 bits for each generator;
and the channel's exact law through ``privatize`` with the numpy kernel when keys tie often.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from ldpcli.math import _kernels as kernels
from ldpcli.math import _subsets as subsets
from ldpcli.math._subsets import uniform_subsets
from ldpcli.mechanisms import get_mechanism

SMALL_D = [1, 2, 3, 4, 5]
#: Seeded draws per agreement count: ≥ 400 per subset cell at d = 5 (C(5, 2) = 10 cells).
DRAWS = 4000
#: Family level of the χ² tests of one call (each test file's tolerance is its sampling error).
LEVEL = 1e-6


def few_valued_keys(calls: list[int]):
    """A key source with values in {0, 1, 2} only (i.i.d. uniform, so the proof's exchangeability
    holds): most rows tie at their cut; ``calls`` counts the rows it drew keys for, call by call."""

    def keys(rows: int, d: int, rng: np.random.Generator) -> np.ndarray:
        calls.append(rows)
        return rng.integers(0, 3, size=(rows, d)).astype(np.uint32)

    return keys


def assert_uniform_subsets(mask: np.ndarray, agree: np.ndarray, d: int, tests: int) -> None:
    """Each row marks exactly agree[i] positions, and for each A the marked sets are uniform over
    the C(d, A) subsets (χ², p above LEVEL/tests; one subset: always that one)."""
    assert np.array_equal(mask.sum(axis=1), agree)
    codes = mask @ (1 << np.arange(d))
    for a in range(d + 1):
        of_size = codes[agree == a]
        cells = [sum(1 << j for j in subset) for subset in itertools.combinations(range(d), a)]
        counts = np.array([np.count_nonzero(of_size == c) for c in cells])
        assert counts.sum() == of_size.size  # nothing outside the size-a subsets
        if len(cells) > 1:
            assert stats.chisquare(counts).pvalue > LEVEL / tests, (d, a, counts)


def agreement_counts(d: int) -> np.ndarray:
    """DRAWS rows of each A = 0…d, shuffled so that sizes mix within a chunk."""
    agree = np.repeat(np.arange(d + 1), DRAWS)
    return np.random.default_rng(d).permutation(agree)


@pytest.mark.parametrize("partition_min_d", [1, 2048])  # selection for every d; sorting for small d
@pytest.mark.parametrize("d", SMALL_D)
def test_subsets_are_uniform_among_subsets_of_their_size(
    monkeypatch: pytest.MonkeyPatch, d: int, partition_min_d: int
) -> None:
    monkeypatch.setattr(subsets, "_PARTITION_MIN_D", partition_min_d)
    agree = agreement_counts(d)
    mask = uniform_subsets(agree, d, np.random.default_rng(100 + d))
    assert_uniform_subsets(mask, agree, d, tests=d + 1)


@pytest.mark.parametrize("partition_min_d", [1, 2048])
@pytest.mark.parametrize("d", SMALL_D)
def test_ties_at_the_cut_are_redrawn_and_the_subsets_stay_uniform(
    monkeypatch: pytest.MonkeyPatch, d: int, partition_min_d: int
) -> None:
    """With keys of three values, a row with 0 < A < d ties at its cut often (at d = 2, A = 1:
    whenever its two keys are equal, probability 1/3): the redraw loop runs several rounds, and
    the accepted sets still have exactly A elements and the uniform law. Marking {k ≤ k_(A)}
    without the redraw would mark more than A positions."""
    monkeypatch.setattr(subsets, "_PARTITION_MIN_D", partition_min_d)
    calls: list[int] = []
    monkeypatch.setattr(subsets, "_uniform_keys", few_valued_keys(calls))
    agree = agreement_counts(d)
    mask = uniform_subsets(agree, d, np.random.default_rng(200 + d))
    assert_uniform_subsets(mask, agree, d, tests=d + 1)
    assert calls[0] == agree.size
    if d >= 2:
        assert len(calls) >= 3 and calls[1] > DRAWS // 10  # many rows tied, some of them twice


def test_rows_of_no_and_all_agreements() -> None:
    """A = 0 marks nothing and A = d everything, at d = 1, 2 and one long row (selection route)."""
    rng = np.random.default_rng(5)
    for d in (1, 2, 3000):
        agree = np.array([0, d, 0, d])
        mask = uniform_subsets(agree, d, rng)
        assert not mask[0].any() and not mask[2].any() and mask[1].all() and mask[3].all()


def test_sorting_and_selection_give_the_same_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """The route that finds the cut never changes a seeded output (same keys, same cut)."""
    agree = np.random.default_rng(1).integers(0, 301, 40)
    want = uniform_subsets(agree, 300, np.random.default_rng(2))
    monkeypatch.setattr(subsets, "_PARTITION_MIN_D", 1)
    assert np.array_equal(uniform_subsets(agree, 300, np.random.default_rng(2)), want)


def generators() -> list[object]:
    """numpy's PCG64 (the raw-word route), MT19937 (32-bit raw words: the ``integers`` route) and,
    with randomgen installed, the secure ChaCha20 generator (the raw-word route)."""
    params: list[object] = [
        pytest.param(lambda: np.random.default_rng(3), id="pcg64"),
        pytest.param(lambda: np.random.Generator(np.random.MT19937(3)), id="mt19937"),
    ]
    try:
        import randomgen  # noqa: F401
    except ImportError:
        return params
    from ldpcli.math._bitgen import secure_generator

    return [*params, pytest.param(lambda: secure_generator(3), id="chacha20")]


@pytest.mark.parametrize("make", generators())
def test_keys_are_uniform_on_32_bits_for_each_generator(make) -> None:
    """Each byte of the keys uniform on 0…255 (χ² at family level 1e−6 over the 4 bytes), odd
    and even positions alike: MT19937's raw words, 32 bits wide, would leave half the high bytes 0."""
    keys = subsets._uniform_keys(401, 33, make())  # odd rows·d: the last raw word is cut in half
    assert keys.dtype == np.uint32 and keys.shape == (401, 33)
    flat = keys.ravel()
    for part in (flat[0::2], flat[1::2]):
        for shift in (0, 8, 16, 24):
            counts = np.bincount((part >> shift) & 0xFF, minlength=256)
            assert stats.chisquare(counts).pvalue > LEVEL / 8


@pytest.mark.parametrize("few_values", [False, True], ids=["keys", "three-valued-keys"])
@pytest.mark.parametrize("name", ["privunit-inf", "duchi-linf"])
@pytest.mark.parametrize("d", [1, 2, 5])
def test_numpy_privatize_draws_the_exact_channel(
    monkeypatch: pytest.MonkeyPatch, name: str, d: int, few_values: bool
) -> None:
    """Through ``privatize`` (numpy kernel) at a vertex s, with the real keys and with three-valued
    ones (most rows redrawn): z has the channel's exact law, p/N_in on the cap {⟨z, s⟩ > κ} and
    (1 − p)/N_out off it (χ² over all 2^d outputs, 40 000 seeded rows, p above 1e−6)."""
    monkeypatch.setenv(kernels.KERNEL_ENV, "numpy")
    calls: list[int] = []
    if few_values:
        monkeypatch.setattr(subsets, "_uniform_keys", few_valued_keys(calls))
    n = 40_000
    mech = get_mechanism(name).calibrate(d, 1.0)
    s = np.array([1.0, -1.0, -1.0, 1.0, 1.0])[:d]
    z = mech.privatize(np.tile(s, (n, 1)), np.random.default_rng(30 + d)) > 0.0
    assert bool(calls) == few_values  # the numpy reference drew its agreeing sets from the keys
    observed = np.bincount(z @ (1 << np.arange(d)), minlength=2**d)
    vertices = (np.arange(2**d)[:, None] >> np.arange(d)) & 1
    in_cap = np.sum((2 * vertices - 1) == s, axis=1) >= mech.agree_min
    p = mech.parameters()["p"]
    expected = np.where(in_cap, p / in_cap.sum(), (1.0 - p) / (~in_cap).sum()) * n
    assert stats.chisquare(observed, expected).pvalue > 1e-6
