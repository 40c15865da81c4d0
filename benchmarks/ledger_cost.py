"""What the privacy-budget ledger costs `write_file_release`: the same file with and without a ledger, one run.

With a ledger, every batch's values are also hashed (SHA-256, in a background thread) for the
input's fingerprint, and the ledger file is read, locked and rewritten once. The ratio is
with ÷ without, best of ``--repeat`` runs, for 1 and 2 privatizing threads.

    python benchmarks/ledger_cost.py                     # 100k×500
    python benchmarks/ledger_cost.py --shape 20000x500 --repeat 1
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from privatize_vs_baseline import make_input

from ldpcli.release._file import write_file_release
from ldpcli.release._ledger import Ledger
from ldpcli.release._options import Budget, ReleaseOptions, Resources


def timed(src: Path, out: Path, threads: int, ledger: Ledger | None) -> float:
    start = time.perf_counter()
    write_file_release(src, out, epsilon=4.0, options=ReleaseOptions(
        overwrite=True, budget=Budget(ledger=ledger), resources=Resources(threads=threads)))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="100000x500", help="N×D of the input (default 100000x500)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per setting; the best is reported")
    args = parser.parse_args()
    n, d = (int(part) for part in args.shape.lower().split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        src = folder / "rows.parquet"
        make_input(src, n, d)
        timed(src, folder / "warm.parquet", 1, None)  # imports and calibration caches, outside the timings
        for threads in (1, 2):
            without, with_ledger = [], []
            for rep in range(args.repeat):  # interleaved, so drift hits both alike
                without.append(timed(src, folder / "a.parquet", threads, None))
                with_ledger.append(timed(src, folder / "b.parquet", threads, Ledger.open(folder / f"ledger{rep}.json")))
            best, best_ledger = min(without), min(with_ledger)
            print(f"{n}×{d}, threads={threads}: without ledger {best:.3f} s, with {best_ledger:.3f} s, "
                  f"ratio {best_ledger / best:.3f}")


if __name__ == "__main__":
    main()
