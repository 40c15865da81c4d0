"""An output that is the input itself, under any name, is refused once, before any question of
``--overwrite``, with a message that does not suggest it (issue 36: "pass --overwrite", then, with
it, a refusal). Real processes, real links; the input's bytes never change."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import ldp_process, unit_rows, write_list


def _ldp(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    return ldp_process(*args, cwd=cwd, module=True)


@pytest.mark.slow
@pytest.mark.parametrize("spelling", ["same", "dot", "parent", "absolute", "symlink", "hardlink"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_privatize_refuses_its_input_as_output_without_suggesting_overwrite(tmp_path: Path, spelling: str,
                                                                           overwrite: bool) -> None:
    (tmp_path / "d").mkdir()
    data = write_list(tmp_path / "d" / "in.parquet", unit_rows(30, 4))
    before = data.read_bytes()
    output = {"same": "in.parquet", "dot": "./in.parquet", "parent": "../d/in.parquet", "absolute": str(data),
              "symlink": "link.parquet", "hardlink": "hard.parquet"}[spelling]
    if spelling == "symlink":
        os.symlink("in.parquet", tmp_path / "d" / "link.parquet")
    if spelling == "hardlink":
        os.link(data, tmp_path / "d" / "hard.parquet")
    result = _ldp("privatize", "in.parquet", "--eps", 2, "-o", output, *(["--overwrite"] if overwrite else []),
                  cwd=tmp_path / "d")
    assert result.returncode == 2
    assert "the output would be the input itself" in result.stderr and "choose another --output file" in result.stderr
    assert "overwrite" not in result.stderr.replace("writes over", "")
    assert len(result.stderr.splitlines()) == 1
    if spelling in ("symlink", "hardlink"):
        assert "(in.parquet by another name)" in result.stderr
    assert data.read_bytes() == before and not (tmp_path / "d" / "in.parquet.ldp.json").exists()


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_dataset_directory_that_holds_the_input_is_refused(tmp_path: Path, overwrite: bool) -> None:
    pytest.importorskip("dask")
    (tmp_path / "d").mkdir()
    data = write_list(tmp_path / "d" / "a.parquet", unit_rows(30, 4))
    before = data.read_bytes()
    result = _ldp("privatize", "d", "--eps", 2, "--engine", "dask", "-o", "d/", *(["--overwrite"] if overwrite else []),
                  cwd=tmp_path)
    assert result.returncode == 2
    assert "the output directory holds the input d/a.parquet" in result.stderr
    assert "choose another --output directory" in result.stderr and "pass --overwrite" not in result.stderr
    assert "--overwrite replaces only a dataset directory written by ldp" in result.stderr  # why it cannot help
    assert data.read_bytes() == before and sorted(os.listdir(tmp_path / "d")) == ["a.parquet"]
