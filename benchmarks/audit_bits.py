"""The bit-level audit table (issue 29): ε_lb on the default rendering and on ``--secure``, for every main
mechanism, d and ε, in one run.

For each mechanism with a secure rendering (privunit2, duchi-l2, separated, gaussian-sign, privunit-inf,
duchi-linf, scalar, scalar-rel; the scalar ones at d = 1 only) and privunitg (which has none: its secure
column says so), d ∈ {1, 2, 3, 16} and ε ∈ {0.5, 2, 8}, the audit ``ldp audit`` runs
(``ldpcli.audit._claims.audit``) three times, with the same ``--seed`` and the same trials:

- ``rounded``: the default rendering, the lower bound's events on the outputs rounded to a relative
  1e−9 (``ldp audit``): it checks the mechanism's law, not its doubles;
- ``default``: the default rendering, with the bit-level events (``ldp audit --bits``);
- ``secure``: the secure rendering at its default target δ (``ldpcli.mechanisms._rendering.secured``), with
  the bit-level events (``ldp audit --bits --secure``).

So every cell is what this command prints as ``epsilon_lower_bound``:

    ldp audit -m M --d D --eps E --bits [--secure] --seed S --lower-bound-trials N --json

ε_lb is a (1 − β) lower confidence bound, β = 1e−4, on the privacy loss of what is measured (with the
mechanism's δ: the secure rendering's is counted). ``claimed``: ε exact, and the secure rendering's δ
(its claim is (ε, δ)-LDP). ``cap``: the largest ε_lb the trials can give at all (every measured row of one
input in the event, none of the other's); a cell can show nothing above its cap, so the ε = 8 column runs
``--high-eps-trials`` (20000 trials cap ε_lb at ≈ 6.8). Marks: ``leak``: the default rendering's ε_lb
(``--bits``) is above ε, a leak of its doubles; ``ABOVE``: the secure rendering's ε_lb is above ε, a
finding against its proof (docs/floating-point.md); ``fail``: that audit's verdict is a failure (any of
its checks, not only the lower bound). The time columns are each audit's seconds (default, then secure,
alternating; each mechanism's first cell is preceded by an untimed run of both at 100 trials, so
compiling its kernels is not counted).

    python benchmarks/audit_bits.py                     # 20000 trials per input, 200000 at ε = 8
    python benchmarks/audit_bits.py --quick             # 2000 and 20000, a smoke run
    python benchmarks/audit_bits.py --mechanism privunit2 --d 2 --eps 0.5 --json
    python benchmarks/audit_bits.py --markdown          # the table of README.md and docs/floating-point.md §7

Nothing here is a test: tests never assert wall-clock times.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any

from ldpcli.audit._claims import LOWER_BOUND_BETA, MIN_TRIALS, AuditResult, audit
from ldpcli.audit._lower_bound import LowerBound
from ldpcli.errors import UsageError
from ldpcli.mechanisms import Mechanism, MechanismSpec
from ldpcli.mechanisms._rendering import secured

MECHANISMS = ("privunit2", "duchi-l2", "separated", "gaussian-sign", "privunit-inf", "duchi-linf", "scalar",
              "scalar-rel", "privunitg")
SCALAR = ("scalar", "scalar-rel")
DIMENSIONS = (1, 2, 3, 16)
EPSILONS = (0.5, 2.0, 8.0)
#: Cells with ε at least this run ``--high-eps-trials``: at 20000 trials ε_lb cannot exceed ≈ 6.8.
HIGH_EPSILON = 8.0


def timed_audit(mech: Mechanism, trials: int, seed: int, bits: bool) -> tuple[AuditResult, float]:
    """``ldp audit [--bits] --seed SEED --lower-bound-trials TRIALS`` on ``mech`` and its wall time in seconds."""
    t0 = time.perf_counter()
    result = audit(mech, seed=seed, lower_bound_trials=trials, bits=bits)
    return result, time.perf_counter() - t0


def secure_or_none(mech: Mechanism) -> Mechanism | None:
    """``mech`` with its secure rendering, or None where it has none (privunitg)."""
    try:
        return secured(mech)
    except UsageError:
        return None


def bound_of(result: AuditResult) -> LowerBound:
    """The audit's lower bound (it always runs one)."""
    if result.lower_bound is None:
        raise RuntimeError("the audit ran no lower bound")
    return result.lower_bound


def cell(name: str, d: int, eps: float, trials: int, seed: int) -> dict[str, Any]:
    """One cell of the table: the three audits of ``name`` at (d, ε)."""
    plain = MechanismSpec(name, eps).calibrate(d)
    secure = secure_or_none(plain)
    rounded, _ = timed_audit(plain, trials, seed, False)
    default, t_default = timed_audit(plain, trials, seed, True)
    bound = bound_of(default)
    row: dict[str, Any] = {
        "mechanism": name, "d": d, "epsilon": eps, "epsilon_exact": plain.epsilon_exact, "trials": trials,
        "seed": seed, "cap": bound.reach, "epsilon_lb_rounded": bound_of(rounded).epsilon,
        "passed_rounded": rounded.passed, "epsilon_lb_default": bound.epsilon, "passed_default": default.passed,
        "leak": bound.epsilon > plain.epsilon_exact * (1.0 + 1e-12), "event_default": bound.event,
        "seconds_default": t_default, "rendering": None, "delta_secure": None, "epsilon_lb_secure": None,
        "above": None, "passed_secure": None, "event_secure": None, "seconds_secure": None,
    }
    if secure is not None:
        result, t_secure = timed_audit(secure, trials, seed, True)
        bound = bound_of(result)
        row.update(rendering=secure.rendering.kind, delta_secure=secure.delta_exact,  # type: ignore[attr-defined]
                   epsilon_lb_secure=bound.epsilon, above=bound.epsilon > secure.epsilon_exact * (1.0 + 1e-12),
                   passed_secure=result.passed, event_secure=bound.event, seconds_secure=t_secure)
    return row


def warm_up(name: str, d: int, eps: float, seed: int) -> None:
    """Both audits at 100 trials, untimed: the first call of a mechanism compiles its kernels."""
    plain = MechanismSpec(name, eps).calibrate(d)
    for mech in (plain, secure_or_none(plain)):
        if mech is not None:
            audit(mech, seed=seed, trials=MIN_TRIALS, lower_bound_trials=MIN_TRIALS, bits=True)


def marks(row: dict[str, Any]) -> str:
    """``leak``, ``ABOVE`` and ``fail`` as the module docstring defines them."""
    out = ["leak"] if row["leak"] else []
    if row["above"]:
        out.append("ABOVE")
    out += [f"fail ({which})" for which in ("rounded", "default", "secure") if row[f"passed_{which}"] is False]
    return " ".join(out)


def text_line(row: dict[str, Any]) -> str:
    """A row of the plain-text table."""
    secure, t_secure = "none", ""
    if row["rendering"] is not None:
        secure = f"{row['epsilon_lb_secure']:>7.3f} {row['rendering']:>6} {row['delta_secure']:>8.1e}"
        t_secure = f"{row['seconds_secure']:.2f}"
    return (f"{row['mechanism']:<14}{row['d']:>3}{row['epsilon']:>5g}{row['epsilon_exact']:>8.4g}{row['trials']:>8}"
            f"{row['cap']:>6.2f}{row['epsilon_lb_rounded']:>9.3f}{row['epsilon_lb_default']:>9.3f}  {secure:<24}"
            f"{row['seconds_default']:>7.2f}{t_secure:>9}  {marks(row)}")


def rounded_up(value: float) -> str:
    """``value`` > 0 to two significant digits, rounded up (a δ printed as a bound must not shrink)."""
    exponent = math.floor(math.log10(value)) - 1
    digits = math.ceil(value / 10.0**exponent * (1.0 - 1e-12))
    return f"{digits / 10:g}e{exponent + 1}"


def markdown_table(rows: list[dict[str, Any]], epsilons: list[float]) -> list[str]:
    """The docs' table: one line per mechanism and d, a default and a secure column per ε. ``*``: ε_lb above ε;
    ``†``: that audit failed another of its checks; in brackets, the rounded audit's ε_lb where it differs by more
    than 0.1."""
    def default(row: dict[str, Any]) -> str:
        rounded = row["epsilon_lb_rounded"]
        failed = "" if row["passed_default"] or row["leak"] else "†"
        text = f"{row['epsilon_lb_default']:.2f}{'*' if row['leak'] else ''}{failed}"
        return text + (f" ({rounded:.2f})" if abs(rounded - row["epsilon_lb_default"]) > 0.1 else "")

    def secure(row: dict[str, Any]) -> str:
        if row["rendering"] is None:
            return "—"
        failed = "" if row["passed_secure"] or row["above"] else "†"
        return f"{row['epsilon_lb_secure']:.2f}{'*' if row['above'] else ''}{failed}"

    def claim(line: list[dict[str, Any]]) -> str:
        if line[0]["rendering"] is None:
            return "none"
        delta = max(row["delta_secure"] for row in line)
        return f"{line[0]['rendering']}, δ = 0" if delta == 0.0 else f"{line[0]['rendering']}, δ ≤ {rounded_up(delta)}"

    lines = ["| mechanism | d | secure rendering | " + " | ".join(f"ε = {eps:g}: default | secure" for eps in epsilons)
             + " |", "|---|---:|---|" + "---:|---:|" * len(epsilons)]
    keys = list(dict.fromkeys((row["mechanism"], row["d"]) for row in rows))
    for name, d in keys:
        line = [next(row for row in rows if (row["mechanism"], row["d"], row["epsilon"]) == (name, d, eps))
                for eps in epsilons]
        lines.append(f"| {name} | {d} | {claim(line)} | " + " | ".join(f"{default(row)} | {secure(row)}" for row in line)
                     + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2000 trials per input (20000 at ε ≥ 8), a smoke run")
    parser.add_argument("--trials", type=int, help="lower-bound trials per input (default 20000; overrides --quick)")
    parser.add_argument("--high-eps-trials", type=int,
                        help=f"lower-bound trials per input where ε ≥ {HIGH_EPSILON:g} (default 200000, whose cap is "
                             "≈ 9.0; overrides --quick)")
    parser.add_argument("--seed", type=int, default=0, help="the audits' --seed (default 0)")
    parser.add_argument("--mechanism", action="append", help="repeatable (default: all nine)")
    parser.add_argument("--d", type=int, action="append", help="repeatable (default: 1, 2, 3, 16)")
    parser.add_argument("--eps", type=float, action="append", help="repeatable (default: 0.5, 2, 8)")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object per cell instead of the table")
    out.add_argument("--markdown", action="store_true", help="the table in Markdown, as the docs show it")
    args = parser.parse_args()
    trials = args.trials or (2000 if args.quick else 20_000)
    high_trials = args.high_eps_trials or (20_000 if args.quick else 200_000)
    if not (args.json or args.markdown):
        print(f"seed {args.seed}, β = {LOWER_BOUND_BETA:g}; trials per input {trials} "
              f"({high_trials} where ε ≥ {HIGH_EPSILON:g}); cap: the largest ε_lb those trials can give")
        print(f"{'mechanism':<14}{'d':>3}{'ε':>5}{'ε exact':>8}{'trials':>8}{'cap':>6}{'rounded':>9}{'default':>9}  "
              f"{'secure   kind        δ':<24}{'s dflt':>7}{'s secure':>9}  marks")
    rows = []
    start = time.perf_counter()
    warmed: set[str] = set()
    for name in args.mechanism or MECHANISMS:
        for d in args.d or DIMENSIONS:
            if name in SCALAR and d != 1:
                continue
            for eps in args.eps or EPSILONS:
                if name not in warmed:
                    warmed.add(name)
                    warm_up(name, d, eps, args.seed)
                row = cell(name, d, eps, high_trials if eps >= HIGH_EPSILON else trials, args.seed)
                rows.append(row)
                if not args.markdown:
                    print(json.dumps(row) if args.json else text_line(row), flush=True)
    total = time.perf_counter() - start
    if args.markdown:
        print("\n".join(markdown_table(rows, args.eps or list(EPSILONS))))
    summary = (f"{len(rows)} cells in {total:.0f} s: {sum(row['leak'] for row in rows)} with the default rendering's "
               f"ε_lb (--bits) above ε, {sum(bool(row['above']) for row in rows)} with the secure rendering's above "
               f"ε, {sum(row['passed_secure'] is False for row in rows)} secure audits failed")
    print(summary, file=sys.stderr if args.json or args.markdown else sys.stdout)


if __name__ == "__main__":
    main()
