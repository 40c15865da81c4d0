"""Normals per second per core: the counter-based ChaCha20 stream against numpy's PCG64, in one process.

    python benchmarks/chacha_normals.py                          # 100 000 × 500 float64, 1 and 2 threads
    python benchmarks/chacha_normals.py --rows 20000 --repeat 3  # a quick look

Columns, timed in turn after one untimed round (``run.side_by_side``), medians of --repeat rounds,
ratios of throughput against (a) measured in the same rounds:

- (a) PCG64: ``numpy.random.Generator.standard_normal((rows, d))`` (numpy's ziggurat); with 2
  threads, two generators each filling half the rows in its own thread (numpy releases the GIL);
- (b) ChaCha20, numba: :func:`ldpcli.math._chacha20_numba.normals` (``parallel=True``) with ``numba.set_num_threads``;
- (c) ChaCha20, numpy reference: :func:`ldpcli.math._chacha20.stream_normals` on --reference-rows
  rows (it is slow; its throughput is per value, so a smaller batch compares fairly), one thread always;
- (d) randomgen's ChaCha (20 rounds) through ``Generator.standard_normal`` when randomgen is installed
  (one thread; two generators in two threads for 2).

The throughput target of issue 39 is (b) ≥ 0.8× (a) per core. The load of the machine is printed
before and after: on a shared machine the ratios are noisy. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rng import load  # noqa: E402
from run import side_by_side, table  # noqa: E402

from ldpcli.math import _chacha20 as reference  # noqa: E402


def threaded(fill: Callable[[np.random.Generator, int], object], generators: list[np.random.Generator],
             rows: int) -> Callable[[], object]:
    """A function filling ``rows`` rows split evenly over one thread per generator."""
    share = -(-rows // len(generators))
    if len(generators) == 1:
        return lambda: fill(generators[0], rows)
    pool = ThreadPoolExecutor(len(generators))
    return lambda: list(pool.map(lambda g: fill(g, share), generators))


def columns(rows: int, d: int, reference_rows: int, threads: int) -> dict[str, tuple[Callable[[], object], int, int]]:
    """name → (function, values it draws, threads it runs on) for one thread count."""
    key = reference.release_key(1)
    keys = np.arange(rows, dtype=np.uint64)
    out: dict[str, tuple[Callable[[], object], int, int]] = {
        "(a) PCG64 standard_normal": (threaded(lambda g, m: g.standard_normal((m, d)),
                                               [np.random.default_rng(s) for s in range(threads)], rows), rows * d, threads),
    }
    try:
        import numba

        from ldpcli.math import _chacha20_numba as compiled
    except ImportError:
        print("numba is not installed: no (b)")
    else:
        numba.set_num_threads(threads)
        compiled.normals(key, keys[:2], d, parallel=True)  # compile outside the timing
        out["(b) ChaCha20 numba"] = (lambda: compiled.normals(key, keys, d, parallel=True), rows * d, threads)
    out["(c) ChaCha20 numpy reference"] = (lambda: reference.stream_normals(key, keys[:reference_rows], d),
                                            reference_rows * d, 1)
    try:
        import randomgen
    except ImportError:
        print("randomgen is not installed: no (d)")
    else:
        chachas = [np.random.Generator(randomgen.ChaCha(key=s, rounds=20)) for s in range(threads)]
        out["(d) randomgen ChaCha standard_normal"] = (
            threaded(lambda g, m: g.standard_normal((m, d)), chachas, rows), rows * d, threads)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=500)
    parser.add_argument("--reference-rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    print(f"load before: {load()}\n")
    for threads in args.threads:
        cols = columns(args.rows, args.d, args.reference_rows, threads)
        times = side_by_side({name: fn for name, (fn, _, _) in cols.items()}, args.repeat)
        rate = {name: cols[name][1] / seconds for name, seconds in times.items()}
        base = rate["(a) PCG64 standard_normal"]
        print(f"{threads} thread(s), {args.rows} × {args.d} float64 ((c): {args.reference_rows} rows)\n")
        table(["generator", "median s", "normals/s per thread", "throughput vs (a)"],
              [[name, f"{times[name]:.3f}", f"{rate[name] / cols[name][2]:.3g}", f"{rate[name] / base:.2f}×"]
               for name in times])
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
