"""A URL given as a path gets one clear error naming the scheme, never "no such file".

``pathlib`` collapses ``https://host/x`` into the local name ``https:/host/x``; before this check the
user was told the file did not exist. Every command's inputs and outputs go through
:func:`ldpcli.io._formats.check_local` (via ``file_format`` or ``find_sidecar``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ldp, unit_rows, write_list

from ldpcli.errors import DataError, UsageError
from ldpcli.io import _remote as remote
from ldpcli.io._formats import check_local, file_format

URLS = ["https://example.com/data/x.parquet", "http://h/x.csv", "s3://bucket/x.parquet", "gs://b/k/x.parquet",
        "hf://datasets/user/x.parquet", "file:///tmp/x.parquet"]


@pytest.mark.parametrize("url", URLS)
def test_library_refuses_urls_as_given_and_as_pathlib_mangles_them(url: str) -> None:
    scheme = url.split(":")[0]
    for form in (url, Path(url)):
        with pytest.raises(UsageError, match=f"URLs are not supported \\({scheme}://\\)"):
            file_format(form)
    with pytest.raises(UsageError, match="no such file") as info:  # a plain missing file is still that
        from ldpcli.io import open_vectors

        open_vectors("missing.parquet")
    assert "URL" not in str(info.value)


def test_local_paths_pass() -> None:
    for path in ("x.parquet", "./a/b.csv", "/abs/x.parquet", "C:/data/x.parquet", "C:\\data\\x.csv", "a:b.csv"):
        check_local(path)


def test_file_url_names_the_local_path() -> None:
    with pytest.raises(UsageError, match=r"file:///tmp/x.parquet: .*\(here: /tmp/x.parquet\)"):
        check_local(Path("file:///tmp/x.parquet"))


def _offline(url: str) -> None:
    """Stands in for pyarrow's filesystem resolution: the test suite never reaches a network."""
    raise DataError(f"{url}: cannot open (no network in the test suite); check the address, your credentials and "
                    "the network")


@pytest.mark.parametrize("url", ["https://example.com/x.parquet", "s3://bucket/x.parquet"])
def test_every_command_names_the_scheme(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "_filesystem", _offline)
    data = write_list(tmp_path / "x.parquet", unit_rows(20, 3), label=[0, 1] * 10)
    runs = [
        ("privatize", url, "--eps", 1),
        ("privatize", data, "--eps", 1, "-o", url.replace("x.parquet", "out.parquet")),
        ("estimate-mean", url),
        ("regress", url, "--label", "0"),
        ("train", url, "--label", "label", "--eps", 1),
        ("train", data, "--label", "label", "--eps", 1, "--test", url),
        ("sweep", "--data", url, "--eps", 1, "--empirical", 5),
    ]
    for args in runs:
        result = ldp(*args)
        if url.startswith("s3") and args[1] == url and args[0] in ("privatize", "estimate-mean", "regress"):
            # An input URL that pyarrow resolves is fetched (ldpcli.io._remote): here it cannot be reached.
            assert result.exit_code == 1 and f"{url}: cannot open" in result.stderr, (args, result.stderr)
            continue
        assert result.exit_code == 2, (args, result.stderr)
        assert "URLs are not supported" in result.stderr and "no such file" not in result.stderr, (args, result.stderr)
        assert result.stderr.count("\n") == 1
