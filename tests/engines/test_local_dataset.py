"""The local engine's dataset directory (issue 27 item 1): `-o DIR/` writes part files on threads.

Each part is read, privatized, encoded and written by one thread of a pool, so parts are written
at once instead of through one writer. Keyed randomness makes the values independent of the thread
count, the layout (one file or parts) and the engine: these tests compare them bit for bit. The
Dask comparison skips where Dask is not installed; every other test runs without it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
from helpers import LDP, ROOT, ldp, read_list, unit_rows, write_list

from ldpcli.errors import DataError
from ldpcli.release import _dataset as partitioned
from ldpcli.release._dataset import PartResult, PartTask, write_dataset_release
from ldpcli.release._engines import DaskEngine
from ldpcli.release._file import write_file_release
from ldpcli.release._inputs import MANIFEST_NAME
from ldpcli.release._options import ReleaseOptions, Resources

D = 16  # key blocks of 512 rows


@pytest.fixture
def inputs(tmp_path: Path) -> list[Path]:
    raw = tmp_path / "raw"
    raw.mkdir()
    paths = [raw / "a.parquet", raw / "b.parquet"]
    for path, n, seed in zip(paths, (4100, 1500), (1, 2)):
        write_list(path, unit_rows(n, D, seed=seed), row_group_size=700)
    return paths


def input_values(out: Path, input_index: int) -> np.ndarray:
    """The privatized rows of one input: its parts concatenated in the manifest's order."""
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    return np.concatenate([read_list(out / p["file"]) for p in manifest["parts"] if p["input"] == input_index])


def test_parts_are_the_same_bits_whatever_the_threads_the_layout_and_the_engine(
    inputs: list[Path], tmp_path: Path
) -> None:
    runs = {}
    for threads in (1, 2, 4):
        out = tmp_path / f"threads{threads}"
        write_dataset_release(inputs, out, engine=None, epsilon=4.0,
                          options=ReleaseOptions(seed=9, resources=Resources(threads=threads)))
        runs[threads] = out
    parts = json.loads((runs[1] / MANIFEST_NAME).read_text())["parts"]
    assert len(parts) == 8  # row groups at 0, 700, 1400, …, each start rounded up to a block of 512 rows: a 6, b 2
    for index, source in enumerate(inputs):
        single = write_file_release(source, tmp_path / f"single{index}.parquet", epsilon=4.0,
                                options=ReleaseOptions(seed=9, resources=Resources(threads=3)))
        reference = read_list(single.output)
        for threads, out in runs.items():
            assert np.array_equal(input_values(out, index), reference), f"threads {threads}, input {index}"
    if importlib.util.find_spec("dask") is not None:  # the Dask engine's parts: the same files, byte for byte
        write_dataset_release(inputs, tmp_path / "dask", engine=DaskEngine("threads"), epsilon=4.0,
                          options=ReleaseOptions(seed=9))
        for part in parts:
            assert (tmp_path / "dask" / part["file"]).read_bytes() == (runs[4] / part["file"]).read_bytes()


def test_the_cli_writes_a_dataset_directory_for_a_directory_and_files_on_request(
    inputs: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "release"
    result = ldp("privatize", *inputs, "--eps", 4, "--seed", 9, "-o", f"{out}/", "--threads", 2, "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["n"] == 5600 and len(summary["parts"]) == 8 and summary["engine"] == {"name": "local"}
    estimated = ldp("estimate-mean", f"{out}/", "--json")
    assert estimated.exit_code == 0, estimated.stderr
    assert json.loads(estimated.stdout)["n"] == 5600
    files = tmp_path / "files"
    result = ldp("privatize", *inputs, "--eps", 4, "--seed", 9, "-o", f"{files}/", "--layout", "files", "-q")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in files.iterdir()) == ["a.privatized.parquet", "a.privatized.parquet.ldp.json",
                                                       "b.privatized.parquet", "b.privatized.parquet.ldp.json"]
    assert np.array_equal(read_list(files / "b.privatized.parquet"), input_values(out, 1))
    parted = ldp("privatize", inputs[0], "--eps", 4, "-o", f"{tmp_path / 'parted'}/", "--part-rows", 2000, "--json")
    assert parted.exit_code == 0, parted.stderr
    assert len(json.loads(parted.stdout)["parts"]) == 3


def test_an_existing_plain_directory_needs_layout_files(inputs: list[Path], tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    refused = ldp("privatize", inputs[0], "--eps", 1, "-o", plain)
    assert refused.exit_code == 2 and "is an existing directory that holds no ldp dataset" in refused.stderr
    assert "--layout files to write one file per input into it" in refused.stderr and not list(plain.iterdir())
    assert ldp("privatize", inputs[0], "--eps", 1, "-o", plain, "--layout", "files", "-q").exit_code == 0
    assert sorted(p.name for p in plain.iterdir()) == ["a.privatized.parquet", "a.privatized.parquet.ldp.json"]


@pytest.mark.parametrize("args, fragment", [
    (["-o", "{out}/", "--copies", "2"], "--copies is not available with the dataset layout of -o DIR/; add --layout files"),
    (["--layout", "dataset"], "--layout dataset writes a dataset directory: give it with -o DIR/"),
    (["-o", "{out}/", "--layout", "parts"], "--layout 'parts': use dataset or files"),
    (["-o", "{out}/", "--layout", "files", "--engine", "dask"], "--engine dask writes the dataset layout"),
    (["-o", "{out}/", "--layout", "files", "--part-rows", "100"], "--part-rows sets the parts of --engine dask and of "
     "a dataset directory"),
])
def test_layout_options_are_checked(inputs: list[Path], tmp_path: Path, args: list[str], fragment: str) -> None:
    result = ldp("privatize", inputs[0], "--eps", 1, *(arg.format(out=tmp_path / "out") for arg in args))
    assert result.exit_code == 2 and fragment in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()


def test_parts_are_written_at_once_on_several_threads(inputs: list[Path], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The first two parts each wait for the other before they start: one thread alone would never
    get past the barrier (it breaks after its timeout, and the run fails)."""
    barrier = threading.Barrier(2, timeout=60)
    workers: set[str] = set()
    original = partitioned.privatize_part

    def meeting(task: PartTask) -> PartResult:
        if task.index < 2:
            barrier.wait()
        workers.add(threading.current_thread().name)
        return original(task)

    monkeypatch.setattr(partitioned, "privatize_part", meeting)
    result = write_dataset_release(inputs, tmp_path / "release", engine=None, epsilon=4.0,
                               options=ReleaseOptions(resources=Resources(threads=2)))
    assert result.n == 5600 and len(workers) == 2


@pytest.mark.parametrize("threads, share", [(1, 8), (4, 8), (16, 16)])
def test_each_part_gets_its_share_of_the_memory_budget(inputs: list[Path], tmp_path: Path, threads: int, share: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    budgets: list[int] = []
    original = partitioned.privatize_part

    def recording(task: PartTask) -> PartResult:
        budgets.append(task.memory)
        return original(task)

    monkeypatch.setattr(partitioned, "privatize_part", recording)
    memory = 2**26
    write_dataset_release(inputs, tmp_path / "release", engine=None, epsilon=4.0,
                      options=ReleaseOptions(resources=Resources(threads=threads, memory=memory)))
    assert budgets == [memory // share] * 8


def test_a_failing_part_on_several_threads_leaves_nothing(inputs: list[Path], tmp_path: Path) -> None:
    bad = unit_rows(1500, D, seed=2)
    bad[1234, 5] = np.inf
    write_list(inputs[1], bad, row_group_size=700)
    with pytest.raises(DataError, match=r"b\.parquet.*row 1235"):
        write_dataset_release(inputs, tmp_path / "release", engine=None, epsilon=4.0,
                          options=ReleaseOptions(resources=Resources(threads=4)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]


def test_a_large_row_group_is_cut_into_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One row group of 4100 rows, with parts capped at 1024 rows (64 KB of vectors here, 64 MB in use):
    parts at every second key block, and the same bits as one file."""
    source = tmp_path / "one.parquet"
    write_list(source, unit_rows(4100, D, seed=3), row_group_size=10_000)
    monkeypatch.setattr(partitioned, "_MAX_PART_BYTES", 8 * D * 1024)
    result = write_dataset_release(source, tmp_path / "release", engine=None, epsilon=2.0,
                               options=ReleaseOptions(seed=4, resources=Resources(threads=2)))
    manifest = json.loads((tmp_path / "release" / MANIFEST_NAME).read_text())
    assert [p["rows"] for p in manifest["parts"]] == [1024, 1024, 1024, 1024, 4] and result.n == 4100
    single = write_file_release(source, tmp_path / "single.parquet", epsilon=2.0, options=ReleaseOptions(seed=4))
    assert np.array_equal(input_values(tmp_path / "release", 0), read_list(single.output))


@pytest.mark.slow
def test_more_parts_than_open_files_allow_fall_back_to_the_named_staging(tmp_path: Path) -> None:
    """Each part without a name stays open until the commit: past the soft RLIMIT_NOFILE (less 64 spare),
    raised to the hard limit where it can be, the parts are named in the staging directory as before,
    so a release of many parts under a low limit still succeeds (here 120 parts under 100 descriptors)."""
    src = tmp_path / "in.parquet"
    write_list(src, unit_rows(120 * 512, 4, seed=2))
    out = tmp_path / "release"
    done = subprocess.run(["bash", "-c", 'ulimit -n 100 && exec "$@"', "bash", LDP, "privatize", str(src), "--eps", "1",
                           "-o", f"{out}/", "--part-rows", "512", "--threads", "1", "-q"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert len(json.loads((out / MANIFEST_NAME).read_text())["parts"]) == 120
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet", "release"]


@pytest.mark.parametrize("soft, hard, parts, raised, anonymous", [
    (1024, 1024, 900, 1024, True), (1024, 1024, 961, 1024, False), (1024, 4096, 2000, 4096, True),
    (1024, 4096, 4033, 4096, False),
])
def test_the_open_file_limit_is_raised_to_the_hard_limit_before_the_parts_fall_back_to_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, soft: int, hard: int, parts: int, raised: int, anonymous: bool
) -> None:
    limits = [soft, hard]

    def setrlimit(which: int, values: tuple[int, int]) -> None:
        limits[:] = values

    monkeypatch.setattr(partitioned.resource, "getrlimit", lambda which: tuple(limits))
    monkeypatch.setattr(partitioned.resource, "setrlimit", setrlimit)
    assert partitioned._anonymous_parts(tmp_path, parts) is anonymous
    assert limits == [raised if parts > soft - 64 else soft, hard]
