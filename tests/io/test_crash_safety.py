"""Interrupting or failing `privatize` at any point leaves no output, no temporary file, and the
input untouched."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import LDP, files_open_for_writing, unit_rows, write_list

from ldpcli.errors import DataError
from ldpcli.io._atomic import HOST_TAG
from ldpcli.io._faults import NAMED_TEMPORARIES_ENV
from ldpcli.release._file import write_file_release
from ldpcli.release._options import ReleaseOptions, Resources


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def big_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Large enough that privatizing it takes seconds on one thread."""
    path = tmp_path_factory.mktemp("big") / "big.parquet"
    write_list(path, unit_rows(300_000, 100, seed=0))
    return path


@pytest.fixture(scope="module")
def small_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("small") / "small.parquet"
    write_list(path, unit_rows(200, 4, seed=1))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_killing_privatize_mid_run_leaves_nothing(tmp_path: Path, big_input: Path, signum: int, threads: str) -> None:
    src = tmp_path / "in.parquet"
    src.write_bytes(big_input.read_bytes())
    before = digest(src)
    out = tmp_path / "out.parquet"
    proc = subprocess.Popen([LDP, "privatize", str(src), "--eps", "4", "-o", str(out), "--threads", threads,
                             "--memory", "8MB"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    # the data file is being written (the sidecar's temporary file appears only at the very end)
    while not files_open_for_writing(proc.pid, tmp_path):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "privatize never started writing"
        time.sleep(0.005)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]
    assert digest(src) == before


def stopped_mid_write(proc: subprocess.Popen[str], directory: Path) -> int:
    """Wait until ``proc`` has written bytes to its output's temporary in ``directory``, freeze it
    (SIGSTOP) and return those bytes: it is then certainly mid-write, with nothing published."""
    deadline = time.monotonic() + 60
    while not any(files_open_for_writing(proc.pid, directory).values()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "privatize never started writing"
        time.sleep(0.005)
    proc.send_signal(signal.SIGSTOP)
    writing = files_open_for_writing(proc.pid, directory)
    assert len(writing) == 1, writing  # the data file's temporary only: no sidecar yet
    return max(writing.values())


@pytest.mark.slow
@pytest.mark.parametrize("temporaries", ["anonymous", "named"])
def test_kill_9_mid_write_leaves_no_file_and_a_named_temporary_is_swept_by_the_next_run(
    tmp_path: Path, big_input: Path, small_input: Path, monkeypatch: pytest.MonkeyPatch, temporaries: str
) -> None:
    """Issue 36: a run killed outright while it wrote its output left a hidden temporary as large as
    what it had written (617 MB in the report) until the next run in that directory. Now the
    temporary has no name until it is finished, so nothing is left at all; where it must have one
    (no ``O_TMPFILE``: forced here), the next run still sweeps it."""
    if temporaries == "named":
        monkeypatch.setenv(NAMED_TEMPORARIES_ENV, "1")
    src = tmp_path / "in.parquet"
    src.write_bytes(big_input.read_bytes())
    out = tmp_path / "out.parquet"
    proc = subprocess.Popen([LDP, "privatize", str(src), "--eps", "4", "-o", str(out), "--memory", "8MB", "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    written = stopped_mid_write(proc, tmp_path)
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    left = {p.name: p.stat().st_size for p in tmp_path.iterdir() if p.name != "in.parquet"}
    if temporaries == "anonymous":
        assert left == {}, left  # the kernel freed the nameless temporary with the process
        return
    (name, size), = left.items()
    assert name.startswith(f".out.parquet.ldp-{HOST_TAG}-{proc.pid}-") and name.endswith(".tmp")
    assert size >= written > 0
    later = subprocess.run([LDP, "privatize", str(small_input), "--eps", "1", "-o", str(tmp_path / "later.parquet"),
                            "-q"], capture_output=True, text=True, timeout=300)
    assert later.returncode == 0, later.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet", "later.parquet", "later.parquet.ldp.json"]


def stopped_writing_parts(proc: subprocess.Popen[str], directory: Path) -> None:
    """Wait until ``proc`` has written bytes to a part of its dataset, a file without a name in
    ``directory`` or a named one in its staging directory there, and freeze it (SIGSTOP)."""
    deadline = time.monotonic() + 60
    while not any(size > 0 for place in (directory, *directory.glob(".*.tmp"))
                  for size in files_open_for_writing(proc.pid, place).values()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "privatize never started writing its parts"
        time.sleep(0.005)
    proc.send_signal(signal.SIGSTOP)


@pytest.mark.slow
@pytest.mark.parametrize("temporaries", ["anonymous", "named"])
def test_kill_9_of_a_dataset_release_mid_parts_leaves_nothing_and_a_named_staging_is_swept_by_the_next_run(
    tmp_path: Path, big_input: Path, small_input: Path, monkeypatch: pytest.MonkeyPatch, temporaries: str
) -> None:
    """Issue 36: a dataset release (-o DIR/, the local engine) killed outright while it wrote its parts
    left its hidden staging directory, holding every part written so far, until the next run in that
    parent directory. Now each part is a file without a name until the commit, so nothing is left; where
    the parts must have names (no ``O_TMPFILE``: forced here) the next run still sweeps the staging."""
    if temporaries == "named":
        monkeypatch.setenv(NAMED_TEMPORARIES_ENV, "1")
    src = tmp_path / "in.parquet"
    src.write_bytes(big_input.read_bytes())
    proc = subprocess.Popen([LDP, "privatize", str(src), "--eps", "4", "-o", f"{tmp_path / 'out'}/", "--threads", "1",
                             "--memory", "8MB", "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stopped_writing_parts(proc, tmp_path)
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != "in.parquet")
    if temporaries == "anonymous":
        assert left == [], left  # the kernel freed the nameless parts with the process
        return
    (name,) = left
    assert name.startswith(f".out.ldp-{HOST_TAG}-{proc.pid}-") and name.endswith(".tmp")
    assert any(p.stat().st_size > 0 for p in (tmp_path / name).iterdir())  # the parts written so far
    later = subprocess.run([LDP, "privatize", str(small_input), "--eps", "1", "-o", str(tmp_path / "later.parquet"),
                            "-q"], capture_output=True, text=True, timeout=300)
    assert later.returncode == 0, later.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet", "later.parquet", "later.parquet.ldp.json"]


def test_a_bad_row_late_in_the_file_leaves_nothing(tmp_path: Path) -> None:
    """The error is found after several batches were already written to the temporary file."""
    x = np.random.default_rng(1).standard_normal((5000, 6))
    x[4321, 2] = np.nan
    src = tmp_path / "in.parquet"
    write_list(src, x, row_group_size=500)
    before = digest(src)
    with pytest.raises(DataError, match="row 4322"):
        write_file_release(src, tmp_path / "out.parquet", epsilon=1.0, options=ReleaseOptions(resources=Resources(batch_rows=400, threads=2)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]
    assert digest(src) == before


def test_a_failed_sidecar_write_removes_the_data_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ldpcli.release._file as module

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    src = tmp_path / "in.parquet"
    write_list(src, np.eye(4))
    monkeypatch.setattr(module, "finished_text", broken)  # the sidecar is written as a finished temporary
    with pytest.raises(DataError, match="disk full"):  # one line for the command line, saying what was kept
        write_file_release(src, tmp_path / "out.parquet", epsilon=1.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


def test_a_signal_held_back_during_the_rename_still_removes_the_published_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interrupt that fires right after the data's rename (it was held back during it) must not
    leave the published data without its sidecar."""
    import ldpcli.io._publication as io_module
    from ldpcli.errors import Interrupted

    real_publish = io_module._publish

    def publish_then_interrupted(*args: object, **kwargs: object) -> None:
        real_publish(*args, **kwargs)
        if str(args[1]).endswith("out.parquet"):
            raise Interrupted(15)

    src = tmp_path / "in.parquet"
    write_list(src, np.eye(4))
    monkeypatch.setattr(io_module, "_publish", publish_then_interrupted)
    with pytest.raises(Interrupted):
        write_file_release(src, tmp_path / "out.parquet", epsilon=1.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]
