"""``ldp params``: a mechanism's calibrated parameters, exact ε and expected error before any data is touched;
without --mechanism the comparison of every vector mechanism, with a target the smallest ε that meets it."""

from __future__ import annotations

import math
from typing import Any, Optional

import typer
from rich.table import Table

from ldpcli.cli._typer_compat import Command
from ldpcli.cli.options import (
    CALIBRATION_OPTION,
    D_OPTION,
    NORM_OPTION,
    R_MAX_OPTION,
    REPORT_BITS_OPTION,
    RISK_A_OPTION,
    RISK_K_OPTION,
    RISK_RHO0_OPTION,
    RISK_THRESHOLD_OPTION,
    SECURE_DELTA_OPTION,
    SECURE_OPTION,
    WithMechanismOptions,
    command_app,
    floats,
    public_bound,
    report_bits,
)
from ldpcli.cli.render import fmt, fmt_bound, fmt_logp, fmt_probability, out, render, warn
from ldpcli.cli.tables import print_reconstruction, verdict_reading
from ldpcli.errors import UsageError, counted
from ldpcli.math._shuffling import ASSUMPTIONS, THEOREM
from ldpcli.mechanisms import BCDP, MechanismSpec, SeedReports, get_mechanism
from ldpcli.mechanisms._base import check_count
from ldpcli.mechanisms._rendering import secured
from ldpcli.planning._compare import DEFAULT_DELTA, compare_mechanisms, recommendation
from ldpcli.planning._shuffle import NO_CLAIM, add_shuffle_claims, central_delta, shuffle_claim
from ldpcli.planning._solvers import epsilon_for_error, epsilons_for_error
from ldpcli.release._randomness import DEFAULT_RNG, randomness_record
from ldpcli.release._safety import check_epsilon, near_exact_warning
from ldpcli.risk._section import reconstruction

app = command_app()


@app.command("params", cls=Command)
@WithMechanismOptions
def params(
    d: int = D_OPTION,
    eps: Optional[float] = typer.Option(
        None, "--eps", "--epsilon", help="Privacy level ε per row, in [0.01, 10⁴]. Required unless --target-rmse or "
        "--target-error asks for the smallest ε that meets an error target."
    ),
    mechanism: Optional[str] = typer.Option(
        None, "--mechanism", "-m", help=" Without it: a comparison of all vector mechanisms."
    ),
    calibration: Optional[str] = CALIBRATION_OPTION,
    norm_bound: Optional[float] = NORM_OPTION,
    r_max: Optional[float] = R_MAX_OPTION,
    n: Optional[int] = typer.Option(None, "--n", help="Number of rows, to report the expected error of their mean."),
    target_rmse: Optional[float] = typer.Option(
        None, "--target-rmse", help="With --n: the smallest ε at which the guaranteed RMS ℓ2 error of the mean of n "
        "rows is at most this (solved exactly, per mechanism)."
    ),
    target_error: Optional[float] = typer.Option(
        None, "--target-error", help="Like --target-rmse, for the guaranteed E‖mean − true mean‖² (the RMS squared)."
    ),
    risk_k: Optional[int] = RISK_K_OPTION,
    risk_rho0: float = RISK_RHO0_OPTION,
    risk_a: Optional[str] = RISK_A_OPTION,
    risk_threshold: float = RISK_THRESHOLD_OPTION,
    shuffle: Optional[int] = typer.Option(
        None, "--shuffle", help="N, a number of reports (one per person, N ≥ 2): also show the central (ε, δ) of N "
        "reports published in a uniformly random order by an honest shuffler, beside the local ε, for every pure "
        "ε-LDP mechanism shown (Feldman, McMillan & Talwar 2021: a certified upper bound, the lower end of its "
        "bracket, and the closed form of their Thm 3.1 where it applies). (ε, δ)-LDP mechanisms (gaussian) get no "
        "claim."
    ),
    shuffle_delta: Optional[float] = typer.Option(
        None, "--shuffle-delta", help="The central δ of --shuffle N; default 1/N². Must be below 1/N. --delta "
        "means the same with --shuffle when no mechanism shown takes a δ of its own (the comparison's gaussian "
        "baseline then keeps its default δ = 1e-6); with --mechanism gaussian, --delta is the mechanism's and "
        "the central δ must be given as --shuffle-delta."
    ),
    secure: bool = SECURE_OPTION,
    secure_delta: Optional[float] = SECURE_DELTA_OPTION,
    compress_reports: bool = typer.Option(
        False, "--compress-reports", help="With --mechanism privunit2 or privunitg: also describe seed-compressed "
        "reports (Feldman & Talwar 2021, Alg. 1): each row one seed of --report-bits whose ChaCha20 expansion is the "
        "privatized vector, chosen by rejection over fresh seeds; shows the tries T, the expected tries p/P, the "
        "fallback probability, the exact ε with respect to an ideal generator and the error. Not --compression, "
        "the Parquet codec."
    ),
    bits: Optional[int] = REPORT_BITS_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON (an object, or a list for the comparison)."),
    options: dict[str, Any] = {},  # noqa: B006 - filled by WithMechanismOptions, never mutated
) -> None:
    """Show a mechanism's calibrated parameters, its exact ε and its expected error, for (d, ε).

    With --secure (and --mechanism), also the secure rendering's grid, its δ and its cost in error
    (docs/floating-point.md); the expected errors then include the rounding's.

    Without --mechanism (and without --calibration, which implies privunit2), compare every vector mechanism at (d, ε) by its worst-case error over the
    ℓ2 ball of radius L, as a ratio to optimal PrivUnit2 (no unbiased ε-LDP mechanism does better).
    Vector mechanisms also get bounds on reconstructing a row's direction from one output
    (Bhowmick et al. 2018 Sec. 2.3.1; --risk-k, --risk-rho0, --risk-a; `ldp risk` for more).
    With --n and --target-rmse (or --target-error), give instead the smallest ε at which each
    mechanism's guaranteed error of the mean meets the target.
    With --shuffle N, also give the central ε of N shuffled reports (amplification by shuffling).
    With --compress-reports, also the seed-compressed reports of the mechanism (bits, tries, fallback, ε).
    """
    if n is not None:
        check_count(n, "n")
    norm = public_bound(norm_bound, r_max)
    if mechanism is None and calibration is not None:
        mechanism = "privunit2"  # a calibration names the default mechanism's, not a comparison
    central, options = _central(shuffle, shuffle_delta, mechanism, options)
    if central is not None and (target_rmse is not None or target_error is not None):
        raise UsageError("--shuffle gives the central ε of reports made at a given --eps: it does not combine with "
                         "--target-rmse or --target-error")
    if target_rmse is not None or target_error is not None:
        _params_for_target(d, n, eps, target_rmse, target_error, mechanism, calibration, norm, options, as_json)
        return
    if eps is None:
        raise UsageError("Missing option '--eps' (or give --n with --target-rmse / --target-error to solve for ε)")
    warn(check_epsilon(eps, force=True))  # params touches no data: out of range is a warning here
    risk_options: dict[str, Any] = {"k": risk_k, "rho0": risk_rho0, "a": floats(risk_a, "--risk-a"),
                                    "threshold": risk_threshold}
    report_bits(compress_reports, bits)  # --report-bits alone is refused
    if mechanism is None:
        if secure or compress_reports:
            raise UsageError("--secure and --compress-reports describe one mechanism: give --mechanism")
        if set(options) - {"delta"}:
            raise UsageError("--k, --alpha, --nu and --eps-split need --mechanism")
        rows = compare_mechanisms(d, eps, norm_bound=norm, delta=options.get("delta"), risk=risk_options)
        if n is not None:
            for row in rows:
                if "expected_error_max" in row:
                    row["n"] = n
                    row["expected_error_mean"] = row["expected_error_max"] / n
        if central is not None:
            add_shuffle_claims(rows, *central)
        render(rows, as_json, lambda: _print_comparison(rows, recommendation(rows), n, central))
        return
    bound_spec, notes = MechanismSpec(mechanism, eps, calibration, norm, options).bind_columns(None, d)
    for text in notes:
        warn(text)
    mech = bound_spec.calibrate(d)
    if secure or secure_delta is not None:
        if not secure:
            raise UsageError("--secure-delta is the target δ of the secure rendering: give it with --secure")
        mech = secured(mech, secure_delta)
    info = mech.describe()
    if compress_reports:
        info["reports"] = SeedReports.build(mech, 64 if bits is None else bits).describe()
    warn(near_exact_warning(mech))
    if n is not None:
        info["n"] = n
        info["expected_error_mean"] = mech.expected_error_mean(n)
    section = reconstruction(mech, **risk_options)
    if section is not None:
        info["reconstruction"] = section
    if isinstance(mech, BCDP):
        info["features"] = mech.feature_section()
        info["alternatives"] = mech.alternatives()
    if central is not None:
        info.update(shuffle_claim(mech.epsilon_exact, mech.delta_exact, *central))
    info["randomness"] = {**randomness_record(DEFAULT_RNG, seeded=False).to_dict(), "bit_level": "rendering" in info}
    render(info, as_json, lambda: _print_mechanism(mech, info, n, section, central))


def _randomness_reading(secure: bool) -> str:
    """One sentence on what a default release's randomness guarantees, and what --rng pcg64 and --secure change."""
    doubles = ("with --secure, the released doubles are a proven post-processing of the exact mechanism (the δ above)"
               if secure else "the released doubles are ε-LDP as real numbers and carry a bit-level guarantee only "
               "with --secure (docs/floating-point.md)")
    return (f"Randomness: a release draws its noise from ldp's ChaCha20 stream (RFC 8439, 20 rounds) keyed by 256 bits "
            f"of OS entropy, which nobody can predict from other rows; {doubles}. --rng pcg64 opts out for simulations "
            f"(faster, predictable from enough output).")


def _central(shuffle: int | None, shuffle_delta: float | None, mechanism: str | None,
             options: dict[str, Any]) -> tuple[tuple[int, float] | None, dict[str, Any]]:
    """((N, central δ) for --shuffle N or None without it, the mechanisms' options). Without --shuffle-delta, a --delta is the central
    δ when no mechanism shown takes a δ of its own (the options returned then leave it out; ``options`` itself
    is never changed); with --mechanism gaussian it is that mechanism's, and the central δ must be --shuffle-delta."""
    if shuffle is None:
        if shuffle_delta is not None:
            raise UsageError("--shuffle-delta needs --shuffle N, the number of shuffled reports")
        return None, options
    if shuffle_delta is None and options.get("delta") is not None:
        if mechanism is not None and "delta" in get_mechanism(mechanism).options:
            raise UsageError(f"--delta is {mechanism}'s own δ here, so it cannot also be the central δ of --shuffle: "
                             "give the central δ as --shuffle-delta")
        shuffle_delta = options["delta"]
        options = {name: value for name, value in options.items() if name != "delta"}
        if mechanism is None:
            warn("--delta is taken as the central δ of --shuffle; the gaussian baseline keeps its default δ = "
                 f"{DEFAULT_DELTA:g} (give the central δ as --shuffle-delta to set the baseline's with --delta)")
    return (shuffle, central_delta(shuffle, shuffle_delta)), options


def _central_reading(central: tuple[int, float]) -> str:
    """The line under a table with central ε's: what the three numbers are, and what they assume."""
    n, delta = central
    return (f"Central ε: the n = {n} reports shuffled, at δ = {delta:.3g}. \"upper\" is a certified upper bound on "
            f"the central ε ({THEOREM}); \"lower\" is the lower end of its bracket (that reduction's exact ε is at "
            "least this; a given mechanism may do better); \"closed form\" is Thm 3.1's ε where its condition holds. "
            "It assumes " + "; ".join(ASSUMPTIONS) + ".")


def _print_mechanism(mech: Any, info: dict[str, Any], n: int | None, section: dict[str, Any] | None,
                     central: tuple[int, float] | None = None) -> None:
    """The tables of one mechanism: its parameters, bcdp's features, the reconstruction bounds."""
    _print_parameters(mech, info, n, central)
    if isinstance(mech, BCDP):
        _print_features(info["features"], info["alternatives"])
    if section is not None:
        print_reconstruction(section)
    out.print(_randomness_reading(info["randomness"]["bit_level"]), markup=False)


def _print_features(features: dict[str, Any], alternatives: list[dict[str, Any]]) -> None:
    """bcdp: each group of features with its level, budget, granted level and error; then the alternatives."""
    table = Table(title=f"Features by level (most sensitive first; q = {fmt(features['q'])}, base "
                  f"{features['base']}, c_d = {fmt(features['c_total'])})", title_justify="left")
    for name in ("coordinates", "features", "δ asked", "c", "BCDP level (Prop. 4)", "expected error"):
        table.add_column(name, justify="left" if name == "coordinates" else "right")
    for group in features["groups"]:
        table.add_row(group["coordinates"], str(group["count"]), fmt(group["delta"]), fmt(group["c"]),
                      fmt(group["bcdp_level"]), fmt(group["expected_error"]))
    out.print(table)
    choices = Table(title="The same levels by other choices (error at a vertex of the box / worst case over it)",
                    title_justify="left")
    for name in ("choice", "c_d", "expected error", "expected error max", "meets the levels"):
        choices.add_column(name, justify="left" if name == "choice" else "right")
    for row in alternatives:
        if "error" in row:
            choices.add_row(row["choice"], "—", "—", "—", row["error"])
        else:
            choices.add_row(row["choice"], fmt(row["c_total"]), fmt(row["expected_error"]),
                            fmt(row["expected_error_max"]), "yes" if row["meets_levels"] else "no")
    out.print(choices)


def _print_risk_line(rows: list[dict[str, Any]]) -> None:
    """One line under the comparison: the reconstruction bound at the release's ε (they share it)."""
    best = next((row for row in rows if row.get("reconstruction") and row["reconstruction"]["levels"][0]["bounds"]), None)
    if best is None:
        return
    section = best["reconstruction"]
    level = section["levels"][0]
    parts = [f"a = {fmt(b['a'])}: {fmt_logp(b['log_exact'])} ({b['verdict']})" for b in level["bounds"]]
    out.print(
        f"Reconstruction (k = {section['k']}, ρ0 = {fmt(section['rho0'])}, ε = {fmt(level['epsilon'])}): any guess "
        f"from one output reaches ⟨f(x), v̂⟩ ≥ a with probability at most {'; '.join(parts)}; "
        f"{verdict_reading(section['threshold'])}. See `ldp risk`.",
        markup=False,
    )


def _central_cells(row: dict[str, Any]) -> list[str]:
    """A comparison row's central ε cells (upper, lower, closed form), dashes where there is no claim."""
    claim = row["shuffle"]
    if claim is None:
        return ["—", "—", "—"]
    closed = claim["epsilon_closed_form"]
    return [fmt_bound(claim["epsilon_upper"]), fmt_bound(claim["epsilon_lower"], up=False), fmt_bound(closed)]


def _params_for_target(
    d: int, n: int | None, eps: float | None, target_rmse: float | None, target_error: float | None,
    mechanism: str | None, calibration: str | None, bound: float, options: dict[str, Any], as_json: bool,
) -> None:
    """``ldp params --n N --target-rmse T``: the smallest ε per mechanism (ldpcli.planning._solvers)."""
    if target_rmse is not None and target_error is not None:
        raise UsageError("give one of --target-rmse and --target-error")
    if n is None:
        raise UsageError("--target-rmse and --target-error need --n, the number of rows the mean is taken over")
    if eps is not None:
        raise UsageError("--eps and a target exclude each other: the target chooses ε")
    flag = "--target-rmse" if target_rmse is not None else "--target-error"
    value = target_rmse if target_rmse is not None else target_error
    assert value is not None
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{flag} must be a positive number, got {value}")
    target = value**2 if target_rmse is not None else value
    if mechanism is None:
        results = epsilons_for_error(d=d, n=n, target_error=target, norm_bound=bound, delta=options.get("delta"))
    else:
        results = [epsilon_for_error(mechanism, d=d, n=n, target_error=target, norm_bound=bound,
                                     calibration=calibration, options=options,
                                     target_name="target_rmse" if target_rmse is not None else "target_error")]
    payload = [r.to_dict() for r in results] if mechanism is None else results[0].to_dict()
    render(payload, as_json, lambda: _print_targets(results, target_rmse is not None, value, n, d, bound))


def _print_targets(results: list[Any], rmse: bool, value: float, n: int, d: int, bound: float) -> None:
    """The smallest ε per mechanism for an error target (``ldp params --target-rmse``)."""
    table = Table(
        title=f"Smallest ε meeting a guaranteed {'RMS ℓ2 error' if rmse else 'E‖mean − true mean‖²'} "
        f"≤ {fmt(value)} for the mean of n = {counted(n, 'row')}, d = {d}, L = {fmt(bound)}",
        title_justify="left",
    )
    for name in ("mechanism", "ε", "ε exact", "RMS error at ε", "note"):
        table.add_column(name, justify="left" if name in ("mechanism", "note") else "right")
    for r in results:
        if r.epsilon is None:
            table.add_row(r.mechanism, "—", "—", "—", f"not attainable: {r.reason}")
            continue
        note = "met already at the smallest ε, 0.01" if r.at_minimum else ""
        table.add_row(r.mechanism, fmt(r.epsilon), fmt(r.epsilon_exact), fmt(r.rmse), note)
    out.print(table)


def _print_parameters(mech: Any, info: dict[str, Any], n: int | None,
                      central: tuple[int, float] | None = None) -> None:
    """The human table for one mechanism, and a one-line reading of it."""
    table = Table(title=f"{mech.title}", show_header=False, title_justify="left")
    table.add_column("quantity", style="bold")
    table.add_column("value", justify="right")
    table.add_column("meaning")
    rows: list[tuple[str, str, str]] = [
        ("mechanism", mech.name, f"calibration: {mech.calibration}"),
        ("d", str(mech.d), "dimension"),
        ("ε", fmt(mech.epsilon), "privacy level asked for"),
        ("ε exact", fmt(mech.epsilon_exact), "exact worst-case privacy loss of these parameters"),
    ]
    if "gamma" in info and "cap_probability" in info:
        rows += [
            ("γ", fmt(info["gamma"]), "cap threshold on ⟨V, u⟩"),
            ("p", fmt_probability(info["p"], info["p_logit"]), "probability of sampling the cap"),
            ("cap probability", fmt(info["cap_probability"]) if info["cap_probability"] > 0
             else f"e^{info['log_cap_probability']:.6g}", "P(⟨V, u⟩ ≥ γ) for V uniform on the sphere"),
        ]
    else:
        skip = {"mechanism", "calibration", "d", "epsilon", "epsilon_exact", "norm_bound", "domain", "scale",
                "expected_error", "expected_error_max", "n", "expected_error_mean"}
        for key, value in info.items():
            if key not in skip and isinstance(value, (int, float)) and not isinstance(value, bool):
                rows.append((key, fmt(value) if isinstance(value, float) else str(value), "parameter"))
    rows += [
        ("L", fmt(mech.norm_bound), f"public bound ({mech.domain})"),
        ("scale", fmt(mech.scale), "each output row has ℓ2 norm scale·L"),
        ("expected error", fmt(mech.expected_error), "E‖Z − x‖² for x on the boundary of the domain"),
        ("expected error max", fmt(mech.expected_error_max), "worst case over the domain"),
    ]
    rendering = info.get("rendering")
    if rendering is not None:
        rows += _rendering_rows(rendering)
    if n is not None:
        rows.append(("expected error of mean", fmt(info["expected_error_mean"]), f"E‖mean − true mean‖² ≤ max/n, n = {n}"))
    if central is not None:
        rows += _central_rows(info, central)
    if "reports" in info:
        rows += _reports_rows(info["reports"], mech.d)
    for row in rows:
        table.add_row(*row)
    out.print(table)
    if central is not None:
        out.print(_central_reading(central), markup=False)
    rms_row = math.sqrt(mech.expected_error_max)
    if n is not None:
        reading = (
            f"Reading: the mean of {counted(n, 'row')} privatized at ε = {fmt(mech.epsilon)} is within about "
            f"{fmt(math.sqrt(info['expected_error_mean']))} of the true mean (RMS ℓ2 error), for L = {fmt(mech.norm_bound)}."
        )
    else:
        reading = (
            f"Reading: one privatized row is off by at most about {fmt(rms_row)} (RMS ℓ2) for L = {fmt(mech.norm_bound)}; "
            f"the mean of n rows by {fmt(rms_row)}/√n. Add --n for your row count."
        )
    out.print(reading, markup=False)


def _central_rows(info: dict[str, Any], central: tuple[int, float]) -> list[tuple[str, str, str]]:
    """The central ε rows of one mechanism's table (--shuffle)."""
    n, delta = central
    claim = info["shuffle"]
    if claim is None:
        return [("central ε, shuffled", "—", info["shuffle_reason"])]
    closed = claim["epsilon_closed_form"]
    return [
        ("central ε, shuffled", fmt_bound(claim["epsilon_upper"]), f"upper bound for n = {n} shuffled reports, δ = {delta:.3g}"),
        ("central ε lower", fmt_bound(claim["epsilon_lower"], up=False), "lower end of the bracket"),
        ("central ε closed form", fmt_bound(closed),
         "outside Thm 3.1's regime" if closed is None else "Thm 3.1 (looser)"),
    ]


def _reports_rows(reports: dict[str, Any], d: int) -> list[tuple[str, str, str]]:
    """The --compress-reports rows of the parameter table."""
    return [
        ("report", f"{reports['bits']} bits", f"one seed per row, against {8 * d:,} bytes for d float64 numbers"),
        ("tries T", str(reports["tries"]), "fresh seeds tried per row at most, then a fallback seed"),
        ("expected tries", fmt(reports["expected_tries"]), "seeds expanded per row on average (p/P)"),
        ("fallback probability", fmt_bound(reports["fallback_probability"]), "the decoder's mean is corrected for it"),
        ("ε compressed", fmt(reports["epsilon_exact"]), "exact, with respect to an ideal generator (≤ ε exact)"),
        ("expected error compressed", fmt(reports["expected_error"]), "E‖Z − x‖² on the boundary, fallback included"),
    ]


def _rendering_rows(rendering: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The --secure rows of the parameter table: the rendering, its grid, its δ and its cost in error."""
    if rendering["rendering"] == "finite":
        return [("secure rendering", "finite", "each coordinate one of the public values: δ = 0, ε unchanged")]
    return [
        ("secure rendering", "grid", f"extended precision, rounded without bias to g·ℤ ({rendering['proof']})"),
        ("grid g", fmt(rendering["grid"]), "every released coordinate is an integer multiple of g"),
        ("δ", fmt_bound(rendering["delta"]), f"upper bound: (ε, δ)-LDP, aimed at δ ≤ {fmt(rendering['delta_target'])}"),
        ("error ratio", fmt(rendering["error_ratio"]), "worst-case E‖Z − x‖², secure over plain (rounding adds ≤ d·g²/4)"),
    ]


def _print_comparison(rows: list[dict[str, Any]], advice: str, n: int | None = None,
                      central: tuple[int, float] | None = None) -> None:
    """The comparison of all vector mechanisms (``ldp params`` without --mechanism), and the reconstruction line.

    With ``n``: a column with each mechanism's guaranteed error of the mean of n rows (worst case / n)."""
    first = next(row for row in rows if "d" in row)
    of_mean = "" if n is None else f"; for the mean of n = {counted(n, 'row')}, E‖mean − true mean‖² ≤ that / n"
    table = Table(
        title=f"Vector mechanisms at d = {first['d']}, ε = {fmt(first['epsilon'])}, L = {fmt(first['norm_bound'])}: "
        f"worst-case E‖Z − x‖² over the ℓ2 ball of radius L{of_mean}",
        title_justify="left",
    )
    columns = [("mechanism", "left"), ("ε exact", "right")]
    if central is not None:
        columns += [("central ε upper", "right"), ("lower", "right"), ("closed form", "right")]
    columns.append(("worst-case error", "right"))
    if n is not None:
        columns.append((f"error of mean (n = {n})", "right"))
    for name, justify in (*columns, ("× optimal", "right"), ("note", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        if "error" in row:
            table.add_row(row["mechanism"], *["—"] * (len(columns) - 1), "—", f"not available: {row['error']}")
            continue
        note = row["title"]
        if "delta" in row:
            note += f"; δ = {row['delta']:.3g}, not pure ε-LDP"
        shuffled = [] if central is None else _central_cells(row)
        if central is not None and row["shuffle"] is None:
            note += f"; {NO_CLAIM}"
        mean = [] if n is None else [fmt(row["expected_error_mean"])]
        table.add_row(row["mechanism"], fmt(row["epsilon_exact"]), *shuffled, fmt(row["expected_error_max"]), *mean,
                      f"{row['ratio_to_optimal']:.4g}", note)
    out.print(table)
    if central is not None:
        out.print(_central_reading(central), markup=False)
    if n is not None:
        best = next(row for row in rows if "expected_error_mean" in row and not row["baseline"])
        out.print(f"Reading: the mean of {counted(n, 'row')} privatized by {best['mechanism']} "
                  f"at ε = {fmt(best['epsilon'])} has "
                  f"an RMS ℓ2 error of at most {fmt(math.sqrt(best['expected_error_mean']))} from the true mean, for "
                  f"L = {fmt(best['norm_bound'])}.", markup=False)
    out.print(advice, markup=False)
    _print_risk_line(rows)
    out.print(_randomness_reading(False), markup=False)
