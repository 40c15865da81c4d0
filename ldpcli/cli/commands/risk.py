"""``ldp risk``: the chance that anyone reconstructs a person's data from their output (Bhowmick et al. 2018, Sec. 2.3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from ldpcli.analysis._attack import attack as run_attack
from ldpcli.cli._typer_compat import Command
from ldpcli.cli.options import NORM_OPTION, RISK_THRESHOLD_OPTION, command_app, floats
from ldpcli.cli.render import fmt, fmt_logp, out, progress, render, warn
from ldpcli.cli.tables import print_reconstruction, verdict_reading
from ldpcli.errors import UsageError
from ldpcli.mechanisms import MechanismSpec, RiskEpsilon, get_mechanism
from ldpcli.mechanisms._hooks import risk_epsilons
from ldpcli.planning._compare import comparison_options
from ldpcli.release._sidecar import load_sidecar
from ldpcli.risk._diffuse import STANDARD_A, check_threshold, max_epsilon_for_risk
from ldpcli.risk._section import RISK_NAMES, reconstruction, reconstruction_for
from ldpcli.risk._sparse import sparse_risk

app = command_app()


@app.command("risk", cls=Command)
def risk(
    eps: Optional[float] = typer.Option(
        None, "--eps", "--epsilon", help="The release's ε (with --mechanism: the level it is calibrated to)."
    ),
    mechanism: Optional[str] = typer.Option(
        None, "--mechanism", "-m", help="With --d: the bound uses this mechanism's exact ε (its default options; for "
        "others, `ldp params -m M … --risk-k K` or --sidecar) and says which ε counts."
    ),
    calibration: Optional[str] = typer.Option(None, "--calibration", help="With --mechanism: how its parameters "
                                              "are chosen (default: its first; `ldp privatize --help` lists them)."),
    sidecar: Optional[Path] = typer.Option(None, "--sidecar", help="Take the mechanism and d from a release's sidecar."),
    d: Optional[int] = typer.Option(
        None, "--d", help="Dimension of the rows (with --mechanism; default k). With --model zipf: the dictionary size."
    ),
    k: Optional[int] = typer.Option(
        None, "--k", help="Dimension of the reconstructed direction f(x) = Ax/‖Ax‖, 2 ≤ k ≤ d (default d: the whole "
        "direction). Low-dimensional views (a few first coordinates, low frequencies) are the hard case."
    ),
    rho0: float = typer.Option(
        0.0, "--rho0", help="The onlooker's prior concentration ρ0 ≥ 0: its density on f(x) is at most e^ρ0 times "
        "uniform (0: a uniform prior)."
    ),
    a: Optional[str] = typer.Option(
        None, "--a", metavar="A,...", help="Accuracies in [0, 1], comma-separated (default 0.1,0.3,0.5,0.9): a guess "
        "v̂ succeeds when ⟨f(x), v̂⟩ ≥ a, i.e. ‖f(x) − v̂‖ ≤ √(2 − 2a)."
    ),
    max_risk: Optional[float] = typer.Option(
        None, "--max-risk", metavar="P", help="Instead: the largest ε whose reconstruction bound stays ≤ P, per a "
        "(needs --k or --d)."
    ),
    model: Optional[str] = typer.Option(
        None, "--model", metavar="zipf", help="Sparse data instead: the Zipfian prior P(word j used) = min(m/j, 1) of "
        "Bhowmick et al. Sec. 2.3.2 (with --m, --d, --precision, --recall)."
    ),
    m: Optional[int] = typer.Option(None, "--m", help="--model zipf: the least number of words a user contributes."),
    precision: Optional[float] = typer.Option(None, "--precision", help="--model zipf: the guess's precision to reach."),
    recall: Optional[float] = typer.Option(None, "--recall", help="--model zipf: the guess's recall to reach."),
    attack: Optional[Path] = typer.Option(
        None, "--attack", metavar="PRIVATIZED", help="Instead: run the natural reconstruction on a release and compare "
        "with --raw (the owner's own analysis: it reads raw data, never publish its output)."
    ),
    raw: Optional[Path] = typer.Option(None, "--raw", help="--attack: the raw file the release was made from."),
    basis: str = typer.Option(
        "coordinates", "--basis", metavar="coordinates|random", help="--attack: project on the first k coordinates, or "
        "on a seeded public random orthonormal basis."
    ),
    basis_seed: int = typer.Option(0, "--basis-seed", help="--attack --basis random: the public basis's seed."),
    norm_bound: Optional[float] = NORM_OPTION,
    risk_threshold: float = RISK_THRESHOLD_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="--attack: no progress bar."),
) -> None:
    """What a release costs: the chance that anyone reconstructs a person's data from their output.

    If a release is ε-LDP, no guess made from one output does better than e^ε times the best guess
    made without it (Bhowmick et al. 2018, Lemma 2.2). With a diffuse prior on the direction of a
    k-dimensional view of the row, that chance stays tiny even at large ε unless ε is of the order of
    k (Prop. 1). Reports, per accuracy a, the paper's Prop. 1 bound (two branches) and the sharper
    exact bound with the uniform cap probability, as probabilities (powers of ten below 1e-4),
    and a verdict: 'protected' at most --risk-threshold (default 0.001), 'at risk' above it, 'no
    guarantee' where the bound reaches 1.

    Modes: the bound at --eps, at a --mechanism's exact ε (with --d) or at a --sidecar's release;
    --max-risk P: the largest ε that keeps the bound ≤ P; --model zipf: sparse histogram data
    (Lemma 2.3's bound and the exact best guess); --attack PRIVATIZED --raw RAW: the natural
    reconstruction run on real rows, against the guess the prior alone allows.
    """
    accuracies = floats(a, "--a")
    if attack is not None:
        _risk_attack(attack, raw, sidecar, k, basis, basis_seed, accuracies, as_json, quiet)
        return
    if raw is not None:
        raise UsageError("--raw goes with --attack PRIVATIZED")
    threshold = check_threshold(risk_threshold, RISK_NAMES)
    if model is not None:
        _risk_sparse(model, eps, mechanism, sidecar, m, d, precision, recall, as_json, calibration, norm_bound,
                     threshold)
        return
    if max_risk is not None:
        if eps is not None or mechanism is not None or sidecar is not None:
            raise UsageError("--max-risk solves for ε: give --k (or --d) and --a, not --eps, --mechanism or --sidecar")
        _risk_max_epsilon(max_risk, k, d, rho0, accuracies, as_json)
        return
    mech = _risk_mechanism(eps, mechanism, sidecar, d, calibration, norm_bound)
    if mech is not None:
        section = reconstruction(mech, k=k, rho0=rho0, a=accuracies, threshold=threshold)
        if section is None:
            raise UsageError(f"{mech.name} releases one number (d = 1): there is no direction to reconstruct; "
                             "see --model zipf for sparse data")
    else:
        assert eps is not None
        section = _plain_section(eps, k, d, rho0, accuracies, threshold)
    render(section, as_json, lambda: print_reconstruction(section, title="Reconstruction risk"))


def _risk_mechanism(
    eps: float | None, mechanism: str | None, sidecar: Path | None, d: int | None, calibration: str | None,
    norm_bound: float | None,
) -> Any:
    """The release whose exact ε counts: from a sidecar, a mechanism at (d, ε), or None for a bare ε."""
    if sidecar is not None:
        if eps is not None or mechanism is not None:
            raise UsageError("--sidecar gives the mechanism and ε; drop --eps and --mechanism")
        return load_sidecar(sidecar).mechanism
    if eps is None:
        raise UsageError("give --eps, --mechanism with --d and --eps, or --sidecar (or --max-risk, --model, --attack)")
    if mechanism is None:
        if calibration is not None:
            raise UsageError("--calibration needs --mechanism")
        return None
    if d is None:
        raise UsageError("--mechanism needs --d, the dimension it is calibrated for")
    options = comparison_options(get_mechanism(mechanism))  # δ for the Gaussian baseline, as `ldp params`
    return MechanismSpec(mechanism, eps, calibration, 1.0 if norm_bound is None else norm_bound, options).calibrate(d)


def _plain_section(
    eps: float, k: int | None, d: int | None, rho0: float, a: list[float] | None, threshold: float
) -> dict[str, Any]:
    """The reconstruction section for a bare ε (any ε-LDP release), with verdicts at ``threshold``."""
    k = d if k is None else k
    if k is None:
        raise UsageError("--k is required with a bare --eps (the dimension of the reconstructed direction), or --d")
    level = RiskEpsilon("release", eps, f"any {fmt(eps)}-LDP release, any prior", True)
    return reconstruction_for([level], k=k, rho0=rho0, a=a, d=d, threshold=threshold)


def _risk_max_epsilon(
    max_risk: float, k: int | None, d: int | None, rho0: float, a: list[float] | None, as_json: bool
) -> None:
    """``ldp risk --max-risk P``: the largest ε per a (closed form, ldpcli.risk._diffuse)."""
    k = d if k is None else k
    if k is None:
        raise UsageError("--max-risk needs --k (the dimension of the reconstructed direction) or --d")
    if d is not None and k > d:
        raise UsageError(f"--k must be an integer >= 2 and <= d = {d}, got {k}")
    results = [max_epsilon_for_risk(max_risk, k=k, a=value, rho0=rho0) for value in (STANDARD_A if a is None else a)]
    render([r.to_dict() for r in results], as_json, lambda: _print_max_epsilon(results, max_risk, k, rho0))


def _print_max_epsilon(results: list[Any], max_risk: float, k: int, rho0: float) -> None:
    """The largest ε per accuracy a (``ldp risk --max-risk``)."""
    table = Table(title=f"Largest ε keeping P(reconstruction) ≤ {fmt(max_risk)}: direction of a k = {k} projection, "
                  f"prior ρ0 = {fmt(rho0)}", title_justify="left")
    for name in ("a", "largest ε (exact cap)", "largest ε (Prop. 1)", "note"):
        table.add_column(name, justify="left" if name == "note" else "right")
    for r in results:
        table.add_row(fmt(r.a), fmt(r.epsilon_max), fmt(r.epsilon_max_prop1), r.reason or "")
    out.print(table)
    out.print("Reading: an ε-LDP release at or below this ε keeps every onlooker's chance of a guess with "
              "⟨f(x), v̂⟩ ≥ a at most P, whatever the output (Lemma 2.2 with the exact uniform cap probability).",
              markup=False)


def _risk_sparse(
    model: str, eps: float | None, mechanism: str | None, sidecar: Path | None, m: int | None, d: int | None,
    precision: float | None, recall: float | None, as_json: bool, calibration: str | None,
    norm_bound: float | None, threshold: float,
) -> None:
    """``ldp risk --model zipf``: Lemma 2.3's bound and the exact best guess, times e^ε (Prop. 2)."""
    if model != "zipf":
        raise UsageError(f"--model must be zipf (the Zipfian prior of Bhowmick et al. Sec. 2.3.2), got {model!r}")
    missing = [flag for flag, value in (("--m", m), ("--d", d), ("--precision", precision), ("--recall", recall))
               if value is None]
    if missing:
        raise UsageError(f"--model zipf needs {', '.join(missing)}")
    assert m is not None and d is not None and precision is not None and recall is not None
    if mechanism is not None or sidecar is not None:
        mech = _risk_mechanism(eps, mechanism, sidecar, d if sidecar is None else None, calibration, norm_bound)
        level = risk_epsilons(mech)[0]
        if level.epsilon is None:
            raise UsageError(f"{mech.name}: {level.applies}")
        epsilon = level.epsilon
    elif eps is None:
        raise UsageError("--model zipf needs --eps (or --sidecar)")
    else:
        epsilon = eps
    result = sparse_risk(epsilon, m=m, d=d, precision=precision, recall=recall)
    render(result.to_dict(threshold), as_json, lambda: _print_sparse(result, m, d, precision, recall, epsilon, threshold))


def _print_sparse(
    result: Any, m: int, d: int, precision: float, recall: float, epsilon: float, threshold: float
) -> None:
    """The sparse-data bounds (``ldp risk --model zipf``): Lemma 2.3's and the exact best guess's."""
    table = Table(title=f"Reconstruction of a sparse histogram (Zipfian prior, m = {m}, d = {d}): precision ≥ "
                  f"{fmt(precision)} and recall ≥ {fmt(recall)}, at ε = {fmt(epsilon)}", title_justify="left")
    for name in ("route", "prior alone", "after the release", "note"):
        table.add_column(name, justify="left" if name in ("route", "note") else "right")
    table.add_row("Lemma 2.3 (Bernstein, proof's constants)", fmt_logp(result.log_prior_lemma),
                  fmt_logp(result.log_bound_lemma), f"γ = {fmt(result.gamma)}")
    if result.log_prior_exact is None:
        table.add_row("exact best guess", "—", "—", result.exact_reason or "")
    else:
        table.add_row("exact best guess", fmt_logp(result.log_prior_exact), fmt_logp(result.log_bound_exact),
                      f"the {result.best_size} most frequent words")
    out.print(table)
    out.print(f"Verdict: {result.verdict(threshold)} (the tighter bound after the release is {fmt_logp(result.log_bound)}).",
              markup=False)
    out.print("Reading: no guess made from one output reaches both precision and recall with more than the "
              f"'after the release' probability (Lemma 2.2: e^ε × the prior's best guess); {verdict_reading(threshold)}.",
              markup=False)


def _risk_attack(
    privatized: Path, raw: Path | None, sidecar: Path | None, k: int | None, basis: str, basis_seed: int,
    a: list[float] | None, as_json: bool, quiet: bool,
) -> None:
    """``ldp risk --attack PRIVATIZED --raw RAW``: the natural reconstruction (ldpcli.analysis._attack)."""
    if raw is None:
        raise UsageError("--attack needs --raw RAW, the file the release was made from")
    kwargs: dict[str, Any] = {"k": k, "basis": basis, "basis_seed": basis_seed, "sidecar": sidecar}
    if a is not None:
        kwargs["a"] = a
    with progress("attacking", quiet) as (_, on_rows):
        report = run_attack(privatized, raw, on_rows=on_rows, **kwargs)
    info = report.to_dict()
    render(info, as_json, lambda: _print_attack(info))


def _print_attack(info: dict[str, Any]) -> None:
    """The attack's tables: how close the natural reconstruction came, against the prior-only guess."""
    basis = "first k coordinates" if info["basis"] == "coordinates" else f"random basis, seed {info['basis_seed']}"
    table = Table(
        title=f"Reconstruction attack on {info['privatized']} ({info['mechanism']}, ε = {fmt(info['epsilon'])}, "
        f"n = {info['n']}): ⟨f(x), v̂⟩ for the direction of k = {info['k']} of d = {info['d']} ({basis})",
        title_justify="left",
    )
    for name in ("guess", *info["release"].keys()):
        table.add_column(name, justify="left" if name == "guess" else "right")
    table.add_row("from the release", *(fmt(v) for v in info["release"].values()))
    table.add_row("prior only", *(fmt(v) for v in info["prior"].values()))
    out.print(table)
    success = Table(title=f"Fraction of rows reconstructed to ⟨f(x), v̂⟩ ≥ a ({info['interval']} intervals)",
                    title_justify="left")
    for name in ("a", "from the release", "prior only", "bound, uniform prior"):
        success.add_column(name, justify="right")
    for row in info["success"]:
        release, prior = row["release"], row["prior"]
        success.add_row(
            fmt(row["a"]), f"{fmt(release['fraction'])} [{fmt(release['low'])}, {fmt(release['high'])}]",
            f"{fmt(prior['fraction'])} [{fmt(prior['low'])}, {fmt(prior['high'])}]", fmt(row["uniform_bound"]),
        )
    out.print(success)
    if info["expected_boundary"] is not None:
        out.print(f"Expected cosine of this reconstruction for a row on the boundary (‖x‖ = L, a unit embedding with "
                  f"L = 1), from the public parameters: {fmt(info['expected_boundary'])} ({info['expected_how']}); "
                  "compare the mean above.", markup=False)
    out.print("Reading: 'prior only' is the best single guess made without the release (the rows' mean direction); "
              "the release adds what lies between the two columns. The bound holds for a prior uniform on the "
              "directions (ρ0 = 0), which real data is not.", markup=False)
    warn(info["notice"])
