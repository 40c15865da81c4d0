"""The central ε of a mechanism's reports when n of them are shuffled: what `ldp params` shows of shuffling.

A pure ε0-LDP mechanism's n reports, published in a uniformly random order by an honest shuffler, are
(ε, δ)-DP centrally with ε bracketed by :func:`ldpcli.accounting.compose` of a
:class:`~ldpcli.accounting.ShuffledRelease` (:func:`ldpcli.math._shuffling.shuffle_bound`: Feldman, McMillan &
Talwar 2021, Thm 3.2; closed form Thm 3.1). ε0 is the mechanism's exact ε (``epsilon_exact``). An
(ε0, δ0)-LDP mechanism with δ0 > 0 (the Gaussian baseline) gets no claim from this bound: its proof
decomposes each report's law using e^{−ε0} ≤ P/Q ≤ e^{ε0} everywhere, which δ0 > 0 does not give.
"""

from __future__ import annotations

from typing import Any

from ldpcli.accounting import ShuffledRelease, compose
from ldpcli.math._shuffling import default_central_delta
from ldpcli.mechanisms._base import check_count

NO_CLAIM = "no shuffle claim: the bound needs pure ε0-LDP"
"""What a mechanism with δ0 > 0 gets instead of a central ε."""


def central_delta(shuffle: int, shuffle_delta: float | None = None) -> float:
    """The central δ for ``shuffle`` shuffled reports: ``shuffle_delta``, by default 1/shuffle²; refused
    unless 0 < δ < 1/shuffle (at δ ≥ 1/n a guarantee allows publishing one report in the clear)."""
    check_count(shuffle, "shuffle", minimum=2)
    return default_central_delta(shuffle, shuffle_delta, "shuffle_delta")


def shuffle_claim(epsilon0: float, delta0: float, shuffle: int, delta: float) -> dict[str, Any]:
    """``{"shuffle": …}`` for a mechanism that is (epsilon0, delta0)-LDP: the shuffle bound's ``to_dict()`` at
    (shuffle, delta) when delta0 = 0 (the composition of one :class:`~ldpcli.accounting.ShuffledRelease`), else
    ``None`` with a ``shuffle_reason``."""
    if delta0 > 0:
        return {"shuffle": None,
                "shuffle_reason": f"{NO_CLAIM}; this mechanism is (ε, δ)-LDP with δ = {delta0:.3g} > 0"}
    (bound,) = compose([ShuffledRelease(epsilon0, shuffle, delta)]).shuffles
    return {"shuffle": bound.to_dict()}


def add_shuffle_claims(rows: list[dict[str, Any]], shuffle: int, delta: float) -> None:
    """Each row of :func:`ldpcli.planning._compare.compare_mechanisms` gets its :func:`shuffle_claim`
    (a row that could not be calibrated gets ``shuffle: None`` and its reason). Rows of equal (ε0, δ0)
    share one evaluation of the bound."""
    claims: dict[tuple[float, float], dict[str, Any]] = {}
    for row in rows:
        if "error" in row:
            row.update(shuffle=None, shuffle_reason="no shuffle claim: the mechanism is not available here")
            continue
        key = (row["epsilon_exact"], row.get("delta_exact", 0.0))
        if key not in claims:
            claims[key] = shuffle_claim(*key, shuffle, delta)
        row.update(claims[key])
