"""The fused cap sampler: its numpy form against the unfused reference, and numba's against numpy's.

``spheremath.rounded_cap_directions`` (the sampler of PrivUnit2 and of the hemisphere mechanism)
runs chunk by chunk in numpy, or as one compiled loop per row with numba (``ldp[fast]``). Both must
draw what ``directions_with_cosines(round_to_sphere(x))`` draws: the numpy form bit for bit for
rows x ≠ 0, numba's to rounding (its sums run left to right). Both are then checked for the law
itself: unbiased, with E‖Z − x‖² as the closed form says, zero rows uniform.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import bonferroni_z

from ldpcli.errors import MissingDependency, UsageError
from ldpcli.math import _kernels as kernels
from ldpcli.math import _logspace as logspace
from ldpcli.math import _rows as rowmath
from ldpcli.math import _sphere as sm
from ldpcli.mechanisms import get_mechanism

numba_only = pytest.mark.skipif(not kernels._numba_installed(), reason="numba is not installed (pip install 'ldp[fast]')")
KERNELS = ["numpy", pytest.param("numba", marks=numba_only)]


@pytest.fixture
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(kernels.KERNEL_ENV, request.param)
    return str(request.param)


def rows(n: int, d: int, seed: int) -> np.ndarray:
    """Rows of every kind the sampler meets: inside the ball, on the sphere, beyond it by rounding,
    tiny (1e−300: a direction, not the zero row) and huge coordinates scaled down."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    x *= (rng.random(n) / np.linalg.norm(x, axis=1))[:, None]
    x[::7] /= np.linalg.norm(x[::7], axis=1)[:, None]
    x[3::11] *= 1e-300
    return x


def reference(mech_name: str, x: np.ndarray, d: int, eps: float, seed: int) -> np.ndarray:
    """The unfused route: round_to_sphere, then the cap cosines, then directions_with_cosines."""
    mech = get_mechanism(mech_name).calibrate(d, eps)
    rng = np.random.default_rng(seed)
    u = sm.round_to_sphere(x, mech.norm_bound, rng)
    if mech_name == "privunit2":
        t, r = sm.sample_cap_cosines(logspace.bernoulli_logit(mech.logit_p, len(x), rng), mech.cap_logit,
                                     mech.log_cap_probability, d, rng)
        return sm.directions_with_cosines(u, t, r, mech.norm_bound * mech.scale, rng)
    t, r = sm.sample_cap_cosines(logspace.bernoulli_logit(mech.epsilon, len(x), rng), 0.0, -logspace.LOG2, d, rng)
    return sm.directions_with_cosines(u, t, r, mech.radius, rng)


@pytest.mark.parametrize("kernel", ["numpy"], indirect=True)
@pytest.mark.parametrize("name", ["privunit2", "duchi-l2"])
@pytest.mark.parametrize("d", [2, 3, 10, 500])
def test_numpy_chunks_match_the_unfused_reference_bit_for_bit(
    kernel: str, name: str, d: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = rows(400, d, seed=d)
    want = reference(name, x, d, 4.0, seed=7)
    mech = get_mechanism(name).calibrate(d, 4.0)
    for chunk in (1, 3 * d, rowmath.FUSED_CHUNK_VALUES):  # one row per chunk, three, the default
        monkeypatch.setattr(rowmath, "FUSED_CHUNK_VALUES", chunk)
        got = mech.privatize(x, np.random.default_rng(7))
        assert np.array_equal(got, want), f"chunk of {chunk} values"


@numba_only
@pytest.mark.parametrize("name", ["privunit2", "duchi-l2"])
@pytest.mark.parametrize("d, eps", [(2, 1.0), (3, 4.0), (10, 1000.0), (500, 8.0), (20_000, 8.0)])
def test_numba_matches_numpy_to_rounding(monkeypatch: pytest.MonkeyPatch, name: str, d: int, eps: float) -> None:
    """Same generator, same draws in the same order: the two kernels differ only by the order of
    their sums, a few ulps of the output's scale (d = 2 takes the explicit-projection branch)."""
    mech = get_mechanism(name).calibrate(d, eps)
    x = rows(max(8, 40_000 // d), d, seed=d + 1)
    x[5] = 0.0  # a zero row: uniform from its own normals in both
    outputs = {}
    for which in ("numpy", "numba"):
        monkeypatch.setenv(kernels.KERNEL_ENV, which)
        outputs[which] = mech.privatize(x, np.random.default_rng(3))
    radius = float(np.linalg.norm(outputs["numpy"][0]))
    assert np.all(np.isfinite(outputs["numba"]))
    np.testing.assert_allclose(outputs["numba"], outputs["numpy"], rtol=0, atol=1e-11 * radius)


@pytest.mark.parametrize("kernel", KERNELS, indirect=True)
@pytest.mark.parametrize("name, d, eps, n", [
    ("privunit2", 3, 2.0, 200_000), ("privunit2", 50, 8.0, 40_000), ("duchi-l2", 4, 1.0, 200_000),
])
def test_each_kernel_is_unbiased_with_the_predicted_error(kernel: str, name: str, d: int, eps: float, n: int) -> None:
    """E[Z] = x and E‖Z − x‖² = expected_error_max − ‖x‖² for an inside row; a zero row has mean 0
    and norm the output radius (seeded; Bonferroni z over the coordinates, 6 standard errors)."""
    mech = get_mechanism(name).calibrate(d, eps)
    rng = np.random.default_rng(50 + d)
    x = rng.standard_normal(d)
    x *= 0.6 / np.linalg.norm(x)
    for row in (x, np.zeros(d)):
        z = mech.privatize(np.tile(row, (n, 1)), rng)
        norms = np.linalg.norm(z, axis=1)
        assert np.allclose(norms, norms[0], rtol=1e-12)
        se = z.std(axis=0, ddof=1) / math.sqrt(n)
        assert np.all(np.abs(z.mean(axis=0) - row) <= bonferroni_z(1e-6, d) * se)
        sq = np.sum((z - row) ** 2, axis=1)
        predicted = mech.expected_error_max - float(row @ row)
        assert abs(sq.mean() - predicted) <= 6 * sq.std(ddof=1) / math.sqrt(n) + 1e-12 * predicted


def test_kernel_choice_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(kernels.KERNEL_ENV, "numpy")
    assert kernels.kernel_name() == "numpy" and kernels.compiled(np.random.default_rng(0)) is None
    monkeypatch.setenv(kernels.KERNEL_ENV, "fortran")
    with pytest.raises(UsageError, match="LDP_KERNEL='fortran': use one of auto, numba, numpy"):
        kernels.kernel_name()
    monkeypatch.setattr(kernels, "_numba_installed", lambda: False)
    monkeypatch.setenv(kernels.KERNEL_ENV, "numba")
    with pytest.raises(MissingDependency, match=r"numba is not installed: pip install 'ldp\[fast\]'"):
        kernels.kernel_name()
    monkeypatch.setenv(kernels.KERNEL_ENV, "auto")
    assert kernels.kernel_name() == "numpy"  # auto without numba: the reference, silently


def test_row_buffers_change_no_result_and_are_restored() -> None:
    """sphere.row_buffers shrinks numpy's ufunc buffer to a row for long rows only, per thread, and
    puts it back even when the loop raises; a per-row scaling computed inside is bit-identical."""
    import threading

    default = np.getbufsize()
    rng = np.random.default_rng(5)
    for d in (3, 500, 2000):
        g, a = rng.standard_normal((300, d)), rng.random(300) + 0.5
        want = g * a[:, None]
        with rowmath.row_buffers(d):
            inside = np.getbufsize()
            seen: list[int] = []
            worker = threading.Thread(target=lambda: seen.append(np.getbufsize()))
            worker.start()
            worker.join()
            got = g * a[:, None]
        assert np.array_equal(got, want)
        assert inside == (default if d < 64 else min(default, d - d % 16)) and seen == [default]
        assert np.getbufsize() == default
    with pytest.raises(RuntimeError), rowmath.row_buffers(1000):
        raise RuntimeError("a failing chunk")
    assert np.getbufsize() == default
