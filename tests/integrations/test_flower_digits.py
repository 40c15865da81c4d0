"""examples/flower_digits.py end to end at a tiny size, through Flower's own simulation engine: every round of
every arm in its JSON, accuracies in [0, 1], finite non-negative errors, and ldp's aggregate error far below
LocalDpMod's at the same ε."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flwr")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flower_digits.py"


@pytest.mark.slow  # Ray's start and 3 arms × 2 rounds × 5 clients: about 20 s on 2 cores
def test_the_digits_example_runs_and_ldp_aggregates_closer_to_the_true_mean(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(EXAMPLE), "--eps", "4", "--rounds", "2", "--clients", "5",
                             "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads((tmp_path / "flower_digits.json").read_text(encoding="utf-8"))["rows"]
    assert sorted((r["arm"], r["round"]) for r in rows) == [(arm, t) for arm in ("ldp", "localdp", "none")
                                                            for t in (1, 2)]
    for row in rows:
        assert 0.0 <= row["accuracy"] <= 1.0 and math.isfinite(row["mse"]) and row["mse"] >= 0.0
    # the reference is unclipped: its error is clipping's bias alone (zero once no update passes L), far below noise
    assert all(r["mse"] < 0.1 for r in rows if r["arm"] == "none")
    assert (tmp_path / "flower_digits.png").stat().st_size > 0 and "| round |" in result.stdout
    for t in (1, 2):
        ldp, local = (next(r["mse"] for r in rows if r["arm"] == arm and r["round"] == t) for arm in ("ldp", "localdp"))
        # expected: PrivUnit2's ≈ 0.435·d / 5 ≈ 57, the Gaussian's d·(2·√(2 ln 1.25e5)/4)² / 5 ≈ 763 (13×); with
        # d = 650 coordinates each error is within a few per cent of its mean, so 4× is far beyond the noise
        assert 4 * ldp < local
