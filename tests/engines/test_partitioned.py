"""The dataset engine: inputs cut into key-block-aligned parts, one task each, on any engine.

The tests that need Dask skip where it is not installed (``pip install 'ldp[dask]'``); .ci/run runs
this file again after installing it, so every test here runs in CI. Everything else (the parts, the
manifest, the bit-for-bit agreement with the local engine, the failures) runs without Dask through
the in-process engine.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import ldp, unit_rows

from ldpcli.analysis._estimate import estimate_file_mean
from ldpcli.errors import DataError, MissingDependency
from ldpcli.io._atomic import file_sha256
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._engines import DaskEngine, make_engine
from ldpcli.release._file import write_file_release
from ldpcli.release._inputs import MANIFEST_NAME
from ldpcli.release._ledger import Ledger
from ldpcli.release._options import Budget, ReleaseOptions

needs_dask = pytest.mark.skipif(importlib.util.find_spec("dask") is None, reason="pip install 'ldp[dask]'")
D = 16  # key blocks of 512 rows


def write(path: Path, rows: np.ndarray, row_group_size: int = 1000) -> Path:
    flat = pa.array(np.ascontiguousarray(rows).reshape(-1))
    pq.write_table(pa.table({"vec": pa.FixedSizeListArray.from_arrays(flat, rows.shape[1])}), path,
                   row_group_size=row_group_size)
    return path


@pytest.fixture
def inputs(tmp_path: Path) -> list[Path]:
    raw = tmp_path / "raw"
    raw.mkdir()
    return [write(raw / "a.parquet", unit_rows(4600, D, seed=1)), write(raw / "b.parquet", unit_rows(1300, D, seed=2))]


def part_values(out: Path, input_index: int) -> np.ndarray:
    """The privatized rows of one input, from its parts in the manifest's order."""
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    parts = [p for p in manifest["parts"] if p["input"] == input_index]
    return np.concatenate([read_values(out / p["file"]) for p in parts])


def read_values(path: Path) -> np.ndarray:
    column = pq.read_table(path).column("vec").combine_chunks()
    return np.asarray(column.flatten()).reshape(len(column), -1)


def test_parts_follow_row_groups_on_key_block_boundaries_and_equal_the_local_output(
    inputs: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "release"
    result = write_dataset_release(inputs, out, engine=None, epsilon=4.0, options=ReleaseOptions(seed=11))
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    # Row groups start at 0, 1000, 2000, …: rounded up to blocks of 512 rows.
    assert [(p["file"], p["input"], p["rows"]) for p in manifest["parts"]] == [
        (f"part-0000{i}.parquet", source, rows)
        for i, (source, rows) in enumerate([(0, 1024), (0, 1024), (0, 1024), (0, 1024), (0, 504), (1, 1024), (1, 276)])]
    assert manifest["rows"] == result.n == 5900 and manifest["inputs"] == 2
    for part in manifest["parts"]:
        assert file_sha256(out / part["file"]) == part["sha256"]
        side = json.loads((out / (part["file"] + ".ldp.json")).read_text())
        assert side["release"]["part"] == {"dataset": manifest["dataset"], "index": int(part["file"][5:10]),
                                           "input": part["input"], "parts": 7}
        assert side["data"]["n"] == part["rows"] and side["data"]["sha256"] == part["sha256"]
    for index, source in enumerate(inputs):
        alone = write_file_release(source, tmp_path / f"local{index}.parquet", epsilon=4.0, options=ReleaseOptions(seed=11))
        assert np.array_equal(part_values(out, index), read_values(alone.output))  # bit for bit
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local0.parquet", "local0.parquet.ldp.json",
                                                          "local1.parquet", "local1.parquet.ldp.json", "raw", "release"]


def test_part_rows_and_the_estimate_from_the_directory(inputs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "release"
    write_dataset_release(inputs, out, engine=None, epsilon=4.0, options=ReleaseOptions(seed=5), part_rows=2000)
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert [(p["input"], p["rows"]) for p in manifest["parts"]] == [(0, 2048), (0, 2048), (0, 504), (1, 1300)]
    whole = estimate_file_mean(out)
    assert whole.n == 5900
    listed = estimate_file_mean([out / p["file"] for p in manifest["parts"]])
    assert np.array_equal(whole.mean, listed.mean)


def test_a_dataset_directory_is_bound_by_its_manifest(inputs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "release"
    write_dataset_release(inputs, out, engine=None, epsilon=4.0, options=ReleaseOptions(budget=Budget(ledger=Ledger.open(tmp_path / "ledger.json"))))
    # The parts of one input share its tag: they are one release, not two.
    assert estimate_file_mean(out).n == 5900
    _copy(out / "part-00001.parquet", out / "copy.parquet")  # the same part again, under another name
    with pytest.raises(DataError, match="are the same part of one dataset"):
        estimate_file_mean([out / "part-00001.parquet", out / "part-00002.parquet", out / "copy.parquet"])
    (out / "copy.parquet").unlink()
    (out / "copy.parquet.ldp.json").unlink()
    (out / "part-00003.parquet").unlink()
    with pytest.raises(DataError, match=r"its manifest lists the part part-00003\.parquet but there is no such file"):
        estimate_file_mean(out)


def _copy(source: Path, target: Path) -> None:
    """A part file and its sidecar under another name (the sidecar's data.file renamed with it)."""
    target.write_bytes(source.read_bytes())
    (target.parent / (target.name + ".ldp.json")).write_text(
        (source.parent / (source.name + ".ldp.json")).read_text().replace(source.name, target.name))


def test_a_failing_part_leaves_no_directory_and_no_staging(inputs: list[Path], tmp_path: Path) -> None:
    bad = unit_rows(1300, D, seed=2)
    bad[1100, 3] = np.nan
    write(inputs[1], bad)
    with pytest.raises(DataError, match=r"b\.parquet.*row 1101"):
        write_dataset_release(inputs, tmp_path / "release", engine=None, epsilon=4.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]


def test_the_budget_is_checked_before_anything_is_published(inputs: list[Path], tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "ledger.json")
    write_file_release(inputs[1], tmp_path / "earlier.parquet", epsilon=4.0, options=ReleaseOptions(budget=Budget(ledger=ledger)))
    with pytest.raises(DataError, match="budget"):
        write_dataset_release(inputs, tmp_path / "release", engine=None, epsilon=4.0, options=ReleaseOptions(budget=Budget(ledger=ledger, max_budget=6.0)))
    assert not (tmp_path / "release").exists() and not list(tmp_path.glob(".release.*"))
    write_dataset_release(inputs, tmp_path / "release", engine=None, epsilon=1.0, options=ReleaseOptions(budget=Budget(ledger=ledger, max_budget=6.0)))
    assert [entry.epsilon for entry in ledger.entries] == [4.0, 1.0, 1.0]


@pytest.mark.parametrize("args, fragment", [
    (["--engine", "spark"], "--engine 'spark': use one of local, dask"),
    (["--scheduler", "threads"], "--scheduler chooses where Dask runs; it needs --engine dask"),
    (["--part-rows", "100"], "--part-rows sets the parts of --engine dask"),
])
def test_engine_options_are_checked(inputs: list[Path], args: list[str], fragment: str) -> None:
    result = ldp("privatize", inputs[0], "--eps", 1, *args)
    assert result.exit_code == 2 and fragment in result.stderr


def test_without_dask_the_engine_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingDependency, match=r"engine dask needs Dask: pip install 'ldp\[dask\]'"):
        make_engine("dask")


@pytest.mark.slow
@needs_dask
def test_dask_threads_synchronous_processes_and_a_two_worker_cluster_write_the_same_bytes(
    inputs: list[Path], tmp_path: Path
) -> None:
    from distributed import LocalCluster

    runs = {"local": None, "threads": DaskEngine("threads"), "synchronous": DaskEngine("synchronous"),
            "processes": DaskEngine("processes")}
    for name, engine in runs.items():
        write_dataset_release(inputs, tmp_path / name, engine=engine, epsilon=4.0, options=ReleaseOptions(seed=3))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        write_dataset_release(inputs, tmp_path / "cluster", engine=DaskEngine(cluster.scheduler_address), epsilon=4.0, options=ReleaseOptions(seed=3))
        cluster_mean = estimate_file_mean(tmp_path / "cluster", engine=DaskEngine(cluster.scheduler_address))
    names = sorted(p.name for p in (tmp_path / "local").glob("part-*.parquet"))
    assert len(names) == 7
    for name in names:
        reference = (tmp_path / "local" / name).read_bytes()
        for run in ("threads", "synchronous", "processes", "cluster"):
            assert (tmp_path / run / name).read_bytes() == reference, f"{run}/{name}"
    local_mean = estimate_file_mean(tmp_path / "local")
    assert cluster_mean.n == local_mean.n == 5900
    np.testing.assert_allclose(cluster_mean.mean, local_mean.mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(cluster_mean.std_error, local_mean.std_error, rtol=1e-10)


@needs_dask
def test_cli_dask_engine_end_to_end(inputs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "release"
    assert "give it with -o DIR/" in ldp("privatize", *inputs, "--eps", 2, "--engine", "dask").stderr
    assert "--copies is not available with --engine dask" in ldp(
        "privatize", *inputs, "--eps", 2, "--engine", "dask", "-o", f"{out}/", "--copies", 2).stderr
    result = ldp("privatize", inputs[0].parent, "--eps", 2, "--engine", "dask", "--scheduler", "synchronous",
                 "-o", f"{out}/", "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["n"] == 5900 and len(summary["parts"]) == 7 and summary["engine"] == {
        "name": "dask", "scheduler": "synchronous"}
    estimated = ldp("estimate-mean", out, "--engine", "dask", "--json")
    assert estimated.exit_code == 0, estimated.stderr
    local = ldp("estimate-mean", out, "--json")
    assert json.loads(estimated.stdout)["n"] == json.loads(local.stdout)["n"] == 5900
    np.testing.assert_allclose(json.loads(estimated.stdout)["mean"], json.loads(local.stdout)["mean"], atol=1e-12)


def test_an_unseeded_run_sends_no_entropy_to_its_tasks(inputs: list[Path], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import ldpcli.release._dataset as partitioned

    sent: list[partitioned.PartTask] = []

    def recording(engine: object, fn: object, items: list[partitioned.PartTask]) -> list[object]:
        sent.extend(items)
        return [partitioned.privatize_part(item) for item in items]

    monkeypatch.setattr(partitioned, "run_all", recording)
    write_dataset_release(inputs, tmp_path / "a", engine=None, epsilon=4.0)
    write_dataset_release(inputs, tmp_path / "b", engine=None, epsilon=4.0)
    assert len(sent) == 14 and all(task.entropy is None for task in sent)
    assert not np.array_equal(part_values(tmp_path / "a", 0), part_values(tmp_path / "b", 0))  # fresh noise
    sent.clear()
    write_dataset_release(inputs, tmp_path / "c", engine=None, epsilon=4.0, options=ReleaseOptions(seed=1))
    assert all(task.entropy is not None for task in sent)


def _descendants(pid: int) -> dict[int, str]:
    """The processes below ``pid`` now, each with its start time (so that a reused pid is not taken for it)."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stats[int(entry.name)] = (entry / "stat").read_text()
            except OSError:  # ended meanwhile
                continue
    # After the command's closing parenthesis: state, ppid, ..., start time (field 22 of proc(5)).
    fields = {child: text[text.rindex(")") + 2:].split() for child, text in stats.items()}
    found: dict[int, str] = {}
    parents = [pid]
    while parents:
        parent = parents.pop()
        for child, values in fields.items():
            if int(values[1]) == parent and child not in found:
                found[child] = values[19]
                parents.append(child)
    return found


def _running(pid: int, started: str) -> bool:
    """Whether the process ``pid`` that started at ``started`` still runs (a zombie does not)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    values = text[text.rindex(")") + 2:].split()
    return values[19] == started and values[0] not in ("Z", "X")


@pytest.mark.slow
@needs_dask
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")
def test_dask_process_workers_end_with_a_killed_driver(tmp_path: Path) -> None:
    """kill -9 of ldp while its Dask ``processes`` workers write parts: the workers end with it and
    write nothing more (before, they outlived the driver and went on writing parts)."""
    import signal
    import subprocess
    import sys
    import time

    source = write(tmp_path / "in.parquet", unit_rows(120_000, 64, seed=7), row_group_size=4096)
    out = tmp_path / "release"
    driver = subprocess.Popen(
        [str(Path(sys.executable).with_name("ldp")), "privatize", str(source), "--eps", "1", "--engine", "dask",
         "--scheduler", "processes", "--part-rows", "1024", "-o", f"{out}/", "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    workers: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 120
        while not any(staging.is_dir() and any(staging.glob("part-*")) for staging in tmp_path.glob(".release.*")):
            assert driver.poll() is None, driver.communicate()
            assert time.monotonic() < deadline, "no part was written"
            time.sleep(0.01)
        workers = _descendants(driver.pid)
        assert workers, "the processes scheduler started no worker process"
        driver.kill()
        driver.wait(timeout=60)
        deadline = time.monotonic() + 30  # a bound on the wait, not a timing claim
        while any(_running(pid, started) for pid, started in workers.items()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid, started in workers.items() if _running(pid, started)] == []
        (staging,) = tmp_path.glob(".release.*")
        written = sorted(p.name for p in staging.iterdir())
        time.sleep(1)
        assert sorted(p.name for p in staging.iterdir()) == written
    finally:
        for pid, started in workers.items():
            if _running(pid, started):
                os.kill(pid, signal.SIGKILL)
