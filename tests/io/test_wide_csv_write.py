"""Wide CSV output written by the wide writer (ldpcli/io/_csv_wide_write.py, issue 36): above the wide
reader's threshold (``CSV_WIDE_COLUMNS``, 1500) the text is built from the values, not by pyarrow's CSV
writer, which held a few KB per column (3 rows of 10⁶ columns peaked at 3.1 GB), and it is the bytes pyarrow
writes: each file here is written both ways (the threshold raised to send it to pyarrow) and compared.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from ldpcli.io import AtomicVectorWriter, VectorLayout
from tests.helpers import ldp_peak_memory

D = 2_500  # above CSV_WIDE_COLUMNS: the wide writer's without any override
#: Names pyarrow quotes with something inside: a quote, a comma, a line break, spaces, non-ASCII text.
ODD_NAMES = ('a"b', "c,d", "e\nf", " lead", "é", "'s", "1")
#: Values whose shortest text differs between writers (pyarrow: 1e-7, 0.00001, -0, 1e+16).
ODD_VALUES = {"float64": (0.1, 1e-300, -0.0, 5e-324, 1e16, 1e-5, 1e-7, 0.30000000000000004, 1.2345678901234568e17),
              "float32": (0.1, 1e-30, -0.0, 1e-45, 16777216.0, 1e-5, 1e-7, 3.4e38)}


def _values(rows: int, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(3)
    values = rng.standard_normal((rows, D))
    if dtype == "float64":
        values *= 10.0 ** rng.integers(-300, 300, (rows, D))
    values[0, : len(ODD_VALUES[dtype])] = ODD_VALUES[dtype]
    return values


def _keep(rows: int) -> pa.Table:
    """Kept columns pyarrow writes in its own ways: missing values, quoted text (with a quote, a comma, a line
    break: the one-row-at-a-time path), integers and booleans."""
    texts = ["a", 'b"c', None, "x\ny", "", "é", ","]
    return pa.table({
        "id": pa.array([i if i != 2 else None for i in range(rows)], pa.int64()),
        "s": [texts[i % len(texts)] for i in range(rows)],
        "ok": [i % 3 == 0 for i in range(rows)],
    })


def _write(path: Path, names: tuple[str, ...], values: np.ndarray, keep: pa.Table | None, dtype: str,
           cuts: tuple[int, ...]) -> None:
    """``values`` (and ``keep``) written in the batches between ``cuts`` (an empty batch included)."""
    layout = VectorLayout("columns", names, len(names), tuple(keep.column_names) if keep is not None else ())
    with AtomicVectorWriter(path, layout, dtype=dtype) as writer:
        for start, stop in zip(cuts, cuts[1:]):
            writer.write(values[start:stop], keep.slice(start, stop - start) if keep is not None else None)
        writer.commit()


def _both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str,
               write: Callable[[Path], None]) -> tuple[bytes, bytes, int]:
    """The bytes ``write`` writes through pyarrow's CSV writer and through the wide writer (decompressed),
    and how many batches the wide writer wrote."""
    import ldpcli.io._csv_wide as csv_wide
    import ldpcli.io._csv_wide_write as wide_write

    calls = []
    original = wide_write.WideCsvEncoder.write_values
    monkeypatch.setattr(wide_write.WideCsvEncoder, "write_values",
                        lambda self, *args: (calls.append(1), original(self, *args))[1])
    texts = []
    for name, threshold in (("arrow", 10**9), ("wide", csv_wide.CSV_WIDE_COLUMNS)):
        monkeypatch.setattr(csv_wide, "CSV_WIDE_COLUMNS", threshold)
        path = tmp_path / f"{name}{suffix}"
        write(path)
        texts.append(gzip.decompress(path.read_bytes()) if suffix.endswith(".gz") else path.read_bytes())
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"arrow{suffix}", f"wide{suffix}"]  # no temporary left
    return texts[0], texts[1], len(calls)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("cells", [1 << 18, 1_000])  # whole rows a block, or each row cut in three
@pytest.mark.parametrize("suffix", [".csv", ".csv.gz"])
def test_the_wide_writer_writes_the_bytes_pyarrow_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         dtype: str, kept: bool, cells: int, suffix: str) -> None:
    import ldpcli.io._csv_wide_write as wide_write

    monkeypatch.setattr(wide_write, "_CELLS", cells)
    rows = 9
    names = tuple(f"x{j}" for j in range(D - len(ODD_NAMES))) + ODD_NAMES
    values, keep = _values(rows, dtype), (_keep(rows) if kept else None)
    arrow, wide, batches = _both_ways(tmp_path, monkeypatch, suffix,
                                      lambda path: _write(path, names, values, keep, dtype, (0, 4, 4, rows)))
    assert batches == 2  # the wide writer wrote the non-empty batches
    assert wide == arrow

    # what it reads back as: the same names and float64 values (float32: the shortest text of each float32,
    # so the same float32 values once read and rounded to float32, as pyarrow's text reads back)
    table = pacsv.read_csv(pa.BufferReader(wide), convert_options=pacsv.ConvertOptions(
        column_types=dict.fromkeys(names, pa.float64()), strings_can_be_null=True, quoted_strings_can_be_null=False))
    assert table.column_names == [*(keep.column_names if keep is not None else ()), *names]
    read = np.column_stack([table.column(name).to_numpy() for name in names])
    if dtype == "float32":
        read, values = read.astype(np.float32), values.astype(np.float32)
    expected = values
    assert np.array_equal(read, expected) and np.array_equal(np.signbit(read), np.signbit(expected))
    if keep is not None:
        assert table.select(keep.column_names).cast(keep.schema).equals(keep)


def test_an_empty_wide_file_is_pyarrows_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = tuple(f"v{j}" for j in range(D)) + ODD_NAMES
    arrow, wide, batches = _both_ways(tmp_path, monkeypatch, ".csv",
                                      lambda path: _write(path, names, np.empty((0, len(names))), None, "float64", ()))
    assert wide == arrow and batches == 0 and wide.count(b"\n") == 2  # the header, with one name's line break


def test_a_wide_file_left_unfinished_leaves_nothing(tmp_path: Path) -> None:
    """The wide writer writes into the writer's temporary file, renamed only on commit."""
    names = tuple(f"v{j}" for j in range(D))
    with pytest.raises(KeyboardInterrupt), AtomicVectorWriter(tmp_path / "out.csv", VectorLayout(
            "columns", names, D)) as writer:
        writer.write(_values(3, "float64"))
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def _csv(path: Path, rows: np.ndarray) -> Path:
    with path.open("w") as out:
        out.write(",".join(f"c{j}" for j in range(rows.shape[1])) + "\n")
        np.savetxt(out, rows, delimiter=",", fmt="%.17g")
    return path


def narrow_and_wide_peaks(tmp_path: Path, d: int, *options: str) -> tuple[list[int], Path]:
    """The peak memory of ``ldp privatize`` (with ``options``) of 3 rows of 10 columns and of the same
    rows of ``d`` columns (CSV into CSV), and the wide run's output."""
    x = np.random.default_rng(0).standard_normal((3, d))
    peaks = []
    for name, rows in (("narrow", x[:, :10]), ("wide", x)):
        source = _csv(tmp_path / f"{name}.csv", rows / (1.01 * np.linalg.norm(rows, axis=1, keepdims=True)))
        output = tmp_path / f"{name}-out.csv"
        run, peak = ldp_peak_memory("privatize", source, "--eps", "1", "-o", output, "-q", *options, timeout=600)
        assert run.returncode == 0, run.stderr
        peaks.append(peak)
    return peaks, output


@pytest.mark.slow
def test_privatizing_a_wide_csv_into_csv_takes_memory_by_the_rows_not_the_columns(tmp_path: Path) -> None:
    """3 rows of 200000 columns (15 MB of text): its run peaked ~520 MB above that of 10 columns through
    pyarrow's writer (812–828 MB against ~300 MB), ~160–210 MB through the wide writer, most of it the
    reader's choice of columns among 200000 names."""
    d = 200_000
    peaks, output = narrow_and_wide_peaks(tmp_path, d)
    assert peaks[1] - peaks[0] < 350 * 2**20, [peak // 2**20 for peak in peaks]
    with output.open("rb") as text:
        assert text.readline().count(b",") == d - 1 and len(text.read().splitlines()) == 3
