"""What ``--shuffle`` costs `write_file_release`: the same file with and without the shuffle, in one run.

With ``shuffle=True`` the privatized rows are held in memory while they fit half of ``--memory``, and
otherwise go through 64 bucket files beside the output (:mod:`ldpcli.release._shuffle`: bucketed by the
leading digit of each row's 128-bit ChaCha20 order key, each bucket then sorted by key) before they are
written. The run times both sides interleaved
(plain, shuffled, plain, …; one untimed round first), for the default budget (256 MB: rows of a file
that fits in 128 MB are shuffled in memory) and for a budget that sends every row through the bucket
files (``--small-memory``, default 16 MB). The ratio is shuffled ÷ plain, medians of ``--repeat`` runs.
Then the peak resident memory of ``ldp privatize`` with and without ``--shuffle`` at the small budget,
each in its own process: the shuffle holds at most half the budget of rows, so the two peaks differ by
about that much, however large the file.

    python benchmarks/shuffle_cost.py                          # 200k×500 (800 MB of float64 rows)
    python benchmarks/shuffle_cost.py --shape 20000x500 --repeat 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from privatize_vs_baseline import make_input

from ldpcli.release._file import write_file_release
from ldpcli.release._options import DEFAULT_MEMORY, ReleaseOptions, Resources


def timed(src: Path, out: Path, memory: int, shuffle: bool) -> float:
    start = time.perf_counter()
    write_file_release(src, out, epsilon=4.0, options=ReleaseOptions(
        overwrite=True, shuffle=shuffle, resources=Resources(memory=memory)))
    return time.perf_counter() - start


def peak_mb(folder: Path, *args: object) -> float:
    """Peak resident memory (MB) of one ``ldp`` process (Linux: ru_maxrss in KiB), its ledger in ``folder``."""
    ldp = str(Path(sys.executable).with_name("ldp"))
    env = {**os.environ, "LDP_LEDGER": str(folder / "scratch-ledger.json")}
    process = subprocess.Popen([ldp, *map(str, args)], env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise RuntimeError(f"ldp {args} failed with status {status}")
    return usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="200000x500", help="N×D of the input (default 200000x500)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per side; the median is reported")
    parser.add_argument("--small-memory", type=int, default=16, help="MB of the budget that forces bucket files")
    args = parser.parse_args()
    n, d = (int(part) for part in args.shape.lower().split("x"))
    rows_bytes = n * d * 8
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        src = folder / "rows.parquet"
        make_input(src, n, d)
        for memory in (DEFAULT_MEMORY, args.small_memory * 2**20):
            path = "bucket files" if rows_bytes > memory // 2 else "in memory"
            times: dict[bool, list[float]] = {False: [], True: []}
            for round_ in range(args.repeat + 1):  # interleaved, so drift hits both alike
                for shuffle in (False, True):
                    seconds = timed(src, folder / f"out{int(shuffle)}.parquet", memory, shuffle)
                    if round_:
                        times[shuffle].append(seconds)
            plain, shuffled = statistics.median(times[False]), statistics.median(times[True])
            print(f"{n}×{d}, --memory {memory // 2**20} MB ({path}): plain {plain:.3f} s, shuffled {shuffled:.3f} s, "
                  f"ratio {shuffled / plain:.3f}")
        common = (folder, "privatize", src, "--eps", 4, "-q", "--overwrite", "--memory", f"{args.small_memory}MB", "-o")
        plain_mb = peak_mb(*common, folder / "p.parquet")
        shuffled_mb = peak_mb(*common, folder / "s.parquet", "--shuffle")
        print(f"{n}×{d} ({rows_bytes / 2**20:.0f} MB of rows), --memory {args.small_memory} MB: peak resident "
              f"memory {plain_mb:.0f} MB plain, {shuffled_mb:.0f} MB shuffled")


if __name__ == "__main__":
    main()
