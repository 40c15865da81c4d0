"""ldpcli.analysis._attack: the natural reconstruction on a release, against Lemma 2.2 / Prop. 1.

Rows uniform on S^{d−1} make f_A(x) = Ax/‖Ax‖ uniform on S^{k−1} for any A with orthonormal rows,
so the prior of Bhowmick et al. 2018 Prop. 1 holds with ρ0 = 0, and every row's chance of a
reconstruction with ⟨f(x), v̂⟩ ≥ a is at most e^ε·P(⟨Y, v0⟩ ≥ a) (Lemma 2.2). The rows are
independent, so the number of successes is at most Binomial(n, that bound) in law.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from scipy import special, stats

from ldpcli.analysis import _attack as attack_module
from ldpcli.analysis._attack import AttackReport, attack, random_basis
from ldpcli.errors import DataError, UsageError
from ldpcli.release._file import write_file_release
from ldpcli.release._options import Columns, ReleaseOptions

N, D = 20_000, 32
EPSILONS = (1.0, 4.0, 8.0)
ACCURACIES = (0.1, 0.3, 0.5, 0.7, 0.9)
#: (k, basis) for the bound checks.
TARGETS = ((32, "coordinates"), (8, "coordinates"), (8, "random"))
#: Family-wise level of the one-sided binomial checks of the bound (Bonferroni over all of them).
FAMILY_LEVEL = 1e-6


def sphere_rows(n: int, d: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def write_list_parquet(path: Path, x: np.ndarray, row_group_size: int = 3000) -> Path:
    n, d = x.shape
    table = pa.table({"id": np.arange(n), "v": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), d)})
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def write_columns_csv(path: Path, x: np.ndarray) -> Path:
    pacsv.write_csv(pa.table({f"x{j}": x[:, j] for j in range(x.shape[1])}), path)
    return path


def cap_probability(a: float, k: int) -> float:
    """P(⟨Y, v0⟩ ≥ a), Y uniform on S^{k−1}: the regularised incomplete beta I_{(1−a)/2}((k−1)/2, (k−1)/2)."""
    return float(special.betainc((k - 1) / 2, (k - 1) / 2, (1 - a) / 2))


@pytest.fixture(scope="module")
def sphere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """N rows uniform on S^{D−1} in a Parquet list column, with a kept id column."""
    return write_list_parquet(tmp_path_factory.mktemp("attack") / "raw.parquet", sphere_rows(N, D, seed=20180))


@pytest.fixture(scope="module")
def releases(sphere: Path) -> dict[float, Path]:
    """The sphere rows privatized by PrivUnit2 at each ε (seeded; the id column kept)."""
    out: dict[float, Path] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LDP_LEDGER", str(sphere.parent / "ledger.json"))
        for i, eps in enumerate(EPSILONS):
            target = sphere.parent / f"release-{eps:g}.parquet"
            write_file_release(sphere, target, mechanism="privunit2", epsilon=eps, options=ReleaseOptions(columns=Columns(keep=["id"]), seed=100 + i))
            out[eps] = target
    return out


@pytest.fixture(autouse=True)
def _ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LDP_LEDGER", str(tmp_path / "ledger.json"))


def test_success_never_exceeds_the_lemma_2_2_bound(sphere: Path, releases: dict[float, Path]) -> None:
    """#successes ≤ Binomial(n, min(1, e^ε·P(⟨Y, v0⟩ ≥ a))) at every (ε, k, basis, a), one-sided, Bonferroni."""
    checks = len(EPSILONS) * len(TARGETS) * len(ACCURACIES)
    alpha = FAMILY_LEVEL / checks
    informative = []
    for eps, path in releases.items():
        for k, basis in TARGETS:
            report = attack(path, sphere, k=k, basis=basis, basis_seed=7, a=ACCURACIES)
            assert report.n == N and report.d == D and report.k == k and report.epsilon == pytest.approx(eps)
            assert report.undefined_raw == report.undefined_release == 0
            for s in report.success:
                bound = min(1.0, math.exp(eps) * cap_probability(s.a, k))
                assert s.uniform_bound == pytest.approx(bound, rel=1e-9, abs=1e-300)
                count = s.release.count
                if bound < 1.0:
                    p_value = stats.binom.sf(count - 1, N, bound)  # P(X ≥ count) for X ~ Bin(N, bound)
                    assert p_value >= alpha, (eps, k, basis, s.a, count / N, bound)
                    if bound < 0.5 and count / N > bound / 4:
                        informative.append((eps, k, basis, s.a, count / N, bound))
    # the check has teeth: the empirical fraction comes within a factor 4 of a bound below 1/2
    assert informative, "no check where the bound is < 1/2 and the success fraction is clearly positive"
    assert any(frac > bound / 2 and frac > 0.01 for *_, frac, bound in informative)


@pytest.mark.parametrize(("k", "basis"), [(32, "coordinates"), (8, "coordinates"), (8, "random")])
def test_prior_only_guess_on_uniform_rows_succeeds_as_a_fixed_direction(
    sphere: Path, releases: dict[float, Path], k: int, basis: str
) -> None:
    """On uniform directions the prior-only guess is no better than any fixed v0: P(⟨Y, v0⟩ ≥ a).

    The guess is the mean direction of the same rows, which adds about 1/(n·‖mean‖) ≈ 1/√n to each
    cosine; the tolerance is 6 binomial standard deviations plus 2/√n.
    """
    report = attack(releases[4.0], sphere, k=k, basis=basis, a=ACCURACIES)
    assert report.prior_mean_length < 5 / math.sqrt(N)
    for s in report.success:
        p = cap_probability(s.a, k)
        assert s.prior.fraction == pytest.approx(p, abs=6 * math.sqrt(p * (1 - p) / N) + 2 / math.sqrt(N))
    assert report.prior["mean"] == pytest.approx(0.0, abs=5 / math.sqrt(N))
    # the release adds what the bound allows: here far more than the prior at ε = 4
    assert report.success[0].release.fraction > report.success[0].prior.fraction + 0.1


def test_report_contents_and_json(sphere: Path, releases: dict[float, Path]) -> None:
    report = attack(releases[1.0], sphere, k=8)
    assert isinstance(report, AttackReport)
    assert report.a == (0.1, 0.3, 0.5, 0.9) and report.basis == "coordinates" and report.basis_seed is None
    assert report.mechanism == "privunit2"
    for column in (report.release, report.prior):
        values = [column[name] for name in ("min", "p01", "p05", "p25", "p50", "p75", "p95", "p99", "max")]
        assert all(v is not None and -1.0 <= v <= 1.0 for v in values)
        assert values == sorted(values)
        assert column["defined"] == N
    for s in report.success:
        for part in (s.release, s.prior):
            assert part.n == N and part.low <= part.fraction <= part.high
            low, high = stats.binomtest(part.count, N).proportion_ci(0.95, method="exact")
            assert (part.low, part.high) == pytest.approx((low, high), rel=1e-6, abs=1e-12)
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert "never be published" in data["notice"]
    assert data["success"][0]["release"]["count"] == report.success[0].release.count


def test_batches_of_the_two_files_need_not_align(sphere: Path, releases: dict[float, Path]) -> None:
    """The raw file's row groups (3000) and the release's batches differ; the result does not (the
    prior's mean direction is a sum whose rounding depends on the batches: equal to 1e-12)."""
    one = attack(releases[4.0], sphere, k=8, batch_rows=777).to_dict()
    two = attack(releases[4.0], sphere, k=8).to_dict()
    assert one["release"] == two["release"] and one["success"] == two["success"]
    assert one["prior"] == pytest.approx(two["prior"], rel=1e-12, abs=1e-14)
    seen: list[int] = []
    attack(releases[4.0], sphere, k=8, batch_rows=5000, on_rows=seen.append)
    assert sum(seen) == 2 * N  # both passes


def test_random_basis_has_orthonormal_rows() -> None:
    a = random_basis(8, 32, seed=3)
    assert a.shape == (8, 32)
    np.testing.assert_allclose(a @ a.T, np.eye(8), atol=1e-12)
    np.testing.assert_array_equal(a, random_basis(8, 32, seed=3))  # public: the seed fixes it
    assert not np.allclose(a, random_basis(8, 32, seed=4))
    full = random_basis(32, 32, seed=0)
    np.testing.assert_allclose(full @ full.T, np.eye(32), atol=1e-12)


def test_random_basis_is_recorded(sphere: Path, releases: dict[float, Path]) -> None:
    report = attack(releases[8.0], sphere, k=5, basis="random", basis_seed=11)
    assert report.basis == "random" and report.basis_seed == 11 and report.k == 5


def test_row_count_mismatch_is_refused(sphere: Path, releases: dict[float, Path], tmp_path: Path) -> None:
    short = write_list_parquet(tmp_path / "short.parquet", sphere_rows(N, D, seed=20180)[:-1])
    with pytest.raises(DataError, match=r"short\.parquet: has 19999 rows but the release .* has 20000.*skip_invalid=True"):
        attack(releases[1.0], short, k=8)


@pytest.mark.parametrize("delta", [-1, 1])
def test_row_count_mismatch_of_csv_found_while_reading(tmp_path: Path, delta: int) -> None:
    """CSV has no row count up front: the mismatch is found in lockstep (fewer) or at the end (more)."""
    x = sphere_rows(300, 4, seed=5)
    raw = write_columns_csv(tmp_path / "raw.csv", x)
    out = tmp_path / "out.csv"
    write_file_release(raw, out, epsilon=2.0, options=ReleaseOptions(seed=1))
    assert attack(out, raw, batch_rows=64).n == 300
    other = write_columns_csv(tmp_path / "other.csv", sphere_rows(300 + delta, 4, seed=5))
    with pytest.raises(DataError, match=r"other\.csv: .*row i of the raw file must be row i of the release"):
        attack(out, other, batch_rows=64)


def test_raw_file_without_the_release_columns_is_refused(
    sphere: Path, releases: dict[float, Path], tmp_path: Path
) -> None:
    other = tmp_path / "renamed.parquet"
    table = pq.read_table(sphere).rename_columns(["id", "w"])
    pq.write_table(table, other)
    with pytest.raises(DataError, match=r"renamed\.parquet: the raw file must hold the vector columns .*'v'"):
        attack(releases[1.0], other)


def test_undefined_rows_are_counted_and_fail(tmp_path: Path) -> None:
    """A raw row with Ax = 0 has no target: it counts as a failure for both columns."""
    x = sphere_rows(400, 6, seed=9)
    x[:10, :3] = 0.0
    x[:10] /= np.linalg.norm(x[:10], axis=1, keepdims=True)
    raw = write_list_parquet(tmp_path / "raw.parquet", x, row_group_size=128)
    out = tmp_path / "out.parquet"
    write_file_release(raw, out, epsilon=50.0, options=ReleaseOptions(columns=Columns(keep=["id"]), seed=2))
    report = attack(out, raw, k=3, a=(0.0, 0.5))
    assert report.undefined_raw == 10 and report.undefined_release == 0
    assert report.release["defined"] == report.prior["defined"] == 390
    first = report.success[0]
    assert first.a == 0.0 and first.release.count <= 390 and first.prior.count <= 390


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"k": 1}, r"^k\b"),
        ({"k": D + 1}, r"^k\b"),
        ({"k": "3"}, r"^k\b"),
        ({"k": True}, r"^k\b"),
        ({"a": (1.5,)}, r"^a\b"),
        ({"a": (-0.1,)}, r"^a\b"),
        ({"a": ()}, r"^a\b"),
        ({"a": "0.5"}, r"^a\b"),
        ({"a": (math.nan,)}, r"^a\b"),
        ({"basis": "fourier"}, r"^basis\b"),
        ({"basis_seed": -1}, r"^basis_seed\b"),
    ],
)
def test_bad_arguments_are_usage_errors(
    sphere: Path, releases: dict[float, Path], kwargs: dict[str, Any], needle: str
) -> None:
    with pytest.raises(UsageError, match=needle):
        attack(releases[1.0], sphere, **kwargs)


def test_large_random_basis_is_refused(
    sphere: Path, releases: dict[float, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(attack_module, "MAX_BASIS_ENTRIES", 100)
    with pytest.raises(UsageError, match="basis coordinates"):
        attack(releases[1.0], sphere, k=8, basis="random")
    assert attack(releases[1.0], sphere, k=8, basis="coordinates").k == 8
