"""Read a wide CSV file with pyarrow's CSV reader and with the wide reader (``ldpcli.io._csv_wide``), side by
side in one run: the throughput of each at a width (where the threshold ``CSV_WIDE_COLUMNS`` belongs: the
widest table where pyarrow is still the faster), and, one file per process, the peak memory of reading.

    python benchmarks/wide_csv.py --d 2000 --d 10000 --d 50000 --n-values 4000000 --repeat 3
    /usr/bin/time -v python benchmarks/wide_csv.py --read FILE --reader wide     # max RSS of one read
    python benchmarks/wide_csv.py --make FILE --d 1000000 --n 3                  # a file to read
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import ldpcli.io._csv_wide as wide
from ldpcli.io import open_vectors


def make(path: Path, n: int, d: int, seed: int = 0) -> None:
    """A CSV file of n rows of d values (%.17g, as numpy writes them), with a header x0, x1, …"""
    x = np.random.default_rng(seed).standard_normal((n, d)) / np.sqrt(d)
    with path.open("w") as out:
        out.write(",".join(f"x{j}" for j in range(d)) + "\n")
        np.savetxt(out, x, delimiter=",", fmt="%.17g")


def read(path: Path, reader: str) -> float:
    """Seconds to read every batch of the file with the given reader (``pyarrow`` or ``wide``)."""
    wide.CSV_WIDE_COLUMNS = 0 if reader == "wide" else 10**9
    start = time.perf_counter()
    with open_vectors(path, writable=False) as vectors:
        for _ in vectors:
            pass
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d", type=int, action="append")
    parser.add_argument("--n", type=int, default=None, help="rows (default: --n-values / d)")
    parser.add_argument("--n-values", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--make", type=Path)
    parser.add_argument("--read", type=Path)
    parser.add_argument("--reader", choices=("pyarrow", "wide"), default="wide")
    args = parser.parse_args()
    if args.make is not None:
        make(args.make, args.n or 3, (args.d or [1_000_000])[0])
        return
    if args.read is not None:
        print(f"{args.reader}: {read(args.read, args.reader):.2f} s")
        return
    print(f"{'d':>8} {'n':>6} {'MB':>7} {'pyarrow MB/s':>13} {'wide MB/s':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for d in args.d or [2_000, 10_000, 50_000]:
            n = args.n or max(1, args.n_values // d)
            path = Path(tmp) / f"w{d}.csv"
            make(path, n, d)
            mb = path.stat().st_size / 1e6
            best = {reader: min(read(path, reader) for _ in range(args.repeat)) for reader in ("pyarrow", "wide")}
            print(f"{d:>8} {n:>6} {mb:>7.1f} {mb / best['pyarrow']:>13.1f} {mb / best['wide']:>10.1f}")


if __name__ == "__main__":
    main()
