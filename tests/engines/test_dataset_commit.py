"""The dataset engine's commit with real processes: --overwrite replaces only an ldp dataset, two runs
never both publish one directory, and a kill or a failure at any step leaves the old dataset or
the new one, counted (docs/commit-protocol.md; faults through LDP_FAULT, :mod:`ldpcli.io._faults`).

The tests of the CLI's ``--engine dask`` skip without Dask; .ci/run runs this file again with it.
The library tests run the same publication through the in-process engine.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import signal
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import LDP, ldp_process, ledger_document, unit_rows

from ldpcli.errors import UsageError
from ldpcli.io._faults import STEPS
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._inputs import MANIFEST_NAME
from ldpcli.release._ledger import Ledger, Reservation
from ldpcli.release._options import Budget, ReleaseOptions

needs_dask = pytest.mark.skipif(importlib.util.find_spec("dask") is None, reason="pip install 'ldp[dask]'")


def write(path: Path, rows: np.ndarray) -> Path:
    flat = pa.array(np.ascontiguousarray(rows).reshape(-1))
    pq.write_table(pa.table({"vec": pa.FixedSizeListArray.from_arrays(flat, rows.shape[1])}), path,
                   row_group_size=1000)
    return path


def run(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return ldp_process(*args, env=env, timeout=180)


def tree(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` (relative name → SHA-256)."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def dataset_id(directory: Path) -> str:
    return json.loads((directory / MANIFEST_NAME).read_text())["dataset"]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    return write(tmp_path / "input.parquet", unit_rows(3000, 8, seed=4))


@pytest.mark.slow
@needs_dask
def test_overwrite_never_deletes_a_directory_that_is_not_an_ldp_dataset(tmp_path: Path, source: Path) -> None:
    """The probe's case: -o victim/ holding the input, other files, a subdirectory and the ledger."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "notes.txt").write_text("mine")
    (victim / "sub").mkdir()
    (victim / "sub" / "more.txt").write_text("also mine")
    inside = write(victim / "input.parquet", unit_rows(500, 8, seed=5))
    ledger = victim / "ledger.json"
    assert run("privatize", inside, "--eps", "1", "-o", tmp_path / "first.parquet", "--ledger", ledger,
               "-q").returncode == 0
    before = tree(victim)
    for target in (victim, tmp_path):  # the victim itself, and a directory that holds it
        result = run("privatize", inside, "--eps", "1", "--engine", "dask", "-o", f"{target}/", "--overwrite",
                     "--ledger", ledger, "-q")
        assert result.returncode == 2, result.stderr
        assert "--overwrite replaces only a dataset directory written by ldp" in result.stderr
        assert tree(victim) == before
    assert len(ledger_document(ledger)["entries"]) == 1


@pytest.mark.slow
@needs_dask
def test_overwrite_replaces_an_ldp_dataset(tmp_path: Path, source: Path) -> None:
    out = tmp_path / "release"
    ledger = tmp_path / "ledger.json"
    assert run("privatize", source, "--eps", "1", "--engine", "dask", "-o", f"{out}/", "--ledger", ledger,
               "-q").returncode == 0
    old = dataset_id(out)
    assert run("privatize", source, "--eps", "1", "--engine", "dask", "-o", f"{out}/", "--ledger", ledger,
               "-q").returncode == 2  # not without --overwrite
    replaced = run("privatize", source, "--eps", "2", "--engine", "dask", "-o", f"{out}/", "--overwrite",
                   "--ledger", ledger, "-q")
    assert replaced.returncode == 0, replaced.stderr
    assert dataset_id(out) != old
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    (out / "stray.txt").write_text("not part of the dataset")
    refused = run("privatize", source, "--eps", "1", "--engine", "dask", "-o", f"{out}/", "--overwrite",
                  "--ledger", ledger, "-q")
    assert refused.returncode == 2 and "stray.txt" in refused.stderr


@pytest.mark.slow
@needs_dask
def test_two_dask_runs_to_one_directory_publish_one(tmp_path: Path, source: Path) -> None:
    out = tmp_path / "release"
    ledger = tmp_path / "ledger.json"
    runs = [subprocess.Popen([LDP, "privatize", str(source), "--eps", "1", "--engine", "dask", "-o", f"{out}/",
                              "--ledger", str(ledger), "-q"], stderr=subprocess.PIPE, text=True) for _ in range(3)]
    codes = [proc.wait(timeout=180) for proc in runs]
    assert codes.count(0) == 1, (codes, [proc.stderr.read() for proc in runs if proc.stderr])
    (entry,) = ledger_document(ledger)["entries"]
    assert entry["state"] == "confirmed"
    tags = {json.loads(p.read_text())["release"]["input_tag"] for p in out.glob("*.ldp.json")}
    assert tags == {entry["tag"]}


def test_a_directory_that_appears_before_publishing_is_not_replaced(tmp_path: Path, source: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The check at the start is repeated, atomically, at the rename: another run's directory wins."""
    import ldpcli.release._dataset as module

    out = tmp_path / "release"

    class LateRival(module.Commit):
        def publish(self) -> list[Reservation]:
            out.mkdir()
            (out / "rival.txt").write_text("another run's output")
            return super().publish()

    monkeypatch.setattr(module, "Commit", LateRival)
    ledger = Ledger.open(tmp_path / "ledger.json")
    with pytest.raises(UsageError, match="already exists"):
        write_dataset_release([source], out, engine=None, epsilon=1.0, options=ReleaseOptions(budget=Budget(ledger=ledger)))
    assert sorted(p.name for p in out.iterdir()) == ["rival.txt"]
    assert Ledger.open(tmp_path / "ledger.json").entries == ()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.parquet", "ledger.json", "ledger.json.lock",
                                                          "ledger.json.log", "release"]  # the log: the cancellation


@pytest.mark.slow
@needs_dask
@pytest.mark.parametrize("action", ["kill", "enospc"])
@pytest.mark.parametrize("step", STEPS)
def test_a_failed_dataset_overwrite_is_fully_old_or_fully_new_and_counted(
    tmp_path: Path, source: Path, step: str, action: str
) -> None:
    out = tmp_path / "release"
    ledger = tmp_path / "owner" / "ledger.json"
    assert run("privatize", source, "--eps", "1", "--engine", "dask", "-o", f"{out}/", "--ledger", ledger,
               "-q").returncode == 0
    old = tree(out)
    failed = run("privatize", source, "--eps", "2", "--engine", "dask", "-o", f"{out}/", "--overwrite",
                 "--ledger", ledger, "-q", env={"LDP_FAULT": f"{step}:{action}"})
    if action == "kill":
        assert failed.returncode == -signal.SIGKILL
    else:
        assert failed.returncode == 1 and "Traceback" not in failed.stderr, failed.stderr
        assert "nothing was published" in failed.stderr
    assert run("budget", "--ledger", ledger, "--json").returncode == 0  # finishes what a dead run left
    now = tree(out)
    entries = ledger_document(ledger)["entries"]
    spent = sum(e["epsilon_exact"] for e in entries)
    if now == old:
        state = "old"
    else:
        manifest = json.loads((out / MANIFEST_NAME).read_text())
        assert sorted(now) == sorted([MANIFEST_NAME, *(p["file"] for p in manifest["parts"]),
                                      *(p["file"] + ".ldp.json" for p in manifest["parts"])])
        assert all(now[p["file"]] == p["sha256"] for p in manifest["parts"])
        state = "new"
        assert spent >= 3 - 1e-9, entries  # published: counted
    if action == "enospc":
        assert state == "old" and spent == pytest.approx(1.0), entries
    assert run("privatize", source, "--eps", "1", "-o", tmp_path / "later.parquet", "--ledger", ledger,
               "-q").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
