"""Seed-compressed reports against plain PrivUnit2, in one process: size, error, tries and rows per second.

    python benchmarks/compressed_reports.py                       # 100 000 × 500 at ε = 4; speed at ε = 2, 4, 8
    python benchmarks/compressed_reports.py --rows 5000 --speed-rows 500 --file-rows 2000

Three tables, all with the library calls a release makes (:class:`ldpcli.mechanisms.SeedReports` over
``PrivUnit2.calibrate(d, ε)``, the default ChaCha20 generator of a release,
``CounterGenerator(release_key())``, for both sides):

- **size and error** at --eps: --rows unit rows (a fixed direction per row drawn once), the compressed
  reports as bytes (8 per row at 64 bits) against the float64 PrivUnit2 release (8·d per row), and the
  per-row mean squared error ‖Z − x‖² of each against the exact formula, with their ratio;
- **speed** at ε = 2, 4, 8: rows per second of encoding (the rejection sampler: expected tries p/P, each
  d normals of a seed's stream) and of decoding, against plain privunit2's ``privatize`` of the same rows,
  medians of --repeat rounds timed in turn (``run.side_by_side``); the tries per row measured;
- **files** at --eps: a Parquet file of --file-rows × d float64 rows released by ``write_file_release`` as
  ``ldp privatize`` does (every core, the default generator, batches on the thread pool), plainly and with
  ``report_bits=64`` (``ldp privatize --compress-reports``), then ``estimate_file_mean`` of each (the
  verified scan: SHA-256, law check, decoding): bytes on disk and seconds, each the median of --repeat runs.

Nothing here is a test; on a shared machine the ratios are noisy.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import side_by_side, table  # noqa: E402

from ldpcli.analysis._estimate import estimate_file_mean  # noqa: E402
from ldpcli.math import CounterGenerator, release_key  # noqa: E402
from ldpcli.mechanisms import PrivUnit2, SeedReports  # noqa: E402
from ldpcli.release._file import write_file_release  # noqa: E402
from ldpcli.release._options import ReleaseOptions  # noqa: E402


def release_generator() -> np.random.Generator:
    """A release's default generator: ldp's ChaCha20 stream under 256 bits from the OS."""
    return CounterGenerator(release_key())  # type: ignore[return-value]


def unit_rows(n: int, d: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def size_and_error(rows: int, d: int, eps: float) -> None:
    base = PrivUnit2.calibrate(d, eps)
    reports = SeedReports.build(base)
    x = unit_rows(rows, d, 1)
    seeds = reports.encode(x, release_generator())
    z = reports.decode(seeds)
    plain = base.privatize(x, release_generator())
    mse_c, mse_p = float(np.mean(np.sum((z - x) ** 2, 1))), float(np.mean(np.sum((plain - x) ** 2, 1)))
    print(f"size and error: {rows} × {d} unit rows, privunit2 at ε = {eps:g}, 64-bit reports")
    table(["release", "bytes", "per-row ‖Z − x‖² (measured)", "exact", "measured / exact"], [
        ["compressed (seeds)", f"{seeds.nbytes:,}", f"{mse_c:.5g}", f"{reports.expected_error:.5g}",
         f"{mse_c / reports.expected_error:.4f}"],
        ["plain privunit2 (float64)", f"{plain.nbytes:,}", f"{mse_p:.5g}", f"{base.expected_error:.5g}",
         f"{mse_p / base.expected_error:.4f}"],
    ])
    print(f"size ratio {plain.nbytes / seeds.nbytes:.0f}×; compressed/plain per-row error {mse_c / mse_p:.4f}; "
          f"ε compressed {reports.epsilon_exact!r} (plain {base.epsilon_exact!r})\n")


def speed(rows: int, d: int, repeat: int) -> None:
    out = []
    for eps in (2.0, 4.0, 8.0):
        base = PrivUnit2.calibrate(d, eps)
        reports = SeedReports.build(base)
        x = unit_rows(rows, d, 2)
        seeds = reports.encode(x, release_generator())
        times = side_by_side({
            "plain": lambda: base.privatize(x, release_generator()),
            "encode": lambda: reports.encode(x, release_generator()),
            "decode": lambda: reports.decode(seeds),
        }, repeat)
        out.append([f"{eps:g}", f"{reports.expected_tries:.4g}", f"{reports.tries}",
                    f"{rows / times['plain']:,.0f}", f"{rows / times['encode']:,.0f}",
                    f"{times['encode'] / times['plain']:.1f}×", f"{rows / times['decode']:,.0f}"])
    print(f"speed: {rows} rows, d = {d}, {os.cpu_count()} cores (numba's threads where the kernel uses them)")
    table(["ε", "expected tries p/P", "T", "plain rows/s", "encode rows/s", "encode / plain time",
           "decode rows/s"], out)


def files(rows: int, d: int, eps: float, repeat: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "in.parquet"
        flat = pa.array(unit_rows(rows, d, 3).reshape(-1))
        pq.write_table(pa.table({"vec": pa.FixedSizeListArray.from_arrays(flat, d)}), source)
        outputs = {"plain": Path(tmp) / "plain.parquet", "compressed": Path(tmp) / "seeds.parquet"}
        bits = {"plain": None, "compressed": 64}
        jobs = {f"privatize {name}": (lambda name=name: write_file_release(
            source, outputs[name], epsilon=eps, options=ReleaseOptions(report_bits=bits[name], overwrite=True)))
            for name in outputs}
        times = side_by_side(jobs, repeat)
        times.update(side_by_side({f"estimate {name}": (lambda name=name: estimate_file_mean(outputs[name]))
                                   for name in outputs}, repeat))
        out = [[name, f"{outputs[name].stat().st_size:,}", f"{times['privatize ' + name]:.3g}",
                f"{rows / times['privatize ' + name]:,.0f}", f"{times['estimate ' + name]:.3g}",
                f"{rows / times['estimate ' + name]:,.0f}"] for name in outputs]
        print(f"files: {rows} × {d} float64 rows ({source.stat().st_size:,} bytes of Parquet), privunit2 at "
              f"ε = {eps:g}, {os.cpu_count()} cores")
        table(["release", "bytes on disk", "privatize s", "rows/s", "estimate-mean s", "rows/s"], out)
        print(f"compressed / plain: {outputs['plain'].stat().st_size / outputs['compressed'].stat().st_size:.0f}× "
              f"smaller, privatize {times['privatize compressed'] / times['privatize plain']:.1f}× the time, "
              f"estimate {times['estimate compressed'] / times['estimate plain']:.1f}× the time\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=500)
    parser.add_argument("--eps", type=float, default=4.0)
    parser.add_argument("--speed-rows", type=int, default=2000)
    parser.add_argument("--file-rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    files(args.file_rows, args.d, args.eps, args.repeat)
    size_and_error(args.rows, args.d, args.eps)
    speed(args.speed_rows, args.d, args.repeat)
    print(f"(expected tries at d = {args.d}: p/P; the per-row cost is about that many expansions of d normals; "
          f"T keeps the fallback ≤ 1e-12: {math.log(1e-12):.1f}/log(1 − P/p) tries)")


if __name__ == "__main__":
    main()
