"""The noise-multiplier solver of ``ldp train --central-epsilon`` against the bisection it replaced.

For each setting (target ε, q, T, δ) this runs ``CentralOptions(..., central_epsilon=E).layer(T)`` (what
``--central-epsilon`` calls: the solved z and both accountants' ε there) and the baseline, the bisection of
ldp before (below: an RDP bisection for the start, then a bracket [z/2, z] checked at both ends and bisected
in log z to 5e-4, then the accountants evaluated again at the answer). The two alternate, after one untimed
round, and each is timed by its median; the PLD evaluations of each are counted. Both answers are checked:
ε_PLD(z) ≤ E.

    python benchmarks/central_solver.py              # about a minute
    python benchmarks/central_solver.py --repeat 3
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

from ldpcli.learn import _accounting as accounting
from ldpcli.learn._accounting import MIN_NOISE_MULTIPLIER, central_epsilon, epsilon_rdp
from ldpcli.learn._central import CentralOptions

#: (target ε, q, T, δ)
SETTINGS = [(2.0, 0.05, 100, 1e-6), (0.8, 0.01, 500, 1e-9), (3.0, 0.25, 4, 1e-6), (1.0, 0.02, 50, 1e-9),
            (0.3, 0.001, 1000, 1e-8)]
_RTOL = 5e-4


def _bisect(too_small: Callable[[float], bool], lo: float, hi: float) -> float:
    while hi / lo > 1.0 + _RTOL:
        mid = math.sqrt(lo * hi)
        if too_small(mid):
            lo = mid
        else:
            hi = mid
    return hi


def bisection_layer(target: float, q: float, steps: int, delta: float) -> float:
    """The replaced solver followed by the accountants at its answer; returns z."""
    pld = accounting.epsilon_pld
    floor, ceiling = MIN_NOISE_MULTIPLIER, 1e4
    hi = _bisect(lambda z: epsilon_rdp(q, z, steps, delta)[0] > target, floor, ceiling)
    while pld(q, hi, steps, delta) > target:
        hi *= 2.0
    lo = hi / 2.0
    while lo > floor and pld(q, lo, steps, delta) <= target:
        lo = max(floor, lo / 2.0)
    z = floor if lo <= floor and pld(q, floor, steps, delta) <= target else _bisect(
        lambda z: pld(q, z, steps, delta) > target, lo, hi)
    central_epsilon(q, z, steps, delta)
    return z


def search_layer(target: float, q: float, steps: int, delta: float) -> float:
    """What ``--central-epsilon`` runs now; returns z."""
    return CentralOptions(1.0, q, central_epsilon=target, central_delta=delta).layer(steps).noise_multiplier


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="timed rounds per setting (after one untimed round)")
    args = parser.parse_args()
    real = accounting.epsilon_pld
    print("| E | q | T | δ | bisection: PLD evals | s | search: PLD evals | s | time ratio | z (bisection, search) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for setting in SETTINGS:
        times: dict[str, list[float]] = {"bisection": [], "search": []}
        counts: dict[str, int] = {}
        answers: dict[str, float] = {}
        for round_ in range(args.repeat + 1):
            for name, solve in (("bisection", bisection_layer), ("search", search_layer)):
                calls: list[float] = []

                def counting(*given: float, calls: list[float] = calls) -> float:
                    calls.append(given[1])
                    return real(*given)  # type: ignore[arg-type]

                accounting.epsilon_pld = counting  # type: ignore[assignment]
                try:
                    started = time.perf_counter()
                    answers[name] = solve(*setting)
                    elapsed = time.perf_counter() - started
                finally:
                    accounting.epsilon_pld = real
                counts[name] = len(calls)
                if round_:
                    times[name].append(elapsed)
        target, q, steps, delta = setting
        assert all(real(q, z, steps, delta) <= target for z in answers.values())
        old, new = statistics.median(times["bisection"]), statistics.median(times["search"])
        print(f"| {target:g} | {q:g} | {steps} | {delta:g} | {counts['bisection']} | {old:.2f} | {counts['search']} | "
              f"{new:.2f} | {new / old:.2f} | {answers['bisection']:.6g}, {answers['search']:.6g} |")


if __name__ == "__main__":
    main()
