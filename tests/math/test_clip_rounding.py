"""Issue 26 item 1: rounding is not clipping.

Sentence embeddings made in float32 and saved as float64 have norms 1 ± 1.3e-7; ``ldp privatize``
counted most of them as clipped (77.4% in the report) and ``--fail-on-clip 0`` refused the file.
A row whose values are all exact in float32 carries float32's slack in the count; the projection
onto the ball stays as it was (public post-processing), and genuine float64 rows just beyond L are
still clipped. Each test failed on the code before the change.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import ldp, unit_rows, write_list

import ldpcli
from ldpcli.math._domains import FLOAT32_PRECISION, L2_BALL, LINF_BOX
from ldpcli.release._file import write_file_release
from ldpcli.release._options import ReleaseOptions


def float32_embeddings(n: int = 2000, d: int = 384, seed: int = 0) -> np.ndarray:
    """Unit rows normalised in float32, then widened to float64 (as ``df.astype(float)`` saves them)."""
    g = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    unit = (g / np.linalg.norm(g, axis=1, keepdims=True)).astype(np.float32).astype(np.float64)
    assert np.count_nonzero(np.linalg.norm(unit, axis=1) > 1 + 1e-9) > n // 4  # what the float64 rule counted
    return unit


def test_the_domain_moves_rounded_rows_but_does_not_count_them() -> None:
    unit = float32_embeddings()
    projected, clipped = L2_BALL.project(unit, 1.0)
    assert clipped == 0
    over = np.linalg.norm(unit, axis=1) > 1 + 1e-9
    assert not np.array_equal(projected[over], unit[over])  # the projection stays: moved onto the sphere
    assert np.linalg.norm(projected[over], axis=1).max() <= 1 + 1e-15
    assert np.array_equal(projected[~over], unit[~over])
    # Beyond float32's slack (8√d·2⁻²⁴ = 9.3e-6 at d = 384), float32-exact rows are clipped.
    scaled = (unit * 1.001).astype(np.float32).astype(np.float64)
    assert L2_BALL.project(scaled, 1.0)[1] == unit.shape[0]
    # Already read at float32's precision: nothing moved, nothing counted, as before.
    projected, clipped = L2_BALL.project(unit, 1.0, FLOAT32_PRECISION)
    assert projected is unit and clipped == 0


def test_genuine_float64_rows_just_beyond_the_bound_are_clipped() -> None:
    rows = unit_rows(300, 384, seed=4) * (1 + 1e-6)
    assert L2_BALL.project(rows, 1.0)[1] == 300
    # Per row: one float64 value (not exact in float32) makes the row count; the others do not.
    mixed = float32_embeddings(300, 384, seed=5)
    beyond = np.linalg.norm(mixed, axis=1) > 1 + 1e-9
    mixed[:100, 0] += 1e-12  # no longer exact in float32
    mixed[:100] *= (1 + 1e-6) / np.linalg.norm(mixed[:100], axis=1, keepdims=True)
    assert L2_BALL.project(mixed, 1.0)[1] == 100
    assert np.count_nonzero(beyond[100:]) > 0  # the float32 rows beyond 1 + 1e-9 were there, not counted


def test_box_coordinates_rounded_in_float32_are_not_clipped() -> None:
    x = np.array([[1 + 2.0**-23, -0.5], [-(1 + 2.0**-23), 0.25], [1 + 1e-7, 0.0], [1.001, 0.0]])
    projected, clipped = LINF_BOX.project(x, 1.0)
    assert clipped == 2  # 1 + 1e-7 is not exact in float32; 1.001 is beyond float32's slack
    assert np.abs(projected).max() == 1.0


def test_privatize_file_counts_no_clipped_row_and_fail_on_clip_0_accepts(tmp_path: Path) -> None:
    unit = float32_embeddings()
    src = tmp_path / "emb.parquet"
    write_list(src, unit)
    assert write_file_release(src, epsilon=4.0, options=ReleaseOptions(seed=0, fail_on_clip=0.0)).n_clipped == 0
    res = ldp("privatize", src, "--eps", "4", "--seed", "1", "--fail-on-clip", "0", "--overwrite", "--json")
    assert res.exit_code == 0, res.stderr
    assert "rows were outside" not in res.stderr and json.loads(res.stdout)["n_clipped"] == 0


def test_float64_rows_beyond_the_bound_still_fail_and_the_message_states_the_tolerance(tmp_path: Path) -> None:
    src = tmp_path / "over.parquet"
    write_list(src, unit_rows(200, 384, seed=6) * (1 + 1e-6))
    res = ldp("privatize", src, "--eps", "4", "--seed", "1", "--fail-on-clip", "0")
    assert res.exit_code == 1 and "200 of 200 rows (100.0%) were outside" in res.stderr
    assert "by more than the rounding of their values, a relative 9.3e-06 for float32 values" in res.stderr
    assert "1e-09 for other float64 values" in res.stderr and res.stderr.count("\n") == 1
    res = ldp("privatize", src, "--eps", "4", "--seed", "1", "--fail-on-clip", "1")  # accepted: a warning
    assert res.exit_code == 0 and "200 of 200 rows were outside" in res.stderr
    assert "counting only rows beyond L by more than the rounding of their values" in res.stderr


def test_array_api_counts_rounding_as_in_files() -> None:
    unit = float32_embeddings()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ldpcli.LdpWarning)  # no clipping warning
        _, release = ldpcli.privatize(unit, eps=4.0, rng=0, fail_on_clip=0.0)
    assert release.n_clipped == 0
    over = unit_rows(200, 384, seed=7) * (1 + 1e-6)
    with pytest.warns(ldpcli.LdpWarning, match="200 of 200 rows were outside"):
        _, release = ldpcli.privatize(over, eps=4.0, rng=0, fail_on_clip=1.0)
    assert release.n_clipped == 200
    with pytest.raises(ValueError, match="more than fail_on_clip 0 allows, counting only rows beyond L"):
        ldpcli.privatize(over, eps=4.0, rng=0, fail_on_clip=0.0)
