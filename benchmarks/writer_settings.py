"""Parquet writer settings for privatized floats: write time, read time and size, side by side in one run.

Privatized coordinates are random: their min/max statistics tell a reader nothing (every row group
spans nearly the whole range), dictionary encoding finds no repeats, and general-purpose codecs
find little to squeeze. What they do compress is the sign and exponent bytes, which
BYTE_STREAM_SPLIT gathers into runs. This benchmark measures each candidate on the same privatized
rows (PrivUnit2 outputs at ε = 8, float64 and float32), as a FixedSizeList column like ldp writes:

    python benchmarks/writer_settings.py                   # 100k×500, 5 repeats
    python benchmarks/writer_settings.py --shape 20000x500 --repeat 3

Timings are medians over --repeat runs, the candidates alternating within each repeat so drift
in the machine's speed hits all of them. Ratios are against pyarrow's defaults (snappy, statistics,
dictionary), the first row. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ldpcli.io._layout import VectorLayout
from ldpcli.io._parquet import PARQUET_CODECS, writer_settings
from ldpcli.mechanisms import get_mechanism

sys.path.insert(0, str(Path(__file__).resolve().parent))
from privatize_vs_baseline import timed  # noqa: E402

#: name → ParquetWriter keywords; ldp's own rows (``ldpcli.io._parquet.writer_settings``) are added per dtype.
CANDIDATES: dict[str, dict[str, Any]] = {
    "pyarrow default (snappy, stats, dict)": {},
    "snappy, no dict": {"use_dictionary": False},
    "none, no stats, no dict": {"compression": "none", "write_statistics": False, "use_dictionary": False},
    "snappy, no stats, no dict": {"compression": "snappy", "write_statistics": False, "use_dictionary": False},
    "lz4, no stats, no dict": {"compression": "lz4", "write_statistics": False, "use_dictionary": False},
    "zstd(1), no stats, no dict": {"compression": "zstd", "compression_level": 1, "write_statistics": False,
                                   "use_dictionary": False},
    "zstd(1) + byte split, no stats": {"compression": "zstd", "compression_level": 1, "write_statistics": False,
                                       "use_dictionary": False, "use_byte_stream_split": True},
    "zstd(3) + byte split, no stats": {"compression": "zstd", "compression_level": 3, "write_statistics": False,
                                       "use_dictionary": False, "use_byte_stream_split": True},
    "lz4 + byte split, no stats": {"compression": "lz4", "write_statistics": False, "use_dictionary": False,
                                   "use_byte_stream_split": True},
    "snappy + byte split, no stats": {"compression": "snappy", "write_statistics": False, "use_dictionary": False,
                                      "use_byte_stream_split": True},
}


def privatized_table(n: int, d: int, dtype: str, seed: int = 0) -> pa.Table:
    """n PrivUnit2 outputs (ε = 8, unit rows) as one FixedSizeList column of ``dtype``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    z = get_mechanism("privunit2").calibrate(d, 8.0).privatize(x, rng).astype(dtype)
    return pa.table({"vec": pa.FixedSizeListArray.from_arrays(pa.array(z.ravel()), d)})


def main() -> None:
    """Measure every candidate on float64 and float32 and print one table per dtype."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="100000x500", help="NxD (default 100000x500)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n, d = (int(v) for v in args.shape.lower().split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in ("float64", "float32"):
            table = privatized_table(n, d, dtype)
            layout = VectorLayout("list", ("vec",), d)
            candidates = CANDIDATES | {f"ldp --compression {codec}": writer_settings(table.schema, layout, codec)
                                       for codec in dict.fromkeys((PARQUET_CODECS[0], "lz4", "zstd"))}
            writes: dict[str, list[float]] = {name: [] for name in candidates}
            reads: dict[str, list[float]] = {name: [] for name in candidates}
            sizes: dict[str, int] = {}
            for _ in range(args.repeat):
                for name, settings in candidates.items():
                    path = Path(tmp) / "out.parquet"

                    def write(path: Path = path, settings: dict[str, Any] = settings) -> None:
                        with pq.ParquetWriter(path, table.schema, **settings) as writer:
                            writer.write_table(table, row_group_size=65_536)

                    writes[name].append(timed(write))
                    reads[name].append(timed(lambda path=path: pq.read_table(path)))
                    sizes[name] = path.stat().st_size
            base = statistics.median(writes[next(iter(candidates))])
            raw = table.nbytes
            print(f"\n{n}×{d} {dtype} ({raw / 1e6:.0f} MB in memory), median of {args.repeat}")
            print(f"{'settings':36} {'write s':>8} {'× default':>9} {'read s':>7} {'size MB':>8} {'× raw':>6}")
            for name in candidates:
                w = statistics.median(writes[name])
                print(f"{name:36} {w:8.3f} {w / base:9.2f} {statistics.median(reads[name]):7.3f} "
                      f"{sizes[name] / 1e6:8.1f} {sizes[name] / raw:6.3f}")


if __name__ == "__main__":
    main()
