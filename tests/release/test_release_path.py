"""The release path of issue 37 (item 2): the commit as an object the release drives, the release's
cost computed once, and ``ldpcli.privatize_file`` returning its Release without reading back the file
it just wrote."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers import ledger_document, unit_rows, write_list

import ldpcli
from ldpcli.errors import DataError
from ldpcli.io._atomic import finished_bytes
from ldpcli.io._publication import Publication
from ldpcli.release._commit import Commit
from ldpcli.release._file import write_file_release
from ldpcli.release._ledger import Ledger, LedgerEntry
from ldpcli.release._options import Budget, ReleaseOptions
from ldpcli.release._rowindex import Charge


@contextmanager
def calls_of(name: str, file_end: str) -> Iterator[list[int]]:
    """Count the calls of the function ``name`` defined in a file ending with ``file_end``, on every thread."""
    import threading

    count = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name == name and frame.f_code.co_filename.endswith(file_end):
            count[0] += 1

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield count
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("how", [{"copies": 2}, {"shuffle": True}])
def test_release_cost_is_computed_once_per_release(tmp_path: Path, how: dict[str, Any]) -> None:
    """With a ledger, copies or a shuffle, the cost is computed once and read by the ledger entry,
    the sidecar, the shuffle claim and the result (it was computed two to four times)."""
    source = write_list(tmp_path / "in.parquet", unit_rows(300, 4, seed=1))
    options = ReleaseOptions(seed=3, budget=Budget(ledger=Ledger.open(tmp_path / "ledger.json")), **how)
    with calls_of("release_cost", "mechanisms/_composition.py") as count:
        result = write_file_release(source, tmp_path / "out.parquet", epsilon=2.0, options=options)
        result.summary()
    assert count[0] == 1
    (entry,) = ledger_document(tmp_path / "ledger.json")["entries"]
    assert entry["epsilon_exact"] == result.cost.epsilon_exact


def test_privatize_file_does_not_read_back_what_it_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Release comes from the sidecar written and the SHA-256 the writer computed: no hash of the
    output and no sidecar read again; it is the Release that open_release gives for the same files."""
    source = write_list(tmp_path / "in.parquet", unit_rows(200, 5, seed=2))
    import ldpcli.analysis._handle as handle
    import ldpcli.analysis._scan as scan
    import ldpcli.release._sidecar as sidecar

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("the output was read back")

    with monkeypatch.context() as patched:
        patched.setattr(handle, "file_sha256", refused)
        patched.setattr(scan, "scan", refused)
        patched.setattr(sidecar, "load_sidecar", refused)
        release = ldpcli.privatize_file(source, tmp_path / "out.parquet", epsilon=3.0,
                                        options=ReleaseOptions(seed=4))
    opened = ldpcli.open_release(tmp_path / "out.parquet")
    assert release.result is not None and release.n_clipped == release.result.n_clipped
    assert (release.mechanism, release.n, release.columns, release.keep, release.dtype, release.reproducible,
            release.warnings, release.paths, release.verified) == (
        opened.mechanism, opened.n, opened.columns, opened.keep, opened.dtype, opened.reproducible,
        opened.warnings, opened.paths, opened.verified)
    (written,), (read,) = release.sidecars, opened.sidecars
    fields = ("n", "sha256", "version", "data_file", "dtype", "dtype_recorded", "unprivatized_columns", "warnings",
              "baseline", "input_tag", "part", "row_sketch", "shuffled", "layout", "spec")
    assert {name: getattr(written, name) for name in fields} == {name: getattr(read, name) for name in fields}
    assert release.to_dict() == opened.to_dict()


def _charge(tmp_path: Path) -> Charge:
    entry = LedgerEntry(fingerprint="ab" * 32, input=str(tmp_path / "in.parquet"), rows=10, d=2, columns=["v"],
                        output=str(tmp_path / "out.json"), mechanism="privunit2", epsilon=1.0, epsilon_exact=1.0,
                        delta=None, created="", tag="", reproducible=False)
    return Charge(entry, "in.parquet")


def _commit_with(tmp_path: Path, body: Callable[[Commit, Publication], None]) -> Ledger:
    ledger = Ledger.open(tmp_path / "ledger.json")
    publication = Publication(overwrite=False)
    with finished_bytes(tmp_path / "out.json", b"{}\n") as sink:
        publication.add_file(sink)
        with Commit(publication, ledger=ledger, charges=[_charge(tmp_path)], max_budget=None) as commit:
            body(commit, publication)
    return ledger


def test_the_caller_drives_the_commit(tmp_path: Path) -> None:
    """reserve → (the caller's sidecar, with the reservation's tag and time) → publish: confirmed."""
    seen: dict[str, Any] = {}

    def body(commit: Commit, publication: Publication) -> None:
        (seen["tag"],) = commit.reserve()
        seen["created"] = commit.created
        (seen["reservation"],) = commit.publish()

    _commit_with(tmp_path, body)
    (entry,) = ledger_document(tmp_path / "ledger.json")["entries"]
    assert (entry["state"], entry["tag"], entry["created"]) == ("confirmed", seen["tag"], seen["created"])
    assert seen["reservation"].tag == seen["tag"] and (tmp_path / "out.json").read_bytes() == b"{}\n"


def test_a_failure_in_the_callers_block_takes_the_reservation_out(tmp_path: Path) -> None:
    """A failure after the reservation and before the commit point: nothing published, no entry kept,
    and the error says so."""

    def body(commit: Commit, publication: Publication) -> None:
        commit.reserve()
        raise DataError("the sidecar could not be built")

    with pytest.raises(DataError, match="nothing was published"):
        _commit_with(tmp_path, body)
    assert ledger_document(tmp_path / "ledger.json")["entries"] == []
    assert not (tmp_path / "out.json").exists()


def test_an_error_after_the_commit_point_keeps_the_release(tmp_path: Path) -> None:
    """Past the commit point nothing takes the release back: the error goes on unchanged and the
    confirmed entry stays."""

    def body(commit: Commit, publication: Publication) -> None:
        commit.reserve()
        commit.publish()
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _commit_with(tmp_path, body)
    (entry,) = ledger_document(tmp_path / "ledger.json")["entries"]
    assert entry["state"] == "confirmed" and (tmp_path / "out.json").exists()
