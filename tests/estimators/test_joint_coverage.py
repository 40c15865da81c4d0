"""Joint confidence regions of the mean (issue 36): ``estimate-mean``'s intervals are per coordinate (each
holds its coordinate about 95% of the time, all 16 at once far less often); the Bonferroni intervals and the
ℓ2 ball hold the whole mean vector at once with probability ≥ the confidence. A seeded Monte Carlo of real
releases (the mechanisms' own privatize, the estimator ``estimate-mean`` runs) measures the three coverages;
the tolerance is 5 binomial standard errors of the number of trials, so a seeded run cannot flake.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ldpcli.estimators._mean import MeanEstimator
from ldpcli.mechanisms import MechanismSpec

TRIALS, N, D, CONFIDENCE = 600, 400, 16, 0.95
#: Five binomial standard errors of a coverage of 0.95 over TRIALS trials.
SLACK = 5 * math.sqrt(CONFIDENCE * (1 - CONFIDENCE) / TRIALS)


@pytest.mark.parametrize(("name", "options"), [("privunit2", {}), ("laplace", {}), ("duchi-linf", {})])
def test_joint_regions_cover_the_whole_mean_where_the_per_coordinate_intervals_do_not(name: str, options: dict) -> None:
    mech = MechanismSpec(name, 2.0, options=options).calibrate(D)
    rng = np.random.default_rng(2026)
    x = rng.normal(0.3, 1.0, size=(N, D))
    x = x / np.linalg.norm(x, axis=1, keepdims=True) if mech.domain == "l2-ball" else np.clip(x, -1, 1)
    truth = x.mean(axis=0)
    per_coordinate = all_coordinates = bonferroni = ball = 0
    for _ in range(TRIALS):
        estimator = MeanEstimator(D, CONFIDENCE)
        estimator.add(mech.privatize(x, rng), None)
        est = estimator.finalize(mech, N)
        assert est.lower is not None and est.upper is not None
        assert est.joint_lower is not None and est.joint_upper is not None
        inside = (est.lower <= truth) & (truth <= est.upper)
        per_coordinate += int(inside.sum())
        all_coordinates += bool(inside.all())
        bonferroni += bool(np.all((est.joint_lower <= truth) & (truth <= est.joint_upper)))
        ball += bool(np.linalg.norm(est.mean - truth) <= est.ball_radius)
    # Each per-coordinate interval has about its level; all 16 at once far less (≈ 0.95^16 = 0.44).
    assert abs(per_coordinate / (TRIALS * D) - CONFIDENCE) <= SLACK
    assert all_coordinates / TRIALS < CONFIDENCE - SLACK
    # The joint regions hold the whole vector at least at the confidence, within the sampling error.
    assert bonferroni / TRIALS >= CONFIDENCE - SLACK
    assert ball / TRIALS >= CONFIDENCE - SLACK


@pytest.mark.slow
def test_estimate_mean_says_its_intervals_are_per_coordinate_and_reports_the_joint_regions(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = np.random.default_rng(1).normal(size=(500, D))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"vec": list(rows)}), source)
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]),
                                                     os.environ.get("PYTHONPATH", "")) if p)}
    ldp = str(Path(sys.executable).with_name("ldp"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([ldp, *args], capture_output=True, text=True, env=env, timeout=120)

    assert run("privatize", str(source), "-o", str(tmp_path / "out.parquet"), "--eps", "2", "-q").returncode == 0
    table = run("estimate-mean", str(tmp_path / "out.parquet"))
    assert table.returncode == 0, table.stderr
    assert "95% interval (per coordinate)" in table.stdout and "95% joint (Bonferroni)" in table.stdout
    assert "not all 16 at once" in table.stdout and "95% joint ℓ2 ball" in table.stdout
    result = run("estimate-mean", str(tmp_path / "out.parquet"), "--json", "--confidence", "0.9")
    est = json.loads(result.stdout)
    assert est["intervals"].startswith("per coordinate")
    joint = est["joint"]
    assert joint["confidence"] == 0.9 and joint["bonferroni"]["per_coordinate_level"] == pytest.approx(1 - 0.1 / D)
    lower, upper = np.array(joint["bonferroni"]["lower"]), np.array(joint["bonferroni"]["upper"])
    assert np.all(lower < np.array(est["lower"])) and np.all(upper > np.array(est["upper"]))  # wider: simultaneous
    assert joint["l2_ball"]["radius"] == pytest.approx(math.sqrt(est["expected_error"] / 0.1))
