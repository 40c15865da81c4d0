"""What the cryptographic generators cost: ldp's ChaCha20 stream (`--rng chacha20`) and randomgen's ChaCha20
(`--rng secure`) against numpy's PCG64 (the default), side by side in one process.

    python benchmarks/rng.py                                # 10⁷ normals; d = 500 on 40000 rows
    python benchmarks/rng.py --values 1000000 --shape 4000x500 --repeat 3   # a quick look
    python benchmarks/rng.py --shape 100000x500 --threads 1 --threads 2      # issue 39's end-to-end target

Three sections, each timing its columns in turn (a, b, c, a, b, c, …) after one untimed round, so
drift in the machine's speed hits every column (``run.side_by_side``); seconds are medians of
--repeat rounds and ratios are against PCG64 measured in the same rounds:

- normals: ``generator.standard_normal(n)`` for n = --values, with PCG64, ldp's stream
  (:class:`ldpcli.math._counter_rng.CounterGenerator`, compiled when numba is installed), randomgen's
  ChaCha20 (20 rounds: what ``ldpcli.math._bitgen.secure_generator`` makes) and randomgen's AES-128-CTR
  (``AESCounter``, the other candidate: the measurement behind the choice of ChaCha20 is in
  ``ldpcli.math._bitgen``'s docstring);
- api: each --mechanism (ε = 8) on an n × d batch in memory (``Mechanism.privatize``), with a PCG64 generator,
  ldp's stream and randomgen's ChaCha20: the noise alone, without reading or writing;
- file: ``write_file_release`` of each --mechanism (Parquet → Parquet, zstd, with each of --threads) with ``rng="pcg64"``,
  ``rng="chacha20"`` (and under ``LDP_KERNEL=numpy``: the numpy reference of every sampler and of the stream)
  and ``rng="secure"``: what `ldp privatize --rng ...` costs end to end (every key block gets its own generator).

The load of the machine (``uptime``) is printed before and after: on a shared machine the ratios
are noisy. Nothing here is a test: tests never assert wall-clock times.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import input_file, side_by_side, table  # noqa: E402

from ldpcli.math._bitgen import require_randomgen, secure_generator  # noqa: E402
from ldpcli.math._counter_rng import CounterGenerator  # noqa: E402
from ldpcli.math._kernels import KERNEL_ENV  # noqa: E402
from ldpcli.mechanisms import MechanismSpec  # noqa: E402
from ldpcli.release._file import write_file_release  # noqa: E402
from ldpcli.release._options import ReleaseOptions, Resources  # noqa: E402


def load() -> str:
    """The machine's load averages, as ``uptime`` prints them."""
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip() if os.path.exists("/usr/bin/uptime") else "?"


def ratio_rows(times: dict[str, float], reference: str) -> list[list[str]]:
    """One row per column: its median seconds and its ratio to ``reference``."""
    return [[name, f"{seconds:.3f}", f"{seconds / times[reference]:.2f}×"] for name, seconds in times.items()]


def normals(values: int, repeat: int) -> dict[str, float]:
    """Median seconds of ``standard_normal(values)`` with each bit generator (fresh generators, one each)."""
    randomgen = require_randomgen()
    generators = {
        "PCG64": np.random.default_rng(1),
        "ChaCha20 (chacha20)": CounterGenerator(bytes(32)),
        "ChaCha20 (secure)": secure_generator(1),
        "AES-128-CTR": np.random.Generator(randomgen.AESCounter(key=1)),
    }
    fns: dict[str, Callable[[], object]] = {name: (lambda g=g: g.standard_normal(values)) for name, g in generators.items()}
    return side_by_side(fns, repeat)


def api(name: str, n: int, d: int, repeat: int) -> dict[str, float]:
    """Median seconds of mechanism ``name``'s ``privatize`` on an n × d batch with each generator."""
    mech = MechanismSpec(name, 8.0).calibrate(d)
    x = np.random.default_rng(0).standard_normal((n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    generators = {"PCG64": np.random.default_rng(2), "ChaCha20 (chacha20)": CounterGenerator(bytes(32)),
                  "ChaCha20 (secure)": secure_generator(2)}
    return side_by_side({label: (lambda g=g: mech.privatize(x, g)) for label, g in generators.items()}, repeat)


def file(tmp: Path, name: str, n: int, d: int, threads: int, repeat: int) -> dict[str, float]:
    """Median seconds of ``write_file_release`` of mechanism ``name`` on ``threads`` threads with each ``rng``
    (and chacha20 on numpy)."""
    src = input_file(tmp, n, d)

    def run(rng: str, kernel: str = "auto") -> Callable[[], object]:
        options = ReleaseOptions(rng=rng, overwrite=True, resources=Resources(threads=threads))

        def release() -> object:
            saved = os.environ.get(KERNEL_ENV)
            os.environ[KERNEL_ENV] = kernel
            try:
                return write_file_release(src, tmp / f"out-{rng}-{kernel}.parquet", mechanism=name, epsilon=8.0,
                                          options=options)
            finally:
                os.environ.pop(KERNEL_ENV) if saved is None else os.environ.__setitem__(KERNEL_ENV, saved)

        return release

    return side_by_side({"pcg64": run("pcg64"), "chacha20": run("chacha20"), "chacha20, numpy": run("chacha20", "numpy"),
                         "secure": run("secure")}, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--values", type=int, default=10**7, help="normals drawn per timed call")
    parser.add_argument("--shape", default="40000x500", help="NxD of the api section's batch and of the Parquet input")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--mechanism", action="append", help="the api and file sections' mechanisms (repeatable; default privunit2)")
    parser.add_argument("--threads", type=int, action="append", help="file section's threads (repeatable; default 1)")
    args = parser.parse_args()
    n, d = (int(v) for v in args.shape.lower().split("x"))
    print(f"# rng: PCG64 against ChaCha20 (--rng chacha20, --rng secure)\n\nload before: {load()}\n")
    print(f"## normals: standard_normal({args.values})\n")
    table(["bit generator", "median s", "÷ PCG64"], ratio_rows(normals(args.values, args.repeat), "PCG64"))
    for name in args.mechanism or ["privunit2"]:
        print(f"## api: {name} ε = 8, privatize on {n}×{d} in memory\n")
        table(["generator", "median s", "÷ PCG64"], ratio_rows(api(name, n, d, args.repeat), "PCG64"))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.mechanism or ["privunit2"]:
            for threads in args.threads or [1]:
                print(f"## file: write_file_release, {name} ε = 8, {n}×{d} float64 Parquet → Parquet, {threads} thread(s)\n")
                times = file(Path(tmp), name, n, d, threads, args.repeat)
                table(["--rng", "median s", "÷ pcg64"], ratio_rows(times, "pcg64"))
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
