"""Rows whose ℓ2 norm overflows float64 are clipped onto L·(their direction), through the real CLI.

A row of d coordinates 1e308 (‖x‖ = 2e308 for d = 4) has no finite norm: L·x/‖x‖ was L·x/inf = 0,
so the row was "moved onto the ball" as the zero row, whose release is a uniform direction, and
numpy's RuntimeWarning reached stderr. Each test privatizes many copies of one huge row with a
fixed seed and checks that the mean of the outputs (unbiased for the clipped row) is L·direction
within 6 standard errors of that mean, estimated from the outputs themselves.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import ldp_process

from ldpcli.math._domains import L2_BALL

N = 4000
BOUND = 2.0


def _privatize(tmp_path: Path, row: list[str], mechanism: str) -> tuple[subprocess.CompletedProcess[str], np.ndarray]:
    source = tmp_path / "huge.csv"
    source.write_text("x0,x1,x2,x3\n" + (",".join(row) + "\n") * N)
    out = tmp_path / "out.csv"
    run = ldp_process("privatize", source, "-m", mechanism, "--eps", 4, "-L", BOUND, "--fail-on-clip", 1, "--seed", 7,
                      "-o", out, env={"LDP_LEDGER": str(tmp_path / "ledger.json")}, timeout=300, cwd=tmp_path,
                      module=True)
    z = np.loadtxt(out, delimiter=",", skiprows=1) if run.returncode == 0 else np.empty((0, 4))
    return run, z


@pytest.mark.slow
@pytest.mark.parametrize("row", [["1e308"] * 4, ["1e308", "-1e308", "5e307", "0"],
                                 ["3e200", "-4e200", "1.2e201", "0"]])
@pytest.mark.parametrize("mechanism", ["privunit2", "laplace"])
def test_a_huge_row_is_released_around_its_true_direction(tmp_path: Path, row: list[str], mechanism: str) -> None:
    run, z = _privatize(tmp_path, row, mechanism)
    assert run.returncode == 0, run.stderr
    assert "Warning" not in run.stderr and "sphere.py" not in run.stderr, run.stderr
    assert f"{N} of {N} rows were outside the l2-ball" in run.stderr
    x = np.array([float(v) for v in row])
    target = BOUND * (x / np.max(np.abs(x))) / np.linalg.norm(x / np.max(np.abs(x)))
    mean, se = z.mean(axis=0), z.std(axis=0, ddof=1) / np.sqrt(N)
    assert np.all(np.abs(mean - target) <= 6 * se), (mean, target, se)
    assert np.linalg.norm(target) == pytest.approx(BOUND)


def test_nearest_maps_an_infinite_norm_to_the_sphere_without_warnings() -> None:
    x = np.array([[1e308] * 4, [-1e308, 1e308, 0.0, 0.0], [3.0, 4.0, 0.0, 0.0], [0.1, 0.0, 0.0, 0.0]])
    with np.errstate(all="raise"):
        clipped, moved = L2_BALL.project(x, 1.0)
    assert moved == 3
    np.testing.assert_allclose(clipped, [[0.5] * 4, [-(2**-0.5), 2**-0.5, 0, 0], [0.6, 0.8, 0, 0], [0.1, 0, 0, 0]],
                               rtol=1e-15)
