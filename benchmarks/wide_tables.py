"""Time `write_file_release` on wide tables (one column per coordinate) against pyarrow reading and
writing the same table, side by side in one run, up to d = 10⁶ columns.

Baseline, on the same file: pyarrow streams it batch by batch (``pyarrow.csv.open_csv``, which
infers the columns' types, or ``ParquetFile.iter_batches``) and writes the batches back with its own
writer. write_file_release does that plus choosing the columns, checking every value and the
mechanism. Both should grow linearly with d, so the ratio and the time per column should stay
about flat from 10⁴ to 10⁶ columns; a step that is quadratic in d (a column looked up by a
linear search, once per column) shows as a ratio that grows tenfold with d.

    python benchmarks/wide_tables.py                          # CSV and Parquet, d = 10⁴, 10⁵, 10⁶
    python benchmarks/wide_tables.py --d 10000 --d 100000 --format csv --repeat 1
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ldpcli.io._layout import VectorLayout
from ldpcli.io._parquet import writer_settings
from ldpcli.release._file import write_file_release
from ldpcli.release._options import ReleaseOptions


def make_input(path: Path, n: int, d: int, seed: int = 0) -> None:
    """A CSV or Parquet file of n rows (norm about 1) in d float64 columns c0, c1, …"""
    x = np.random.default_rng(seed).standard_normal((n, d)) / np.sqrt(d)
    table = pa.Table.from_arrays([pa.array(column) for column in x.T], names=[f"c{j}" for j in range(d)])
    if path.suffix == ".csv":
        pacsv.write_csv(table, path)
    else:
        pq.write_table(table, path)


def baseline(src: Path, dst: Path) -> None:
    """pyarrow alone: read the file batch by batch and write the batches back."""
    if src.suffix == ".csv":
        with src.open("rb") as file:  # a block holds 16 lines, as in ldp's reader
            block = max(1 << 20, 16 * len(file.readline()))
        reader = pacsv.open_csv(src, read_options=pacsv.ReadOptions(block_size=block))
        with pacsv.CSVWriter(dst, reader.schema) as writer:
            for batch in reader:
                writer.write_batch(batch)
    else:
        parquet = pq.ParquetFile(src)
        schema = parquet.schema_arrow  # ldp's writer settings for one column per coordinate
        settings = writer_settings(schema, VectorLayout("columns", tuple(schema.names), len(schema.names)))
        with pq.ParquetWriter(dst, schema, **settings) as writer:
            for batch in parquet.iter_batches():
                writer.write_batch(batch)


def side_by_side(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median seconds of each function, timed in turn (a, b, a, b, …) so that drift hits both."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d", type=int, action="append", help="columns, repeatable (default: 10⁴, 10⁵, 10⁶)")
    parser.add_argument("--n", type=int, default=8, help="rows (default 8)")
    parser.add_argument("--format", action="append", choices=["csv", "parquet"], help="default: both")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'format':>8} {'d':>9} {'baseline s':>11} {'privatize s':>12} {'ratio':>6} {'µs/column':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in args.format or ["csv", "parquet"]:
            for d in args.d or [10_000, 100_000, 1_000_000]:
                src = Path(tmp) / f"in.{fmt}"
                make_input(src, args.n, d)
                times = side_by_side({
                    "baseline": lambda: baseline(src, Path(tmp) / f"base.{fmt}"),
                    "privatize": lambda: write_file_release(src, Path(tmp) / f"out.{fmt}", epsilon=1.0, options=ReleaseOptions(overwrite=True)),
                }, args.repeat)
                base, priv = times["baseline"], times["privatize"]
                print(f"{fmt:>8} {d:>9} {base:>11.2f} {priv:>12.2f} {priv / base:>6.2f} {1e6 * priv / d:>10.1f}",
                      flush=True)
                src.unlink()


if __name__ == "__main__":
    main()
