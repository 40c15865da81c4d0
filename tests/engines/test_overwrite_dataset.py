"""--overwrite of a dataset directory (``-o DIR/``, local and Dask engines) replaces it only when every
entry in it is a file ldp wrote for its dataset, and never deletes a file ldp did not write: one
found at the start, and one added while the run goes on (fault points with ``touch=PATH``,
:mod:`ldpcli.io._faults`). Real processes (``python -m ldpcli``); the Dask cases skip without Dask."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
from pathlib import Path

import pytest
from helpers import ldp_process, ledger_document, unit_rows, write_list

from ldpcli.release._inputs import MANIFEST_NAME

pytestmark = pytest.mark.slow

ENGINES = ["local", pytest.param("dask", marks=pytest.mark.skipif(
    importlib.util.find_spec("dask") is None, reason="pip install 'ldp[dask]'"))]


def run(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return ldp_process(*args, env=env, timeout=180, module=True)


def tree(directory: Path) -> dict[str, str]:
    """Every file under ``directory``, hidden ones included (relative name → SHA-256)."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def dataset_id(directory: Path) -> str:
    return json.loads((directory / MANIFEST_NAME).read_text())["dataset"]


def privatize(source: Path, out: Path, engine: str, *extra: object,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run("privatize", source, "--eps", "1", "--engine", engine, "-o", f"{out}/", "--part-rows", "400", "-q",
               *extra, env=env)


def one_line_refusal(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ldp: error: "), result.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    write_list(tmp_path / "input.parquet", unit_rows(1000, 8, seed=4))
    return tmp_path / "input.parquet"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", [".notes.ldp-keep", ".x.ldp-backup.tar", "mine.txt"])
def test_a_users_file_in_the_old_dataset_is_never_deleted(tmp_path: Path, source: Path, engine: str,
                                                          name: str) -> None:
    out = tmp_path / "release"
    assert privatize(source, out, engine).returncode == 0
    (out / name).write_text("the user's own file\n")
    before = tree(out)
    one_line_refusal(privatize(source, out, engine, "--overwrite"), str(out), repr(name), "move")
    assert tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_a_changed_part_is_not_replaced(tmp_path: Path, source: Path, engine: str) -> None:
    out = tmp_path / "release"
    assert privatize(source, out, engine).returncode == 0
    write_list(out / "part-00000.parquet", unit_rows(10, 8, seed=9))  # the user's rows under ldp's name
    before = tree(out)
    one_line_refusal(privatize(source, out, engine, "--overwrite"), "part-00000.parquet", "changed after ldp wrote it")
    assert tree(out) == before


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("step", ["reserved", "journal"])
def test_a_file_added_during_the_run_is_never_deleted(tmp_path: Path, source: Path, engine: str, step: str) -> None:
    """Added after the check at the start (``reserved``: before the publication; ``journal``: its
    journal written, the directory about to be swapped): the swapped-out directory is listed again
    before the commit point, and the run rolls back and refuses, naming it."""
    out = tmp_path / "release"
    ledger = tmp_path / "owner" / "ledger.json"
    assert privatize(source, out, engine, "--ledger", ledger).returncode == 0
    old = tree(out)
    added = out / ".notes.ldp-keep"
    result = privatize(source, out, engine, "--overwrite", "--ledger", ledger,
                       env={"LDP_FAULT": f"{step}:touch={added}"})
    one_line_refusal(result, str(out), ".notes.ldp-keep", "nothing was replaced")
    assert tree(out) == {**old, added.name: hashlib.sha256(b"a file ldp did not write\n").hexdigest()}
    assert [e["state"] for e in ledger_document(ledger)["entries"]] == ["confirmed"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_a_file_added_after_the_swap_survives(tmp_path: Path, source: Path, engine: str) -> None:
    """Added once the new directory is in place (``data-placed``): the release goes on, the file stays
    in it, and the next --overwrite refuses, naming it."""
    out = tmp_path / "release"
    assert privatize(source, out, engine).returncode == 0
    old = dataset_id(out)
    result = privatize(source, out, engine, "--overwrite", env={"LDP_FAULT": f"data-placed:touch={out}/mine.txt"})
    assert result.returncode == 0, result.stderr
    assert dataset_id(out) != old
    assert (out / "mine.txt").read_text() == "a file ldp did not write\n"
    before = tree(out)
    one_line_refusal(privatize(source, out, engine, "--overwrite"), "'mine.txt'")
    assert tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_ldps_own_dataset_is_replaced_new_and_again(tmp_path: Path, source: Path, engine: str) -> None:
    out = tmp_path / "release"
    first = privatize(source, out, engine, "--overwrite")  # new: nothing to replace
    assert first.returncode == 0, first.stderr
    seen = {dataset_id(out)}
    for _ in range(2):
        again = privatize(source, out, engine, "--overwrite")
        assert again.returncode == 0, again.stderr
        seen.add(dataset_id(out))
    assert len(seen) == 3
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
