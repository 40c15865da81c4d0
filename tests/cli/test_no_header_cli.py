"""``ldp privatize --no-header`` in real processes (issue 36): a headerless CSV file, from a path, from stdin
and into a dataset directory; its output and sidecar name the columns f0, f1, …, which ``estimate-mean``
reads with no flag; a file with a header is refused with the flag, and a numeric first line without it
names the flag."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from tests.helpers import ldp_process, write_headerless


def test_a_headerless_csv_is_privatized_and_its_output_is_estimated(tmp_path: Path) -> None:
    source = tmp_path / "x.csv"
    write_headerless(source, 40, 3, seed=4, scale=0.4)
    out = tmp_path / "out.csv"
    run = ldp_process("privatize", source, "--no-header", "--eps", "1", "--seed", "0", "-o", out)
    assert run.returncode == 0, run.stderr
    assert out.read_text().splitlines()[0] == '"f0","f1","f2"' and len(out.read_text().splitlines()) == 41
    sidecar = json.loads((tmp_path / "out.csv.ldp.json").read_text())
    assert sidecar["data"]["layout"]["columns"] == ["f0", "f1", "f2"], sidecar["data"]
    mean = ldp_process("estimate-mean", out, "--json")
    assert mean.returncode == 0, mean.stderr
    assert len(json.loads(mean.stdout)["mean"]) == 3 and json.loads(mean.stdout)["n"] == 40


def test_no_header_from_stdin_and_into_a_dataset_directory(tmp_path: Path) -> None:
    source = tmp_path / "x.csv"
    write_headerless(source, 40, 3, seed=4, scale=0.4)
    piped = ldp_process("privatize", "-", "--no-header", "--eps", "1", "-o", "-", "--sidecar", tmp_path / "s.json",
                        "-q", input=source.read_text())
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.splitlines()[0] == '"f0","f1","f2"' and len(piped.stdout.splitlines()) == 41
    run = ldp_process("privatize", source, "--no-header", "--eps", "1", "-o", f"{tmp_path / 'dataset'}/", "-q")
    assert run.returncode == 0, run.stderr
    part = pq.read_table(next((tmp_path / "dataset").glob("part-*.parquet")))
    assert part.column_names == ["f0", "f1", "f2"] and part.num_rows == 40


def test_keep_by_generated_name(tmp_path: Path) -> None:
    source = tmp_path / "x.csv"
    source.write_text("".join(f"{i},{0.1 * (i % 5):.2f},{-0.1 * (i % 3):.2f}\n" for i in range(1, 31)))
    out = tmp_path / "out.parquet"
    run = ldp_process("privatize", source, "--no-header", "--keep", "f0", "--columns", "f1:f2", "--eps", "1",
                      "-o", out, "-q")
    assert run.returncode == 0, run.stderr
    table = pq.read_table(out)
    assert table.column_names == ["f0", "f1", "f2"] and table.column("f0").to_pylist() == list(range(1, 31))


def test_a_file_with_a_header_is_refused_with_no_header(tmp_path: Path) -> None:
    source = tmp_path / "h.csv"
    source.write_text("a,b,c\n" + "".join("0.1,0.2,0.3\n" for _ in range(5)))
    run = ldp_process("privatize", source, "--no-header", "--eps", "1", "-o", tmp_path / "out.csv")
    assert run.returncode == 1, run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith(f"ldp: error: {source}: read with --no-header, ")
    assert "leave --no-header out" in run.stderr and not (tmp_path / "out.csv").exists()


def test_a_numeric_first_line_names_no_header(tmp_path: Path) -> None:
    source = tmp_path / "x.csv"
    write_headerless(source, 40, 3, seed=4, scale=0.4)
    run = ldp_process("privatize", source, "--eps", "1", "-o", tmp_path / "out.csv")
    assert run.returncode == 1 and run.stderr.count("\n") == 1, run.stderr
    assert "not a header of column names" in run.stderr and "or pass --no-header to read every line" in run.stderr


def test_the_help_of_no_header() -> None:
    run = ldp_process("privatize", "--help", env={"COLUMNS": "400"})
    assert run.returncode == 0 and "--no-header" in run.stdout and "f0, f1" in run.stdout
