"""Several inputs, directories and glob patterns for `ldp privatize` and the commands that estimate.

ldpcli.release._inputs.expand_inputs decides which files an argument names; write_file_releases gives each
its own release; scan (estimate-mean, queries, regress) takes the shards a directory or a pattern
names. Every test checks the files written and the messages, not only the exit code.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import ldp, unit_rows, write_list

from ldpcli.analysis._estimate import estimate_file_mean
from ldpcli.errors import DataError, UsageError
from ldpcli.release._inputs import expand_inputs
from ldpcli.release._file import write_file_release, write_file_releases
from ldpcli.release._options import ReleaseOptions


@pytest.fixture
def shards(tmp_path: Path) -> Path:
    """raw/ with three shards, a hidden temporary, a text file and a nested directory."""
    raw = tmp_path / "raw"
    raw.mkdir()
    for i, n in enumerate((120, 80, 100)):
        write_list(raw / f"part-{i}.parquet", unit_rows(n, 6, seed=i))
    (raw / ".part-3.parquet.x.tmp").write_bytes(b"half written")
    (raw / "README.txt").write_text("not data")
    (raw / "nested").mkdir()
    write_list(raw / "nested" / "part-9.parquet", unit_rows(10, 6, seed=9))
    return raw


def names(paths: list[Path]) -> list[str]:
    return [path.name for path in paths]


def test_a_directory_is_its_data_files_in_sorted_order(shards: Path) -> None:
    assert names(expand_inputs(shards, privatized=False)) == ["part-0.parquet", "part-1.parquet", "part-2.parquet"]
    assert names(expand_inputs([str(shards / "part-[12].parquet")], privatized=False)) == [
        "part-1.parquet", "part-2.parquet"]
    # A file given by name is taken as it is, in the order given.
    given = [shards / "part-2.parquet", shards / "part-0.parquet"]
    assert expand_inputs(given, privatized=False) == given


def test_ldp_outputs_are_skipped_when_privatizing_and_picked_when_estimating(shards: Path) -> None:
    write_file_release(shards / "part-0.parquet", epsilon=4.0, options=ReleaseOptions(seed=1))
    raw = expand_inputs(shards, privatized=False)
    assert names(raw) == ["part-0.parquet", "part-1.parquet", "part-2.parquet"]
    assert names(expand_inputs(shards, privatized=True)) == ["part-0.privatized.parquet"]
    assert names(expand_inputs(str(shards / "*.parquet"), privatized=True)) == ["part-0.privatized.parquet"]


@pytest.mark.parametrize("privatized, fragment", [
    (False, "is a directory with no .arrows/.csv/.csv.gz/.csv.zst/.npy/.parquet/.pq file to privatize in it"),
    (True, "is a directory with no privatized file (.arrows/.csv/.csv.gz/.csv.zst/.npy/.parquet/.pq with a .ldp.json sidecar beside it) in it"),
])
def test_a_directory_without_suitable_files_is_refused(tmp_path: Path, privatized: bool, fragment: str) -> None:
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(UsageError, match=fragment.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        expand_inputs(tmp_path, privatized=privatized)


def test_a_pattern_matching_nothing_and_a_file_named_twice_are_refused(shards: Path) -> None:
    with pytest.raises(UsageError, match=r"part-7\*\.parquet: matches no \.arrows/\.csv/\.csv\.gz/\.csv\.zst/\.npy/\.parquet/\.pq file to privatize"):
        expand_inputs(str(shards / "part-7*.parquet"), privatized=False)
    with pytest.raises(UsageError, match=r"part-1\.parquet: given twice; each input is privatized once"):
        expand_inputs([shards / "part-1.parquet", shards], privatized=False)
    with pytest.raises(UsageError, match=r"raw/\.\./raw/part-1\.parquet: given twice \(also as .*raw/part-1\.parquet\)"):
        expand_inputs([shards / "part-1.parquet", shards / ".." / "raw" / "part-1.parquet"], privatized=False)
    with pytest.raises(UsageError, match="no input file given"):
        expand_inputs([], privatized=False)


def test_privatize_a_directory_into_a_new_dataset_directory(shards: Path, tmp_path: Path) -> None:
    out = tmp_path / "release"
    # --layout files: one output per input (-o DIR/ alone writes a dataset directory of parts, tests/engines/test_local_dataset.py).
    result = ldp("privatize", shards, "--eps", 4, "--seed", 7, "-o", f"{out}/", "--layout", "files", "--json")
    assert result.exit_code == 0, result.stderr
    summaries = json.loads(result.stdout)
    assert [Path(s["output"]).name for s in summaries] == [
        "part-0.privatized.parquet", "part-1.privatized.parquet", "part-2.privatized.parquet"]
    assert [s["n"] for s in summaries] == [120, 80, 100]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"part-{i}.privatized.parquet" for i in range(3)] + [f"part-{i}.privatized.parquet.ldp.json" for i in range(3)])
    # Each input is its own release, keyed by its own bytes: privatized alone, with the same seed, it is
    # the same file, byte for byte.
    alone = write_file_release(shards / "part-1.parquet", tmp_path / "alone.parquet", epsilon=4.0, options=ReleaseOptions(seed=7))
    assert alone.output.read_bytes() == (out / "part-1.privatized.parquet").read_bytes()
    # ...and the shards got different noise (one seed, three keys).
    rows = [pq.read_table(out / f"part-{i}.privatized.parquet").column("vec") for i in range(2)]
    assert not np.array_equal(np.asarray(rows[0].chunk(0).flatten())[:480], np.asarray(rows[1].chunk(0).flatten())[:480])


def test_estimate_from_a_directory_equals_estimate_from_its_files(shards: Path, tmp_path: Path) -> None:
    out = tmp_path / "release"
    results = write_file_releases(shards, f"{out}/", epsilon=4.0, options=ReleaseOptions(seed=3))
    listed = estimate_file_mean([r.output for r in results])
    assert estimate_file_mean(out).mean.tolist() == listed.mean.tolist()
    assert estimate_file_mean(str(out / "part-*.privatized.parquet")).n == 300
    cli = ldp("estimate-mean", out, "--json")
    assert cli.exit_code == 0, cli.stderr
    assert json.loads(cli.stdout)["n"] == 300


def test_one_output_file_for_several_inputs_is_refused_before_anything_is_written(shards: Path, tmp_path: Path) -> None:
    result = ldp("privatize", shards, "--eps", 4, "-o", tmp_path / "one.parquet")
    assert result.exit_code == 2
    assert "names one file but 3 inputs were given; give a directory for their outputs" in result.stderr
    assert not (tmp_path / "one.parquet").exists() and not list(shards.glob("*.privatized.*"))


def test_two_inputs_with_one_output_name_are_refused(tmp_path: Path) -> None:
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        write_list(tmp_path / sub / "x.parquet", unit_rows(5, 3))
    (tmp_path / "out").mkdir()
    with pytest.raises(UsageError, match=r"would both be privatized into .*out/x\.privatized\.parquet"):
        write_file_releases([tmp_path / "a" / "x.parquet", tmp_path / "b" / "x.parquet"], tmp_path / "out", epsilon=1.0)
    assert list((tmp_path / "out").iterdir()) == []


def test_an_existing_output_stops_the_run_before_the_first_input(shards: Path) -> None:
    (shards / "part-2.privatized.parquet").write_bytes(b"keep me")
    with pytest.raises(UsageError, match=r"part-2\.privatized\.parquet already exists; pass overwrite=True"):
        write_file_releases(shards, epsilon=4.0)
    assert not (shards / "part-0.privatized.parquet").exists()
    assert (shards / "part-2.privatized.parquet").read_bytes() == b"keep me"


def test_a_failing_input_says_which_inputs_were_released_before_it(shards: Path, tmp_path: Path) -> None:
    bad = unit_rows(4, 6)
    bad[2, 1] = np.nan
    write_list(shards / "part-1.parquet", bad)
    out = tmp_path / "release"
    with pytest.raises(DataError) as caught:
        write_file_releases(shards, f"{out}/", epsilon=4.0)
    message = str(caught.value)
    assert "part-1.parquet" in message and "row 3" in message
    assert "(1 of 3 inputs was privatized before this one and stays released: " in message
    assert sorted(p.name for p in out.iterdir()) == ["part-0.privatized.parquet", "part-0.privatized.parquet.ldp.json"]


def test_a_new_output_directory_is_removed_when_the_first_input_fails(shards: Path, tmp_path: Path) -> None:
    write_list(shards / "part-0.parquet", np.full((3, 6), np.inf))
    out = tmp_path / "release"
    assert ldp("privatize", shards, "--eps", 4, "-o", f"{out}/").exit_code == 1
    assert not out.exists()


def write_csv(path: Path, rows: np.ndarray) -> Path:
    """A CSV file of one column per coordinate, compressed by its suffix (.csv.gz, .csv.zst)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    table = pa.table({f"f{j}": rows[:, j] for j in range(rows.shape[1])})
    codec = {".gz": "gzip", ".zst": "zstd"}.get(path.suffix)
    with pa.output_stream(path, compression=codec) as stream:
        pacsv.write_csv(table, stream)
    return path


@pytest.mark.parametrize("suffix", [".csv.gz", ".csv.zst"])
def test_compressed_csv_in_and_out(tmp_path: Path, suffix: str) -> None:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rows = unit_rows(700, 4, seed=3)
    source = write_csv(tmp_path / f"x{suffix}", rows)
    # The default output keeps the compression; the same input and seed give the same values in any output.
    packed = write_file_release(source, epsilon=2.0, options=ReleaseOptions(seed=4))
    assert packed.output.name == f"x.privatized{suffix}" and packed.n == 700
    plain = write_file_release(source, tmp_path / "plain.csv", epsilon=2.0, options=ReleaseOptions(seed=4))
    codec = {".csv.gz": "gzip", ".csv.zst": "zstd"}[suffix]
    with pa.input_stream(packed.output, compression=codec) as stream:
        assert stream.read() == plain.output.read_bytes()
    assert pacsv.read_csv(plain.output).num_rows == 700
    # Compressed outputs estimate like any other; a directory picks compressed files up.
    assert estimate_file_mean(packed.output).n == 700
    assert names(expand_inputs(tmp_path, privatized=False)) == [f"x{suffix}"]
    assert names(expand_inputs(tmp_path, privatized=True)) == ["plain.csv", f"x.privatized{suffix}"]


def test_only_csv_is_compressed(tmp_path: Path) -> None:
    result = ldp("privatize", tmp_path / "x.parquet.gz", "--eps", 1)
    assert result.exit_code == 2
    assert "a compressed parquet file; only CSV is read and written compressed (.csv.gz, .csv.zst)" in result.stderr
