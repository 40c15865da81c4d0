"""A wrong ``--sidecar`` (issue 36): it blamed a missing column instead of saying that the sidecar describes
another file, and a sidecar of another file suggested ``--no-verify``. The message now names the file the
sidecar was written for, its n and d, and asks for this file's own sidecar. Real ``ldp`` processes.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import ldp_process, unit_rows, write_list

pytestmark = pytest.mark.slow


def ldp_run(*args: Any) -> subprocess.CompletedProcess[str]:
    return ldp_process(*args, env={"COLUMNS": "250", "NO_COLOR": "1"})


def release(tmp_path: Path, name: str, d: int, csv: bool = False) -> Path:
    rows = unit_rows(300, d, seed=d)
    source = tmp_path / f"{name}-in.{'csv' if csv else 'parquet'}"
    if csv:
        np.savetxt(source, rows, delimiter=",", header=",".join(f"x{j}" for j in range(d)), comments="", fmt="%.17g")
    else:
        write_list(source, rows)
    out = tmp_path / f"{name}.{'csv' if csv else 'parquet'}"
    assert ldp_run("privatize", source, "-o", out, "--eps", 1, "-q").returncode == 0
    return out


def refusal(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stdout
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("ldp: error: ") and "--no-verify" not in line
    return line


def test_a_sidecar_of_another_dimension_names_the_mismatch(tmp_path: Path) -> None:
    a, b = release(tmp_path, "a", 16), release(tmp_path, "b", 8)
    line = refusal(ldp_run("estimate-mean", a, "--sidecar", f"{b}.ldp.json"))
    assert f"describes another file, {b.name!r} (n = 300, d = 8" in line
    assert "16 coordinates, not d=8" in line and "pass this file's own sidecar with --sidecar" in line


def test_a_sidecar_of_another_layout_names_the_file_it_was_written_for(tmp_path: Path) -> None:
    a, b = release(tmp_path, "a", 16, csv=True), release(tmp_path, "b", 16)
    line = refusal(ldp_run("estimate-mean", a, "--sidecar", f"{b}.ldp.json"))
    assert f"describes another file, {b.name!r}" in line and "column 'vec' is missing" in line


def test_a_sidecar_of_another_file_of_the_same_shape_does_not_suggest_no_verify(tmp_path: Path) -> None:
    a, c = release(tmp_path, "a", 16), release(tmp_path, "c", 16)
    line = refusal(ldp_run("estimate-mean", a, "--sidecar", f"{c}.ldp.json"))
    assert "do not match the SHA-256" in line and f"describes another file, {c.name!r} (n = 300, d = 16)" in line
    assert "pass this file's own sidecar with --sidecar" in line
