"""Issue 27 item 4: ``ldpcli.privatize`` on arrays where they live (PyTorch, CuPy, JAX: the Array API).

The path runs here on ``array-api-strict`` arrays (the test extra installs it; ``.ci/run`` sets CI,
where its absence is an error, not a skip): the output is an array of the same library, dtype and
device; its law is the mechanism's (the audit's goodness-of-fit tests, unbiasedness and
E‖Z − x‖² = L²/m² − ‖x‖², seeded, with tolerances from the sampling error); the ``Release`` says
which generator drew the normals; a seeded run repeats. PyTorch and JAX on the CPU run when they
are importable; the GPU test runs where torch or cupy sees a GPU, and skips otherwise.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings
from typing import Any

import numpy as np
import pytest
from helpers import bonferroni_z, unit_rows

import ldpcli
from ldpcli.math._devices import device_rounded_cap_directions, host_copy
from ldpcli.mechanisms import get_mechanism
from ldpcli.mechanisms._hooks import law_tests

if os.environ.get("CI"):  # .ci/run installs the test extra: there the device path must run, not skip
    import array_api_strict as xs
else:
    xs = pytest.importorskip("array_api_strict")

ALPHA = 1e-6  # the family level of each statistical test: none of them can flake


def host(z: Any) -> np.ndarray:
    """The values of an output that must be an array-api-strict array (it stayed where it lives), as numpy float64."""
    assert type(z) is type(xs.asarray(0.0)), type(z)
    return np.asarray(z, dtype=np.float64)


def on_device(x: np.ndarray, dtype: Any = None) -> Any:
    return xs.asarray(x, dtype=dtype or xs.float64)


# --- what comes back ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, name", [("float64", "float64"), ("float32", "float32")])
def test_output_is_the_same_library_dtype_and_device(dtype: str, name: str) -> None:
    x = on_device(unit_rows(300, 12, seed=1), getattr(xs, dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # unit rows, also in float32, are on the sphere: no clipping warning
        z, release = ldpcli.privatize(x, eps=2.0, rng=3)
    assert type(z) is type(x) and z.dtype == x.dtype and z.device == x.device and z.shape == x.shape
    assert isinstance(release, ldpcli.Release) and release.dtype == name and release.n == 300 and release.d == 12
    assert release.n_clipped == 0 and release.reproducible is True
    assert release.mechanism == get_mechanism("privunit2").calibrate(12, 2.0)
    norms = np.linalg.norm(host(z), axis=1)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(norms, release.mechanism.scale, rtol=rtol)  # ‖Z‖ = L/m on every row


def test_float32_input_can_be_released_as_float64() -> None:
    x = on_device(unit_rows(50, 6, seed=2), xs.float32)
    z, release = ldpcli.privatize(x, eps=1.0, rng=1, dtype="float64")
    assert z.dtype == xs.float64 and release.dtype == "float64"


def test_integer_rows_become_the_default_floating_dtype() -> None:
    x = xs.asarray(np.eye(4, dtype=np.int64))
    z, release = ldpcli.privatize(x, eps=1.0, rng=1)
    assert z.dtype == xs.float64 and release.dtype == "float64" and release.n_clipped == 0


# --- the law ----------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::ldpcli.LdpWarning")  # d = 2 at ε = 2 is a near-exact release, on purpose
@pytest.mark.parametrize("mechanism", ["privunit2", "duchi-l2"])
@pytest.mark.parametrize("d, radius", [(1, 0.6), (2, 1.0), (3, 0.5), (16, 0.8), (16, 0.0)])
def test_the_output_has_the_mechanisms_exact_law(mechanism: str, d: int, radius: float) -> None:
    """The audit's goodness-of-fit tests of one input row privatized 4000 times on the device: the
    norm, the cosine to the rounded direction against its exact cap mixture, the orthogonal part
    uniform (KS, exact binomial at d = 1), Bonferroni over the tests at family level 1e-6."""
    x = unit_rows(1, d, seed=d)[0] * radius
    z, release = ldpcli.privatize(on_device(np.tile(x, (4000, 1))), eps=2.0, mechanism=mechanism, rng=d)
    tests = [test for test in law_tests(release.mechanism, x, host(z)) if not test.skipped]
    assert tests and min(test.p_value for test in tests) >= ALPHA / len(tests), tests


@pytest.mark.parametrize("mechanism", ["privunit2", "duchi-l2"])
def test_unbiased_with_the_formula_error(mechanism: str) -> None:
    """Rows of norms from 0 to L = 2 (zeros included): E[Z] = x, and E‖Z − x‖² = L²/m² − ‖x‖².

    ‖Z‖ = L/m =: s exactly, so ‖Z − x‖² = s² − 2⟨Z, x⟩ + ‖x‖² and the mean error's only noise is
    −2·mean(⟨Z, x⟩ − ‖x‖²), of standard deviation at most 2·s·max‖x‖/√n; each coordinate of Z − x
    has variance at most E Z_j² ≤ s² (Bonferroni over the d coordinates)."""
    n, d, bound = 20_000, 8, 2.0
    radii = bound * np.random.default_rng(7).uniform(0.0, 1.0, n)
    radii[::10] = 0.0
    x = unit_rows(n, d, seed=8) * radii[:, None]
    z, release = ldpcli.privatize(on_device(x), eps=3.0, mechanism=mechanism, norm_bound=bound, rng=9)
    zz = host(z)
    s = bound * release.mechanism.scale
    np.testing.assert_allclose(np.linalg.norm(zz, axis=1), s, rtol=1e-12)
    assert np.all(np.abs((zz - x).mean(axis=0)) <= bonferroni_z(ALPHA, d) * s / math.sqrt(n))
    error = np.mean(np.sum((zz - x) ** 2, axis=1))
    formula = release.mechanism.expected_error_max - np.mean(radii**2)  # L²/m² − mean ‖x‖²
    assert abs(error - formula) <= bonferroni_z(ALPHA, 1) * 2.0 * s * bound / math.sqrt(n)
    assert release.mechanism.expected_error == pytest.approx(release.mechanism.expected_error_max - bound**2)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # array-api-strict's numpy, on the huge rows
@pytest.mark.parametrize("dtype, tiny, huge", [("float64", 1e-200, 1e200), ("float32", 1e-30, 1e30)])
def test_rows_whose_squares_underflow_or_overflow_keep_their_direction(dtype: str, tiny: float, huge: float) -> None:
    """A row of norm 1e-200 (1e-30 in float32) is not a zero row, and one of 1e200 (1e30) is not
    infinite: both are rescaled before their norms; the huge rows lie outside L = 1 and are counted."""
    direction = unit_rows(1, 5, seed=4)[0]
    x = np.concatenate([np.tile(direction * tiny, (3000, 1)), np.tile(direction * huge, (3000, 1))])
    with pytest.warns(ldpcli.LdpWarning, match="3000 of 6000 rows were outside"):
        z, release = ldpcli.privatize(on_device(x, getattr(xs, dtype)), eps=4.0, rng=5)
    zz = host(z)
    assert np.all(np.isfinite(zz)) and release.n_clipped == 3000
    np.testing.assert_allclose(np.linalg.norm(zz, axis=1), release.mechanism.scale, rtol=1e-5)
    # The tiny rows round to ±direction with probability 1/2 each (E[Z] ≈ 0); the huge rows to +direction,
    # so their cosine to it has mean m (E[Z] = L·direction), each cosine within [−1, 1].
    m = 1.0 / release.mechanism.scale
    cos_tiny = zz[:3000] @ direction * m
    cos_huge = zz[3000:] @ direction * m
    z_crit = bonferroni_z(ALPHA, 2)
    assert abs(cos_tiny.mean()) <= z_crit / math.sqrt(3000)
    assert abs(cos_huge.mean() - m) <= z_crit / math.sqrt(3000)


def test_clipped_rows_are_counted_as_the_numpy_path_counts_them() -> None:
    """Half the rows at ‖x‖ = 1.5 are clipped; float32 unit rows held as float64 (outside L by their
    float32 rounding only) are not, on the device as in numpy (``Domain.rounded``)."""
    rows = unit_rows(400, 9, seed=6).astype(np.float32).astype(np.float64)
    rows[::2] *= 1.5
    with pytest.warns(ldpcli.LdpWarning, match="200 of 400 rows were outside"):
        _, on_host = ldpcli.privatize(rows, eps=2.0, rng=1)
    with pytest.warns(ldpcli.LdpWarning, match="200 of 400 rows were outside"):
        _, there = ldpcli.privatize(on_device(rows), eps=2.0, rng=1)
    assert there.n_clipped == on_host.n_clipped == 200
    with pytest.raises(ValueError, match="more than fail_on_clip"):
        ldpcli.privatize(on_device(rows), eps=2.0, fail_on_clip=0.1)


def test_estimate_mean_reads_the_rows_where_they_live() -> None:
    x = unit_rows(3000, 6, seed=15) * 0.5
    z, release = ldpcli.privatize(on_device(x), eps=2.0, rng=16)
    _library_round_trip(z, x, release)
    assert ldpcli.estimate_mean(z, release).to_dict() == ldpcli.estimate_mean(host(z), release).to_dict()


def test_many_batches_on_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of 7 rows (the path of inputs over 2²⁶ values): every row privatized, the rows in
    order (the norm is the same everywhere, so the zero rows' neighbours tell), a seeded run repeats."""
    import ldpcli.release._array_device as arrays

    monkeypatch.setattr(arrays, "_DEVICE_BATCH_VALUES", 7 * 5)
    x = unit_rows(100, 5, seed=17)
    z, release = ldpcli.privatize(on_device(x), eps=4.0, rng=18)
    again, _ = ldpcli.privatize(on_device(x), eps=4.0, rng=18)
    assert z.shape == (100, 5) and bool(xs.all(z == again))
    np.testing.assert_allclose(np.linalg.norm(host(z), axis=1), release.mechanism.scale, rtol=1e-12)


def test_batches_are_written_into_one_output_not_concatenated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The device holds the output once: each batch goes into its slice of one array allocated up
    front (``RowStack``), and nothing is concatenated (which would hold it twice and copy it again)."""
    import ldpcli.release._array_device as arrays
    from ldpcli.math._devices import RowStack

    monkeypatch.setattr(arrays, "_DEVICE_BATCH_VALUES", 7 * 5)
    want, _ = ldpcli.privatize(on_device(unit_rows(50, 5, seed=19)), eps=4.0, rng=20)

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the batches were concatenated")

    monkeypatch.setattr(xs, "concat", refused)
    got, _ = ldpcli.privatize(on_device(unit_rows(50, 5, seed=19)), eps=4.0, rng=20)
    assert bool(xs.all(got == want))
    stack = RowStack(xs, (5, 2), xs.float64, xs.asarray(0.0).device)
    for batch in ([[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0]], [[7.0, 8.0], [9.0, 10.0]]):
        stack.append(xs.asarray(batch))
    assert host(stack.rows()).tolist() == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0]]


def test_normals_parallel_to_the_row_are_drawn_again() -> None:
    """g ∥ u leaves no orthogonal part (probability 0 for real normals): those rows get new normals.
    A stub device generator returns normals along each row first, then proper ones."""
    rows = unit_rows(4, 3, seed=19)
    calls: list[tuple[int, int]] = []

    def normals(shape: tuple[int, int]) -> Any:
        calls.append(shape)
        values = 2.0 * rows if len(calls) == 1 else np.random.default_rng(20).standard_normal(shape)
        return on_device(values)

    one = on_device(np.ones(4))
    t = on_device(np.full(4, 0.6))
    r = on_device(np.full(4, 0.8))
    z = host(device_rounded_cap_directions(xs, on_device(rows), one, one, -one, t, r, 2.0, normals))
    assert calls == [(4, 3), (4, 3)]
    np.testing.assert_allclose(np.linalg.norm(z, axis=1), 2.0, rtol=1e-12)
    np.testing.assert_allclose(np.sum(z * rows, axis=1), 2.0 * 0.6, rtol=1e-12)  # the cosine t to u = +row


# --- the generator -----------------------------------------------------------------------------------


def test_the_release_says_which_generator_ran_and_a_seeded_run_repeats() -> None:
    x = on_device(unit_rows(200, 7, seed=3))
    a, release = ldpcli.privatize(x, eps=2.0, rng=11)
    b, _ = ldpcli.privatize(x, eps=2.0, rng=11)
    c, _ = ldpcli.privatize(x, eps=2.0, rng=12)
    assert bool(xs.all(a == b)) and not bool(xs.any(a == c))
    assert release.generator is not None and release.generator.startswith("numpy PCG64 on the host, copied to ")
    assert release.to_dict()["generator"] == release.generator
    assert ldpcli.Release.from_dict(release.to_dict()) == release
    _, unseeded = ldpcli.privatize(x, eps=2.0)
    assert unseeded.reproducible is False
    _, numpy_release = ldpcli.privatize(unit_rows(20, 7), eps=2.0, rng=1)
    assert numpy_release.generator == "numpy PCG64"


# --- what is refused ----------------------------------------------------------------------------------


@pytest.mark.parametrize("x, kwargs, error, words", [
    (np.ones(5), {}, ValueError, "must be 2-D"),
    (np.ones((0, 3)), {}, ValueError, "no rows"),
    (np.array([[1.0, np.nan], [0.0, 0.0]]), {}, ValueError, r"x\[0, 1\] is nan"),
    (np.array([[0.5, 0.0], [0.0, np.inf]]), {}, ValueError, r"x\[1, 1\] is inf"),
    (np.ones((2, 2), dtype=complex), {}, TypeError, "not complex"),
    (np.eye(3), {"column": "vec"}, TypeError, "apply to tables"),
    (np.eye(3), {"mechanism": "privunitg"}, TypeError, "'privunitg' has no device path.*privunit2, duchi-l2"),
])
def test_bad_device_arrays_are_named(x: np.ndarray, kwargs: dict[str, Any], error: type[Exception],
                                     words: str) -> None:
    with pytest.raises(error, match=words):
        ldpcli.privatize(xs.asarray(x), eps=1.0, **kwargs)


def test_without_array_api_compat_a_device_array_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "array_api_compat", None)  # import array_api_compat now raises ImportError
    with pytest.raises(ImportError, match=r"array_api_strict array.*pip install 'ldp\[arrays\]'"):
        ldpcli.privatize(on_device(np.eye(3)), eps=1.0)


@pytest.mark.slow
def test_numpy_rows_load_no_array_api_package() -> None:
    code = ("import sys, numpy as np, ldpcli; ldpcli.privatize(np.eye(3), eps=1.0, rng=1); "
            "print(sorted(m for m in sys.modules if m.startswith(('array_api', 'torch', 'jax', 'cupy'))))")
    shown = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert shown.strip() == "[]"


# --- the libraries themselves, where installed ---------------------------------------------------------


def _library_round_trip(z: Any, x: np.ndarray, release: ldpcli.Release) -> None:
    """The checks shared by every library's output: ‖Z‖ = L/m, and the mean that
    ``ldpcli.estimate_mean`` reads from the rows where they live is unbiased."""
    zz = host_copy(z).astype(np.float64)
    n, d = x.shape
    s = release.mechanism.scale
    np.testing.assert_allclose(np.linalg.norm(zz, axis=1), s, rtol=1e-5)
    est = ldpcli.estimate_mean(z, release)
    np.testing.assert_allclose(est.mean, zz.mean(axis=0), rtol=0.0, atol=1e-12 * s)
    assert np.all(np.abs(est.mean - x.mean(axis=0)) <= bonferroni_z(ALPHA, d) * s / math.sqrt(n))


def test_torch_tensors_on_the_cpu() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("array_api_compat")
    x = unit_rows(5000, 10, seed=12) * 0.7
    tensor = torch.asarray(x, dtype=torch.float32).requires_grad_()  # a model's output, say
    z, release = ldpcli.privatize(tensor, eps=2.0, rng=4)
    again, _ = ldpcli.privatize(tensor, eps=2.0, rng=4)
    assert isinstance(z, torch.Tensor) and z.dtype == torch.float32 and z.device.type == "cpu"
    assert not z.requires_grad  # no graph kept of the privatization
    assert release.generator == "torch.Generator on cpu" and release.dtype == "float32"
    assert torch.equal(z, again)  # reproducible on the same device and torch version
    _library_round_trip(z, x, release)


def test_jax_arrays_on_the_cpu() -> None:
    jax = pytest.importorskip("jax")
    pytest.importorskip("array_api_compat")
    x = unit_rows(5000, 10, seed=13) * 0.7
    array = jax.numpy.asarray(x, dtype=jax.numpy.float32)
    z, release = ldpcli.privatize(array, eps=2.0, rng=4)
    again, _ = ldpcli.privatize(array, eps=2.0, rng=4)
    assert isinstance(z, jax.Array) and z.dtype == jax.numpy.float32 and release.generator.startswith("jax.random")
    assert bool((z == again).all())
    _library_round_trip(z, x, release)


def _gpu_array(x: np.ndarray) -> Any:
    """``x`` as float32 on a GPU, through torch or cupy; skip where neither sees one."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.asarray(x, dtype=torch.float32, device="cuda")
    except ImportError:
        pass
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy.asarray(x, dtype=cupy.float32)
    except Exception:  # noqa: BLE001  (cupy without a driver raises its own CUDA errors)
        pass
    pytest.skip("no GPU seen by torch or cupy")


def test_a_gpu_array_is_privatized_on_its_gpu() -> None:
    pytest.importorskip("array_api_compat")
    import array_api_compat

    x = unit_rows(20_000, 64, seed=14) * 0.9
    gpu = _gpu_array(x)
    z, release = ldpcli.privatize(gpu, eps=4.0, rng=6)
    again, _ = ldpcli.privatize(gpu, eps=4.0, rng=6)
    assert type(z) is type(gpu) and z.dtype == gpu.dtype and array_api_compat.device(z) == array_api_compat.device(gpu)
    assert "cuda" in release.generator.lower() or "cupy" in release.generator
    assert bool((z == again).all())
    _library_round_trip(z, x, release)
