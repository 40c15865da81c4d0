"""A run of many file releases into one directory lists it once and syncs it three times a release (issue 36).

``ldp privatize DIR -o OUT/ --layout files`` of 4,000 tiny files took 126-137 s, superlinear: every
release swept OUT for what dead runs left (:func:`ldpcli.io._publication.sweep_stale`) twice, each
listing every output written so far, and fsynced OUT six times. The tests count the work, never a
wall-clock time: the listings of OUT in one run do not grow with its inputs, and OUT is fsynced three
times a release (the journal, the renames, the commit point: each must be durable before the next
step). What a killed run left in OUT is still swept by the next run, in a process of its own.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from helpers import ldp_process, unit_rows, write_list

from ldpcli.release._file import write_file_releases
from ldpcli.release._options import ReleaseOptions


class DirectoryWork:
    """Counts the listings (``os.listdir``) and the opens for an fsync (``os.open`` read-only, as
    :func:`ldpcli.io._atomic._sync_directory` opens it) of one directory, passing each through."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
        self.listings = self.syncs = 0
        listdir, open_ = os.listdir, os.open

        def counted_listdir(path: str | os.PathLike[str] = ".") -> list[str]:
            self.listings += os.fspath(path) == os.fspath(directory)
            return listdir(path)

        def counted_open(path: str | os.PathLike[str], flags: int, *args: int, **kwargs: int) -> int:
            self.syncs += os.fspath(path) == os.fspath(directory) and flags == os.O_RDONLY
            return open_(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "listdir", counted_listdir)
        monkeypatch.setattr(os, "open", counted_open)


def inputs(folder: Path, count: int) -> Path:
    folder.mkdir()
    for i in range(count):
        write_list(folder / f"f{i:03d}.parquet", unit_rows(5, 4, seed=200 + i))
    return folder


@pytest.mark.parametrize("count", [4, 16])
def test_a_run_of_many_releases_lists_its_output_directory_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    source, out = inputs(tmp_path / "in", count), tmp_path / "out"
    work = DirectoryWork(monkeypatch, out)
    results = write_file_releases(source, f"{out}/", epsilon=1.0, options=ReleaseOptions(seed=1))
    assert len(results) == count
    assert work.listings == 1  # the first release's sweep; was 2 a release
    assert work.syncs == 3 * count  # journal, renames, commit point; was 6 a release


def test_what_a_killed_run_left_in_the_output_directory_is_swept_by_the_next_run(tmp_path: Path) -> None:
    source, out = inputs(tmp_path / "in", 3), tmp_path / "out"
    killed = ldp_process("privatize", source, "--eps", "1", "-o", f"{out}/", "--layout", "files", "-q",
                         env={"LDP_FAULT": "journal:kill", "LDP_NAMED_TEMPORARIES": "1"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = sorted(p.name for p in out.iterdir())
    assert any(name.endswith(".journal") for name in left) and any(name.endswith(".tmp") for name in left), left
    later = ldp_process("privatize", source, "--eps", "1", "-o", f"{out}/", "--layout", "files", "-q")
    assert later.returncode == 0, later.stderr
    names = [f"f{i:03d}.privatized.parquet" for i in range(3)]
    assert sorted(p.name for p in out.iterdir()) == sorted([*names, *(n + ".ldp.json" for n in names)])
