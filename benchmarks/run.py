"""The benchmark suite: every speed and memory target of ldp, measured side by side in one run.

    python benchmarks/run.py            # everything (tens of minutes on 2 cores, ~8 GB of temp files)
    python benchmarks/run.py --quick    # small shapes, a few minutes
    python benchmarks/run.py --only privatize,api --before /path/to/an/older/checkout

Sections (ratios are against a baseline measured in the same run, on the same file; the timed
runs of the two sides alternate, so drift in the machine's speed hits both):
- privatize: PrivUnit2 at ε = 8, Parquet → Parquet, against read + n·d numpy normals + write with
  ldp's writer settings (``privatize_vs_baseline.baseline``), with each sampler kernel
  (``ldpcli.math._kernels``: numba when installed, and the numpy reference) on 1 and 2 threads. Targets
  (issue 14): ≤ 1.25× on one thread, ≤ 0.7× of the one-thread baseline on two. ``--before PATH``
  adds the same run of the ldp checkout at PATH (e.g. a ``git worktree`` of an older commit).
- api: each vector mechanism's ``privatize`` on an n × d batch with n·d = 10⁷ (2·10⁶ with
  --quick), d ∈ {500, 10⁴, 10⁶}, with each kernel, against drawing the n·d normals with numpy
  (``rng.standard_normal((n, d))``), the floor the issues name. Targets (issue 27): every fused
  mechanism ≤ 0.8× with numba, ≤ 1.2× with the numpy reference where it needs n·d normals. The
  hypercube mechanisms (privunit-inf, duchi-linf) draw no normals: their numpy reference draws n·d
  uniforms (the vertex) and n·d 32-bit keys (each row's agreeing set is its A smallest keys), then
  sorts or selects within each row; those draws, ``rng.random((n, d))`` and n·d/2 raw 64-bit words,
  are timed in the same run as their own row (0.27–0.31× the normals on 2 cores; the sort or
  selection adds 0.05–0.2× more), and the reference is held to the same ≤ 1.2× of the normals.
- mechanisms: `write_file_release` with every registered vector mechanism at one shape.
- memory: peak resident memory of `ldp privatize` on a ~400 MB and a ~2 GB file (target
  < 400 MB and flat).
- params: calibration time after import for d ∈ {10, 10⁴, 10⁷}, ε ∈ {0.1, 4, 1000} (target
  ≤ 10 ms), and the cold start of `ldp --help` (target ≤ 0.5 s).
- estimate: `estimate-mean` against a plain pyarrow scan of the same file (target ≤ 1.2×).
Timings are medians of --repeat runs. Nothing here is a test: tests never assert wall-clock times.
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
from typing import Callable

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from privatize_vs_baseline import baseline, make_input  # noqa: E402

from ldpcli.analysis._estimate import estimate_file_mean  # noqa: E402
from ldpcli.errors import UsageError  # noqa: E402
from ldpcli.math._kernels import KERNEL_ENV, _numba_installed  # noqa: E402
from ldpcli.mechanisms import MechanismSpec, get_mechanism, mechanism_names  # noqa: E402
from ldpcli.release._file import write_file_release  # noqa: E402
from ldpcli.release._options import ReleaseOptions, Resources  # noqa: E402

LDP = str(Path(sys.executable).with_name("ldp"))


def median_time(fn: Callable[[], object], repeat: int) -> float:
    return side_by_side({"": fn}, repeat)[""]


def side_by_side(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median seconds of each function, timed in turn (a, b, c, a, b, c, …) after one untimed round."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for round_ in range(repeat + 1):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            if round_:
                times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(values) for name, values in times.items()}


def with_kernel(kernel: str, fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` run with ``LDP_KERNEL=kernel`` (ldpcli.math._kernels reads it at every call)."""

    def run() -> object:
        previous = os.environ.get(KERNEL_ENV)
        os.environ[KERNEL_ENV] = kernel
        try:
            return fn()
        finally:
            if previous is None:
                del os.environ[KERNEL_ENV]
            else:
                os.environ[KERNEL_ENV] = previous

    return run


def kernels_here() -> list[str]:
    """The sampler kernels this machine can run: numba when installed, and the numpy reference."""
    return (["numba"] if _numba_installed() else []) + ["numpy"]


_BEFORE_PROBE = (
    "import sys, time\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "from ldpcli.release._file import write_file_release\n"
    "args = dict(epsilon=8.0, threads=int(sys.argv[4]), overwrite=True)\n"
    "write_file_release(sys.argv[2], sys.argv[3], **args)\n"
    "t0 = time.perf_counter()\n"
    "write_file_release(sys.argv[2], sys.argv[3], **args)\n"
    "print(time.perf_counter() - t0)\n"
)


def before_run(checkout: Path, src: Path, dst: Path, threads: int) -> Callable[[], float]:
    """A function that privatizes ``src`` with the ldp of ``checkout`` in a fresh interpreter and
    returns the seconds of one warm call (its import and first call are not counted)."""

    def run() -> float:
        proc = subprocess.run([sys.executable, "-c", _BEFORE_PROBE, str(checkout), str(src), str(dst), str(threads)],
                              capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": ""})
        return float(proc.stdout.strip().splitlines()[-1])

    return run


def table(header: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(flush=True)


def input_file(tmp: Path, n: int, d: int) -> Path:
    path = tmp / f"in_{n}x{d}.parquet"
    if not path.exists():
        make_input(path, n, d)
    return path


def bench_privatize(tmp: Path, shapes: list[tuple[int, int]], repeat: int, before: Path | None) -> None:
    kernels = kernels_here()
    print("## privatize (privunit2, ε = 8, Parquet → Parquet) ÷ read + numpy normals + write on one thread\n")
    header = ["n×d", "baseline s"]
    for kernel in kernels:
        header += [f"{kernel} 1 thread", f"{kernel} 2 threads"]
    if before is not None:
        header += ["before 1 thread", "before 2 threads"]
    rows = []
    for n, d in shapes:
        src = input_file(tmp, n, d)
        fns: dict[str, Callable[[], object]] = {"base": lambda: baseline(src, tmp / "base.parquet", d)}
        for kernel in kernels:
            for threads in (1, 2):
                fns[f"{kernel} {threads}"] = with_kernel(kernel, lambda threads=threads: write_file_release(
                    src, tmp / "out.parquet", epsilon=8.0,
                    options=ReleaseOptions(overwrite=True, resources=Resources(threads=threads))))
        times = side_by_side(fns, repeat)
        base = times["base"]
        cells = [f"{n}×{d}", f"{base:.2f}"]
        for kernel in kernels:
            cells += [f"{times[f'{kernel} {threads}'] / base:.2f}×" for threads in (1, 2)]
        if before is not None:
            for threads in (1, 2):
                probe = before_run(before, src, tmp / "before.parquet", threads)
                warm = [probe() for _ in range(repeat)]
                cells.append(f"{statistics.median(warm) / base:.2f}×")
        rows.append(cells)
    table(header, rows)


def hypercube_draws(n: int, d: int) -> None:
    """The random numbers the hypercube mechanisms' numpy reference draws for an n × d batch: n·d
    uniforms for the vertex, n·d 32-bit keys (n·d/2 raw words) for the agreeing sets."""
    rng = np.random.default_rng(1)
    rng.random((n, d))
    rng.bit_generator.random_raw(n * d // 2)


def bench_api(repeat: int, values: int = 10**7) -> None:
    kernels = kernels_here()
    print(f"## mechanism API on n·d = {values:.0e} values ÷ numpy's n·d normals "
          "(fused: ≤ 0.8× numba, ≤ 1.2× numpy)\n")
    names = [name for name in mechanism_names() if get_mechanism(name).vector]
    header = ["mechanism"] + [f"d = {d:g}" + (f" ({kernel})" if len(kernels) > 1 else "")
                              for d in (500, 10**4, 10**6) for kernel in kernels]
    uniforms = "n·d uniforms + n·d 32-bit keys (the hypercube mechanisms' draws)"
    results: dict[str, list[str]] = {name: [name] for name in [*names, uniforms]}
    floors = []
    for d in (500, 10**4, 10**6):
        n = values // d
        x = np.random.default_rng(0).standard_normal((n, d))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        fns: dict[str, Callable[[], object]] = {"floor": lambda n=n, d=d: np.random.default_rng(1).standard_normal((n, d)),
                                                uniforms: lambda n=n, d=d: hypercube_draws(n, d)}
        for name in names:
            cls = get_mechanism(name)
            try:
                mech = cls.calibrate(d, 8.0, **({"delta": 1e-6} if "delta" in cls.options else {}))
            except UsageError:  # needs options of its own (bcdp: the dependence q and per-feature levels)
                continue
            for kernel in kernels:
                fns[f"{name} {kernel}"] = with_kernel(kernel, lambda mech=mech: mech.privatize(x, np.random.default_rng(1)))
        times = side_by_side(fns, repeat)
        floors.append(f"d = {d:g}: {times['floor'] * 1e3:.0f} ms")
        for name in names:
            results[name] += [f"{times[f'{name} {kernel}'] / times['floor']:.2f}×" if f"{name} {kernel}" in times
                              else "n/a (needs its own options)" for kernel in kernels]
        results[uniforms] += [f"{times[uniforms] / times['floor']:.2f}×"] * len(kernels)
    table(header, list(results.values()))
    print("numpy normals floor: " + ", ".join(floors) + "\n")
def bench_mechanisms(tmp: Path, shape: tuple[int, int], repeat: int) -> None:
    n, d = shape
    print(f"## every vector mechanism, {n}×{d}, ε = 8, 2 threads\n")
    src = input_file(tmp, n, d)
    base = median_time(lambda: baseline(src, tmp / "base.parquet", d), repeat)
    rows = []
    for name in mechanism_names():
        cls = get_mechanism(name)
        if not cls.vector:
            continue
        options = {"delta": 1e-6} if "delta" in cls.options else {}
        t = median_time(lambda: write_file_release(
            src, tmp / "out.parquet", mechanism=MechanismSpec(name, 8.0, options=options),
            options=ReleaseOptions(overwrite=True, resources=Resources(threads=2))), repeat)
        rows.append([name, f"{t:.2f}", f"{t / base:.2f}"])
    table(["mechanism", "seconds", "× baseline (%.2f s)" % base], rows)


_HWM_PROBE = (
    "import sys\n"
    "from ldpcli.cli.app import app\n"
    "try:\n"
    "    app(sys.argv[1:], prog_name='ldp')\n"
    "except SystemExit as exc:\n"
    "    if exc.code: raise\n"
    "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1], file=sys.stderr)\n"
)


def peak_rss_mb(args: list[str]) -> tuple[float, float]:
    """(seconds, peak resident MB) of `ldp ARGS` in a fresh interpreter.

    Read from the process's own VmHWM at exit: ru_maxrss of a child forked from this (large)
    benchmark process would include the parent's image from before exec.
    """
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _HWM_PROBE, *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return time.perf_counter() - t0, int(proc.stderr.strip().splitlines()[-1]) / 1024


def bench_memory(tmp: Path, shapes: list[tuple[int, int]]) -> None:
    print("## peak memory of `ldp privatize` (target < 400 MB, flat)\n")
    rows = []
    for n, d in shapes:
        src = input_file(tmp, n, d)
        size = src.stat().st_size / 2**20
        secs, rss = peak_rss_mb(["privatize", str(src), "--eps", "8", "-o", str(tmp / "mem.parquet"),
                                 "--overwrite", "--quiet"])
        rows.append([f"{n}×{d}", f"{size:.0f}", f"{rss:.0f}", f"{secs:.1f}"])
    table(["n×d", "input MB", "peak RSS MB", "seconds"], rows)


def bench_params(repeat: int) -> None:
    print("## params: calibration time after import (target ≤ 10 ms), `ldp --help` cold start (≤ 0.5 s)\n")
    rows = []
    for name in ("privunit2",) + tuple(n for n in mechanism_names() if n != "privunit2"):
        cls = get_mechanism(name)
        if not cls.vector:
            continue
        options = {"delta": 1e-6} if "delta" in cls.options else {}
        for d in (10, 10**4, 10**7):
            for eps in (0.1, 4.0, 1000.0):
                try:
                    t = median_time(lambda: cls.calibrate(d, eps, **options), repeat)
                    rows.append([name, str(d), str(eps), f"{t * 1e3:.2f}"])
                except Exception as exc:  # a limit the mechanism documents
                    rows.append([name, str(d), str(eps), f"n/a ({type(exc).__name__})"])
    table(["mechanism", "d", "ε", "ms"], rows)
    help_times = []
    for _ in range(max(3, repeat)):
        t0 = time.perf_counter()
        subprocess.run([LDP, "--help"], capture_output=True, check=True)
        help_times.append(time.perf_counter() - t0)
    print(f"`ldp --help` cold start: median {statistics.median(help_times):.3f} s\n")


def bench_estimate(tmp: Path, shape: tuple[int, int], repeat: int) -> None:
    n, d = shape
    print(f"## estimate-mean vs a plain pyarrow scan, {n}×{d} (target ≤ 1.2×)\n")
    src = input_file(tmp, n, d)
    out = write_file_release(src, tmp / "est.parquet", epsilon=8.0, options=ReleaseOptions(overwrite=True)).output

    def scan() -> None:
        total = np.zeros(d)
        for batch in pq.ParquetFile(out).iter_batches():
            total += np.asarray(batch.column(0).flatten()).reshape(-1, d).sum(axis=0)

    base = median_time(scan, repeat)
    est = median_time(lambda: estimate_file_mean(out), repeat)
    table(["scan s", "estimate-mean s", "ratio"], [[f"{base:.2f}", f"{est:.2f}", f"{est / base:.2f}"]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small shapes only")
    parser.add_argument("--only", default="privatize,api,mechanisms,memory,params,estimate")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tmp", default=None, help="folder for the generated files (default: a temporary one)")
    parser.add_argument("--before", type=Path, default=None,
                        help="an older ldp checkout (e.g. a git worktree) to time beside this one in `privatize`")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if args.quick:
        shapes = [(20_000, 500), (200_000, 64), (200, 10**5)]
        mem_shapes = [(20_000, 1000), (100_000, 1000)]
        one = (20_000, 500)
    else:
        shapes = [(100_000, 500), (1_000_000, 64), (1_000, 10**5), (50, 10**6)]
        mem_shapes = [(50_000, 1000), (250_000, 1000)]  # ~400 MB and ~2 GB of float64
        one = (100_000, 500)
    print(f"# ldp benchmarks ({os.cpu_count()} cores, numpy {np.__version__}, kernels: {', '.join(kernels_here())})\n")
    with tempfile.TemporaryDirectory(dir=args.tmp) as name:
        tmp = Path(name)
        if "privatize" in only:
            bench_privatize(tmp, shapes, args.repeat, args.before)
        if "api" in only:
            bench_api(args.repeat, values=2 * 10**6 if args.quick else 10**7)
        if "mechanisms" in only:
            bench_mechanisms(tmp, one, args.repeat)
        if "memory" in only:
            bench_memory(tmp, mem_shapes)
        if "params" in only:
            bench_params(args.repeat)
        if "estimate" in only:
            bench_estimate(tmp, one, args.repeat)


if __name__ == "__main__":
    main()
