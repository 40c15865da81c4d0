"""Rich tables that more than one command prints (each command's own tables live beside it)."""

from __future__ import annotations

import math
from typing import Any

from rich.table import Table

from ldpcli.cli.render import fmt, fmt_logp, out
from ldpcli.risk._diffuse import AT_RISK, NO_GUARANTEE, PROTECTED


def verdict_text(bound: dict[str, Any], threshold: float) -> str:
    """A bound's verdict in words with its number: ``protected (≤ 0.001)``, ``at risk (0.3755 > 0.001)``,
    ``no guarantee (bound ≥ 1)`` (:func:`ldpcli.risk._diffuse.verdict`)."""
    word = bound["verdict"]
    if word == PROTECTED:
        return f"{PROTECTED} (≤ {fmt(threshold)})"
    if word == AT_RISK:
        return f"{AT_RISK} ({fmt_logp(bound['log_exact'])} > {fmt(threshold)})"
    return f"{NO_GUARANTEE} (bound ≥ 1)"


def verdict_reading(threshold: float) -> str:
    """The sentence under a reconstruction table that says what its three verdicts mean."""
    return (
        f"'{PROTECTED}' where the bound is at most {fmt(threshold)} (--risk-threshold), '{AT_RISK}' where it is "
        f"larger but below 1 (the release may let a guess succeed that often), '{NO_GUARANTEE}' where it reaches 1 "
        "(ε rules nothing out)"
    )


def print_reconstruction(section: dict[str, Any], title: str | None = None) -> None:
    """The reconstruction bounds of one release: a table per privacy level (``ldp params``, ``ldp risk``)."""
    threshold = section["threshold"]
    for level in section["levels"]:
        heading = title or "Reconstruction"
        if level["epsilon"] is None:
            out.print(f"{heading}: {level['applies']}.", markup=False)
            continue
        table = Table(
            title=f"{heading} of the direction of a k = {section['k']} projection, prior ρ0 = {fmt(section['rho0'])}, "
            f"at ε = {fmt(level['epsilon'])} ({level['name']}: {level['applies']})",
            title_justify="left",
        )
        for name in ("a", "‖f − v̂‖ ≤", "prior alone (≤)", "bound (exact cap)", "Prop. 1 (a ≤ 1/√2)", "Prop. 1 (a ≥ √(2/k))",
                     "verdict"):
            table.add_column(name, justify="left" if name == "verdict" else "right")
        for bound in level["bounds"]:
            table.add_row(
                fmt(bound["a"]), fmt(math.sqrt(max(0.0, 2.0 - 2.0 * bound["a"]))),
                fmt_logp(None if bound["log_prior"] is None else bound["log_prior"] + section["rho0"]),
                fmt_logp(bound["log_exact"]), "—" if bound["log_prop1_small"] is None else fmt_logp(bound["log_prop1_small"]),
                "—" if bound["log_prop1_large"] is None else fmt_logp(bound["log_prop1_large"]),
                verdict_text(bound, threshold),
            )
        out.print(table)
    out.print(
        "Reading: whatever guess v̂ an onlooker makes from one output, P(⟨f(x), v̂⟩ ≥ a) is at most the bound "
        f"(Lemma 2.2: e^(ε+ρ0) × the prior's own chance); {verdict_reading(threshold)}.", markup=False,
    )
