"""The bit-level audit table: ε_lb with and without ``--bits`` for every main mechanism, d and ε.

For each mechanism (privunit2, privunitg, duchi-l2, privunit-inf, duchi-linf, gaussian-sign,
scalar, scalar-rel, separated; the scalar ones at d = 1 only), d ∈ {1, 2, 3, 16} and
ε ∈ {0.5, 2, 8}, the audit's privacy lower bound (``ldpcli.audit.lower_bound``, β = 1e−4, the
audit's own) on the default rendering, twice from the same seed: with its events on the outputs
rounded to a relative 1e−9 (the baseline: what ``ldp audit`` reads without ``--bits``) and with
the bit-level events of ``ldp audit --bits`` (``ldpcli.audit.bits``). The two runs alternate, so
drift in the machine's speed hits both; the time columns are the seconds of each and their ratio
(each mechanism's first cell is preceded by an untimed run of both at 200 trials, so compiling
its kernels is not counted).
ε_lb is a (1 − β) lower confidence bound on the privacy loss of what is measured: a value above
ε exact is a leak (of the floating-point rendering, when only the ``--bits`` column shows it).

    python benchmarks/audit_bits.py                    # 20000 trials per input (the audit's default)
    python benchmarks/audit_bits.py --quick            # 2000 trials per input, a smoke run
    python benchmarks/audit_bits.py --mechanism privunit2 --d 2 --eps 0.5 --json

Nothing here is a test: tests never assert wall-clock times.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from ldpcli.audit.claims import LOWER_BOUND_BETA
from ldpcli.audit.lower_bound import LowerBound, privacy_lower_bound
from ldpcli.mechanisms import MechanismSpec

MECHANISMS = ("privunit2", "privunitg", "duchi-l2", "privunit-inf", "duchi-linf", "gaussian-sign", "scalar",
              "scalar-rel", "separated")
SCALAR = ("scalar", "scalar-rel")
DIMENSIONS = (1, 2, 3, 16)
EPSILONS = (0.5, 2.0, 8.0)


def timed_bound(mech: object, trials: int, seed: int, bits: bool) -> tuple[LowerBound, float]:
    """The lower bound from ``seed`` and its wall time in seconds."""
    t0 = time.perf_counter()
    bound = privacy_lower_bound(mech, trials=trials, beta=LOWER_BOUND_BETA,  # type: ignore[arg-type]
                                rng=np.random.default_rng(seed), bits=bits)
    return bound, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2000 trials per input instead of 20000")
    parser.add_argument("--trials", type=int, help="trials per input (overrides --quick)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mechanism", action="append", help="repeatable (default: all nine)")
    parser.add_argument("--d", type=int, action="append", help="repeatable (default: 1, 2, 3, 16)")
    parser.add_argument("--eps", type=float, action="append", help="repeatable (default: 0.5, 2, 8)")
    parser.add_argument("--json", action="store_true", help="one JSON object per line instead of the table")
    args = parser.parse_args()
    trials = args.trials or (2000 if args.quick else 20_000)
    rows = []
    header = (f"{'mechanism':<14}{'d':>3}{'ε':>5}{'ε exact':>9}{'ε_lb':>8}{'ε_lb bits':>10}  {'leak':<5}"
              f"{'s':>6}{'s bits':>7}{'ratio':>6}  event (--bits)")
    if not args.json:
        print(f"trials per input: {trials}, β = {LOWER_BOUND_BETA:g}, seed {args.seed}")
        print(header)
    start = time.perf_counter()
    warmed: set[str] = set()
    for name in args.mechanism or MECHANISMS:
        for d in args.d or DIMENSIONS:
            if name in SCALAR and d != 1:
                continue
            for eps in args.eps or EPSILONS:
                mech = MechanismSpec(name, eps).calibrate(d)
                if name not in warmed:
                    warmed.add(name)
                    for bits_warm in (False, True):
                        timed_bound(mech, 200, args.seed, bits_warm)
                plain, t_plain = timed_bound(mech, trials, args.seed, False)
                bits, t_bits = timed_bound(mech, trials, args.seed, True)
                leak = bits.epsilon > mech.epsilon_exact * (1.0 + 1e-12)
                row = {"mechanism": name, "d": d, "epsilon": eps, "epsilon_exact": mech.epsilon_exact,
                       "epsilon_lb": plain.epsilon, "epsilon_lb_bits": bits.epsilon, "leak": leak,
                       "seconds": t_plain, "seconds_bits": t_bits, "event_bits": bits.event, "trials": trials}
                rows.append(row)
                if args.json:
                    print(json.dumps(row))
                else:
                    print(f"{name:<14}{d:>3}{eps:>5g}{mech.epsilon_exact:>9.4g}{plain.epsilon:>8.3f}"
                          f"{bits.epsilon:>10.3f}  {'YES' if leak else 'no':<5}{t_plain:>6.2f}{t_bits:>7.2f}"
                          f"{t_bits / max(t_plain, 1e-9):>6.2f}  {bits.event if leak else ''}")
                sys.stdout.flush()
    total = time.perf_counter() - start
    if not args.json:
        leaks = sum(row["leak"] for row in rows)
        print(f"{len(rows)} cells, {leaks} with ε_lb (--bits) above ε exact; wall time {total:.1f} s "
              f"(both columns), of which --bits {sum(row['seconds_bits'] for row in rows):.1f} s")


if __name__ == "__main__":
    main()
