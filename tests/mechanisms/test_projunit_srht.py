"""projunit with the SRHT projection (FastProjUnit): the transform's orthogonality, E[WᵀW] = I and the uniform
selection by exact enumeration, the stated bias and error bound against seeded Monte Carlo, the same bits from the
numpy reference and the compiled loops and across batchings, and a release end to end in real processes.

Monte Carlo tolerances are the sampling error of the mean tested (sample deviation/√n) times the Bonferroni
threshold of all the tests of one function at family level 10⁻⁶ (``bonferroni_z``); every test is seeded.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from helpers import bonferroni_z, ldp, ldp_process, write_list
from scipy import linalg

from ldpcli.math import _hadamard as hadamard
from ldpcli.mechanisms._projunit import ProjUnit
from ldpcli.release._batches import Privatizer

ALPHA = 1e-6
needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")


def transform(signs: np.ndarray, rows: np.ndarray, d: int) -> np.ndarray:
    """The (k, d) matrix W of one row's draws, column j = W·e_j."""
    t = hadamard.SrhtProjections(signs[None, :], rows[None, :], d)
    return np.stack([t.project(e[None, :])[0] for e in np.eye(d)], axis=1)


def test_walsh_hadamard_is_the_orthonormal_sylvester_matrix() -> None:
    for n in (1, 2, 8, 64):
        a = np.random.default_rng(n).standard_normal((3, n))
        assert np.abs(hadamard.walsh_hadamard(a.copy()) - a @ linalg.hadamard(n) / math.sqrt(n)).max() < 1e-13


@pytest.mark.parametrize("d", [100, 1000, 2**10])
def test_the_transform_is_orthogonal_on_the_data_space(d: int) -> None:
    """With every coordinate selected (k = d′), Wᵀ·(k/d′)·W = (HDP)ᵀ(HDP) = I_d: the round trip to 1e−12."""
    rng = np.random.default_rng(d)
    dp = hadamard.padded_dimension(d)
    x = rng.standard_normal((20, d))
    t = hadamard.srht_projections(20, dp, d, rng)
    assert np.abs(t.lift(t.project(x)) - x).max() < 1e-12
    assert np.abs(np.linalg.norm(t.project(x), axis=1) - np.linalg.norm(x, axis=1)).max() < 1e-12
    # WWᵀ = (d′/k)·I_k on R^{d′}: lift is the transpose of project
    t = hadamard.srht_projections(5, 7, d, rng)
    z = rng.standard_normal((5, 7))
    assert abs(np.sum(t.lift(z) * x[:5]) - np.sum(z * t.project(x[:5]))) < 1e-11


@pytest.mark.parametrize(("k", "d"), [(2, 3), (3, 4), (1, 5)])
def test_second_moment_is_the_identity_by_exact_enumeration(k: int, d: int) -> None:
    """E[WᵀW] = I_d over every sign pattern D and every ordered selection S, and E‖Wu‖² = 1 for every u."""
    dp = hadamard.padded_dimension(d)
    total, count = np.zeros((d, d)), 0
    for bits in itertools.product((1.0, -1.0), repeat=dp):
        for rows in itertools.permutations(range(dp), k):
            w = transform(np.array(bits), np.array(rows), d)
            total += w.T @ w
            count += 1
    assert np.abs(total / count - np.eye(d)).max() < 1e-14


def test_the_selection_is_a_uniform_ordered_subset_by_exact_enumeration() -> None:
    """Every combination of picks (picks[j] uniform on [0, n − j)) gives a distinct ordered k-subset."""
    n, k = 6, 3
    picks = np.array(list(itertools.product(*(range(n - j) for j in range(k))))).T
    subsets = {tuple(row) for row in hadamard.partial_shuffle(picks, n)}
    assert len(subsets) == picks.shape[1] == math.perm(n, k) and all(len(set(s)) == k for s in subsets)


@needs_numba
def test_the_compiled_loops_give_the_references_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(12)
    a = rng.standard_normal((4, 2**12))
    picks = np.stack([rng.integers(0, 2**12 - j, size=4) for j in range(40)])
    out = {}
    for kernel in ("numpy", "numba"):
        monkeypatch.setenv("LDP_KERNEL", kernel)
        out[kernel] = hadamard.walsh_hadamard(a.copy()), hadamard.partial_shuffle(picks, 2**12)
    assert np.array_equal(out["numpy"][0], out["numba"][0]) and np.array_equal(out["numpy"][1], out["numba"][1])


def test_length_bounds_and_the_vertex() -> None:
    """At a vertex R = ‖Wu‖ = 1 for every draw (y = HDPe_j is flat); 1/√M₄ < 1; the stated biases follow."""
    for d, k in [(64, 8), (100, 16), (3, 2)]:
        t = hadamard.srht_projections(50, k, d, np.random.default_rng(d))
        assert np.abs(np.linalg.norm(t.project(np.tile(np.eye(d)[d - 1], (50, 1))), axis=1) - 1.0).max() < 1e-13
        mech = ProjUnit.calibrate(d, 2.0, k=k, projection="srht")
        low = hadamard.length_mean_low(k, d)
        assert 0.5 * mech.alpha < low < mech.alpha < 1.0
        bias = mech.srht_bias
        assert bias["relative_bias_vertex"] == pytest.approx(1.0 / mech.alpha - 1.0)
        assert 0.0 < bias["relative_bias_vertex"] <= bias["relative_bias_along_max"] < bias["relative_bias_max"]


def directions(d: int) -> dict[str, np.ndarray]:
    g = np.random.default_rng([7, d]).standard_normal(d)
    return {"vertex": np.eye(d)[0], "all-ones": np.ones(d) / math.sqrt(d), "random": g / np.linalg.norm(g)}


@pytest.mark.slow
@pytest.mark.parametrize(("d", "k"), [(64, 8), (100, 16)])
def test_the_bias_and_the_error_bound_are_the_stated_ones(d: int, k: int) -> None:
    """Seeded Monte Carlo at a vertex, the all-ones direction and a random one (L = 1, ε = 2): the component of the
    bias along x is the stated exact value at the vertex and inside the stated interval elsewhere, the bias vector is
    within the stated bound, the error within the stated bound; and the vertex's bias is not 0 (srht is biased)."""
    n = 100_000
    mech = ProjUnit.calibrate(d, 2.0, k=k, projection="srht")
    bias, low = mech.srht_bias, hadamard.length_mean_low(k, d)
    z_crit = bonferroni_z(ALPHA, 3 * 5)
    for i, (name, u) in enumerate(directions(d).items()):
        z = mech.privatize(np.tile(u, (n, 1)), np.random.default_rng([13, d, i]))
        along = z @ u
        se = along.std(ddof=1) / math.sqrt(n)
        measured = along.mean() - 1.0
        assert low / mech.alpha - 1.0 - z_crit * se < measured < 1.0 / mech.alpha - 1.0 + z_crit * se, (name, measured)
        if name == "vertex":
            assert abs(measured - bias["relative_bias_vertex"]) < z_crit * se, (measured, bias)
            if d == 64:  # 1/α − 1 = 0.028, 9 standard errors: the mean is visibly off x
                assert measured > 5 * se
        mean = z.mean(axis=0)
        noise = math.sqrt(np.sum(z.var(axis=0, ddof=1)) / n)
        assert np.linalg.norm(mean - u) < bias["relative_bias_max"] + z_crit * noise
        errors = np.sum((z - u) ** 2, axis=1)
        assert errors.mean() < mech.expected_error + z_crit * errors.std(ddof=1) / math.sqrt(n), (name, errors.mean())
    origin = mech.privatize(np.zeros((n, d)), np.random.default_rng([13, d, 9]))
    errors = np.sum(origin**2, axis=1)
    assert errors.mean() < mech.expected_error_max + z_crit * errors.std(ddof=1) / math.sqrt(n)
    # the padding's d′/d is not in the bound for a privunitg base: at d = 100 it is within 2 % of the measured error
    if d == 100:
        assert errors.mean() > 0.98 * mech.expected_error_max


def test_params_states_the_bias_and_haar_does_not() -> None:
    result = ldp("params", "--mechanism", "projunit", "--projection", "srht", "--d", 100, "--eps", 2, "--k", 16,
                 "--json")
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)
    mech = ProjUnit.calibrate(100, 2.0, k=16, projection="srht")
    assert info["projection"] == "srht" and info["padded_d"] == 128 and info["bias"].startswith("biased")
    for key, value in mech.srht_bias.items():
        assert info[key] == pytest.approx(value) and f"{value:.3g}" in info["bias"]
    assert info["epsilon_exact"] == mech.inner.epsilon_exact and info["expected_error"] == mech.expected_error
    haar = json.loads(ldp("params", "-m", "projunit", "--d", 100, "--eps", 2, "--k", 16, "--json").stdout)
    assert not {"bias", "padded_d", *mech.srht_bias} & haar.keys()


def test_same_seed_same_bits_and_the_batching_does_not_matter() -> None:
    """The release engine's key blocks (d = 16: 512 rows a block), in one batch or in two, and the ChaCha20 stream."""
    d, n = 16, 1536
    x = np.random.default_rng(3).standard_normal((n, d))
    x *= 0.9 / np.linalg.norm(x, axis=1, keepdims=True)
    mech = ProjUnit.calibrate(d, 4.0, k=6, projection="srht")
    work = Privatizer(mech, np.random.SeedSequence(5), (1, 2), 2.0**-53)
    whole = work(x, 0)[0]
    split = np.vstack([work(x[:512], 0)[0], work(x[512:], 512)[0]])
    assert np.array_equal(whole, split) and np.array_equal(whole, work(x, 0)[0])
    assert not np.array_equal(whole, Privatizer(mech, np.random.SeedSequence(6), (1, 2), 2.0**-53)(x, 0)[0])


def write_rows(path: Path, d: int, n: int) -> np.ndarray:
    g = np.random.default_rng(9).standard_normal((n, d))
    rows = 0.8 * g / np.linalg.norm(g, axis=1, keepdims=True)
    write_list(path, rows, column="v")
    return rows


@pytest.mark.slow
def test_privatize_then_estimate_mean_in_real_processes(tmp_path: Path) -> None:
    src, out = tmp_path / "x.parquet", tmp_path / "x.privatized.parquet"
    rows = write_rows(src, 12, n=3000)
    env = {"LDP_LEDGER": str(tmp_path / "ledger.json")}
    run = ldp_process("privatize", src, "--eps", 4, "-m", "projunit", "--projection", "srht", "--k", 6, "--seed", 3,
                      "-o", out, module=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    sidecar = json.loads(Path(f"{out}.ldp.json").read_text())
    assert sidecar["mechanism"]["spec"]["options"]["projection"] == "srht"
    assert sidecar["mechanism"]["parameters"]["bias"].startswith("biased")
    est = ldp_process("estimate-mean", out, "--json", module=True, env=env, cwd=tmp_path)
    assert est.returncode == 0, est.stderr
    result = json.loads(est.stdout)
    assert result["n"] == 3000 and result["d"] == 12
    mech = ProjUnit.calibrate(12, 4.0, k=6, projection="srht")
    gap = np.sum((np.array(result["mean"]) - rows.mean(axis=0)) ** 2)
    bias2 = (mech.srht_bias["relative_bias_max"] * 0.8) ** 2
    assert gap < 5.0 * mech.expected_error_max / 3000 + bias2, (gap, mech.expected_error_max / 3000)


@pytest.mark.slow
def test_a_bad_k_is_one_line_from_the_command(tmp_path: Path) -> None:
    src = tmp_path / "x.parquet"
    write_rows(src, 12, n=50)
    run = ldp_process("privatize", src, "--eps", 2, "-m", "projunit", "--projection", "srht", "--k", 12,
                      module=True, env={"LDP_LEDGER": str(tmp_path / "ledger.json")}, cwd=tmp_path)
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ldp: error:"), run.stderr
    assert all(word in lines[0] for word in ("--k", "k = 12", "d = 12", "between 1 and 11")), lines[0]
    assert not (tmp_path / "x.privatized.parquet").exists()
