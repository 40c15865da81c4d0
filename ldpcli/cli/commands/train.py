"""``ldp train``: a model by locally private stochastic gradient descent (Duchi et al. 2014; Bhowmick et al. 2018)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from ldpcli.cli._typer_compat import Command
from ldpcli.cli.flags import text_in_flags
from ldpcli.cli.options import (
    CALIBRATION_OPTION,
    FORCE_OPTION,
    LEDGER_OPTION,
    R_MAX_OPTION,
    WithMechanismOptions,
    byte_size,
    command_app,
    public_bound,
    split,
)
from ldpcli.cli.render import fmt, note, out, progress, render, status, summary_table, warn
from ldpcli.errors import counted
from ldpcli.learn._central import DEFAULT_DELTA, central_options
from ldpcli.learn._model import OWNER_ONLY_STATEMENT
from ldpcli.learn._reference import REFERENCE_SECONDS
from ldpcli.learn._sgd import DEFAULT_MECHANISM
from ldpcli.learn._train import TrainingOptions, train
from ldpcli.mechanisms import MechanismSpec
from ldpcli.release._ledger import Ledger
from ldpcli.release._options import Budget, Columns, ReleaseOptions, Resources
from ldpcli.release._randomness import DEFAULT_RNG, RNG_NAMES

app = command_app()


@app.command("train", cls=Command)
@WithMechanismOptions
def train_cmd(
    data: Path = typer.Argument(
        ..., help="Training data (a format `ldp privatize` reads): one row per person, the features and a label column.",
        show_default=False, metavar="DATA",
    ),
    label: str = typer.Option(..., "--label", help="The label column (not a feature; never released as it is)."),
    loss: str = typer.Option(
        "logistic", "--loss", metavar="logistic|softmax|squared|hinge", help="logistic or hinge: two classes; softmax: "
        "two or more (multinomial logistic); squared: a numeric label (least squares)."
    ),
    eps: float = typer.Option(..., "--eps", "--epsilon", help="Privacy level ε of each released gradient, in [0.01, "
                              "10⁴] (outside it only with --force). Each row's ε is --epochs × ε."),
    mechanism: str = typer.Option(
        DEFAULT_MECHANISM, "--mechanism", "-m", help=f" Default for train: {DEFAULT_MECHANISM} (direction and "
        "magnitude apart, Bhowmick et al. 2018 Eq. 22/23), whose noise shrinks with the gradient's norm as ε grows. "
        "privunit2 (the default before) rounds every gradient to norm L, a noise that does not shrink with ε."
    ),
    calibration: Optional[str] = CALIBRATION_OPTION,
    norm_bound: Optional[float] = typer.Option(
        None, "--norm-bound", "-L", help="Public bound L on each gradient (default 1), chosen before looking at the "
        "data: gradients are clipped to the mechanism's ℓ2 ball (or ℓ∞ box) of radius L. A logistic or hinge "
        "gradient has norm ≤ ‖x‖, a softmax one ≤ √2‖x‖ (x with the intercept's 1); squared-loss gradients are "
        "unbounded and L decides how much is clipped."
    ),
    r_max: Optional[float] = R_MAX_OPTION,
    geometry: str = typer.Option(
        "l2", "--geometry", metavar="l2|l1", help="l2: projected stochastic gradient on the ball ‖θ‖₂ ≤ R; l1: "
        "stochastic mirror descent with the entropy on ‖θ‖₁ ≤ R (Duchi et al. 2014, (14a); pair it with a box "
        "mechanism: duchi-linf, privunit-inf)."
    ),
    radius: float = typer.Option(10.0, "--radius", "-R", help="Radius R of the parameter ball (ℓ2, or ℓ1 with "
                                 "--geometry l1); θ never leaves it."),
    eta0: Optional[float] = typer.Option(
        None, "--eta0", help="η₀ of the steps η_k = η₀·k^−β. Default for l2: 1/(G·M), G = L the gradient bound (√p·L "
        "for a box mechanism) and M² the mechanism's bound on E‖ĝ‖² of one step's mean release (Bhowmick et al. "
        "2018 Sec. 5.1's √(ε/p) written for the mechanism's own noise: less noise, a larger step, at most 1/G²); for "
        "l1: √(2 log 2p)/(R·M∞), M∞² bounding E‖Z‖∞² of one release."
    ),
    beta: Optional[float] = typer.Option(None, "--beta", help="β of the steps, in [0, 1]. Default 0.51 for l2 (the "
                                         "paper's; averaging wants (1/2, 1)), 1/2 for l1."),
    batch: int = typer.Option(1, "--batch", "-B", help="Rows per step: their privatized gradients are averaged "
                              "(a federated round)."),
    epochs: int = typer.Option(1, "--epochs", help="Uses of every row. Each use spends ε again: each row's ε is "
                               "epochs × ε (basic composition), as the output, the sidecar and the ledger say."),
    intercept: bool = typer.Option(True, "--intercept/--no-intercept", help="Fit an intercept (a constant 1 "
                                   "appended to x, inside the gradient's norm)."),
    classes: Optional[str] = typer.Option(
        None, "--classes", metavar="A,B,...", help="The public class list, comma-separated, in order (logistic and "
        "hinge: the second is the positive class). Default: the label values found in the data, with a warning that "
        "the list itself is then not private."
    ),
    column: Optional[str] = typer.Option(None, "--column", help="The list column holding the features."),
    columns: Optional[str] = typer.Option(
        None, "--columns", metavar="COLUMNS", help="The numeric feature columns (names, globs, ranges), as for "
        "`ldp privatize`. Default: the only list column, else every numeric column but the label."
    ),
    baseline: bool = typer.Option(False, "--baseline", help="Also run non-private SGD on the same pass (same rows, "
                                  "steps and set) and report it. It is never written to the model file."),
    reference: bool = typer.Option(
        True, "--reference/--no-reference", help="Compute θ̂, the exact minimiser of the training loss over the same "
        "ball, and report ‖θ̄ − θ̂‖ and θ̂'s evaluation: a yardstick computed from the raw rows without privacy, shown "
        "to you only and never written. --no-reference skips it (and every number that needs it)."
    ),
    reference_seconds: float = typer.Option(
        REFERENCE_SECONDS, "--reference-seconds", metavar="SECONDS", help="Stop θ̂ after this many seconds, with a note "
        "saying how close it got (its tolerance is below the six digits shown)."
    ),
    test: Optional[Path] = typer.Option(None, "--test", help="Evaluate on this file (the same feature and label "
                                        "columns): mean loss, and accuracy for a classifier."),
    holdout: Optional[float] = typer.Option(None, "--holdout", metavar="FRACTION", help="Keep this fraction of the "
                                            "rows out of training, at random, and evaluate there (those rows spend "
                                            "no ε)."),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Save the model (.json or .npz: coefficients, intercept, classes, features) and "
        "its sidecar OUTPUT.ldp.json."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing model and sidecar."),
    seed: Optional[int] = typer.Option(
        None, "--seed", help="Seed for a reproducible run (marked in the sidecar as not for release). Default: OS entropy."
    ),
    rng: str = typer.Option(
        DEFAULT_RNG, "--rng", metavar="|".join(RNG_NAMES), help="The generator of the gradients' noise, the row order and "
        "the central layer's samples and noise. chacha20 (default): ldp's ChaCha20 stream keyed from OS entropy, "
        "cryptographic. pcg64: numpy's PCG64, the opt-out for simulations (faster at --batch 1, predictable from enough "
        "output). secure: randomgen's ChaCha20. Recorded in the sidecar's release.randomness."
    ),
    memory: str = typer.Option("256MB", "--memory", help="Rows kept in memory: training rows that fit are read "
                               "once and shuffled together; a larger file is re-read each epoch and shuffled by window."),
    central_radius: Optional[float] = typer.Option(
        None, "--central-radius", metavar="RHO", help="Turn on the central layer (Bhowmick et al. 2018, eq. (13)): "
        "the server projects each privatized gradient onto the ℓ2 ball of radius RHO, adds Gaussian noise to each "
        "step's sum and states a central (ε, δ) for the model (in the sidecar and the ledger). Needs --sampling-rate and one of --noise-multiplier "
        "or --central-epsilon; needs dp-accounting (pip install 'ldp[central]')."
    ),
    sampling_rate: Optional[float] = typer.Option(
        None, "--sampling-rate", metavar="Q", help="Central layer: each step includes each training row independently "
        "with probability Q in (0, 1] (Poisson sampling, drawn before training from the --rng stream, as is the "
        "noise). The run takes "
        "⌈epochs/Q⌉ steps (each row is used --epochs times on average); the local ε per row is ε times the most "
        "steps any row was sampled in. --batch stays 1."
    ),
    noise_multiplier: Optional[float] = typer.Option(
        None, "--noise-multiplier", metavar="Z", help="Central layer: the noise added to each step's sum is "
        "N(0, (Z·RHO)²) per coordinate (σ = Z·RHO/(Q·N) on the step's mean); Z ≥ 0.3."
    ),
    central_epsilon: Optional[float] = typer.Option(
        None, "--central-epsilon", metavar="E", help="Central layer, instead of --noise-multiplier: the smallest Z "
        "whose accounted ε (PLD accountant) at --central-delta is at most E."
    ),
    central_delta: Optional[float] = typer.Option(
        None, "--central-delta", metavar="D", help=f"Central layer: δ of the central (ε, δ) claim (default "
        f"{DEFAULT_DELTA:g}, Bhowmick et al.'s; choose it well below 1/N). Not --delta, the gaussian mechanism's δ."
    ),
    force: bool = FORCE_OPTION,
    ledger: Optional[Path] = LEDGER_OPTION,
    max_budget: Optional[float] = typer.Option(
        None, "--max-budget", metavar="EPS", help="Refuse (exit 1, nothing trained or written) when the ε this input "
        "has spent in the ledger plus epochs × ε would exceed EPS."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (model, privacy, training, evaluation)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar, notes or tables; warnings are still "
                               "shown."),
    options: dict[str, Any] = {},  # noqa: B006 - filled by WithMechanismOptions, never mutated
) -> None:
    """Train a model by locally private stochastic gradient descent: each row releases only privatized gradients.

    The one-pass protocol of Duchi, Jordan and Wainwright (2014) and Bhowmick et al. (2018): at each
    step the current model θ is public; each of the step's rows computes its gradient of the loss,
    clips it to the public bound L and privatizes it with the chosen mechanism (default separated:
    magnitude and direction apart, Eq. 22/23; privunit2, duchi-l2 or duchi-linf as in the 2014
    paper); the server averages the releases, steps with η_k = η₀·k^−β and projects onto the
    parameter ball. The model is the average of the iterates (Polyak–Ruppert). Each row is used
    once per epoch, so each row's ε is epochs × ε, recorded in the budget ledger.

    With --central-radius the server side of Bhowmick et al. (2018, eq. (13)) runs on top: Poisson
    sampling, each release projected onto a ball, Gaussian noise on each step's sum, and a central
    (ε, δ) by dp-accounting (PLD claimed, RDP beside it) that protects against the model's users,
    provided the server runs the step honestly. The local ε still protects against the server. The
    ledger records both; `ldp budget` composes the central (ε, δ) with the input's other central ones.
    """
    owner_ledger = Ledger.open(ledger)
    with status(quiet) as show, contextlib.ExitStack() as bar:
        on_start, on_rows = bar.enter_context(progress("training", quiet))

        def on_reference(text: str) -> None:
            bar.close()  # the training bar ends where the reference begins
            show(f"non-private reference θ̂ (--no-reference skips it): {text}")

        result = train(
            data, output, label=label,
            mechanism=MechanismSpec(mechanism, eps, calibration, public_bound(norm_bound, r_max), options),
            training=TrainingOptions(
                loss=loss, geometry=geometry, radius=radius, eta0=eta0, beta=beta, batch=batch, epochs=epochs,
                intercept=intercept, classes=split(classes) or None, baseline=baseline, test=test, holdout=holdout,
                central=central_options(central_radius, sampling_rate, noise_multiplier, central_epsilon,
                                        central_delta),
                reference=reference, reference_seconds=reference_seconds,
            ),
            options=ReleaseOptions(
                columns=Columns(column, split(columns) or None), seed=seed, rng=rng, force=force, overwrite=overwrite,
                budget=Budget(owner_ledger, max_budget), resources=Resources(memory=byte_size(memory, "--memory")),
            ),
            on_start=on_start, on_rows=on_rows, on_reference=on_reference,
        )
    for text in result.notices:
        warn(text)
    if result.classes_from_data:
        warn(f"the class list ({', '.join(repr(c) for c in (result.classes or ())[:10])}) was read from the data and is "
             "released with the model unprivatized; pass --classes to make it a public choice")
    clipping = result.clipping()
    if clipping is not None:
        (warn if clipping[1] else lambda text: note(text_in_flags(text), quiet))(clipping[0])
    if result.reproducible:
        warn("seeded run: reproducible by anyone who knows the seed; do not release it")
    report = result.to_dict()
    if report["minimizer_note"] is not None:
        report["minimizer_note"] = text_in_flags(report["minimizer_note"])
    render(report, as_json, None if quiet else lambda: _print_training(result), default=str)


def _print_training(result: Any) -> None:
    """The human tables of a private training run."""
    privacy = result.privacy()
    mech = result.mechanism
    summary = summary_table(f"Private {result.loss} model ({result.geometry} geometry)")
    summary.add_row("rows", str(result.train_rows), "trained on" + (f"; {result.holdout_rows} held out"
                                                                   if result.holdout_rows else ""))
    summary.add_row("parameters p", str(result.theta.size), counted(len(result.features), "feature")
                    + (" (intercept included)" if result.intercept else "") + (f" × {result.outputs} classes"
                                                                               if result.outputs > 1 else ""))
    summary.add_row("mechanism", f"{mech.name}, ε = {fmt(mech.epsilon_exact)} per use", f"gradients clipped to "
                    f"L = {fmt(mech.norm_bound)} ({mech.domain})")
    summary.add_row("ε per row", fmt(privacy["epsilon_per_row"]),
                    (f"{counted(result.epochs, 'use')} per row" if result.uses is None else
                     f"at most {counted(result.uses, 'use')} per row (Poisson sampling)") + ", basic composition; local: "
                    "against the server")
    central = result.central_section()
    if central is not None:
        summary.add_row("central ε (PLD)", fmt(central.epsilon_pld), f"δ = {fmt(central.delta)}, the claim (an upper "
                        "bound); against the model's users, if the server runs eq. (13) honestly")
        summary.add_row("central ε (RDP)", fmt(central.epsilon_rdp), f"δ = {fmt(central.delta)}, RDP accountant "
                        f"(order {fmt(central.rdp_order)}; a looser upper bound)")
        summary.add_row("central layer", f"ρ = {fmt(central.radius)}, z = {fmt(central.noise_multiplier)}, "
                        f"q = {fmt(central.sampling_rate)}", f"{counted(central.steps, 'step')}, noise σ = "
                        f"{fmt(central.noise_std)} on each step's mean; {central.accountant}, "
                        f"{central.neighbouring} neighbours")
    rows = (counted(result.batch, "row") if result.central is None else
            f"~{fmt(result.central.sampling_rate * result.train_rows)} rows (Poisson, q = {fmt(result.central.sampling_rate)})")
    summary.add_row("steps", f"{result.steps} × {rows}", f"{result.rule.describe()}; {result.rule.basis}")
    summary.add_row("radius R", fmt(result.radius), "θ stays in the " + ("ℓ2" if result.geometry == "l2" else "ℓ1")
                    + " ball; the output is the averaged iterate")
    summary.add_row("rate", fmt(result.rate()["value"]), result.rate()["form"] + " (Duchi et al. 2014; constant not "
                    "stated)")
    summary.add_row("time", f"{result.seconds:.3g} s", f"{result.steps / max(result.seconds, 1e-12):,.0f} steps/s")
    if result.output is not None:
        summary.add_row("model", str(result.output), f"sidecar {result.sidecar}")
    out.print(summary)
    report = result.to_dict()
    if result.metrics or report["baseline_distance"] is not None or report["minimizer"] is not None:
        minimizer = report["minimizer"]
        table = Table(title="Evaluation" + (f" on the {result.evaluated_on} ({counted(result.evaluation_rows, 'row')})"
                                            if result.evaluated_on else ""), title_justify="left",
                      caption=f"{OWNER_ONLY_STATEMENT[0].upper()}{OWNER_ONLY_STATEMENT[1:]}.", caption_justify="left")
        columns = ("model", "mean loss", "accuracy") + (("‖θ − θ̂‖",) if minimizer is not None else ())
        for name in columns:
            table.add_column(name, justify="right" if name != "model" else "left")
        distances = {"private": None if minimizer is None else minimizer["distance"],
                     "baseline": None if minimizer is None else minimizer["baseline_distance"], "minimizer": 0.0}
        names = {"private": "private (this model)", "baseline": "non-private SGD, same pass",
                 "minimizer": "θ̂: empirical minimiser"}
        for key in ("private", "baseline", "minimizer"):
            if key == "baseline" and result.baseline is None or key == "minimizer" and minimizer is None:
                continue
            metrics = result.metrics.get(key)
            cells = ["—" if metrics is None else fmt(metrics.loss),
                     "—" if metrics is None or metrics.accuracy is None else f"{metrics.accuracy:.2%}"]
            table.add_row(names[key], *cells, *((fmt(distances[key]),) if minimizer is not None else ()))
        out.print(table)
    if result.minimizer_note:
        out.print(text_in_flags(result.minimizer_note), markup=False)
    weights = result.theta.reshape(result.outputs, len(result.features))
    shown = min(len(result.features), 10)
    coefficients = Table(title="coefficients" + (f" (first {shown} of {len(result.features)})"
                                                  if shown < len(result.features) else ""), title_justify="left")
    coefficients.add_column("feature")
    heads = [str(c) for c in result.classes] if result.outputs > 1 else ["θ"]
    for head in heads[:4]:
        coefficients.add_column(head, justify="right")
    for j in range(shown):
        coefficients.add_row(result.features[j], *(fmt(float(weights[c, j])) for c in range(min(result.outputs, 4))))
    out.print(coefficients)
    if shown < len(result.features) or result.outputs > 4:
        out.print("Use --json or -o MODEL.json for every coefficient.", markup=False)
