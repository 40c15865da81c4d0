"""``ldp audit``: check a mechanism's claims (exact ε by a second route, unbiasedness, error, law, a lower bound)."""

from __future__ import annotations

from typing import Any, Optional

import typer
from rich.table import Table

from ldpcli.audit._bits import BIT_COORDS, LOW_BITS
from ldpcli.audit._claims import MIN_TRIALS
from ldpcli.audit._claims import audit as run_audit
from ldpcli.audit._reports import reported
from ldpcli.cli._typer_compat import Command
from ldpcli.cli.options import (
    CALIBRATION_OPTION,
    D_OPTION,
    EPS_OPTION,
    NORM_OPTION,
    R_MAX_OPTION,
    REPORT_BITS_OPTION,
    SECURE_DELTA_OPTION,
    SECURE_OPTION,
    WithMechanismOptions,
    command_app,
    public_bound,
    report_bits,
)
from ldpcli.cli.render import fmt, out, render, warn
from ldpcli.errors import UsageError
from ldpcli.mechanisms import MechanismSpec, SeedReports
from ldpcli.mechanisms._base import check_count
from ldpcli.mechanisms._rendering import secured
from ldpcli.release._safety import check_epsilon

app = command_app()
#: Branches listed per input in the text output (all are in --json).
SHOWN_BRANCHES = 8


@app.command("audit", cls=Command)
@WithMechanismOptions
def audit(
    mechanism: str = typer.Option(..., "--mechanism", "-m", help=""),
    d: int = D_OPTION,
    eps: float = EPS_OPTION,
    calibration: Optional[str] = CALIBRATION_OPTION,
    norm_bound: Optional[float] = NORM_OPTION,
    r_max: Optional[float] = R_MAX_OPTION,
    trials: Optional[int] = typer.Option(
        None, "--trials", help="Privatized copies of each fixed input. Default: 20000, or as many as --effect needs.",
    ),
    power: float = typer.Option(
        0.8, "--power",
        help="Detection probability: each test reports the smallest deviation it detects with it, and --effect "
             "chooses the trials that reach it.",
    ),
    effect: Optional[float] = typer.Option(
        None, "--effect",
        help="A relative deviation of the error E‖Z − x‖² to detect with probability --power: the audit chooses the "
             "trials (from a pilot run, at most 1e7 per input) and says how many.",
    ),
    bits: bool = typer.Option(
        False, "--bits",
        help="Let the privacy lower bound's events read the raw bits of the outputs, as a released file holds "
             f"them: each row's ‖z‖ (numpy's np.linalg.norm) and first {BIT_COORDS} coordinates as exact doubles, "
             f"their last {LOW_BITS} significand bits and exponents, exact zeros and trailing zero bits (values on "
             "a coarse binary grid). "
             "Without it the events see the outputs rounded to a relative 1e-9, the mechanism's law and not its "
             "floating-point rendering. Same confidence either way.",
    ),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed for a reproducible audit. Default: OS entropy."),
    lower_bound_trials: Optional[int] = typer.Option(
        None, "--lower-bound-trials",
        help="Privatized copies of each input of the privacy lower bound (half choose the event, half measure "
             "it). Default: 20000, fewer above d = 2500 (at most 5e7 values per input, at least 100).",
    ),
    secure: bool = SECURE_OPTION,
    secure_delta: Optional[float] = SECURE_DELTA_OPTION,
    compress_reports: bool = typer.Option(
        False, "--compress-reports", help="Audit privunit2's or privunitg's seed-compressed reports (Feldman & "
        "Talwar 2021, Alg. 1; ldp privatize --compress-reports): the outputs are the decoded seeds, the exact ε "
        "and errors the reports' (the second route: the mechanism's own, then the fallback mixture's bounds "
        "evaluated directly), the law tests those of the mechanism on D(s), and the lower bound's events see "
        "the decoded rows."
    ),
    bits_per_report: Optional[int] = REPORT_BITS_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    options: dict[str, Any] = {},  # noqa: B006 - filled by WithMechanismOptions, never mutated
) -> None:
    """Check a mechanism's claims: its exact ε by a second, independent route; by simulation that its
    outputs are unbiased, that its errors are the ones it reports and that the outputs follow their
    exact law; and that no event seen in samples shows more privacy loss than ε (a lower bound).
    Exit 1 if any check fails. An honest mechanism fails with probability at most 1e-3.

    With --secure, the outputs are those of a --secure release (docs/floating-point.md), and the law
    tests also check its rendering (every coordinate on the grid, or one of the public values).
    """
    if trials is not None:
        check_count(trials, "trials", minimum=MIN_TRIALS)
    if lower_bound_trials is not None:
        check_count(lower_bound_trials, "lower_bound_trials", minimum=MIN_TRIALS)
    warn(check_epsilon(eps, force=True))
    mech = MechanismSpec(mechanism, eps, calibration, public_bound(norm_bound, r_max), options).calibrate(d)
    if secure or secure_delta is not None:  # audit the outputs as a --secure release renders them
        if not secure:
            raise UsageError("--secure-delta is the target δ of the secure rendering: give it with --secure")
        mech = secured(mech, secure_delta)
    chosen = report_bits(compress_reports, bits_per_report)
    if chosen is not None:
        mech = reported(SeedReports.build(mech, chosen))
    result = run_audit(mech, trials=trials, seed=seed, lower_bound_trials=lower_bound_trials, power=power,
                       effect=effect, bits=bits)
    render(result.to_dict(), as_json, lambda: _print_audit(mech, result), default=float)
    if not result.passed:
        raise typer.Exit(1)


def compared(value: float, limit: float, passed: bool) -> str:
    """``value ≤ limit`` when the check passed, ``value > limit ✗`` when it failed: a failing row reads as failing."""
    return f"{value:.2f} ≤ {limit:.2f}" if passed else f"{value:.2f} > {limit:.2f} ✗"


def _print_power(result: Any) -> None:
    """The branches seen, the notes of failed checks, and what each test detects with probability ``power``."""
    for check in result.inputs:
        if len(check.branches) > 1:
            shown = [b for b in check.branches if b.rows or len(check.branches) <= SHOWN_BRANCHES][:SHOWN_BRANCHES]
            seen = ", ".join(f"{b.name} {b.rows} ({b.test}, P = {b.probability:.3g})" for b in shown)
            if len(shown) < len(check.branches):
                seen += f" (of {len(check.branches)} branches; the others {'unseen or ' if shown else ''}in --json)"
            verdict = "" if check.counts_ok else " ✗"
            claim = f"{'' if check.boundary else 'at most '}{fmt(check.claimed)}"
            out.print(f"  {check.name}: branches {seen}; counts p = {check.counts_p_value:.3g}{verdict}; E‖Z − x‖² "
                      f"claimed {claim}, expected given these counts {fmt(check.predicted)}", markup=False)
        for note in check.notes:
            out.print(f"  {check.name}: {note}", markup=False)
    branched = any(len(check.branches) > 1 for check in result.inputs)
    out.print(f"Detected with probability {result.power:g} at these trials (smaller deviations may pass"
              f"{'; given the branch counts, which are tested apart' if branched else ''}):", markup=False)
    for check in result.inputs:
        mean = (f"a shift of one coordinate of E[Z] by {check.mean_effect:.3g}·‖x‖"
                if check.mean_effect is not None else "a shift of one coordinate of E[Z]")
        out.print(f"  {check.name}: {mean} ({check.mean_effect_sd:.3g} of its sd); E‖Z − x‖² off by "
                  f"{check.error_effect:.3g} relative{'' if check.comparison == 'equal' else ' (an excess)'}",
                  markup=False)
    if result.trials_note:
        out.print(f"Trials: {result.trials_note}", markup=False)


def _print_audit(mech: Any, result: Any) -> None:
    """The verdict and the tables of an audit: exact privacy, statistics, the law, the lower bound."""
    verdict = "[bold green]PASSED[/]" if result.passed else "[bold red]FAILED[/]"
    what = f", as {mech.reports.bits}-bit seed reports" if getattr(mech, "reports", None) is not None else ""
    out.print(f"Audit of {mech.name} ({mech.calibration}) at d = {mech.d}, ε = {fmt(mech.epsilon)}{what}: {verdict}")
    privacy = Table(title="Exact privacy", show_header=False, title_justify="left")
    privacy.add_column("quantity", style="bold")
    privacy.add_column("value", justify="right")
    privacy.add_row("ε asked for", fmt(mech.epsilon))
    privacy.add_row("ε exact (calibration)", repr(mech.epsilon_exact))
    privacy.add_row("ε exact (second route)", "—" if result.epsilon_second_route is None else repr(result.epsilon_second_route))
    privacy.add_row("route", result.privacy_route)
    privacy.add_row("agrees", "yes" if result.privacy_ok else "NO")
    out.print(privacy)
    alphas = result.to_dict()["family_alpha"]
    stats = Table(title=f"Statistics (family α = {alphas['statistics']:g}, Bonferroni)", title_justify="left")
    for name in ("input", "trials", "max |z| (mean)", "E‖Z − x‖² observed", "expected", "z (error)", "verdict"):
        stats.add_column(name, justify="left" if name == "input" else "right")
    for check in result.inputs:
        limit = f"{'±' if check.comparison == 'equal' else ''}{check.z_threshold:.2f}"
        stats.add_row(
            check.name, str(check.trials), compared(check.max_abs_z, check.z_threshold, check.unbiased),
            fmt(check.mean_squared_error), f"{check.comparison} {fmt(check.predicted)}",
            f"{check.error_z:.2f}" if check.error_ok else f"{check.error_z:.2f} ✗ (limit {limit})",
            "ok" if check.ok else "FAILED",
        )
    out.print(stats)
    _print_power(result)
    if result.law_unavailable is not None:
        out.print(f"Law of the output: not tested ({result.law_unavailable}).", markup=False)
    else:
        law = Table(title=f"Law of the output (family α = {alphas['law_tests']:g}, Bonferroni)", title_justify="left")
        for name in ("input", "test", "statistic", "p-value", "threshold", "verdict"):
            law.add_column(name, justify="left" if name in ("input", "test") else "right")
        for law_check in result.law:
            verdict = "skipped" if law_check.skipped else ("ok" if law_check.passed else "FAILED")
            law.add_row(
                law_check.input, law_check.test, "—" if law_check.skipped else f"{law_check.statistic:.4g}",
                "—" if law_check.skipped else f"{law_check.p_value:.3g}", f"{law_check.threshold:.2g}", verdict,
            )
        out.print(law)
        for law_check in result.law:
            if law_check.skipped:
                out.print(f"  {law_check.input}: {law_check.test}: {law_check.note}", markup=False)
    bound = result.lower_bound
    if bound is not None:
        verdict = "ok" if result.lower_bound_ok else "FAILED: above ε exact"
        reads = "the raw bits of the outputs and their values" if bound.bits else "the outputs to a relative 1e-9"
        out.print(
            f"Privacy lower bound: ε_lb = {bound.epsilon:.4f} at confidence {bound.confidence:g} "
            f"({bound.trials} trials per input; events read {reads}) against ε exact = {mech.epsilon_exact!r}: "
            f"{verdict}",
            markup=False,
        )
        out.print(f"  event: {bound.event}", markup=False)
        out.print(f"  reach: with {bound.trials} trials per input ε_lb ≤ {bound.reach:.4g} whatever the outputs (all "
                  f"of one input's rows in an event that holds none of the other's): it cannot show a privacy loss "
                  f"above that", markup=False)
    out.print(f"False-failure budget: {alphas['total']:g} = statistics {alphas['statistics']:g} + law "
              f"{alphas['law_tests']:g} + lower bound {alphas['lower_bound']:g}", markup=False)
