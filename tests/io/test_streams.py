"""`-` for standard input and output, and Arrow IPC stream files (.arrows), through real pipes."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet  # noqa: F401 - pa.parquet below
import pytest
from helpers import ledger_document, unit_rows

from ldpcli.analysis._estimate import estimate_file_mean
from ldpcli.io._atomic import file_sha256
from ldpcli.io._streams import spool_stdin
from ldpcli.release._file import write_file_release
from ldpcli.release._options import Columns, ReleaseOptions


def arrow_stream(rows: np.ndarray, ids: bool = True) -> bytes:
    columns = {"id": pa.array(np.arange(len(rows)))} if ids else {}
    table = pa.table({**columns, "vec": pa.FixedSizeListArray.from_arrays(pa.array(rows.ravel()), rows.shape[1])})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=250):
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def ldp_pipe(args: list[str], data: bytes, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    env_ledger = {"LDP_LEDGER": str(tmp_path / "ledger.json")}
    return subprocess.run([sys.executable, "-m", "ldpcli.cli.app", *args], input=data, capture_output=True,
                          env={**os.environ, **env_ledger}, check=False, timeout=120)


@pytest.mark.slow
def test_arrow_stream_through_a_pipe_is_the_file_run_byte_for_byte(tmp_path: Path) -> None:
    data = arrow_stream(unit_rows(1000, 6, seed=1))
    side = tmp_path / "release.ldp.json"
    run = ldp_pipe(["privatize", "-", "--eps", "3", "--keep", "id", "--seed", "9", "-o", "-", "--sidecar", str(side)],
                   data, tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout[:4] == b"\xff\xff\xff\xff"  # an Arrow IPC stream, nothing else, on stdout
    assert b"wrote 1000 rows (d = 6) to stdout and the sidecar" in run.stderr
    piped = tmp_path / "piped.arrows"
    piped.write_bytes(run.stdout)
    content = json.loads(side.read_text())
    assert content["data"]["format"] == "arrow" and content["data"]["sha256"] == file_sha256(piped)
    # The same bytes as a file, with the same seed: the same output (the key is the input's bytes).
    source = tmp_path / "input.arrows"
    source.write_bytes(data)
    as_file = write_file_release(source, tmp_path / "file.arrows", epsilon=3.0, options=ReleaseOptions(columns=Columns(keep=["id"]), seed=9))
    assert as_file.output.read_bytes() == run.stdout
    estimate = estimate_file_mean(piped, sidecar=side)
    assert estimate.n == 1000 and estimate.verified


@pytest.mark.slow
def test_csv_through_a_pipe_stays_csv(tmp_path: Path) -> None:
    rows = unit_rows(300, 3, seed=2)
    text = "a,b,c\n" + "".join(",".join(repr(float(v)) for v in row) + "\n" for row in rows)
    side = tmp_path / "s.json"
    run = ldp_pipe(["privatize", "-", "--eps", "2", "-o", "-", "--sidecar", str(side)], text.encode(), tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.decode().splitlines()
    assert lines[0] == '"a","b","c"' and len(lines) == 301
    assert json.loads(side.read_text())["data"]["format"] == "csv"


@pytest.mark.parametrize("data, name", [(b"a,b\n1,2\n", "stdin.csv"), (arrow_stream(np.eye(3)), "stdin.arrows")])
def test_the_spool_is_read_by_its_suffixed_path_and_has_no_name_of_its_own(
    tmp_path: Path, data: bytes, name: str
) -> None:
    with spool_stdin(tmp_path, io.BytesIO(data)) as path:
        assert path.name == name and path.read_bytes() == data
        if sys.platform.startswith("linux"):  # a link to the open, unlinked copy: no regular file anywhere
            assert path.is_symlink() and [p for p in tmp_path.iterdir() if not p.is_symlink()] == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_kill_9_leaves_no_copy_of_standard_input(tmp_path: Path) -> None:
    """The spooled raw input has no name: a run killed outright leaves none of its bytes on disk.

    Nothing reads the run's stdout, so it blocks in copying its output there: by then the whole input
    was spooled and privatized, and the spool is still open."""
    data = arrow_stream(unit_rows(100_000, 32, seed=6))  # about 26 MB
    spool_dir = tmp_path / "tmp"
    spool_dir.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ldpcli.cli.app", "privatize", "-", "--eps", "1", "-o", "-", "--sidecar",
         str(tmp_path / "s.json")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(spool_dir), "LDP_LEDGER": str(tmp_path / "ledger.json")},
    )
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None and stdout is not None

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError), stdin:
            stdin.write(data)

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        assert stdout.read(4) == b"\xff\xff\xff\xff"  # the output is going down the pipe
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        feeder.join(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert [p.name for p in spool_dir.iterdir()][0].startswith("ldp-stdio-")  # the run did spool here
    sample = data[len(data) // 2:len(data) // 2 + 4096]  # raw vector values from the middle of the input
    for folder, _, names in os.walk(spool_dir):
        for name in names:
            path = Path(folder, name)
            assert path.is_symlink() or sample not in path.read_bytes(), f"{path} holds the raw input"


@pytest.mark.parametrize("args, fragment", [
    (["privatize", "-", "--eps", "1"], "- reads standard input: give the output with -o FILE, or -o - for"),
    (["privatize", "-", "--eps", "1", "-o", "-"], "-o - writes the rows to standard output: give --sidecar PATH"),
    (["privatize", "-", "--eps", "1", "-o", "-", "--sidecar", "s.json", "--json"], "--json cannot print there"),
    (["privatize", "-", "x.parquet", "--eps", "1", "-o", "out/"], "- (standard input) must be the only INPUT"),
    (["privatize", "x.parquet", "--eps", "1", "--sidecar", "s.json"], "--sidecar is for -o -"),
])
def test_stream_options_are_checked(tmp_path: Path, args: list[str], fragment: str) -> None:
    run = ldp_pipe(args, b"", tmp_path)
    assert run.returncode == 2 and fragment in run.stderr.decode() and run.stdout == b""


def test_empty_stdin_is_a_data_error(tmp_path: Path) -> None:
    run = ldp_pipe(["privatize", "-", "--eps", "1", "-o", str(tmp_path / "o.parquet")], b"", tmp_path)
    assert run.returncode == 1 and "standard input is empty" in run.stderr.decode()
    assert not (tmp_path / "o.parquet").exists()


def test_a_parquet_file_on_stdin_is_named_and_refused(tmp_path: Path) -> None:
    """Parquet piped into - is recognised by its magic bytes, not read as CSV; the message names
    <stdin> and what standard input takes, never the spool's temporary path."""
    buffer = pa.BufferOutputStream()
    pa.parquet.write_table(pa.table({"a": [0.1, 0.2], "b": [0.3, 0.4]}), buffer)
    out = tmp_path / "o.parquet"
    run = ldp_pipe(["privatize", "-", "--eps", "1", "-o", str(out)], buffer.getvalue().to_pybytes(), tmp_path)
    text = run.stderr.decode()
    assert run.returncode == 1 and text.count("\n") == 1, text
    assert "<stdin>: standard input holds a Parquet file" in text and "Arrow IPC stream or CSV text" in text
    assert "path instead of -" in text and "CSV file" not in text and "ldp-stdio-" not in text
    assert not out.exists()


def test_an_error_about_stdin_names_stdin_not_the_spool(tmp_path: Path) -> None:
    run = ldp_pipe(["privatize", "-", "--eps", "1", "-o", "-", "--sidecar", str(tmp_path / "s.json")],
                   b"a,b\n1,2,3\n", tmp_path)
    text = run.stderr.decode()
    assert run.returncode == 1 and text.startswith("ldp: error: <stdin>: not a valid CSV file"), text
    assert "ldp-stdio-" not in text and "stdin.csv" not in text and run.stdout == b""


def npy_bytes() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.eye(3))
    return buffer.getvalue()


def arrow_file_bytes() -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, pa.schema([("a", pa.float64())])) as writer:
        writer.write_table(pa.table({"a": [1.0]}))
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("data, kind", [(npy_bytes(), "an .npy file"), (arrow_file_bytes(), "an Arrow IPC file")])
def test_other_binary_files_on_stdin_are_refused_before_spooling(tmp_path: Path, data: bytes, kind: str) -> None:
    from ldpcli.errors import DataError

    with pytest.raises(DataError, match=f"<stdin>: standard input holds {kind}, but ldp reads only an Arrow IPC"):
        with spool_stdin(tmp_path, io.BytesIO(data)):
            pass
    assert list(tmp_path.iterdir()) == []


def test_arrow_stream_files_round_trip_with_kept_columns(tmp_path: Path) -> None:
    source = tmp_path / "x.arrows"
    source.write_bytes(arrow_stream(unit_rows(700, 4, seed=3)))
    result = write_file_release(source, epsilon=2.0, options=ReleaseOptions(columns=Columns(keep=["id"])))
    assert result.output.name == "x.privatized.arrows" and result.n == 700
    with pa.ipc.open_stream(pa.memory_map(str(result.output))) as reader:
        table = reader.read_all()
    assert table.column_names == ["id", "vec"] and table.column("id").to_pylist() == list(range(700))
    assert estimate_file_mean(result.output).n == 700


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
def test_npy_in_and_out(tmp_path: Path, dtype: type) -> None:
    rows = unit_rows(900, 5, seed=4)
    values = (rows * 1000).astype(dtype) if np.issubdtype(dtype, np.integer) else rows.astype(dtype)
    np.save(tmp_path / "x.npy", values)
    result = write_file_release(tmp_path / "x.npy", epsilon=2.0, norm_bound=1000.0 if dtype is np.int16 else 1.0, options=ReleaseOptions(seed=1))
    out = np.load(result.output)
    assert result.output.name == "x.privatized.npy" and out.shape == (900, 5)
    assert out.dtype == (np.float32 if dtype is np.float32 else np.float64)
    # The same values as the Parquet output of the same input and seed (only the container differs).
    parquet = write_file_release(tmp_path / "x.npy", tmp_path / "x.parquet", epsilon=2.0, norm_bound=1000.0 if dtype is np.int16 else 1.0, options=ReleaseOptions(seed=1))
    column = pa.parquet.read_table(parquet.output).column("vector").combine_chunks()
    np.testing.assert_array_equal(np.asarray(column.flatten()).reshape(900, 5), out)
    assert estimate_file_mean(result.output).n == 900


def test_npy_output_of_a_csv_input_reads_back_with_its_sidecar(tmp_path: Path) -> None:
    rows = unit_rows(200, 3, seed=5)
    (tmp_path / "x.csv").write_text("a,b,c\n" + "".join(",".join(repr(float(v)) for v in r) + "\n" for r in rows))
    result = write_file_release(tmp_path / "x.csv", tmp_path / "x.npy", epsilon=2.0)
    assert np.load(result.output).shape == (200, 3)
    assert estimate_file_mean(result.output).n == 200


@pytest.mark.parametrize("array, fragment", [
    (np.zeros(5), "holds a 1-D array of shape (5,); ldp reads a 2-D array"),
    (np.zeros((0, 3)), "no rows"),
    (np.array([["a", "b"]]), "holds values of type <U1; vectors must be real numbers"),
])
def test_bad_npy_inputs(tmp_path: Path, array: np.ndarray, fragment: str) -> None:
    from ldpcli.errors import DataError

    np.save(tmp_path / "x.npy", array)
    with pytest.raises(DataError) as caught:
        write_file_release(tmp_path / "x.npy", epsilon=1.0)
    assert fragment in str(caught.value)


def test_npy_output_refuses_kept_columns(tmp_path: Path) -> None:
    from helpers import write_list

    from ldpcli.errors import UsageError

    write_list(tmp_path / "x.parquet", unit_rows(10, 3), ids=True)
    with pytest.raises(UsageError, match="an .npy file holds only the vectors; leave out keep or write Parquet"):
        write_file_release(tmp_path / "x.parquet", tmp_path / "x.npy", epsilon=1.0, options=ReleaseOptions(columns=Columns(keep=["id"])))
    assert not (tmp_path / "x.npy").exists()


@pytest.mark.slow
def test_a_pipe_release_is_recorded_under_stable_names(tmp_path: Path) -> None:
    """The ledger names a pipe release <stdin> and <stdout> (with its sidecar), not the spool's temporary paths."""
    data = arrow_stream(unit_rows(200, 4, seed=3))
    side = tmp_path / "release.ldp.json"
    run = ldp_pipe(["privatize", "-", "--eps", "1", "--keep", "id", "-o", "-", "--sidecar", str(side)], data, tmp_path)
    assert run.returncode == 0, run.stderr
    (entry,) = ledger_document((tmp_path / "ledger.json"))["entries"]
    assert entry["input"] == "<stdin>"
    assert entry["output"] == f"<stdout> (sidecar {side.resolve()})"
    again = ldp_pipe(["privatize", "-", "--eps", "1", "--keep", "id", "-o", "-", "--sidecar", str(tmp_path / "b.json")],
                     data, tmp_path)
    assert b"<stdin> was already released 1 time (" in again.stderr


@pytest.mark.slow
def test_a_run_killed_while_reading_stdin_leaves_nothing_after_the_next_run(tmp_path: Path) -> None:
    """Issue 36: a stdin run killed outright left an empty ``ldp-stdio-*`` folder (with a dangling link)
    that nothing removed. Its folder names its host and pid, so the next stdin run removes it; folders
    of live processes, and of other hosts, are kept."""
    from ldpcli.io._atomic import HOST_TAG

    spool_dir = tmp_path / "tmp"
    spool_dir.mkdir()
    env = {**os.environ, "TMPDIR": str(spool_dir), "LDP_LEDGER": str(tmp_path / "ledger.json")}
    data = arrow_stream(unit_rows(2_000, 8, seed=3))
    proc = subprocess.Popen(
        [sys.executable, "-m", "ldpcli", "privatize", "-", "--eps", "1", "-o", str(tmp_path / "out.arrows")],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    assert proc.stdin is not None
    proc.stdin.write(data[:len(data) // 2])  # stdin stays open: the run is still reading it
    proc.stdin.flush()
    try:
        for _ in range(6000):  # until the spool's link exists (the run is copying stdin), 60 s at most
            if any(folder.is_dir() and any(folder.iterdir()) for folder in spool_dir.iterdir()):
                break
            proc.poll()
            assert proc.returncode is None, "the run ended before it was killed"
            threading.Event().wait(0.01)
        else:
            pytest.fail("the run never spooled stdin")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()
    assert proc.returncode == -signal.SIGKILL
    assert [p.name for p in spool_dir.iterdir()][0].startswith("ldp-stdio-")  # the dead run's folder was left
    live = spool_dir / f"ldp-stdio-{HOST_TAG}-{os.getpid()}-kept"  # this test's own pid: alive
    other_host = spool_dir / f"ldp-stdio-{'0' * 6 if HOST_TAG != '0' * 6 else '1' * 6}-{proc.pid}-kept"
    live.mkdir()
    other_host.mkdir()

    done = subprocess.run([sys.executable, "-m", "ldpcli", "privatize", "-", "--eps", "1", "-o",
                           str(tmp_path / "again.arrows")], input=data, capture_output=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in spool_dir.iterdir()) == sorted([live.name, other_host.name])
