"""Inputs named by URL, fetched through pyarrow's filesystems (ldpcli.io._remote).

The suite never reaches a network: ``s3://bucket/…`` is resolved here to a pyarrow
``SubTreeFileSystem`` over a temporary folder (only ``remote._filesystem`` is replaced; the copying
goes through pyarrow's real filesystem API). ``file://`` and the missing ``huggingface_hub`` are real.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from helpers import ldp, unit_rows, write_list

from ldpcli.analysis._estimate import estimate_file_mean
from ldpcli.errors import DataError, UsageError
from ldpcli.io import _remote as remote
from ldpcli.release._file import write_file_release
from ldpcli.release._options import ReleaseOptions


@pytest.fixture
def bucket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder that plays the S3 bucket ``s3://bucket/``."""
    root = tmp_path / "bucket"
    (root / "raw").mkdir(parents=True)

    def resolve(url: str) -> tuple[pafs.FileSystem, str]:
        assert url.startswith("s3://bucket/"), url
        return pafs.SubTreeFileSystem(str(root), pafs.LocalFileSystem()), url[len("s3://bucket/"):]

    monkeypatch.setattr(remote, "_filesystem", resolve)
    return root


def test_privatize_an_s3_input_is_the_local_run_byte_for_byte(bucket: Path, tmp_path: Path) -> None:
    write_list(bucket / "raw" / "x.parquet", unit_rows(500, 6, seed=1))
    result = ldp("privatize", "s3://bucket/raw/x.parquet", "--eps", 2, "--seed", 5, "-o", tmp_path / "out.parquet")
    assert result.exit_code == 0, result.stderr
    local = write_file_release(bucket / "raw" / "x.parquet", tmp_path / "local.parquet", epsilon=2.0, options=ReleaseOptions(seed=5))
    assert (tmp_path / "out.parquet").read_bytes() == local.output.read_bytes()


def test_estimate_from_an_s3_release_with_its_sidecar(bucket: Path, tmp_path: Path) -> None:
    write_list(tmp_path / "x.parquet", unit_rows(400, 4, seed=2))
    release = write_file_release(tmp_path / "x.parquet", bucket / "x.privatized.parquet", epsilon=3.0)
    remote_estimate = ldp("estimate-mean", "s3://bucket/x.privatized.parquet", "--json")
    assert remote_estimate.exit_code == 0, remote_estimate.stderr
    assert json.loads(remote_estimate.stdout)["mean"] == estimate_file_mean(release.output).mean.tolist()
    release.sidecar.unlink()  # no sidecar beside the remote file: the local copy has none either
    with pytest.raises(DataError, match="no such sidecar"):
        estimate_file_mean("s3://bucket/x.privatized.parquet")


def test_remote_failures_are_one_line_errors(bucket: Path) -> None:
    with pytest.raises(DataError, match=r"s3://bucket/raw/missing\.parquet: no such file; check the address"):
        privatize_file_from("s3://bucket/raw/missing.parquet")
    with pytest.raises(UsageError, match="remote directories and patterns are not expanded; name each file"):
        privatize_file_from("s3://bucket/raw/")
    with pytest.raises(UsageError, match=r"s3://bucket/raw: is a directory; remote directories are not expanded"):
        privatize_file_from("s3://bucket/raw")


def privatize_file_from(url: str) -> None:
    from ldpcli.release._file import write_file_releases

    write_file_releases(url, epsilon=1.0)


def test_a_file_url_is_the_local_file(tmp_path: Path) -> None:
    source = write_list(tmp_path / "x.parquet", unit_rows(50, 3))
    result = ldp("privatize", f"file://{source}", "--eps", 1, "--seed", 1, "-o", tmp_path / "out.parquet")
    assert result.exit_code == 0, result.stderr
    local = write_file_release(source, tmp_path / "local.parquet", epsilon=1.0, options=ReleaseOptions(seed=1))
    assert (tmp_path / "out.parquet").read_bytes() == local.output.read_bytes()


@pytest.mark.skipif(importlib.util.find_spec("huggingface_hub") is not None, reason="huggingface_hub is installed")
def test_hf_without_huggingface_hub_says_what_to_install() -> None:
    """pyarrow reads hf:// through fsspec and huggingface_hub; it names the one that is missing."""
    result = ldp("privatize", "hf://datasets/user/x.parquet", "--eps", 1)
    assert result.exit_code == 2 and result.stderr.startswith("ldp: error: hf://datasets/user/x.parquet: ")
    assert "Install huggingface_hub" in result.stderr or "`fsspec` is required" in result.stderr


def test_an_output_url_is_still_refused(tmp_path: Path) -> None:
    source = write_list(tmp_path / "x.parquet", unit_rows(10, 3))
    result = ldp("privatize", source, "--eps", 1, "-o", "s3://bucket/out.parquet")
    assert result.exit_code == 2 and "URLs are not supported (s3://) here; ldp writes local files only" in result.stderr
