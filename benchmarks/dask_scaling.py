"""What scales with --engine dask: privatizing one file on a local Dask cluster of 1 and 2 workers.

    python benchmarks/dask_scaling.py                  # 1M×64 Parquet, 16 row groups
    python benchmarks/dask_scaling.py --rows 200000 --repeat 1

Side by side in one run, on the same file (seconds, medians of --repeat, the cluster started
beforehand and not counted): the local engine on 1 and 2 threads (`write_file_release`), and the
dataset engine (`write_dataset_release`) on a LocalCluster of 1 and of 2 single-threaded worker
processes, then `estimate_file_mean` of the dataset locally and on the 2-worker cluster. Ratios are
against the 1-worker cluster (and the local engine's one thread). Needs `pip install 'ldp[dask]'`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ldpcli.analysis._estimate import estimate_file_mean
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._engines import DaskEngine
from ldpcli.release._file import write_file_release
from ldpcli.release._options import ReleaseOptions, Resources


def timed(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from distributed import LocalCluster

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        src = tmp / "in.parquet"
        x = np.random.default_rng(0).standard_normal((args.rows, args.d))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        table = pa.table({"vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), args.d)})
        pq.write_table(table, src, row_group_size=-(-args.rows // 16))
        del x, table
        rows: list[tuple[str, float]] = []
        for threads in (1, 2):
            rows.append((f"local engine, {threads} thread(s)", timed(lambda: write_file_release(
                src, tmp / "local.parquet", epsilon=8.0, options=ReleaseOptions(overwrite=True, resources=Resources(threads=threads))), args.repeat)))
        for workers in (1, 2):
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cl:
                engine = DaskEngine(cl.scheduler_address)
                rows.append((f"dask, {workers} worker(s)", timed(lambda: write_dataset_release(
                    src, tmp / "release", engine=engine, epsilon=8.0, options=ReleaseOptions(overwrite=True)), args.repeat)))
                if workers == 2:
                    rows.append(("estimate-mean, dask 2 workers", timed(
                        lambda: estimate_file_mean(tmp / "release", engine=engine), args.repeat)))
        rows.append(("estimate-mean, local", timed(lambda: estimate_file_mean(tmp / "release"), args.repeat)))
    base = dict(rows)
    print(f"# --engine dask scaling, {args.rows}×{args.d}, {sys.platform}, 16 row groups\n")
    print("| run | seconds | ratio |")
    print("|---|---|---|")
    for label, seconds in rows:
        reference = (base["dask, 1 worker(s)"] if label.startswith("dask") else
                     base["local engine, 1 thread(s)"] if label.startswith("local") else base["estimate-mean, local"])
        print(f"| {label} | {seconds:.2f} | {seconds / reference:.2f}× |")


if __name__ == "__main__":
    main()
