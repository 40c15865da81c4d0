"""A dataset directory cannot be truncated or spliced unnoticed, reveals no skipped-row count, and
its bad inputs end in one line, never a traceback or a hang (issue 24, items 8, 10 and 11).

The datasets are written through the in-process engine (``engine=None``: no Dask needed); the
checks of the command line run the real ``ldp`` in a subprocess with a timeout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import keys_anywhere, ldp_process, unit_rows

from ldpcli.analysis._estimate import estimate_file_mean
from ldpcli.errors import DataError
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._file import write_file_release
from ldpcli.release._inputs import MANIFEST_NAME
from ldpcli.release._options import ReleaseOptions

D = 16  # key blocks of 512 rows
ROWS = (4600, 1300)  # two inputs; parts of 1024 rows: 5 + 2 parts


def write(path: Path, rows: np.ndarray) -> Path:
    flat = pa.array(np.ascontiguousarray(rows).reshape(-1))
    pq.write_table(pa.table({"vec": pa.FixedSizeListArray.from_arrays(flat, rows.shape[1])}), path)
    return path


def make_dataset(tmp_path: Path, name: str, seed: int) -> Path:
    raw = tmp_path / f"raw-{name}"
    raw.mkdir()
    inputs = [write(raw / f"{i}.parquet", unit_rows(n, D, seed=seed + i)) for i, n in enumerate(ROWS)]
    out = tmp_path / name
    write_dataset_release(inputs, out, engine=None, epsilon=4.0, part_rows=1024)
    return out


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    out = make_dataset(tmp_path, "release", seed=1)
    assert estimate_file_mean(out).n == sum(ROWS)  # intact, it reads
    return out


def manifest_of(out: Path) -> dict[str, Any]:
    return json.loads((out / MANIFEST_NAME).read_text())


def save_manifest(out: Path, manifest: dict[str, Any]) -> None:
    (out / MANIFEST_NAME).write_text(json.dumps(manifest))


def remove_part(out: Path, index: int, *, fix_total: bool) -> None:
    """Delete a part, its sidecar and its manifest entry (and, with ``fix_total``, correct the row total)."""
    manifest = manifest_of(out)
    entry = manifest["parts"].pop(index)
    (out / entry["file"]).unlink()
    (out / (entry["file"] + ".ldp.json")).unlink()
    if fix_total:
        manifest["rows"] -= entry["rows"]
    save_manifest(out, manifest)


def splice_foreign_part(out: Path) -> None:
    """Put part 2 of another dataset (same mechanism, same rows) in place of part 2, manifest hash edited."""
    other = make_dataset(out.parent, "other", seed=7)
    for suffix in ("", ".ldp.json"):
        shutil.copyfile(other / f"part-00002.parquet{suffix}", out / f"part-00002.parquet{suffix}")
    manifest = manifest_of(out)
    manifest["parts"][2]["sha256"] = manifest_of(other)["parts"][2]["sha256"]
    save_manifest(out, manifest)


def link_outside(out: Path) -> None:
    """Replace part 1 by a symlink to a copy of it outside the directory."""
    outside = out.parent / "elsewhere.parquet"
    shutil.copyfile(out / "part-00001.parquet", outside)
    (out / "part-00001.parquet").unlink()
    (out / "part-00001.parquet").symlink_to(outside)


def edit_manifest(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def tamper(out: Path) -> None:
        manifest = manifest_of(out)
        change(manifest)
        save_manifest(out, manifest)
    return tamper


TAMPERING: dict[str, tuple[Callable[[Path], None], str]] = {
    "a middle part and its entry removed": (
        lambda out: remove_part(out, 2, fix_total=False), r'lists parts of 4876 rows in all but says "rows": 5900'),
    "a middle part removed, total fixed": (
        lambda out: remove_part(out, 2, fix_total=True), r"part-00000\.parquet: its sidecar records parts 7 but the "
                                                         r"manifest 6; the dataset's parts were removed"),
    "the last part removed, total fixed": (
        lambda out: remove_part(out, 6, fix_total=True), r"part-00000\.parquet: its sidecar records parts 7 but the "
                                                         r"manifest 6"),
    "the whole manifest removed": (
        lambda out: (out / MANIFEST_NAME).unlink(), r"holds parts of an ldp dataset \(part-00000\.parquet is a part "
                                                    r"of dataset [0-9a-f]{32}\) but no manifest _ldp_dataset\.json"),
    "a part of another dataset": (
        splice_foreign_part, r"part-00002\.parquet: its sidecar records dataset [0-9a-f]{32} but the manifest"),
    "a symlink to a file outside": (
        link_outside, r"part-00001\.parquet: is a link \(to .*elsewhere\.parquet\)"),
    "the row total edited": (
        edit_manifest(lambda m: m.update(rows=20000)), r'lists parts of 5900 rows in all but says "rows": 20000'),
    "the number of inputs edited": (
        edit_manifest(lambda m: m.update(inputs=3)), r'says "inputs": 3 but its parts come from inputs \[0, 1\]'),
    "the dataset id edited": (
        edit_manifest(lambda m: m.update(dataset="0" * 32)), r"part-00000\.parquet: its sidecar records dataset "),
    "two parts swapped": (
        edit_manifest(lambda m: m["parts"].__setitem__(slice(0, 2), m["parts"][1::-1])),
        r"part-00001\.parquet: its sidecar records part 1 but the manifest 0"),
    "a part's rows edited": (
        edit_manifest(lambda m: m.update(rows=m["rows"] - 24, parts=[{**m["parts"][0], "rows": 1000}, *m["parts"][1:]])),
        r"part-00000\.parquet: its sidecar records rows 1024 but the manifest 1000"),
    "no parts": (
        edit_manifest(lambda m: m.update(parts=[])), r'not a readable ldp dataset manifest \("parts" must be a non-empty'),
}


@pytest.mark.parametrize("case", list(TAMPERING))
def test_a_truncated_or_spliced_dataset_is_refused(dataset: Path, case: str) -> None:
    tamper, message = TAMPERING[case]
    tamper(dataset)
    with pytest.raises(DataError, match=message):
        estimate_file_mean(dataset)


def test_a_part_given_without_the_rest_of_its_dataset_is_refused(dataset: Path, tmp_path: Path) -> None:
    parts = [dataset / p["file"] for p in manifest_of(dataset)["parts"]]
    with pytest.raises(DataError, match=r"part-00003\.parquet: is one of the 7 parts of dataset [0-9a-f]{32} .*but 6 "
                                        r"of them \(number 0, 1, 2, 4, 5, …\) were not given"):
        estimate_file_mean(parts[3])
    shard = write(tmp_path / "shard.parquet", unit_rows(500, D, seed=9))
    shard_out = write_file_release(shard, tmp_path / "shard.privatized.parquet", epsilon=4.0).output
    with pytest.raises(DataError, match=r"part-00000\.parquet: is one of the 7 parts .* 1 of them \(number 6\)"):
        estimate_file_mean([shard_out, *parts[:6]])
    # The whole dataset with another shard of the same mechanism is a combination, by name or by directory.
    assert estimate_file_mean([shard_out, *parts]).n == estimate_file_mean([shard_out, dataset]).n == sum(ROWS) + 500


def test_no_file_of_a_dataset_counts_the_skipped_rows(tmp_path: Path) -> None:
    rows = unit_rows(3000, D, seed=4)
    rows[[5, 700, 2100]] = np.nan  # three rows skipped in three parts
    rows[1024:1536] = np.nan  # a whole part (of 512 rows) skipped
    source = write(tmp_path / "in.parquet", rows)
    out = tmp_path / "release"
    result = write_dataset_release(source, out, engine=None, epsilon=4.0, options=ReleaseOptions(skip_invalid=True), part_rows=512)
    assert result.n == 3000 - 3 - 512 and result.n_skipped == 515  # the operator is told
    manifest = manifest_of(out)
    written = [p["rows"] for p in manifest["parts"]]
    assert sum(written) == manifest["rows"] == result.n
    assert all(set(p) == {"file", "rows", "sha256", "input"} for p in manifest["parts"])
    # Numbered without the gap the skipped part would leave.
    files = sorted(p.name for p in out.iterdir())
    assert files == [MANIFEST_NAME] + [f"part-0000{i}.parquet{s}" for i in range(len(written)) for s in ("", ".ldp.json")]
    for index, part in enumerate(manifest["parts"]):
        side = json.loads((out / (part["file"] + ".ldp.json")).read_text())
        assert side["release"]["part"] == {"dataset": manifest["dataset"], "index": index, "input": 0,
                                           "parts": len(written)}
        assert side["data"]["n"] == part["rows"]
    for path in out.iterdir():
        if path.name.endswith(".json"):
            keys = set(keys_anywhere(json.loads(path.read_text())))
            assert not keys & {"first_row", "start", "stop", "skipped", "n_skipped", "offset"}, path.name
    assert estimate_file_mean(out).n == result.n


def test_an_npy_input_is_cut_into_parts_that_equal_the_local_output(tmp_path: Path) -> None:
    source = tmp_path / "in.npy"
    np.save(source, unit_rows(2500, D, seed=3))
    whole = write_dataset_release(source, tmp_path / "one", engine=None, epsilon=2.0, options=ReleaseOptions(seed=8))  # one part
    parts = write_dataset_release(source, tmp_path / "parts", engine=None, epsilon=2.0, options=ReleaseOptions(seed=8), part_rows=1000)
    local = write_file_release(source, tmp_path / "local.parquet", epsilon=2.0, options=ReleaseOptions(seed=8)).output
    expected = pq.read_table(local).column(0).combine_chunks().flatten()
    for result, count in ((whole, 1), (parts, 3)):
        assert len(result.parts) == count and result.n == 2500
        values = pa.concat_arrays([pq.read_table(p).column(0).combine_chunks().flatten() for p in result.parts])
        assert values.equals(expected)  # bit for bit


# --- the command line: one line on stderr, no traceback, no hang -----------------------------------------------


def run_ldp(*args: object) -> subprocess.CompletedProcess[str]:
    return ldp_process(*args, env={"PYTHONPATH": os.pathsep.join(sys.path)})


def assert_one_line(result: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr


@pytest.mark.parametrize("content, fragment", [
    (None, '"parts" must be a non-empty list'),
    ("[" * 100_000 + "]" * 100_000, "JSON nested too deeply"),
    ('{"format": "ldp-dataset"}', 'no "dataset" field'),
])
def test_a_broken_manifest_is_one_line(dataset: Path, content: str | None, fragment: str) -> None:
    if content is None:
        edit_manifest(lambda m: m.update(parts=[]))(dataset)
    else:
        (dataset / MANIFEST_NAME).write_text(content)
    assert_one_line(run_ldp("estimate-mean", dataset), 1, fragment)


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "deep"])
def test_a_sidecar_that_is_no_small_regular_file_is_one_line(dataset: Path, kind: str) -> None:
    target = tmp = dataset.parent / "alone.parquet"
    shutil.copyfile(dataset / "part-00000.parquet", target)
    sidecar = tmp.with_name(tmp.name + ".ldp.json")
    if kind == "dev-zero":
        if not Path("/dev/zero").exists():
            pytest.skip("no /dev/zero")
        sidecar.symlink_to("/dev/zero")
        fragment = "it is a character device, not a regular file"
    elif kind == "fifo":
        os.mkfifo(sidecar)
        fragment = "it is a FIFO, not a regular file"
    else:
        sidecar.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
        fragment = "JSON nested too deeply"
    assert_one_line(run_ldp("estimate-mean", target), 1, fragment)


@pytest.mark.slow
def test_npy_with_the_dask_engine_through_the_cli(tmp_path: Path) -> None:
    pytest.importorskip("dask")
    source = tmp_path / "in.npy"
    np.save(source, unit_rows(1500, D, seed=2))
    result = run_ldp("privatize", source, "--eps", 2, "--engine", "dask", "--scheduler", "synchronous",
                     "-o", f"{tmp_path / 'out'}/", "-q")  # no --part-rows: one part, not Parquet row groups
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert json.loads(run_ldp("estimate-mean", tmp_path / "out", "--json").stdout)["n"] == 1500


def _unwritable_parent(tmp_path: Path, kind: str) -> Path:
    """A directory ldp cannot create a directory in, by permission bits (not for root) or for real (/sys)."""
    if kind == "read-only bits":
        if os.geteuid() == 0:
            pytest.skip("root writes in a 0555 directory; the /sys case covers root")
        parent = tmp_path / "locked"
        parent.mkdir()
        parent.chmod(0o555)
        return parent
    probe = Path("/sys") / f".ldp-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return Path("/sys")  # sysfs refuses new directories, even to root
    probe.rmdir()
    pytest.skip("/sys accepts new directories here")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["read-only bits", "sysfs"])
def test_an_unwritable_output_parent_with_the_dask_engine_is_one_line(tmp_path: Path, kind: str) -> None:
    pytest.importorskip("dask")
    source = write(tmp_path / "in.parquet", unit_rows(600, D, seed=5))
    parent = _unwritable_parent(tmp_path, kind)
    try:
        result = run_ldp("privatize", source, "--eps", 1, "--engine", "dask", "--scheduler", "synchronous",
                         "-o", f"{parent / 'out'}/")
    finally:
        if kind == "read-only bits":
            parent.chmod(0o755)
    assert_one_line(result, 2, f"cannot create a directory in {str(parent)!r}")
