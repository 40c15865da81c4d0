"""The fault and concurrency probe of issue 24, re-runnable: kills at random moments, overlapping runs
on one ledger, signals at random moments, each trial judged against the promises of
docs/commit-protocol.md. Prints one table (kind, tried, held, failed) and exits 1 if any failed.

    python benchmarks/fault_probe.py [--rounds N] [--dask]

Unlike the tests (which kill at each named step through LDP_FAULT), the kills here land wherever
the clock says, as a power cut would. Run on an idle machine: the timings decide where kills land.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

LDP = str(Path(sys.executable).with_name("ldp"))


def digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def write_rows(path: Path, n: int, d: int, seed: int) -> Path:
    rows = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    pq.write_table(pa.table({"vec": pa.FixedSizeListArray.from_arrays(pa.array(rows.ravel()), d)}), path)
    return path


def ldp(*args: object, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([LDP, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def entries(ledger: Path) -> list[dict[str, object]]:
    return json.loads(ledger.read_text())["entries"] if ledger.exists() else []


def file_state(out: Path, old: tuple[str | None, str | None]) -> str:
    """old / new / mixed for a data file and its sidecar (after the next run has swept the place)."""
    side = out.with_name(out.name + ".ldp.json")
    now = (digest(out), digest(side))
    if now == old:
        return "old"
    if now[0] and now[1] and json.loads(side.read_text())["data"]["sha256"] == now[0]:
        return "new"
    return "mixed"


def random_kill_overwrite(work: Path, source: Path, dask: bool) -> bool:
    """Overwrite a release, SIGKILL at a random moment; after a sweep: fully old or fully new, counted."""
    ledger, out = work / "ledger.json", work / ("out" if dask else "out.parquet")
    engine = ["--engine", "dask", "-o", f"{out}/"] if dask else ["-o", out]
    subprocess.run([LDP, "privatize", source, "--eps", "1", *engine, "--ledger", ledger, "-q"], check=True)
    old = tree(out) if dask else (digest(out), digest(out.with_name(out.name + ".ldp.json")))
    proc = ldp("privatize", source, "--eps", "2", *engine, "--overwrite", "--ledger", ledger, "-q")
    time.sleep(random.uniform(0.3, 4.0))
    proc.kill()
    proc.communicate()
    subprocess.run([LDP, "budget", "--ledger", ledger, "--json"], capture_output=True, check=True)
    spent = sum(float(e["epsilon_exact"]) for e in entries(ledger))  # type: ignore[arg-type]
    if dask:
        now = tree(out)
        state = "old" if now == old else ("new" if (out / "_ldp_dataset.json").exists() else "mixed")
    else:
        state = file_state(out, old)  # type: ignore[arg-type]
    subprocess.run([LDP, "privatize", source, "--eps", "1", "-o", work / "later.parquet", "--ledger", ledger, "-q"],
                   check=True)
    litter = [p.name for p in work.iterdir() if p.name.startswith(".")]
    return state in ("old", "new") and (state == "old" or spent >= 3 - 1e-9) and not litter


def tree(directory: Path) -> dict[str, str | None]:
    return {p.name: digest(p) for p in sorted(directory.iterdir())} if directory.is_dir() else {}


def overlapping_budget(work: Path, source: Path) -> bool:
    """8 overlapping runs with --max-budget 3 at ε = 1: exactly 3 published and counted."""
    ledger = work / "ledger.json"
    runs = [ldp("privatize", source, "--eps", "1", "--max-budget", "3", "-o", work / f"o{i}.parquet", "--ledger",
                ledger, "-q") for i in range(8)]
    codes = [proc.wait() for proc in runs]
    published = len(list(work.glob("o*.parquet")))
    return codes.count(0) == 3 == published == len(entries(ledger))


def first_use_tags(work: Path, source: Path) -> bool:
    """6 overlapping first releases on a new ledger: one input tag."""
    ledger = work / "new" / "ledger.json"
    runs = [ldp("privatize", source, "--eps", "1", "-o", work / f"o{i}.parquet", "--ledger", ledger, "-q")
            for i in range(6)]
    ok = all(proc.wait() == 0 for proc in runs)
    return ok and len({e["tag"] for e in entries(ledger)}) == 1


def signal_at_random(work: Path, source: Path) -> bool:
    """SIGINT or SIGTERM at a random moment: cancelled with nothing left, or complete and counted."""
    ledger, out = work / "ledger.json", work / "out.parquet"
    proc = ldp("privatize", source, "--eps", "4", "-o", out, "--memory", "8MB", "--ledger", ledger, "-q")
    time.sleep(random.uniform(0.2, 4.0))
    proc.send_signal(random.choice([signal.SIGINT, signal.SIGTERM]))
    _, stderr = proc.communicate()
    if "Traceback" in stderr:
        return False
    if out.exists():
        return file_state(out, (None, None)) == "new" and [e["state"] for e in entries(ledger)] == ["confirmed"]
    return not entries(ledger) and not [p for p in work.iterdir() if p.name.startswith(".")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--dask", action="store_true", help="also kill --engine dask overwrites")
    args = parser.parse_args()
    random.seed(24)
    kinds = {
        "random kill, overwrite (local)": lambda w, s: random_kill_overwrite(w, s, False),
        "8 runs, --max-budget 3": overlapping_budget,
        "6 first releases, one ledger": first_use_tags,
        "SIGINT/SIGTERM at random": signal_at_random,
    }
    if args.dask:
        kinds["random kill, overwrite (dask)"] = lambda w, s: random_kill_overwrite(w, s, True)
    with tempfile.TemporaryDirectory() as scratch:
        big = write_rows(Path(scratch) / "big.parquet", 300_000, 64, seed=1)
        small = write_rows(Path(scratch) / "small.parquet", 2_000, 8, seed=2)
        print(f"{'kind':36} {'tried':>5} {'held':>5} {'failed':>6}")
        failed_any = False
        for name, trial in kinds.items():
            held = 0
            for index in range(args.rounds):
                work = Path(scratch) / f"{abs(hash(name))}-{index}"
                work.mkdir()
                source = small if "runs" in name or "first" in name else big
                held += bool(trial(work, source))
            failed_any |= held < args.rounds
            print(f"{name:36} {args.rounds:5d} {held:5d} {args.rounds - held:6d}")
    sys.exit(1 if failed_any else 0)


if __name__ == "__main__":
    main()
