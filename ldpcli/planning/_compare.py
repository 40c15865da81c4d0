"""Compare every registered vector mechanism at one (d, ε): the data behind the `ldp params` command
when it is given no mechanism.

The common yardstick is the worst-case E‖Z − x‖² over the ℓ2 ball of radius L, the set every
mechanism here accepts (the ℓ∞-box mechanisms are calibrated with box radius L, which contains
that ball). For all of them the worst case is ``expected_error_max``: the mechanisms of constant
output norm reach it at x = 0, and the additive baselines have constant error. The reference is
optimal PrivUnit2: Asi et al. (2022) Thm 2 proves that no unbiased ε-LDP mechanism on the sphere
has smaller error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ldpcli.errors import LdpError
from ldpcli.mechanisms import Mechanism, MechanismSpec, PrivUnit2, get_mechanism, mechanism_names
from ldpcli.risk._section import reconstruction

#: δ used for the (ε, δ) Gaussian baseline when the caller gives none.
DEFAULT_DELTA = 1e-6
#: A switch of mechanism is recommended only when it gives at least this much less error (5%): two
#: mechanisms closer than that are called equivalent, since the choice then matters less than L.
MATERIAL_GAIN = 0.05


def comparison_options(cls: type[Mechanism], delta: float | None = None) -> dict[str, Any]:
    """The options a mechanism is compared with when the user gave none: δ for the (ε, δ) Gaussian
    baseline (``delta``, default :data:`DEFAULT_DELTA`), nothing for the others (their defaults).
    Used by ``params``, ``sweep``, ``risk`` and the ε solver alike."""
    return {"delta": DEFAULT_DELTA if delta is None else delta} if "delta" in cls.options else {}


def compare_mechanisms(
    d: int, epsilon: float, *, norm_bound: float = 1.0, delta: float | None = None,
    risk: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One object per vector mechanism (its ``describe()`` plus ``ratio_to_optimal``), best first.

    A mechanism that cannot be calibrated at (d, ε) gets ``{"mechanism": …, "error": reason}``.
    Baselines carry ``"baseline": true``; the Gaussian one is (ε, δ)-DP with ``delta`` (default
    1e-6), not ε-LDP, and says so. With ``risk`` (the keywords of
    :func:`ldpcli.risk._section.reconstruction`: k, rho0, a) each row also gets its
    ``reconstruction`` section.
    """
    reference = PrivUnit2.calibrate(d, epsilon, norm_bound=norm_bound).expected_error_max
    rows: list[dict[str, Any]] = []
    for name in mechanism_names():
        cls = get_mechanism(name)
        if not (cls.vector and cls.compared):
            continue
        options = comparison_options(cls, delta)
        try:
            mech = MechanismSpec(name, epsilon, None, norm_bound, options).calibrate(d)
            info = mech.describe()
        except LdpError as exc:
            rows.append({"mechanism": name, "title": cls.title, "baseline": cls.baseline, "error": str(exc)})
            continue
        info["title"] = cls.title
        info["baseline"] = cls.baseline
        info["ratio_to_optimal"] = info["expected_error_max"] / reference
        if risk is not None:
            info["reconstruction"] = reconstruction(mech, **risk)
        rows.append(info)
    rows.sort(key=lambda row: row.get("ratio_to_optimal", float("inf")))
    return rows


def material(better: float, worse: float) -> bool:
    """Whether ``better``'s error is at least :data:`MATERIAL_GAIN` (5%) below ``worse``'s."""
    return better <= (1.0 - MATERIAL_GAIN) * worse


def recommendation(rows: list[dict[str, Any]]) -> str:
    """A recommendation computed from the comparison's errors, not from a rule of thumb.

    The pure ε-LDP mechanism of least worst-case error over the ℓ2 ball, then the factor by which
    each other pure ℓ2 mechanism loses to it (so "separated for gradients" is judged by its number at
    this (d, ε): every mechanism here is unbiased for every row in the ball, magnitudes included);
    those within :data:`MATERIAL_GAIN` of it are named as equivalent. For data bounded per
    coordinate by L, the ℓ2 mechanisms need the ball of radius L√d that contains the box, whose
    error is d times larger; the best ℓ∞-box mechanism is compared with that, and one of the two is
    advised only when it has at least 5% less error (otherwise they are equivalent).
    """
    pure = [row for row in rows if "ratio_to_optimal" in row and not row["baseline"]]
    best = pure[0]
    line = f"Recommended: {best['mechanism']} (worst-case error {best['expected_error_max']:.6g}"
    if best["mechanism"] == PrivUnit2.name:
        line += "; no unbiased ε-LDP mechanism on the sphere does better, Asi et al. 2022 Thm 2)"
    else:
        line += f", {best['ratio_to_optimal']:.4g}× optimal PrivUnit2)"
    box = [row for row in pure if row.get("domain") == "linf-box"]
    ball = [row for row in pure if row.get("domain") == "l2-ball"]
    least = best["expected_error_max"]
    ratios = [(row["mechanism"], row["expected_error_max"] / least) for row in ball if row is not best]
    close = [f"{name} {ratio:.4g}×" for name, ratio in ratios if not material(least, ratio * least)]
    worse = [f"{name} {ratio:.4g}×" for name, ratio in ratios if material(least, ratio * least)]
    gain = f"{MATERIAL_GAIN:.0%}"
    if close:
        line += f". Equivalent to it here ({best['mechanism']} has less than {gain} less error): {', '.join(close)}"
    if worse:
        line += (f". The other ℓ2 mechanisms have more error here ({best['mechanism']} has at least {gain} less): "
                 f"{', '.join(worse)}")
    line += "."
    if box and ball:
        d = best["d"]
        box_error, ball_error = box[0]["expected_error_max"], d * ball[0]["expected_error_max"]
        ratio = box_error / ball_error
        if material(box_error, ball_error):
            verdict = f"use it ({1 - ratio:.0%} less error)"
        elif material(ball_error, box_error):
            verdict = f"use {ball[0]['mechanism']} with `norm_bound` L√d instead ({1 - 1 / ratio:.0%} less error)"
        else:
            verdict = f"they are equivalent here (the better has less than {gain} less error): either will do"
        line += (
            f" For data with every |coordinate| ≤ L, {box[0]['mechanism']} has {ratio:.6g}× the error of "
            f"{ball[0]['mechanism']} on the ball of radius L√d = {math.sqrt(d):.4g}·L that contains the box: {verdict}."
        )
    return line
