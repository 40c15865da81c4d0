"""The ChaCha20 stream as a generator (ldpcli.math._counter_rng): its layout, its laws, both paths' bits."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import bonferroni_z
from scipy import stats

from ldpcli.math import _chacha20
from ldpcli.math._counter_rng import NORMALS, ROW_POSITIONS, WORDS, CounterGenerator

KEY = bytes(range(32))


def draws(generator: CounterGenerator) -> list[np.ndarray]:
    """One of each draw, in a fixed order (sizes that straddle row keys)."""
    return [
        np.asarray(generator.random(1500)),
        np.asarray(generator.standard_normal((7, 300))),
        np.asarray(generator.integers(0, 10, size=777)),
        generator.random_raw(33),
        np.asarray(generator.integers(-5, 2**40, size=50)),
        np.asarray(generator.standard_exponential(400)),
        np.asarray(generator.laplace(1.0, 2.0, size=30)),
        np.asarray(generator.uniform(-1.0, 3.0, size=20)),
        np.asarray(generator.normal(5.0, 0.5, size=20)),
    ]


def test_the_numpy_reference_and_the_compiled_stream_give_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numba")
    monkeypatch.setenv("LDP_KERNEL", "numpy")
    reference = draws(CounterGenerator(KEY))
    monkeypatch.setenv("LDP_KERNEL", "numba")
    compiled = draws(CounterGenerator(KEY))
    for a, b in zip(reference, compiled, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def test_the_values_are_the_streams_words_in_flat_position_order() -> None:
    """Flat position p of a stream is position p mod 1024 of row key p div 1024 (the module's layout)."""
    generator = CounterGenerator(KEY)
    first = generator.random_raw(1000)
    second = generator.random_raw(2000)  # straddles row keys 0 | 1 | 2
    words = _chacha20.stream_words(KEY, [0, 1, 2], ROW_POSITIONS, stream=WORDS).reshape(-1)
    assert np.array_equal(np.concatenate([first, second]), words[:3000])
    normals = generator.standard_normal(1100)
    assert np.array_equal(normals, _chacha20.stream_normals(KEY, [0, 1], ROW_POSITIONS, stream=NORMALS).reshape(-1)[:1100])


def test_how_the_draws_are_split_into_calls_changes_nothing() -> None:
    whole = CounterGenerator(KEY)
    parts = CounterGenerator(KEY)
    out = np.empty((13, 257))
    parts.standard_normal(out=out[:5])
    parts.standard_normal(out=out[5:6])
    parts.standard_normal(out=out[6:])
    assert np.array_equal(whole.standard_normal((13, 257)), out)
    assert np.array_equal(whole.random(3001), np.concatenate([parts.random(1), parts.random(2999), parts.random(1)]))


def test_small_draws_reuse_their_row_keys_values_and_give_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls that stay inside the row key the previous call ended in read its kept values: 300 draws of 5
    words and 5 normals (1500 of each, two row keys) compute row key 0 for the first call and rows 0 and 1 for
    the one call that straddles them, nothing else; the draws are those of one call.
    Changing a returned array changes no later draw (the kept row is a copy)."""
    from ldpcli.math import _counter_rng as _stream

    whole = CounterGenerator(KEY)
    want_words, want_normals = whole.random_raw(1500), whole.standard_normal(1500)
    computed: list[int] = []
    real_words, real_normals = _stream.words, _stream.normals
    monkeypatch.setattr(_stream, "words", lambda key, rows, *a, **k: computed.extend(rows) or real_words(key, rows, *a, **k))
    monkeypatch.setattr(_stream, "normals", lambda key, rows, *a, **k: computed.extend(rows) or real_normals(key, rows, *a, **k))
    parts = CounterGenerator(KEY)
    words, normals = [], []
    for _ in range(300):
        chunk = parts.random_raw(5)
        words.append(chunk.copy())
        chunk[:] = 0  # the caller's array is its own
        normals.append(np.asarray(parts.standard_normal(5)))
    assert np.array_equal(np.concatenate(words), want_words)
    assert np.array_equal(np.concatenate(normals), want_normals)
    assert sorted(computed) == [0, 0, 0, 0, 1, 1]  # per stream: [0] for the first call, [0, 1] at the straddle
    split = CounterGenerator(KEY)
    assert np.array_equal(np.concatenate([split.random_raw(1000), split.random_raw(1048), split.random_raw(3)]),
                          CounterGenerator(KEY).random_raw(2051))


def test_a_generator_is_its_key() -> None:
    assert np.array_equal(CounterGenerator(KEY).random(10), CounterGenerator(KEY).random(10))
    assert not np.array_equal(CounterGenerator(KEY).random(10), CounterGenerator(bytes(32)).random(10))
    with pytest.raises(ValueError, match="32 bytes"):
        CounterGenerator(b"short")


def test_uniforms_lie_on_numpys_53_bit_grid_in_the_unit_interval() -> None:
    u = np.asarray(CounterGenerator(KEY).random(100_000))
    assert u.min() >= 0.0 and u.max() < 1.0
    assert np.array_equal(u * 2.0**53, np.floor(u * 2.0**53))
    assert stats.kstest(u, "uniform").pvalue > 1e-4


@pytest.mark.parametrize("name, law", [
    ("standard_normal", stats.norm()),
    ("standard_exponential", stats.expon()),
])
def test_continuous_draws_follow_their_law(name: str, law: stats.rv_continuous) -> None:
    """A Kolmogorov–Smirnov test at level 10⁻⁴ on 200,000 draws of a fixed key (deterministic)."""
    values = np.asarray(getattr(CounterGenerator(KEY), name)(200_000))
    assert stats.kstest(values, law.cdf).pvalue > 1e-4


def test_laplace_follows_its_law() -> None:
    values = np.asarray(CounterGenerator(KEY).laplace(1.5, 0.7, size=100_000))
    assert stats.kstest(values, stats.laplace(loc=1.5, scale=0.7).cdf).pvalue > 1e-4


@pytest.mark.parametrize("k", [2, 3, 7, 1000])
def test_integers_are_uniform(k: int) -> None:
    """Chi-square on the k cells at level 10⁻⁴ (k = 1000: a coarse test that every cell is hit)."""
    values = np.asarray(CounterGenerator(KEY).integers(0, k, size=200_000))
    assert values.min() >= 0 and values.max() < k
    counts = np.bincount(values, minlength=k)
    assert stats.chisquare(counts).pvalue > 1e-4


def test_permutations_are_uniform_on_the_orders() -> None:
    """All 24 orders of 4 items, chi-square at level 10⁻⁴ over 48 000 draws; an array's first axis is permuted by the
    same law (its copy: the input is untouched); each draw reads 2·n words, the order sorting them as 128-bit keys."""
    generator = CounterGenerator(KEY)
    orders = [tuple(generator.permutation(4)) for _ in range(48_000)]
    assert {len(set(order)) for order in orders} == {4}
    counts = np.unique(np.array(orders), axis=0, return_counts=True)[1]
    assert counts.size == 24 and stats.chisquare(counts).pvalue > 1e-4
    items = np.arange(12.0).reshape(6, 2)
    shuffled = CounterGenerator(KEY).permutation(items)
    order = CounterGenerator(KEY).permutation(6)
    assert np.array_equal(shuffled, items[order]) and np.array_equal(items, np.arange(12.0).reshape(6, 2))
    words = CounterGenerator(KEY).random_raw(12).reshape(6, 2)
    assert np.array_equal(order, np.lexsort((words[:, 1], words[:, 0])))
    assert CounterGenerator(KEY).permutation(0).size == 0


def test_integers_redraw_above_the_largest_multiple_of_the_span() -> None:
    """k = 2⁶³ + 1: about half the words lie at or above 2⁶⁴ − (2⁶⁴ mod k) and must be redrawn; w mod k
    without the redraw would put mass 2/2⁶⁴ on the values below 2⁶³ − 1 and 1/2⁶⁴ on the rest, so the
    halves [0, k/2) and [k/2, k) would get 2/3 and 1/3 of the draws instead of 1/2 each."""
    k = (1 << 63) + 1
    values = np.asarray(CounterGenerator(KEY).integers(0, k, size=20_000, dtype=np.uint64))
    assert values.max() < k
    low = int(np.count_nonzero(values < np.uint64(k // 2)))
    assert abs(low - 10_000) < 4.5 * np.sqrt(20_000 * 0.25)


def test_full_width_words_and_bounds() -> None:
    generator = CounterGenerator(KEY)
    words = generator.integers(0, 2**64, size=1000, dtype=np.uint64)
    assert words.dtype == np.uint64 and int(words.max()) > 2**63
    assert generator.integers(0, 2**32, size=(3, 4), dtype=np.uint32).shape == (3, 4)
    assert isinstance(generator.integers(5), int) and isinstance(generator.random(), float)
    assert generator.integers(3, 3, endpoint=True) == 3
    with pytest.raises(ValueError, match="does not fit"):
        generator.integers(0, 300, dtype=np.uint8)
    with pytest.raises(ValueError, match="0 < high - low"):
        generator.integers(4, 4)
    with pytest.raises(TypeError, match="float64"):
        generator.random(3, dtype=np.float32)


def test_the_mean_of_many_normals_is_within_its_sampling_error() -> None:
    """Mean and variance of 10⁶ normals in 8 columns: |mean| < z/√n and |var − 1| < z·√(2/n) (Bonferroni over
    16 two-sided tests at family level 10⁻⁴)."""
    g = np.asarray(CounterGenerator(KEY).standard_normal((125_000, 8)))
    z = bonferroni_z(1e-4, 16)
    n = g.shape[0]
    assert np.all(np.abs(g.mean(axis=0)) < z / np.sqrt(n))
    assert np.all(np.abs(g.var(axis=0) - 1.0) < z * np.sqrt(2.0 / n))


class ParallelFirst(CounterGenerator):
    """The stream, except that its first normals are exactly along e₁ (each row g = (c, 0, …, 0)): the
    probability-0 event where the cap sampler's projection leaves nothing and new normals are needed."""

    def __init__(self) -> None:
        super().__init__(KEY)
        self.first = True

    def standard_normal(self, size=None, dtype=np.float64, out=None):  # type: ignore[no-untyped-def, override]
        if self.first and out is not None:
            self.first = False
            out[...] = 0.0
            out[:, 0] = 1.5
            return out
        return super().standard_normal(size, dtype, out)


@pytest.mark.parametrize("kernel", ["numba", "numpy"])
def test_normals_along_the_input_are_drawn_again(monkeypatch: pytest.MonkeyPatch, kernel: str) -> None:
    """x = e₁ with given normals along e₁: the compiled kernel marks the rows and the sampler draws new normals,
    so every output is still a cap point (norm `scale`, cosine t with e₁) and none is NaN."""
    if kernel == "numba":
        pytest.importorskip("numba")
    monkeypatch.setenv("LDP_KERNEL", kernel)
    from ldpcli.math._sphere import rounded_cap_directions

    n, d, scale = 6, 4, 2.0
    x = np.zeros((n, d))
    x[:, 0] = 1.0
    t = np.full(n, 0.6)
    r = np.sqrt(1.0 - t * t)
    out = rounded_cap_directions(x, 1.0, lambda rows: (t[:rows], r[:rows]), scale, ParallelFirst())
    assert np.all(np.isfinite(out))
    assert np.allclose(np.linalg.norm(out, axis=1), scale)
    assert np.allclose(np.abs(out[:, 0]), scale * 0.6)  # ±e₁ by the rounding, cosine t with it
