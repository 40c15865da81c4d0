"""Which ldpcli files one ``ldpcli.privatize_file`` call touches, and which pairs call each other both ways.

Run: ``python benchmarks/call_graph.py [--rows 2000] [--dim 16]``. The call is made once first (every
import and cache warm), then a second call into a fresh output is profiled with :func:`sys.setprofile`:
every call from a frame in one ldpcli file into a frame in another is an edge caller-file -> callee-file
(issue 37's targets: <= 30 files, <= 2 pairs that call each other both ways), and the calls of
``release_cost`` are counted (one per release). Threads started during
the call are followed too (:func:`threading.setprofile`). ``--verbose`` lists the files, and for each pair
that calls both ways the functions that make those calls (``caller -> callee``, each way).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import ldpcli

ROOT = Path(ldpcli.__file__).resolve().parent


def _package_file(filename: str) -> str | None:
    """``filename`` relative to ldpcli/ when it is one of its files, else None."""
    try:
        return Path(filename).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--ledger", action="store_true", help="release with a privacy-budget ledger")
    parser.add_argument("--verbose", action="store_true", help="list the files and the both-way pairs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "x.parquet"
        x = np.random.default_rng(0).normal(size=(args.rows, args.dim))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        pq.write_table(pa.table({"embedding": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), args.dim)}),
                       source)
        from ldpcli.release import Budget, Ledger, ReleaseOptions

        options = ReleaseOptions(copies=args.copies, budget=Budget(
            ledger=Ledger.open(Path(folder) / "ledger.json") if args.ledger else None))
        privatize_file = ldpcli.privatize_file  # the name looked up before: the profile is of the call alone
        privatize_file(source, Path(folder) / "warm.parquet", mechanism="privunit2", epsilon=4.0, options=options)
        known: dict[str, str | None] = {}
        costs = [0]  # calls of mechanisms/_composition.py release_cost (issue 37: one per release)
        edges: set[tuple[str, str]] = set()
        calls: dict[tuple[str, str], set[str]] = {}  # per edge, the functions that make it (for --verbose)
        files: set[str] = set()
        lock = threading.Lock()

        def where(code_file: str) -> str | None:
            if code_file not in known:
                known[code_file] = _package_file(code_file)
            return known[code_file]

        def profile(frame, event, arg):  # type: ignore[no-untyped-def]
            if event != "call":
                return
            callee = where(frame.f_code.co_filename)
            if callee is None:
                return
            back = frame.f_back
            caller = where(back.f_code.co_filename) if back is not None else None
            with lock:
                if callee == "mechanisms/_composition.py" and frame.f_code.co_name == "release_cost":
                    costs[0] += 1
                files.add(callee)
                if caller is not None and caller != callee:
                    edges.add((caller, callee))
                    calls.setdefault((caller, callee), set()).add(f"{back.f_code.co_name} -> {frame.f_code.co_name}")

        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            privatize_file(source, Path(folder) / "out.parquet", mechanism="privunit2", epsilon=4.0, options=options)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    both = sorted({tuple(sorted(edge)) for edge in edges if (edge[1], edge[0]) in edges})
    print(f"files touched: {len(files)}; file-to-file edges: {len(edges)}; pairs calling each other both ways: "
          f"{len(both)}; release_cost calls: {costs[0]}")
    if args.verbose:
        for name in sorted(files):
            print("  ", name)
        for a, b in both:
            print(f"   both ways: {a} <-> {b}")
            for caller, callee in ((a, b), (b, a)):
                print(f"      {caller} -> {callee}: {', '.join(sorted(calls[caller, callee]))}")


if __name__ == "__main__":
    main()
