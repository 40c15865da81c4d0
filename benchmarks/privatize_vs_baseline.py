"""Time `write_file_release` against the work it cannot avoid, side by side in one run.

Baseline, on the same Parquet file: pyarrow reads it batch by batch, numpy draws n·d standard
normals, pyarrow writes them as a FixedSizeList<float64> column. PrivUnit2 needs at least that
(one Gaussian per coordinate for the direction orthogonal to u), so the ratio shows the overhead.

    python benchmarks/privatize_vs_baseline.py                 # 100k×500 and 1M×64
    python benchmarks/privatize_vs_baseline.py --shape 10000x500 --repeat 1
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ldpcli.io import default_batch_rows
from ldpcli.io._layout import VectorLayout
from ldpcli.io._parquet import writer_settings
from ldpcli.release._file import write_file_release
from ldpcli.release._options import ReleaseOptions


def make_input(path: Path, n: int, d: int, seed: int = 0) -> None:
    """A Parquet file of n unit rows of dimension d, written in chunks."""
    rng = np.random.default_rng(seed)
    chunk = default_batch_rows(d)
    schema = pa.schema([("vec", pa.list_(pa.float64(), d))])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, n, chunk):
            x = rng.standard_normal((min(chunk, n - start), d))
            x /= np.linalg.norm(x, axis=1, keepdims=True)
            writer.write_table(pa.table({"vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), d)}))


def baseline(src: Path, dst: Path, d: int) -> None:
    """Read + n·d normals + write: the unavoidable work."""
    rng = np.random.default_rng(1)
    schema = pa.schema([("vec", pa.list_(pa.float64(), d))])
    # The same writer settings as ldp (no dictionary, no statistics, its default codec).
    with pq.ParquetWriter(dst, schema, **writer_settings(schema, VectorLayout("list", ("vec",), d))) as writer:
        for batch in pq.ParquetFile(src).iter_batches(batch_size=default_batch_rows(d)):
            values = np.asarray(batch.column(0).flatten()).reshape(-1, d)
            noise = rng.standard_normal(values.shape)
            writer.write_table(pa.table({"vec": pa.FixedSizeListArray.from_arrays(pa.array(noise.ravel()), d)}))


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", action="append", help="NxD, repeatable (default: 100000x500 and 1000000x64)")
    parser.add_argument("--eps", type=float, default=8.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in s.lower().split("x")) for s in (args.shape or ["100000x500", "1000000x64"])]
    print(f"{'n×d':>14} {'baseline s':>11} {'privatize s':>12} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for n, d in shapes:
            src = Path(tmp) / f"in_{n}x{d}.parquet"
            make_input(src, n, d)
            base, priv = [], []
            for i in range(args.repeat):
                base.append(timed(lambda: baseline(src, Path(tmp) / "base.parquet", d)))
                priv.append(timed(lambda: write_file_release(src, Path(tmp) / "out.parquet", epsilon=args.eps, options=ReleaseOptions(seed=i, overwrite=True))))
            b, p = statistics.median(base), statistics.median(priv)
            print(f"{n:>8}×{d:<5} {b:>11.2f} {p:>12.2f} {p / b:>6.2f}")


if __name__ == "__main__":
    main()
