"""--overwrite of a one-file output replaces only a file ldp can prove it wrote: its sidecar is a valid
ldp sidecar that records the SHA-256 of the file's bytes (docs/commit-protocol.md). Real processes
(``python -m ldpcli``); after every refusal the user's files are byte-identical."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from helpers import ldp_process, ledger_document, unit_rows, write_list


def run(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return ldp_process(*args, env=env, module=True)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def small(tmp_path: Path) -> Path:
    write_list(tmp_path / "in.parquet", unit_rows(500, 8, seed=3))
    return tmp_path / "in.parquet"


def refused(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ldp: error: "), result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert "move it away" in lines[0] and "--overwrite" in lines[0], lines[0]


def foreign(tmp_path: Path) -> Path:
    mine = tmp_path / "mine.parquet"
    write_list(mine, unit_rows(10, 8, seed=9))
    return mine


def test_a_foreign_file_beside_an_empty_sidecar_is_not_replaced(tmp_path: Path, small: Path) -> None:
    mine = foreign(tmp_path)
    side = tmp_path / "mine.parquet.ldp.json"
    side.write_text("{}")
    before = (sha(mine), sha(side))
    refused(run("privatize", small, "--eps", "1", "-o", mine, "--overwrite", "-q"), str(mine), "not written by ldp",
            "not valid")
    assert (sha(mine), sha(side)) == before


@pytest.mark.slow
def test_a_foreign_file_beside_another_files_valid_sidecar_is_not_replaced(tmp_path: Path, small: Path) -> None:
    other = tmp_path / "other.parquet"
    assert run("privatize", small, "--eps", "1", "-o", other, "-q").returncode == 0
    mine = foreign(tmp_path)
    side = tmp_path / "mine.parquet.ldp.json"
    side.write_bytes((tmp_path / "other.parquet.ldp.json").read_bytes())
    before = (sha(mine), sha(side))
    refused(run("privatize", small, "--eps", "1", "-o", mine, "--overwrite", "-q"), str(mine),
            "hash does not match")
    assert (sha(mine), sha(side)) == before


@pytest.mark.slow
def test_a_tampered_output_is_not_replaced(tmp_path: Path, small: Path) -> None:
    out = tmp_path / "out.parquet"
    assert run("privatize", small, "--eps", "1", "-o", out, "-q").returncode == 0
    write_list(out, unit_rows(10, 8, seed=9))  # the user saved their own rows over it
    before = (sha(out), sha(tmp_path / "out.parquet.ldp.json"))
    refused(run("privatize", small, "--eps", "1", "-o", out, "--overwrite", "-q"), str(out),
            "changed after ldp wrote it")
    assert (sha(out), sha(tmp_path / "out.parquet.ldp.json")) == before


def test_a_sidecar_without_its_data_file_is_not_replaced(tmp_path: Path, small: Path) -> None:
    side = tmp_path / "out.parquet.ldp.json"
    side.write_text('{"mine": true}\n')
    before = sha(side)
    refused(run("privatize", small, "--eps", "1", "-o", tmp_path / "out.parquet", "--overwrite", "-q"), str(side),
            "without the data file")
    assert sha(side) == before and not (tmp_path / "out.parquet").exists()


@pytest.mark.slow
def test_the_default_output_name_follows_the_rule(tmp_path: Path, small: Path) -> None:
    mine = tmp_path / "in.privatized.parquet"
    write_list(mine, unit_rows(10, 8, seed=9))
    (tmp_path / "in.privatized.parquet.ldp.json").write_text("{}")
    before = sha(mine)
    refused(run("privatize", small, "--eps", "1", "--overwrite", "-q"), str(mine), "not written by ldp")
    assert sha(mine) == before
    mine.unlink()
    (tmp_path / "in.privatized.parquet.ldp.json").unlink()
    assert run("privatize", small, "--eps", "1", "-q").returncode == 0
    assert run("privatize", small, "--eps", "2", "--overwrite", "-q").returncode == 0  # its own output


@pytest.mark.slow
def test_ldps_own_output_is_replaced_new_and_again(tmp_path: Path, small: Path) -> None:
    out = tmp_path / "out.parquet"
    side = tmp_path / "out.parquet.ldp.json"
    first = run("privatize", small, "--eps", "1", "-o", out, "--overwrite", "-q")  # new: nothing to replace
    assert first.returncode == 0, first.stderr
    for eps in ("2", "3"):
        again = run("privatize", small, "--eps", eps, "-o", out, "--overwrite", "-q")
        assert again.returncode == 0, again.stderr
        assert json.loads(side.read_text())["data"]["sha256"] == sha(out)
        assert json.loads(side.read_text())["mechanism"]["spec"]["epsilon"] == float(eps)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.slow
def test_a_file_that_appears_at_the_target_during_the_run_is_not_replaced(tmp_path: Path, small: Path) -> None:
    """The rule runs again at the publication: a file saved at the target meanwhile stays (fault point
    ``reserved``: after the rows are written, before anything is published)."""
    out = tmp_path / "out.parquet"
    ledger = tmp_path / "ledger.json"
    result = run("privatize", small, "--eps", "1", "-o", out, "--overwrite", "--ledger", ledger, "-q",
                 env={"LDP_FAULT": f"reserved:touch={out}"})
    refused(result, str(out), "not written by ldp")
    assert out.read_text() == "a file ldp did not write\n"
    assert not (tmp_path / "out.parquet.ldp.json").exists()
    assert ledger_document(ledger)["entries"] == []


@pytest.mark.slow
def test_a_models_overwrite_follows_the_rule(tmp_path: Path) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = unit_rows(400, 4, seed=2)
    labels = np.where(rows[:, 0] > 0, 1.0, -1.0)
    data = tmp_path / "train.parquet"
    pq.write_table(pa.table({"vec": pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), 4), "y": labels}),
                   data)
    model = tmp_path / "model.json"
    model.write_text('{"mine": true}\n')
    (tmp_path / "model.json.ldp.json").write_text("{}")
    before = sha(model)
    args = ("train", data, "--label", "y", "--loss", "logistic", "--eps", "2", "--seed", "1", "-o", model,
            "--overwrite", "-q")
    refused(run(*args), str(model), "not written by ldp")
    assert sha(model) == before
    model.unlink()
    (tmp_path / "model.json.ldp.json").unlink()
    for _ in range(2):  # new, then over its own model
        trained = run(*args)
        assert trained.returncode == 0, trained.stderr


def test_the_re_check_at_the_commit_does_not_hash_an_unchanged_old_output_again(small: Path, tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule runs twice per overwrite (at the start and just before the journal); the old output is read
    and hashed once when it did not change in between (its device, inode, size, mtime and ctime)."""
    import ldpcli
    from ldpcli.release import _sidecar as sidecar_module

    out = tmp_path / "out.parquet"
    options = ldpcli.ReleaseOptions(overwrite=True)
    ldpcli.privatize_file(small, out, epsilon=2.0, options=options)
    hashed: list[Path] = []
    real = sidecar_module.file_sha256

    def counting(path: Path) -> str:
        hashed.append(Path(path))
        return real(path)

    monkeypatch.setattr(sidecar_module, "file_sha256", counting)
    ldpcli.privatize_file(small, out, epsilon=2.0, options=options)
    assert hashed.count(out) == 1
    before = sha(out)
    out.write_bytes(out.read_bytes())  # the same bytes written again: a new ctime, so proven afresh
    ldpcli.privatize_file(small, out, epsilon=2.0, options=options)
    assert hashed.count(out) == 2 and sha(out) != before
