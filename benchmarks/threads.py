"""How the local engine scales with threads: one output file against a dataset directory (`-o DIR/`).

    python benchmarks/threads.py                          # 400k×500 float64, threads 1, 2, 4, … up to the cores
    python benchmarks/threads.py --shape 20000x500 --repeat 1 --kernel numpy

Side by side in one run, on the same Parquet file (PrivUnit2, ε = 8): the one-thread baseline (read
+ n·d numpy normals + write with ldp's writer settings, ``privatize_vs_baseline.baseline``), then
for each thread count `write_file_release` into one file and `write_dataset_release` with the local engine
into a dataset directory of parts (what `ldp privatize -o DIR/` runs). The timed runs alternate
(baseline, file 1, dir 1, file 2, dir 2, …) after one untimed round, so drift in the machine's
speed hits every column; the seconds are medians of --repeat rounds. Ratios are against the
baseline; "× linear" is the directory's speed-up over its own one-thread run divided by the thread
count (1.0: linear). The one output file is bounded by its one writer: pyarrow encodes and writes
the row groups of one file in order on one thread.

``--ledger`` adds, after each directory run, the same run charged to a fresh ledger: the driver
then reads the input once more on a thread of its own, beside the parts, for the input's
fingerprint (a SHA-256 of the values in file order, which cannot be split) and its keyed row
hashes; "ledger ÷ dir" is what that costs. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from privatize_vs_baseline import baseline  # noqa: E402
from run import input_file, kernels_here, side_by_side, table, with_kernel  # noqa: E402

from ldpcli.release._dataset import write_dataset_release  # noqa: E402
from ldpcli.release._file import available_cores, write_file_release  # noqa: E402
from ldpcli.release._ledger import Ledger  # noqa: E402
from ldpcli.release._options import Budget, ReleaseOptions, Resources  # noqa: E402


def thread_counts(cores: int) -> list[int]:
    """1, 2, 4, … below ``cores``, then ``cores``."""
    counts = [1]
    while counts[-1] * 2 < cores:
        counts.append(counts[-1] * 2)
    return counts if cores == 1 else [*counts, cores]


def charged(src: Path, tmp: Path, options: ReleaseOptions) -> object:
    """``write_dataset_release`` of ``src`` charged to a new ledger (so no earlier round's charge counts)."""
    path = tmp / "ledger.json"
    path.unlink(missing_ok=True)
    budget = Budget(ledger=Ledger.open(path))
    return write_dataset_release(src, tmp / "out", engine=None, epsilon=8.0, options=replace(options, budget=budget))


def runs(src: Path, tmp: Path, d: int, counts: list[int], memory: int, kernel: str,
         ledger: bool = False) -> dict[str, Callable[[], object]]:
    """The baseline, then the single file and the dataset directory (and, with ``ledger``, the
    directory charged to a ledger) at each thread count, in timing order."""
    fns: dict[str, Callable[[], object]] = {"baseline": lambda: baseline(src, tmp / "base.parquet", d)}
    for threads in counts:
        options = ReleaseOptions(overwrite=True, resources=Resources(threads=threads, memory=memory))
        fns[f"file {threads}"] = with_kernel(kernel, lambda options=options: write_file_release(
            src, tmp / "out.parquet", epsilon=8.0, options=options))
        fns[f"dir {threads}"] = with_kernel(kernel, lambda options=options: write_dataset_release(
            src, tmp / "out", engine=None, epsilon=8.0, options=options))
        if ledger:
            fns[f"ledger {threads}"] = with_kernel(kernel, lambda options=options: charged(src, tmp, options))
    return fns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="400000x500", help="NxD of the input (float64)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory", type=int, default=256 * 2**20, help="the memory budget in bytes (ldp's default)")
    parser.add_argument("--kernel", choices=("numba", "numpy"), default=kernels_here()[0])
    parser.add_argument("--max-threads", type=int, default=available_cores())
    parser.add_argument("--ledger", action="store_true", help="also time each directory run charged to a ledger")
    args = parser.parse_args()
    n, d = (int(v) for v in args.shape.lower().split("x"))
    counts = thread_counts(args.max_threads)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip() if os.path.exists("/usr/bin/uptime") else "?"
    print(f"## threads: privunit2 ε = 8, {n}×{d} float64 Parquet, kernel {args.kernel}, {available_cores()} cores, "
          f"memory {args.memory // 2**20} MB\n\nload before: {load}\n")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        src = input_file(tmp, n, d)
        times = side_by_side(runs(src, tmp, d, counts, args.memory, args.kernel, args.ledger), args.repeat)
    base = times["baseline"]
    rows = []
    for threads in counts:
        file, folder = times[f"file {threads}"], times[f"dir {threads}"]
        linear = times["dir 1"] / folder / threads
        charge = [f"{times[f'ledger {threads}']:.2f}", f"{times[f'ledger {threads}'] / folder:.2f}×"] if args.ledger else []
        rows.append([str(threads), f"{file:.2f}", f"{file / base:.2f}×", f"{folder:.2f}", f"{folder / base:.2f}×",
                     f"{linear:.2f}", *charge])
    print(f"baseline (one thread): {base:.2f} s\n")
    table(["threads", "one file s", "÷ baseline", "-o DIR/ s", "÷ baseline", "DIR × linear",
           *(["DIR + ledger s", "ledger ÷ dir"] if args.ledger else [])], rows)
    print(f"load after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    main()
