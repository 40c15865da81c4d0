"""A release that lies about itself (issue 36): a self-consistent but edited sidecar, ε = 1 data relabelled
ε = 8, was accepted by ``estimate-mean`` with error bars far too small. The rows are now checked against the
law their sidecar claims, in the pass that reads them (ldpcli.analysis._lawcheck): a row that the law
excludes (PrivUnit2's constant norm, the hypercube's ±c, the scalar grid) is refused, and rows noisier
than the claim allows are warned about. Every release is made by the real ``ldp privatize``, every
estimate by the real ``ldp estimate-mean``, in subprocesses.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import ldp_process, unit_rows, write_list

from ldpcli.io import VectorLayout
from ldpcli.mechanisms import MechanismSpec
from ldpcli.release._sidecar import build_sidecar, load_sidecar, sidecar_path
from ldpcli.risk._section import reconstruction_section

N, D = 2000, 16


def ldp_run(*args: Any) -> subprocess.CompletedProcess[str]:
    """The real ``ldp`` script, with this worktree's package first on the path."""
    return ldp_process(*args, env={"COLUMNS": "200", "NO_COLOR": "1"}, timeout=300)


def privatize(tmp_path: Path, name: str, *args: Any, rows: np.ndarray | None = None, suffix: str = "parquet") -> Path:
    """``ldp privatize`` of seeded rows (norms 0.3 to 1: inside the ball and on its boundary) into NAME.SUFFIX."""
    if rows is None:
        rows = unit_rows(N, D, seed=11) * np.linspace(0.3, 1.0, N)[:, None]
    source = tmp_path / f"{name}-in.{suffix}"
    if suffix == "csv":  # one column per coordinate
        header = ",".join(f"x{j}" for j in range(rows.shape[1]))
        np.savetxt(source, rows, delimiter=",", header=header, comments="", fmt="%.17g")
    else:
        write_list(source, rows)
    out = tmp_path / f"{name}.{suffix}"
    done = ldp_run("privatize", source, "-o", out, "--seed", 5, "-q", *args)
    assert done.returncode == 0, done.stderr
    return out


def relabel(release: Path, epsilon: float) -> None:
    """Rewrite the release's sidecar at another ε with every number the sidecar checks recomputed (the
    mechanism's parameters and errors, the reconstruction bounds), as a forger would: it still loads."""
    meta = load_sidecar(sidecar_path(release))
    mechanism = MechanismSpec.from_dict({**meta.spec.to_dict(), "epsilon": epsilon}).calibrate(meta.d)
    layout = VectorLayout.from_dict(meta.content["data"]["layout"])
    forged = build_sidecar(mechanism, n=meta.n, layout=layout, data_path=release, sha256=meta.sha256,
                           reproducible=False, dtype=meta.dtype, input_tag=meta.input_tag,
                           reconstruction=reconstruction_section(mechanism) if meta.content.get("reconstruction") else None)
    sidecar_path(release).write_text(json.dumps(forged, indent=2))
    assert load_sidecar(sidecar_path(release)).mechanism.epsilon == epsilon  # self-consistent: it loads


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ldp: error: "), result.stderr
    return lines[0]


# --------------------------------------------------------------------------- the pinned law: refused


@pytest.mark.slow
def test_the_issues_case_privunit2_eps_1_relabelled_eps_8_is_refused(tmp_path: Path) -> None:
    release = privatize(tmp_path, "out", "--eps", 1)
    before = json.loads(ldp_run("estimate-mean", release, "--json").stdout)
    relabel(release, 8.0)
    line = one_error_line(ldp_run("estimate-mean", release))
    plain = MechanismSpec("privunit2", 1.0).calibrate(D)
    claimed = MechanismSpec("privunit2", 8.0).calibrate(D)
    assert f"{release}: row 1 (counting from 1) has norm {plain.scale:.6g}" in line
    assert f"but a privunit2 release at ε = 8, d = {D}, L = 1 has norm {claimed.scale:.6g} in every row" in line
    assert f"its sidecar {sidecar_path(release)} does not describe this data" in line
    assert before["dispersion_warnings"] == []
    # The Python API refuses it the same way.
    from ldpcli.analysis._estimate import estimate_file_mean
    from ldpcli.errors import DataError
    with pytest.raises(DataError, match="does not describe this data"):
        estimate_file_mean(release)


@pytest.mark.slow
def test_privunit2_eps_8_relabelled_eps_1_is_refused_too(tmp_path: Path) -> None:
    """Less noise than claimed would only make the error bars conservative, but the norm is pinned: these rows
    are not a privunit2 release at ε = 1, and the sidecar does not describe them."""
    release = privatize(tmp_path, "out", "--eps", 8)
    relabel(release, 1.0)
    assert "has norm" in one_error_line(ldp_run("estimate-mean", release))


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["duchi-linf", "privunit-inf"])
def test_a_relabelled_hypercube_release_is_refused(tmp_path: Path, mechanism: str) -> None:
    rows = np.clip(np.random.default_rng(2).normal(size=(N, D)), -1, 1)
    release = privatize(tmp_path, "out", "--eps", 1, "-m", mechanism, rows=rows)
    relabel(release, 8.0)
    line = one_error_line(ldp_run("estimate-mean", release))
    assert f"{release}: row 1 (counting from 1) has" in line and "has norm" in line  # the norm is pinned first
    assert f"a {mechanism} release at ε = 8, d = {D}, L = 1" in line


@pytest.mark.slow
def test_a_relabelled_scalar_release_is_refused_naming_its_grid(tmp_path: Path) -> None:
    rows = np.random.default_rng(4).uniform(0, 1, size=(N, 1))
    release = privatize(tmp_path, "out", "--eps", 1, "-m", "scalar", rows=rows)
    relabel(release, 2.0)
    line = one_error_line(ldp_run("estimate-mean", release))
    assert "at coordinate 0 (counting from 0) but a scalar release at ε = 2, d = 1, L = 1 has every coordinate in {" in line


@pytest.mark.slow
def test_a_relabelled_float32_csv_release_is_refused(tmp_path: Path) -> None:
    release = privatize(tmp_path, "out", "--eps", 1, "--dtype", "float32", suffix="csv")
    relabel(release, 8.0)
    assert "does not describe this data" in one_error_line(ldp_run("estimate-mean", release))


# --------------------------------------------------------------------------- the dispersion: warned


@pytest.mark.slow
def test_privunitg_eps_1_relabelled_eps_8_warns_that_the_error_bars_are_too_small(tmp_path: Path) -> None:
    """PrivUnitG's norm is not pinned; the dispersion test sees the rows far noisier than ε = 8 allows."""
    release = privatize(tmp_path, "out", "--eps", 1, "-m", "privunitg")
    relabel(release, 8.0)
    result = ldp_run("estimate-mean", release, "--json")
    assert result.returncode == 0, result.stderr
    warning = [line for line in result.stderr.splitlines() if line.startswith("ldp: warning:")]
    assert len(warning) == 1 and f"{release}: its rows are noisier than its sidecar" in warning[0]
    assert "the guaranteed error understates the real one" in warning[0]
    [found] = json.loads(result.stdout)["dispersion_warnings"]
    assert found["blocks"] == 128 and found["blocks_over"] == 128 and found["mean_sq_norm"] > 10 * found["bound"]
    assert found["alpha"] == 1e-6  # FALSE_ALARM, over the scan's one file
    table = ldp_run("estimate-mean", release)
    assert table.returncode == 0 and "noisier than its sidecar" in table.stderr


@pytest.mark.slow
def test_privunitg_eps_8_relabelled_eps_1_is_conservative_and_not_reported(tmp_path: Path) -> None:
    """Rows less noisy than the claim: the guaranteed error is then an overestimate (conservative), and the
    one-sided test says nothing."""
    release = privatize(tmp_path, "out", "--eps", 8, "-m", "privunitg")
    relabel(release, 1.0)
    result = ldp_run("estimate-mean", release, "--json")
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr
    assert json.loads(result.stdout)["dispersion_warnings"] == []


# --------------------------------------------------------------------------- honest releases: never flagged


HONEST = [
    ("privunit2", ()), ("privunitg", ()), ("duchi-l2", ()), ("gaussian-sign", ()), ("privunit-inf", ()),
    ("duchi-linf", ()), ("separated", ()), ("laplace", ("--force",)), ("gaussian", ("--delta", "1e-6", "--force")),
    ("bcdp", ("--q", "0.1")), ("scalar", ()), ("scalar-rel", ()),
]


@pytest.mark.slow
@pytest.mark.parametrize(("mechanism", "extra"), HONEST, ids=[m for m, _ in HONEST])
@pytest.mark.parametrize("epsilon", [1.0, 8.0])
def test_honest_releases_of_every_mechanism_are_never_flagged(tmp_path: Path, mechanism: str, extra: tuple[str, ...],
                                                              epsilon: float) -> None:
    d = 1 if mechanism.startswith("scalar") else D
    rng = np.random.default_rng(7)
    if mechanism.startswith("scalar"):
        rows = rng.uniform(0, 1, size=(N, 1))
    elif mechanism in ("privunit-inf", "duchi-linf", "bcdp"):
        rows = np.clip(rng.normal(size=(N, d)), -1, 1)
    else:
        rows = unit_rows(N, d, seed=7) * rng.uniform(0.5, 1.0, size=(N, 1))
    release = privatize(tmp_path, "out", "--eps", epsilon, "-m", mechanism, *extra, rows=rows)
    result = ldp_run("estimate-mean", release, "--json")
    assert result.returncode == 0, result.stderr
    assert "noisier" not in result.stderr
    assert json.loads(result.stdout)["dispersion_warnings"] == []


@pytest.mark.slow
@pytest.mark.parametrize("args", [("--secure",), ("--copies", "3"), ("--dtype", "float32"), ("-o-csv",)],
                         ids=["secure-grid", "copies", "float32", "csv"])
def test_honest_privunit2_releases_in_every_form_are_accepted(tmp_path: Path, args: tuple[str, ...]) -> None:
    """The norm's tolerance covers a grid rendering (--secure), copies side by side, float32 and CSV text."""
    csv = args == ("-o-csv",)
    release = privatize(tmp_path, "out", "--eps", 2, *(() if csv else args), suffix="csv" if csv else "parquet")
    result = ldp_run("estimate-mean", release, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["dispersion_warnings"] == []


# --------------------------------------------------------------------------- the threshold


def test_the_critical_count_is_the_exact_binomial_quantile() -> None:
    from ldpcli.analysis._lawcheck import FALSE_ALARM, critical_count

    def tail(m: int, k: int) -> float:
        return sum(math.comb(m, i) for i in range(k, m + 1)) / 2**m

    for m in (20, 50, 128):
        k = critical_count(m, FALSE_ALARM)
        assert k is not None and tail(m, k) <= FALSE_ALARM < tail(m, k - 1)
    assert critical_count(19, FALSE_ALARM) is None  # 2^-19 > 1e-6: too few blocks to test
    assert critical_count(128, FALSE_ALARM) == 92
