"""The ``ldp`` command line: a thin Typer layer over the ``ldpcli`` library.

Results go to stdout (rich tables for people, ``--json`` for machines); messages, warnings and
progress bars go to stderr. Exit codes: 0 success, 1 bad data, 2 bad usage. Library errors
(``ldpcli.errors``) become one line ``ldp: error: …`` without a traceback. Modules that pull in
pyarrow are imported inside the commands that need them, so ``ldp --help`` and ``ldp params``
start fast.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import math
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import typer
from rich.console import Console
from rich.table import Table
from typer._click.exceptions import ClickException, NoArgsIsHelpError
from typer._click.exceptions import UsageError as ClickUsageError
from typer.core import TyperArgument, TyperCommand, TyperGroup

from ldpcli._version import __version__
from ldpcli.cli.flags import in_flags, text_in_flags
from ldpcli.errors import Interrupted, LdpError, UsageError
from ldpcli.io import interrupts
from ldpcli.mechanisms import BCDP, MechanismSpec, OptionSpec, get_mechanism, mechanism_names
from ldpcli.mechanisms.base import check_count
from ldpcli.release.safety import check_epsilon, clip_warning, near_exact_warning

# emoji=False: a message quoting a range such as 'A:B:K' must not turn ':b:' into an emoji.
out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


class _Argument(TyperArgument):
    """A positional argument shown by its metavar alone: ``INPUT``, not ``{INPUT}`` and ``<path>``."""

    def _usage_display_name(self) -> str:
        return self.display_name_raw

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


def _plain_help(params: list[Any]) -> None:
    """Show no type for flags (``--json``, not ``--json <bool>``) and plain argument names
    (:class:`_Argument`) in a command's help."""
    for param in params:
        if isinstance(param, TyperArgument):
            param.__class__ = _Argument
        elif getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


class _Command(TyperCommand):
    """A command with :func:`_plain_help`."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        _plain_help(params)
        return params


class _Group(TyperGroup):
    """The ``ldp`` group: usage errors are one ``ldp: error: …`` line (exit 2), like every other error."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        _plain_help(params)
        return params

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None,  # type: ignore[override]
             standalone_mode: bool = True, **extra: Any) -> Any:
        run = functools.partial(super().main, args, prog_name, complete_var, standalone_mode=False, **extra)
        if not standalone_mode:
            return run()
        try:
            code = run()
        except NoArgsIsHelpError as exc:  # `ldp` alone: the help (rich prints it), exit 2 as a usage error
            text = exc.ctx.get_help()
            if text:
                out.print(text, markup=False)
            sys.exit(2)
        except ClickUsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            err.print(f"ldp: error: {exc.format_message()}{hint}", markup=False)
            sys.exit(2)
        except ClickException as exc:
            err.print(f"ldp: error: {exc.format_message()}", markup=False)
            sys.exit(exc.exit_code)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    name="ldp",
    cls=_Group,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _fail(exc: LdpError) -> typer.Exit:
    err.print(f"ldp: error: {exc}", markup=False)
    return typer.Exit(exc.exit_code)


@contextmanager
def _errors() -> Iterator[None]:
    """Turn library errors and Ctrl-C into one-line messages and exit codes."""
    try:
        yield
    except LdpError as exc:
        raise _fail(in_flags(exc)) from None
    except KeyboardInterrupt as exc:
        raise _interrupted(exc.exit_code if isinstance(exc, Interrupted) else 130) from None
    except Exception:
        # A signal whose exception a library swallowed can surface as another error (e.g. pyarrow's
        # half-imported pandas): the run was cancelled, and says so.
        signum = interrupts.requested()
        if signum is None:
            raise
        raise _interrupted(128 + signum) from None


def _interrupted(code: int) -> typer.Exit:
    """Remove this run's temporary files and say that it was interrupted."""
    io_module = sys.modules.get("ldpcli.io")  # loaded if anything was being written
    if io_module is not None:
        io_module.remove_temporaries()
    message = interrupts.interrupted_message()
    if message is not None:
        err.print(f"ldp: {message}", markup=False)
    return typer.Exit(code)


@contextmanager
def _progress(label: str, quiet: bool) -> Iterator[tuple[Callable[[int | None], None], Callable[[int], None]]]:
    """(on_start, on_rows) callbacks driving a rich progress bar on stderr.

    The bar appears only when stderr is a terminal, ``--quiet`` is off and the job has already
    run for a second, so short runs and pipelines stay silent.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeRemainingColumn
    from rich.text import Text

    class RowsPerSecond(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.speed:,.0f} rows/s" if task.speed else "")

    state: dict[str, Any] = {"total": None, "done": 0, "task": None, "t0": time.monotonic()}
    progress = Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("rows"), RowsPerSecond(),
        TimeRemainingColumn(), console=err, transient=True,
    )
    enabled = not quiet and err.is_terminal

    def on_start(total: int | None) -> None:
        """The rows of the next input (several inputs: the bar's total grows by each one's rows)."""
        state["total"] = None if total is None else state["done"] + total
        if state["task"] is not None:
            progress.update(state["task"], total=state["total"])

    def on_rows(rows: int) -> None:
        state["done"] += rows
        if not enabled:
            return
        if state["task"] is None:
            if time.monotonic() - state["t0"] < 1.0:
                return
            progress.start()
            state["task"] = progress.add_task(label, total=state["total"])
        progress.update(state["task"], completed=state["done"])

    try:
        yield on_start, on_rows
    finally:
        if state["task"] is not None:
            progress.stop()


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    if value == 0.0 or (1e-4 <= abs(value) < 1e7):
        return f"{value:.6g}"
    return f"{value:.4e}"


def _fmt_probability(value: float, logit: float) -> str:
    """p with its distance to 1 when it rounds to 1 in six digits."""
    if value > 0.999999:
        return f"1 − {math.exp(-logit) / (1 + math.exp(-logit)):.3e}"
    return _fmt(value)


def _version(value: bool) -> None:
    if value:
        out.print(f"ldp {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Privatize vector datasets under local differential privacy, and estimate from the result.

    Each row of a Parquet or CSV file is one person's vector. `ldp privatize` replaces every row by
    an unbiased ε-LDP randomization and writes a sidecar JSON with the exact public parameters;
    `ldp estimate-mean` estimates the mean from the privatized rows alone; `ldp params` shows the
    parameters and the expected error before you privatize anything.
    """


NORM_HELP = (
    "Public bound L (default 1), chosen before looking at the data, never computed from it: the ℓ2 norm "
    "of each row (ℓ2 mechanisms), each |coordinate| (privunit-inf, duchi-linf) or the value (scalar). "
    "Rows outside are moved onto the bound."
)
R_MAX_HELP = "Alias of --norm-bound (the papers' r_max for scalar, scalar-rel and separated)."


def _mechanism_help() -> str:
    return f"Mechanism: {', '.join(mechanism_names())}."


def _calibration_help() -> str:
    several = [f"{name}: {' or '.join(get_mechanism(name).calibrations)}" for name in mechanism_names()
               if len(get_mechanism(name).calibrations) > 1]
    return (
        "How the mechanism's parameters are chosen (default: its first). " + "; ".join(several) + " ('optimal': "
        "least error at exactly ε, Asi et al. 2022; 'bhowmick': Bhowmick et al. 2018 Eq. 23, γ from Thm 1 at 0.99ε, "
        "p at 0.01ε). Each other mechanism has one calibration; `ldp params -m NAME --json` shows it."
    )


def declared_options() -> dict[str, tuple[type, str]]:
    """Every option declared by a registered mechanism: name → (type, help naming the mechanisms).

    One flag serves every mechanism that declares an option of that name (``--k``: scalar,
    scalar-rel, separated); they must agree on its type.
    """
    users: dict[str, list[tuple[str, OptionSpec]]] = {}
    for name in mechanism_names():
        for option in get_mechanism(name).options.values():
            users.setdefault(option.name, []).append((name, option))
    declared: dict[str, tuple[type, str]] = {}
    for option_name, uses in users.items():
        kinds = {option.kind for _, option in uses}
        if len(kinds) > 1:
            raise TypeError(f"option {option_name!r} is declared with different types: {sorted(k.__name__ for k in kinds)}")
        text = "; ".join(f"{name}: {option.help} (e.g. {option.flag} {option.example})" for name, option in uses)
        declared[option_name] = (kinds.pop(), text)
    return declared


class _WithMechanismOptions:
    """A command whose flags are its own plus one per option any registered mechanism declares.

    Typer reads a command's parameters from ``inspect.signature`` when the app runs, not when it
    is defined; the signature is built then, from the registry, so a mechanism registered after
    this module was imported (a plug-in, a test) has its flags and help in every command. The
    command function receives the given options as one dict, ``options``.
    """

    def __init__(self, func: Callable[..., None]) -> None:
        self._func = func
        self.__name__ = func.__name__
        self.__doc__ = func.__doc__

    @property
    def __signature__(self) -> inspect.Signature:
        own = inspect.signature(self._func, eval_str=True)
        parameters = []
        for parameter in own.parameters.values():
            if parameter.name == "options":
                continue
            if parameter.name in ("mechanism", "calibration") and isinstance(parameter.default, typer.models.OptionInfo):
                info = copy.copy(parameter.default)
                info.help = (_mechanism_help() + (info.help or "")) if parameter.name == "mechanism" else _calibration_help()
                parameter = parameter.replace(default=info)
            parameters.append(parameter)
        for name, (kind, text) in declared_options().items():
            flag = "--" + name.replace("_", "-")
            parameters.append(inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=typer.Option(None, flag, help=text),
                annotation=Optional[kind],
            ))
        return own.replace(parameters=parameters)

    @property
    def __annotations__(self) -> dict[str, Any]:  # type: ignore[override]
        return {name: parameter.annotation for name, parameter in self.__signature__.parameters.items()}

    def __call__(self, **values: Any) -> None:
        declared = declared_options()
        options = {name: values.pop(name) for name in list(values) if name in declared}
        self._func(**values, options={name: value for name, value in options.items() if value is not None})


# Options shared by params, privatize and audit (one definition each). The help of --mechanism and
# --calibration is filled in from the registry when the app runs (_WithMechanismOptions).
MECHANISM_OPTION = typer.Option("privunit2", "--mechanism", "-m", help="")
EPS_OPTION = typer.Option(..., "--eps", "--epsilon", help="Privacy level ε per row, in [0.01, 10⁴] (outside it only with --force).")
D_OPTION = typer.Option(..., "--d", help="Dimension of the vectors (≥ 1).")
CALIBRATION_OPTION = typer.Option(None, "--calibration", help="")
NORM_OPTION = typer.Option(None, "--norm-bound", "-L", help=NORM_HELP)
R_MAX_OPTION = typer.Option(None, "--r-max", help=R_MAX_HELP)
LEDGER_OPTION = typer.Option(
    None, "--ledger", metavar="PATH", help="The data owner's privacy-budget ledger (default: $LDP_LEDGER, else "
    "ldp/ledger.json in the user data directory, e.g. ~/.local/share). It holds a secret key and input fingerprints: "
    "keep it private and never next to a release."
)
KEYS_LEDGER_OPTION = typer.Option(
    None, "--ledger", metavar="PATH", help="The data owner's ledger: the signing key is signing-key.pem in its directory "
    "(default: $LDP_LEDGER, else ldp/ledger.json in the user data directory, e.g. ~/.local/share)."
)
TRUST_OPTION = typer.Option(
    None, "--trust", metavar="KEY", help="Refuse unless every file (and dataset manifest) is signed by the data owner's "
    "public key KEY (ldpkey1-…, a PEM key, or a file holding either; `ldp keys show` prints it) and unchanged since. "
    "Without it, unsigned files are read and labelled unsigned."
)
RISK_K_OPTION = typer.Option(
    None, "--risk-k", help="Reconstruction section: dimension k of the reconstructed direction (default d, the whole "
    "row's direction)."
)
RISK_RHO0_OPTION = typer.Option(
    0.0, "--risk-rho0", help="Reconstruction section: the prior's concentration ρ0 ≥ 0 (its density on the direction is "
    "at most e^ρ0 times uniform; 0: uniform)."
)
RISK_A_OPTION = typer.Option(
    None, "--risk-a", metavar="A,...", help="Reconstruction section: accuracies a in [0, 1] (success: ⟨f(x), v̂⟩ ≥ a), "
    "comma-separated. Default 0.1,0.3,0.5,0.9."
)


def _bound(norm_bound: Optional[float], r_max: Optional[float]) -> float:
    """The public bound from --norm-bound or its alias --r-max (default 1)."""
    if norm_bound is not None and r_max is not None and norm_bound != r_max:
        raise UsageError(f"--norm-bound {norm_bound} and --r-max {r_max} disagree; give one of them")
    if r_max is not None:
        return r_max
    return 1.0 if norm_bound is None else norm_bound


@app.command("params", cls=_Command)
@_WithMechanismOptions
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
    as_json: bool = typer.Option(False, "--json", help="Print JSON (an object, or a list for the comparison)."),
    options: dict[str, Any] = {},  # noqa: B006 - filled by _WithMechanismOptions, never mutated
) -> None:
    """Show a mechanism's calibrated parameters, its exact ε and its expected error, for (d, ε).

    Without --mechanism (and without --calibration, which implies privunit2), compare every vector mechanism at (d, ε) by its worst-case error over the
    ℓ2 ball of radius L, as a ratio to optimal PrivUnit2 (no unbiased ε-LDP mechanism does better).
    Vector mechanisms also get bounds on reconstructing a row's direction from one output
    (Bhowmick et al. 2018 Sec. 2.3.1; --risk-k, --risk-rho0, --risk-a; `ldp risk` for more).
    With --n and --target-rmse (or --target-error), give instead the smallest ε at which each
    mechanism's guaranteed error of the mean meets the target.
    """
    with _errors():
        if n is not None:
            check_count(n, "n")
        bound = _bound(norm_bound, r_max)
        if mechanism is None and calibration is not None:
            mechanism = "privunit2"  # a calibration names the default mechanism's, not a comparison
        if target_rmse is not None or target_error is not None:
            _params_for_target(d, n, eps, target_rmse, target_error, mechanism, calibration, bound, options, as_json)
            return
        if eps is None:
            raise UsageError("Missing option '--eps' (or give --n with --target-rmse / --target-error to solve for ε)")
        _warn(check_epsilon(eps, force=True))  # params touches no data: out of range is a warning here
        risk_options: dict[str, Any] = {"k": risk_k, "rho0": risk_rho0, "a": _floats(risk_a, "--risk-a")}
        if mechanism is None:
            if set(options) - {"delta"}:
                raise UsageError("--k, --alpha, --nu and --eps-split need --mechanism")
            from ldpcli.planning.compare import compare_mechanisms, recommendation

            rows = compare_mechanisms(d, eps, norm_bound=bound, delta=options.get("delta"), risk=risk_options)
            if n is not None:
                for row in rows:
                    if "expected_error_max" in row:
                        row["n"] = n
                        row["expected_error_mean"] = row["expected_error_max"] / n
            _print_comparison(rows, recommendation(rows), as_json)
            if not as_json:
                _print_risk_line(rows)
            return
        from ldpcli.risk.section import reconstruction

        bound_spec, notes = MechanismSpec(mechanism, eps, calibration, bound, options).bind_columns(None, d)
        for note in notes:
            _warn(note)
        mech = bound_spec.calibrate(d)
        info = mech.describe()
        _warn(near_exact_warning(mech))
        if n is not None:
            info["n"] = n
            info["expected_error_mean"] = mech.expected_error_mean(n)
        section = reconstruction(mech, **risk_options)
        if section is not None:
            info["reconstruction"] = section
        if isinstance(mech, BCDP):
            info["features"] = mech.feature_section()
            info["alternatives"] = mech.alternatives()
    if as_json:
        out.print(json.dumps(info, allow_nan=False), markup=False)
        return
    _print_parameters(mech, info, n)
    if isinstance(mech, BCDP):
        _print_features(info["features"], info["alternatives"])
    if section is not None:
        _print_reconstruction(section)


def _print_features(features: dict[str, Any], alternatives: list[dict[str, Any]]) -> None:
    """bcdp: each group of features with its level, budget, granted level and error; then the alternatives."""
    table = Table(title=f"Features by level (most sensitive first; q = {_fmt(features['q'])}, base "
                  f"{features['base']}, c_d = {_fmt(features['c_total'])})", title_justify="left")
    for name in ("coordinates", "features", "δ asked", "c", "BCDP level (Prop. 4)", "expected error"):
        table.add_column(name, justify="left" if name == "coordinates" else "right")
    for group in features["groups"]:
        table.add_row(group["coordinates"], str(group["count"]), _fmt(group["delta"]), _fmt(group["c"]),
                      _fmt(group["bcdp_level"]), _fmt(group["expected_error"]))
    out.print(table)
    choices = Table(title="The same levels by other choices (error at a vertex of the box / worst case over it)",
                    title_justify="left")
    for name in ("choice", "c_d", "expected error", "expected error max", "meets the levels"):
        choices.add_column(name, justify="left" if name == "choice" else "right")
    for row in alternatives:
        if "error" in row:
            choices.add_row(row["choice"], "—", "—", "—", row["error"])
        else:
            choices.add_row(row["choice"], _fmt(row["c_total"]), _fmt(row["expected_error"]),
                            _fmt(row["expected_error_max"]), "yes" if row["meets_levels"] else "no")
    out.print(choices)


def _fmt_logp(log_p: float | None) -> str:
    """A probability given by its natural log: plain when ≥ 1e-4, else as a power of ten."""
    if log_p is None:
        return "0"
    if log_p >= 0.0:
        return "1"
    if log_p >= math.log(1e-4):
        return f"{math.exp(log_p):.4g}"
    return f"10^{log_p / math.log(10.0):.1f}"


def _print_reconstruction(section: dict[str, Any], title: str | None = None) -> None:
    """The reconstruction bounds of one release: a table per privacy level (``ldp params``, ``ldp risk``)."""
    for level in section["levels"]:
        heading = title or "Reconstruction"
        if level["epsilon"] is None:
            out.print(f"{heading}: {level['applies']}.", markup=False)
            continue
        table = Table(
            title=f"{heading} of the direction of a k = {section['k']} projection, prior ρ0 = {_fmt(section['rho0'])}, "
            f"at ε = {_fmt(level['epsilon'])} ({level['name']}: {level['applies']})",
            title_justify="left",
        )
        for name in ("a", "‖f − v̂‖ ≤", "prior alone (≤)", "bound (exact cap)", "Prop. 1 (a ≤ 1/√2)", "Prop. 1 (a ≥ √(2/k))",
                     "verdict"):
            table.add_column(name, justify="left" if name == "verdict" else "right")
        for bound in level["bounds"]:
            table.add_row(
                _fmt(bound["a"]), _fmt(math.sqrt(max(0.0, 2.0 - 2.0 * bound["a"]))),
                _fmt_logp(None if bound["log_prior"] is None else bound["log_prior"] + section["rho0"]),
                _fmt_logp(bound["log_exact"]), "—" if bound["log_prop1_small"] is None else _fmt_logp(bound["log_prop1_small"]),
                "—" if bound["log_prop1_large"] is None else _fmt_logp(bound["log_prop1_large"]),
                "protected" if bound["guarantee"] else "no guarantee",
            )
        out.print(table)
    out.print(
        "Reading: whatever guess v̂ an onlooker makes from one output, P(⟨f(x), v̂⟩ ≥ a) is at most the bound "
        "(Lemma 2.2: e^(ε+ρ0) × the prior's own chance); 'no guarantee' where that reaches 1.", markup=False,
    )


def _print_risk_line(rows: list[dict[str, Any]]) -> None:
    """One line under the comparison: the reconstruction bound at the release's ε (they share it)."""
    best = next((row for row in rows if row.get("reconstruction") and row["reconstruction"]["levels"][0]["bounds"]), None)
    if best is None:
        return
    section = best["reconstruction"]
    level = section["levels"][0]
    parts = [f"a = {_fmt(b['a'])}: {_fmt_logp(b['log_exact'])}" for b in level["bounds"]]
    out.print(
        f"Reconstruction (k = {section['k']}, ρ0 = {_fmt(section['rho0'])}, ε = {_fmt(level['epsilon'])}): any guess "
        f"from one output reaches ⟨f(x), v̂⟩ ≥ a with probability at most {'; '.join(parts)}. See `ldp risk`.",
        markup=False,
    )


def _params_for_target(
    d: int, n: int | None, eps: float | None, target_rmse: float | None, target_error: float | None,
    mechanism: str | None, calibration: str | None, bound: float, options: dict[str, Any], as_json: bool,
) -> None:
    """``ldp params --n N --target-rmse T``: the smallest ε per mechanism (ldpcli.planning.solvers)."""
    from ldpcli.planning.solvers import epsilon_for_error, epsilons_for_error

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
    if as_json:
        out.print(json.dumps([r.to_dict() for r in results] if mechanism is None else results[0].to_dict(),
                             allow_nan=False), markup=False)
        return
    table = Table(
        title=f"Smallest ε meeting a guaranteed {'RMS ℓ2 error' if target_rmse is not None else 'E‖mean − true mean‖²'} "
        f"≤ {_fmt(value)} for the mean of n = {n} rows, d = {d}, L = {_fmt(bound)}",
        title_justify="left",
    )
    for name in ("mechanism", "ε", "ε exact", "RMS error at ε", "note"):
        table.add_column(name, justify="left" if name in ("mechanism", "note") else "right")
    for r in results:
        if r.epsilon is None:
            table.add_row(r.mechanism, "—", "—", "—", f"not attainable: {r.reason}")
            continue
        note = "met already at the smallest ε, 0.01" if r.at_minimum else ""
        table.add_row(r.mechanism, _fmt(r.epsilon), _fmt(r.epsilon_exact), _fmt(r.rmse), note)
    out.print(table)


def _print_parameters(mech: Any, info: dict[str, Any], n: int | None) -> None:
    """The human table for one mechanism, and a one-line reading of it."""
    table = Table(title=f"{mech.title}", show_header=False, title_justify="left")
    table.add_column("quantity", style="bold")
    table.add_column("value", justify="right")
    table.add_column("meaning")
    rows: list[tuple[str, str, str]] = [
        ("mechanism", mech.name, f"calibration: {mech.calibration}"),
        ("d", str(mech.d), "dimension"),
        ("ε", _fmt(mech.epsilon), "privacy level asked for"),
        ("ε exact", _fmt(mech.epsilon_exact), "exact worst-case privacy loss of these parameters"),
    ]
    if "gamma" in info and "cap_probability" in info:
        rows += [
            ("γ", _fmt(info["gamma"]), "cap threshold on ⟨V, u⟩"),
            ("p", _fmt_probability(info["p"], info["p_logit"]), "probability of sampling the cap"),
            ("cap probability", _fmt(info["cap_probability"]) if info["cap_probability"] > 0
             else f"e^{info['log_cap_probability']:.6g}", "P(⟨V, u⟩ ≥ γ) for V uniform on the sphere"),
        ]
    else:
        skip = {"mechanism", "calibration", "d", "epsilon", "epsilon_exact", "norm_bound", "domain", "scale",
                "expected_error", "expected_error_max", "n", "expected_error_mean"}
        for key, value in info.items():
            if key not in skip and isinstance(value, (int, float)) and not isinstance(value, bool):
                rows.append((key, _fmt(value) if isinstance(value, float) else str(value), "parameter"))
    rows += [
        ("L", _fmt(mech.norm_bound), f"public bound ({mech.domain})"),
        ("scale", _fmt(mech.scale), "each output row has ℓ2 norm scale·L"),
        ("expected error", _fmt(mech.expected_error), "E‖Z − x‖² for x on the boundary of the domain"),
        ("expected error max", _fmt(mech.expected_error_max), "worst case over the domain"),
    ]
    if n is not None:
        rows.append(("expected error of mean", _fmt(info["expected_error_mean"]), f"E‖mean − true mean‖² ≤ max/n, n = {n}"))
    for row in rows:
        table.add_row(*row)
    out.print(table)
    rms_row = math.sqrt(mech.expected_error_max)
    if n is not None:
        reading = (
            f"Reading: the mean of {n} rows privatized at ε = {_fmt(mech.epsilon)} is within about "
            f"{_fmt(math.sqrt(info['expected_error_mean']))} of the true mean (RMS ℓ2 error), for L = {_fmt(mech.norm_bound)}."
        )
    else:
        reading = (
            f"Reading: one privatized row is off by at most about {_fmt(rms_row)} (RMS ℓ2) for L = {_fmt(mech.norm_bound)}; "
            f"the mean of n rows by {_fmt(rms_row)}/√n. Add --n for your row count."
        )
    out.print(reading, markup=False)


def _print_comparison(rows: list[dict[str, Any]], advice: str, as_json: bool) -> None:
    """The comparison of all vector mechanisms (``ldp params`` without --mechanism)."""
    if as_json:
        out.print(json.dumps(rows, allow_nan=False), markup=False)
        return
    first = next(row for row in rows if "d" in row)
    table = Table(
        title=f"Vector mechanisms at d = {first['d']}, ε = {_fmt(first['epsilon'])}, L = {_fmt(first['norm_bound'])}: "
        "worst-case E‖Z − x‖² over the ℓ2 ball of radius L",
        title_justify="left",
    )
    for name, justify in (("mechanism", "left"), ("ε exact", "right"), ("worst-case error", "right"),
                          ("× optimal", "right"), ("note", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        if "error" in row:
            table.add_row(row["mechanism"], "—", "—", "—", f"not available: {row['error']}")
            continue
        note = row["title"]
        if "delta" in row:
            note += f"; δ = {row['delta']:.3g}, not pure ε-LDP"
        table.add_row(row["mechanism"], _fmt(row["epsilon_exact"]), _fmt(row["expected_error_max"]),
                      f"{row['ratio_to_optimal']:.4g}", note)
    out.print(table)
    out.print(advice, markup=False)


def _bytes(text: str, option: str) -> int:
    """A size such as 256MB, 1.5GB, 512k or a plain number of bytes."""
    units = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20, "MIB": 2**20,
             "G": 2**30, "GB": 2**30, "GIB": 2**30}
    cleaned = text.strip().upper()
    number = cleaned.rstrip("KMGIB")
    try:
        value = float(number) * units[cleaned[len(number):]]
    except (KeyError, ValueError):
        raise UsageError(f"{option}: cannot read {text!r} as a size; write e.g. 256MB or 2GB") from None
    return int(value)


def _split(value: Optional[str]) -> list[str]:
    return [] if not value else [part.strip() for part in value.split(",") if part.strip()]


SCHEDULER_OPTION = typer.Option(
    None, "--scheduler", metavar="ADDRESS", help="With --engine dask: threads (default), synchronous or processes on "
    "this machine, or the address of a running Dask scheduler (tcp://host:8786), whose workers must see the same "
    "paths and have ldp installed."
)
FORCE_OPTION = typer.Option(
    False, "--force", help="Allow ε outside [0.01, 10⁴], where ldp's guarantees are not computed and tested."
)


def _floats(value: Optional[str], option: str) -> list[float] | None:
    """A comma-separated list of numbers (None when not given)."""
    if value is None:
        return None
    try:
        return [float(part) for part in _split(value)] or None
    except ValueError:
        raise UsageError(f"{option} takes comma-separated numbers, e.g. {option} 0.1,0.5; got {value!r}") from None


def _warn(text: str | None) -> None:
    """A warning on stderr; never hidden by --quiet (which is for progress and notes)."""
    if text:
        err.print(f"ldp: warning: {text_in_flags(text)}", markup=False)


def _note(text: str, quiet: bool) -> None:
    """A note on stderr, hidden by --quiet."""
    if not quiet:
        err.print(f"ldp: note: {text}", markup=False)


@app.command("privatize", cls=_Command)
@_WithMechanismOptions
def privatize(
    inputs: list[str] = typer.Argument(
        ..., help="One or more input .parquet or .csv files, each row one vector; a directory means its .parquet/.csv files "
        "(sorted; ldp's own outputs, the files with a sidecar, are skipped) and a quoted glob ('part-*.parquet') the "
        "files it matches. Each input is its own release, with its own output, sidecar and ledger record.",
        show_default=False, metavar="INPUT",
    ),
    eps: float = EPS_OPTION,
    mechanism: str = MECHANISM_OPTION,
    output: Optional[str] = typer.Option(
        None, "--output", "-o", help="Output file (.parquet or .csv) for one input, or a directory for any number "
        "(an existing one, or DIR/ with the slash: created). Default: `<input stem>.privatized.<ext>` beside each input."
    ),
    column: Optional[str] = typer.Option(None, "--column", help="The list column holding the vectors."),
    columns: Optional[str] = typer.Option(
        None, "--columns", metavar="COLUMNS", help="The numeric columns, one per coordinate, in order: names, globs "
        "(`p*`) and inclusive ranges in file order (`f0:f63`), comma-separated. Default: the only list column, else "
        "every numeric column not in --keep, refused when one looks like an id or a label (`id`, `*_id`, `index`, "
        "`label`, `target`, `class`, `y`, or an integer column among floats)."
    ),
    calibration: Optional[str] = CALIBRATION_OPTION,
    norm_bound: Optional[float] = NORM_OPTION,
    r_max: Optional[float] = R_MAX_OPTION,
    keep: Optional[str] = typer.Option(
        None, "--keep", metavar="COLUMNS", help="Comma-separated columns (e.g. an id, a label) copied to the output "
        "**unprivatized**: listed on stderr and in the sidecar. Free-text columns (a text, an email) are refused "
        "without --keep-unsafe. Nothing else is copied."
    ),
    keep_unsafe: bool = typer.Option(
        False, "--keep-unsafe", help="Allow --keep of free-text columns (names, emails, sentences): released as they are."
    ),
    seed: Optional[int] = typer.Option(
        None, "--seed", help="Seed for a reproducible run (marked in the sidecar as not for release). Default: OS entropy."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output and sidecar."),
    fail_on_clip: Optional[float] = typer.Option(
        None, "--fail-on-clip", metavar="FRACTION", help="Fail (exit 1, nothing written) when more than this fraction "
        "of the rows lies outside the bound L and would be clipped, e.g. 0 or 0.01. Without it, clipping more than 1% "
        "of the rows is a warning: the release is then of the clipped rows."
    ),
    skip_invalid: bool = typer.Option(
        False, "--skip-invalid", help="Leave out rows with a missing, NaN/inf or wrong-length vector (their count and "
        "first row numbers go to stderr) instead of failing on the first one."
    ),
    dtype: Optional[str] = typer.Option(
        None, "--dtype", metavar="float32|float64", help="Type of the written vectors. Default: the input's (float64 for "
        "CSV). Rounding the privatized output is post-processing: the privacy guarantee is unchanged."
    ),
    force: bool = FORCE_OPTION,
    ledger: Optional[Path] = LEDGER_OPTION,
    max_budget: Optional[float] = typer.Option(
        None, "--max-budget", metavar="EPS", help="Refuse (exit 1, nothing written) when the ε this input has spent "
        "in the ledger plus this release's would exceed EPS (basic composition: releases of the same rows add up)."
    ),
    risk_k: Optional[int] = RISK_K_OPTION,
    risk_rho0: float = RISK_RHO0_OPTION,
    risk_a: Optional[str] = RISK_A_OPTION,
    copies: int = typer.Option(
        1, "--copies", min=1, max=16, help="Release this many independent privatized copies of each row, side by side "
        "(copy j ≥ 2 in columns named NAME_copyJ), each at the share of the privacy that makes the whole release "
        "satisfy --eps (ε/copies; bcdp: its budget vector divided by copies). `ldp regress` needs two; "
        "`ldp estimate-mean` averages them."
    ),
    threads: Optional[int] = typer.Option(
        None, "--threads", help="Threads privatizing batches (default: the available cores). The output for a "
        "--seed does not depend on it."
    ),
    memory: str = typer.Option(
        "256MB", "--memory", help="Memory budget for the batches in flight (e.g. 256MB, 2GB); sets the batch size."
    ),
    engine: str = typer.Option(
        "local", "--engine", metavar="local|dask", help="local: this process, --threads threads (default). dask: one task per part of "
        "each input (key-block-aligned row groups) on --scheduler, written as a dataset directory (-o DIR/) of "
        "part files with their sidecars and a manifest; same values for a --seed as the local engine. Needs "
        "`pip install 'ldp[dask]'`."
    ),
    sidecar: Optional[str] = typer.Option(
        None, "--sidecar", metavar="PATH", help="With -o - (the rows on stdout): where the sidecar is written."
    ),
    scheduler: Optional[str] = SCHEDULER_OPTION,
    part_rows: Optional[int] = typer.Option(
        None, "--part-rows", min=1, help="With --engine dask: parts of about this many rows (rounded to key blocks) "
        "instead of one per Parquet row group."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary of the run instead of a line."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar, no notes and no summary line; warnings "
                               "are still shown."),
    options: dict[str, Any] = {},  # noqa: B006 - filled by _WithMechanismOptions, never mutated
) -> None:
    """Privatize every row of each INPUT (files, directories, quoted globs, or - for stdin) and write
    each privatized file plus its sidecar (OUTPUT.ldp.json).

    The vectors are a list column (the only one, or --column) or one numeric column per
    coordinate (--columns, or all numeric columns). Rows with ‖x‖ > L are moved onto the bound, so
    the release and every estimate from it are of the **clipped** rows: choose a public L that the
    rows respect (a warning says when more than 1% were clipped; --fail-on-clip refuses). Inside
    the ball each row is rounded without bias to the sphere, then randomized. The output is
    unbiased for every row: averaging privatized rows estimates the mean of the (clipped) raw ones.

    Each release is recorded in the data owner's privacy-budget ledger (--ledger; see `ldp budget`):
    releasing the same rows again warns and adds to their ε, --max-budget refuses past a cap. The
    sidecar carries a keyed tag of the input and bounds on reconstructing a row's direction from its
    output (Bhowmick et al. 2018 Sec. 2.3; --risk-k, --risk-rho0, --risk-a; see `ldp risk`).
    """
    with _errors():
        from ldpcli.release.engines import make_engine
        from ldpcli.release.file import privatize_files
        from ldpcli.release.ledger import Ledger

        bound = _bound(norm_bound, r_max)
        dask_engine = make_engine(engine, scheduler)
        if dask_engine is None and part_rows is not None:
            raise UsageError("--part-rows sets the parts of --engine dask; the local engine writes one file per input")
        owner_ledger = Ledger.open(ledger)
        streams = _check_streams(inputs, output, sidecar, as_json, dask_engine is not None)
        if dask_engine is not None:
            from ldpcli.release.dataset import privatize_dataset

            if output is None:
                raise UsageError("--engine dask writes a dataset directory of parts: give it with -o DIR/")
            for flag, given in (("--copies", copies != 1), ("--threads", threads is not None)):
                if given:
                    raise UsageError(f"{flag} is not available with --engine dask (its workers set their own threads)")
            dataset = privatize_dataset(
                inputs, output, engine=dask_engine, epsilon=eps, mechanism=mechanism, calibration=calibration,
                norm_bound=bound, options=options, column=column, columns=_split(columns) or None, keep=_split(keep),
                keep_unsafe=keep_unsafe, seed=seed, overwrite=overwrite, force=force, fail_on_clip=fail_on_clip,
                skip_invalid=skip_invalid, memory=_bytes(memory, "--memory"), dtype=dtype, ledger=owner_ledger,
                max_budget=max_budget, risk_k=risk_k, risk_rho0=risk_rho0, risk_a=_floats(risk_a, "--risk-a"),
                part_rows=part_rows,
            )
            _report_dataset(dataset, quiet, as_json)
            return
        with _progress("privatizing", quiet) as (on_start, on_rows), tempfile.TemporaryDirectory(
            prefix="ldp-stdio-"
        ) as spool, ExitStack() as held:
            from ldpcli.io.streams import STDIN_LABEL, STDOUT_LABEL, copy_to_stdout, spool_stdin, stdout_suffix

            sources: list[str] = [str(held.enter_context(spool_stdin(Path(spool))))] if streams[0] else inputs
            target = str(Path(spool) / ("stdout" + stdout_suffix(Path(sources[0])))) if streams[1] else output
            results = privatize_files(
                sources, target, epsilon=eps, mechanism=mechanism, calibration=calibration, norm_bound=bound,
                options=options, threads=threads, memory=_bytes(memory, "--memory"),
                column=column, columns=_split(columns) or None, keep=_split(keep), keep_unsafe=keep_unsafe,
                seed=seed, overwrite=overwrite, force=force, fail_on_clip=fail_on_clip, skip_invalid=skip_invalid,
                dtype=dtype, on_start=on_start, on_rows=on_rows, ledger=owner_ledger, max_budget=max_budget,
                risk_k=risk_k, risk_rho0=risk_rho0, risk_a=_floats(risk_a, "--risk-a"), copies=copies,
                sidecar=sidecar, input_label=STDIN_LABEL if streams[0] else None,
                output_label=f"{STDOUT_LABEL} (sidecar {Path(sidecar).resolve()})" if streams[1] and sidecar else None,
            )
            if streams[1]:
                copy_to_stdout(results[0].output)
    if streams[1]:  # stdout carries the rows: the summary goes to stderr
        err.print(f"ldp: wrote {results[0].n} rows (d = {results[0].d}) to stdout and the sidecar {sidecar}",
                  markup=False)
        quiet = True
    several = len(results) > 1
    for index, result in enumerate(results):
        _report_privatized(result, quiet, as_json, detected=column is None and not columns and index == 0,
                           label=f"{result.output}: " if several else "")
    if results[0].reproducible:
        _warn("seeded run: reproducible by anyone who knows the seed; do not release it")
    if as_json:
        summaries = [result.summary() for result in results]
        out.print(json.dumps(summaries if several else summaries[0], allow_nan=False), markup=False)


def _check_streams(
    inputs: list[str], output: str | None, sidecar: str | None, as_json: bool, dask: bool
) -> tuple[bool, bool]:
    """(read stdin, write stdout) for ``-`` among the inputs and as -o, after checking the combination."""
    stdin, stdout = "-" in inputs, output == "-"
    if stdin and len(inputs) > 1:
        raise UsageError("- (standard input) must be the only INPUT")
    if stdin and output is None:
        raise UsageError("- reads standard input: give the output with -o FILE, or -o - for standard output")
    if stdout and sidecar is None:
        raise UsageError("-o - writes the rows to standard output: give --sidecar PATH for their sidecar")
    if sidecar is not None and not stdout:
        raise UsageError("--sidecar is for -o -; otherwise the sidecar is written beside the output")
    if stdout and as_json:
        raise UsageError("-o - writes the rows to standard output, so --json cannot print there; leave --json out")
    if dask and (stdin or stdout):
        raise UsageError("--engine dask reads and writes files by path; - is for the local engine")
    return stdin, stdout


def _report_dataset(dataset: Any, quiet: bool, as_json: bool) -> None:
    """The warnings and the 'wrote' line (or JSON) of a dataset directory written by --engine dask."""
    for text in dataset.warnings:
        _warn(text)
    if dataset.n_skipped:
        _warn(f"--skip-invalid: left out {dataset.n_skipped} invalid rows; this count is shown here only, never stored")
    clipped = clip_warning(dataset.n_clipped, dataset.n, dataset.mechanism)
    if clipped is not None:
        (_warn if clipped[1] else lambda text: _note(text, quiet))(clipped[0])
    if dataset.reproducible:
        _warn("seeded run: reproducible by anyone who knows the seed; do not release it")
    if as_json:
        out.print(json.dumps(dataset.summary(), allow_nan=False), markup=False)
    elif not quiet:
        out.print(
            f"wrote {dataset.output}/ ({dataset.n} rows of {len(dataset.inputs)} input(s) in {len(dataset.parts)} "
            f"parts, d = {dataset.d}, {dataset.mechanism.name}, ε = {_fmt(dataset.mechanism.epsilon)}) with its "
            f"manifest {dataset.manifest.name}",
            markup=False,
        )


def _report_privatized(result: Any, quiet: bool, as_json: bool, *, detected: bool, label: str) -> None:
    """The notes, warnings and 'wrote' line of one privatized input (``label`` names it among several)."""
    if detected:  # the layout was detected: say which columns became the vector
        names = result.layout.copy_columns(0)
        shown = ", ".join(repr(name) for name in names[:6]) + (", …" if len(names) > 6 else "")
        plural = "s" if len(names) > 1 else ""
        what = f"list column {shown}" if result.layout.kind == "list" else f"{len(names)} numeric column{plural} {shown}"
        _note(f"vectors from {what} (d = {result.d}); pass --column/--columns to choose", quiet)
    for text in result.warnings:
        _warn(label + text)
    if result.n_skipped:
        first = ", ".join(str(row) for row in result.skipped_rows)
        more = ", …" if result.n_skipped > len(result.skipped_rows) else ""
        _warn(f"{label}--skip-invalid: left out {result.n_skipped} invalid rows (rows {first}{more}, counting from 1); "
              "this count is shown here only, never stored")
    clipped = clip_warning(result.n_clipped, result.n, result.mechanism)
    if clipped is not None:
        text, loud = clipped
        if loud:
            _warn(label + text)
        else:
            _note(label + text, quiet)
    if not as_json and not quiet:
        copies = result.layout.copies
        copied = "" if copies == 1 else (
            f", {copies} copies of each row, ε = {_fmt(copies * result.mechanism.epsilon_exact)} in all"
        )
        out.print(
            f"wrote {result.output} ({result.n} rows, d = {result.d}, {result.mechanism.name}, "
            f"ε = {_fmt(result.mechanism.epsilon)}{copied}) and {result.sidecar}",
            markup=False,
        )


@app.command("estimate-mean", cls=_Command)
def estimate_mean_cmd(
    privatized: list[Path] = typer.Argument(
        ..., help="File(s) written by `ldp privatize`; several files are the shards of one job.", show_default=False,
        metavar="PRIVATIZED...",
    ),
    sidecar: Optional[Path] = typer.Option(None, "--sidecar", help="Its sidecar. Default: FILE.ldp.json beside it (or the older <stem>.ldp.json)."),
    confidence: float = typer.Option(0.95, "--confidence", help="Confidence level of the per-coordinate intervals."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Also save the mean: .json, .parquet, .csv (with errors and intervals) or .npy."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing -o file."),
    where: Optional[list[str]] = typer.Option(
        None, "--where", metavar="COND", help="Keep only rows whose kept column satisfies COLUMN OP VALUE (OP: == != < <= > >=) or "
        "COLUMN in (V1, V2); repeat to require several. Kept columns are public, so any subset is again unbiased."
    ),
    group_by: Optional[str] = typer.Option(
        None, "--group-by", help="One mean, error bars and n per value of this kept column (e.g. a label)."
    ),
    project: Optional[str] = typer.Option(
        None, "--project", metavar="SET", help="Also report the mean projected onto a public convex set that contains "
        "the true mean: ball[:R] (ℓ2 ball; R defaults to L), box[:L] or box:LO,HI, simplex[:S] (probability vectors "
        "summing to S, for histograms), nonneg, hull:FILE (convex hull of a public file's rows), or domain (the "
        "mechanism's own ball or box). Never further from the truth than the raw mean (Lemma 5.3 of Błasiok et al."
        " 2019); the intervals stay those of the raw mean."
    ),
    engine: str = typer.Option(
        "local", "--engine", metavar="local|dask", help="local (default) or dask: one task per file, only its sums come back (needs "
        "`pip install 'ldp[dask]'`)."
    ),
    scheduler: Optional[str] = SCHEDULER_OPTION,
    verify: bool = typer.Option(
        True, "--verify/--no-verify", help="Check each file's row count and SHA-256 against its sidecar (default). "
        "--no-verify accepts a file filtered or re-encoded after privatization; the estimate is then marked unverified."
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="Print nothing but the result (no progress bar, notes or 'wrote' line); with -o, "
        "print nothing."
    ),
    trust: Optional[str] = TRUST_OPTION,
) -> None:
    """Estimate the mean of the raw rows from privatized rows alone, with error bars.

    Reports n, d, the mean, its guaranteed expected squared ℓ2 error (expected_error_max / n from
    the mechanism), per-coordinate standard errors from the data, and confidence intervals.
    Several files (e.g. `part-*.parquet`) are combined; their sidecars must agree. --where and
    --group-by select rows by kept columns (privatize with --keep).
    """
    with _errors():
        from ldpcli.analysis.estimate import estimate_group_means, estimate_mean, save_group_means, save_mean

        if not verify:
            _note(
                "--no-verify: the files are not checked against their sidecars' row counts and SHA-256; the "
                "estimate is only as sound as the claim that they hold privatized rows of that release", quiet,
            )
        from ldpcli.release.engines import make_engine

        dask_engine = make_engine(engine, scheduler)
        with _progress("reading", quiet) as (_, on_rows):
            if group_by is not None:
                groups = estimate_group_means(
                    privatized, group_by, sidecar=sidecar, confidence=confidence, where=where or (), verify=verify,
                    on_rows=on_rows, project=project, engine=dask_engine, trust=trust,
                )
            else:
                est = estimate_mean(
                    privatized, sidecar=sidecar, confidence=confidence, where=where or (), verify=verify,
                    on_rows=on_rows, project=project, engine=dask_engine, trust=trust,
                )
        first = groups.groups[0][1] if group_by is not None and groups.groups else (est if group_by is None else None)
        if first is not None and first.projection is not None and not first.projection["contains_domain"]:
            _warn(f"--project {project}: {first.projection['description']} does not contain the mechanism's domain; "
                  "the projected mean is closer to the truth only if the truth lies in it (a claim about the data)")
        if output is not None:
            if group_by is not None:
                save_group_means(groups, output, overwrite=overwrite)
            else:
                save_mean(est, output, overwrite=overwrite)
    if quiet and output is not None:
        return  # -o with -q: the file is the result
    if group_by is not None:
        _print_groups(groups, as_json)
        if output is not None and not as_json:
            out.print(f"wrote {output}", markup=False)
        return
    if as_json:
        out.print(json.dumps(est.to_dict(), allow_nan=False), markup=False)
        return
    _print_mean(est)
    if output is not None:
        out.print(f"wrote {output}", markup=False)


def _summary_table(title: str) -> Table:
    """A headerless three-column table (quantity, value, meaning): the summary of a result."""
    summary = Table(title=title, show_header=False, title_justify="left")
    summary.add_column("quantity", style="bold")
    summary.add_column("value", justify="right")
    summary.add_column("meaning")
    return summary


def _print_mean(est: Any) -> None:
    """The human tables of one mean estimate, and a one-line reading of its error against its size."""
    summary = _summary_table("Mean estimate" + ("" if est.verified else " (UNVERIFIED: read with --no-verify)"))
    summary.add_row("rows n", str(est.n), "privatized rows averaged")
    summary.add_row("dimension d", str(est.d), "")
    summary.add_row("mechanism", f"{est.mechanism}, ε = {_fmt(est.epsilon)}", "from the sidecar")
    if est.copies > 1:
        summary.add_row("copies", str(est.copies), "privatized copies of each row, averaged (error ÷ copies)")
    _signature_row(summary, est.signature)
    if est.norm_bound is not None:
        summary.add_row("norm bound L", _fmt(est.norm_bound), "rows were clipped to it: this is the mean of the clipped rows")
    summary.add_row("‖mean‖", _fmt(est.mean_norm), "ℓ2 norm of the estimate (noise inflates it slightly)")
    summary.add_row("expected squared error", _fmt(est.expected_error), "E‖mean − true mean‖², guaranteed (max error / n)")
    summary.add_row("RMS ℓ2 error", _fmt(est.rms_error), "its square root")
    if est.projection is not None:
        summary.add_row("projected onto", est.projection["description"], "a public convex set (--project)")
        summary.add_row("distance moved", _fmt(est.projection["distance_moved"]),
                        "the guaranteed error holds for the projected mean too (Lemma 5.3)")
    out.print(summary)
    shown = min(est.d, 10)
    coords = Table(title=f"coordinates (first {shown} of {est.d})" if shown < est.d else "coordinates", title_justify="left")
    projected = est.projected
    for name in ("j", "mean", "std error", f"{est.confidence:.0%} interval", *(("projected",) if projected is not None else ())):
        coords.add_column(name, justify="right")
    for j in range(shown):
        extra = () if projected is None else (_fmt(float(projected[j])),)
        if est.std_error is None or est.lower is None or est.upper is None:
            coords.add_row(str(j), _fmt(float(est.mean[j])), "—", "—", *extra)
        else:
            coords.add_row(
                str(j), _fmt(float(est.mean[j])), _fmt(float(est.std_error[j])),
                f"[{_fmt(float(est.lower[j]))}, {_fmt(float(est.upper[j]))}]", *extra,
            )
    out.print(coords)
    if projected is not None:
        out.print("The intervals are for the raw mean; the projected mean has no interval of its own.", markup=False)
    if shown < est.d:
        out.print("Use --json or -o FILE for every coordinate.", markup=False)
    out.print(_reading(est), markup=False)


def _signature_row(summary: Table, signature: dict[str, Any] | None) -> None:
    """The 'signature' row of a result read from files: unsigned, or by whom they are signed."""
    if signature is None:
        return
    if signature["trusted_key"] is not None:
        meaning = "every file checked against the trusted key (--trust)"
    elif signature["signed"]:
        meaning = "valid signatures; --trust KEY also requires that KEY is the data owner's"
    else:
        meaning = "not authenticated: nothing shows who wrote the files or their sidecars (ldp verify)"
    summary.add_row("signature", signature["label"], meaning)


def _reading(est: Any) -> str:
    """'RMS error 0.125 on a mean of norm 0.62: …', with what to do when the error dominates."""
    rms, size = est.rms_error, est.mean_norm
    text = f"Reading: RMS ℓ2 error {_fmt(rms)} (guaranteed) on a mean of norm {_fmt(size)}"
    if est.norm_bound is not None:
        text += f" (rows bounded by L = {_fmt(est.norm_bound)})"
    if size == 0.0 or rms >= size:
        return text + ": the error is as large as the mean itself; use more rows (error ∝ 1/√n) or a larger ε."
    return text + f": the estimate is within about {rms / size:.0%} of the mean's norm."


def _print_groups(groups: Any, as_json: bool) -> None:
    """The per-group means of ``estimate-mean --group-by``."""
    if as_json:
        out.print(json.dumps(groups.to_dict(), allow_nan=False, default=str), markup=False)
        return
    first = groups.groups[0][1]
    table = Table(title=f"Mean estimate per {groups.column} ({first.mechanism}, ε = {_fmt(first.epsilon)}, d = {first.d})",
                  title_justify="left")
    shown = min(first.d, 3)
    for name in (groups.column, "rows n", "RMS ℓ2 error", *(f"mean[{j}]" for j in range(shown))):
        table.add_column(name, justify="right")
    for value, est in groups.groups:
        table.add_row(str(value), str(est.n), _fmt(est.rms_error), *(_fmt(float(est.mean[j])) for j in range(shown)))
    out.print(table)
    if groups.missing:
        out.print(f"{groups.missing} rows with a missing {groups.column} are in no group.", markup=False)
    if first.signature is not None:
        out.print(f"Signature: {first.signature['label']}.", markup=False)
    out.print("Use --json or -o FILE.json for every coordinate and the intervals.", markup=False)


@app.command("regress", cls=_Command)
def regress_cmd(
    privatized: list[Path] = typer.Argument(
        ..., help="File(s) written by `ldp privatize --copies 2`; several files are the shards of one job.",
        show_default=False, metavar="PRIVATIZED...",
    ),
    label: str = typer.Option(
        ..., "--label", help="The privatized coordinate that is the label: a column name, or a 0-based coordinate of a "
        "list column (-1: the last). The features are the other coordinates."
    ),
    radius: Optional[float] = typer.Option(
        None, "--radius", help="Fit over the ball ‖θ‖₂ ≤ R (Thm 3's Θ). Default: √p for p features (every θ with "
        "|θ_j| ≤ 1)."
    ),
    sidecar: Optional[Path] = typer.Option(None, "--sidecar", help="Its sidecar. Default: FILE.ldp.json beside it."),
    where: Optional[list[str]] = typer.Option(
        None, "--where", metavar="COND", help="Keep only rows whose kept column satisfies COLUMN OP VALUE; repeatable."
    ),
    verify: bool = typer.Option(
        True, "--verify/--no-verify", help="Check each file's row count and SHA-256 against its sidecar (default)."
    ),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Also save the coefficients: .json (everything) or .csv / .parquet (one row per "
        "feature)."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing -o file."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar; with -o, print nothing."),
    trust: Optional[str] = TRUST_OPTION,
) -> None:
    """Least-squares regression from two private copies of each row (Aliakbarpour et al. 2024, Alg. 3).

    Each row [features, label] was privatized twice, independently (`ldp privatize --copies 2`, any
    vector mechanism; bcdp gives each copy half its budget vector). Products of the two copies give an
    unbiased estimate f̂(θ) = ½θᵀAθ − bᵀθ of the least-squares loss; A may be indefinite, so θ̂ is the
    exact minimiser over the ball ‖θ‖ ≤ R (trust-region secular equation, Moré–Sorensen 1983), not
    an unconstrained solve. Prints θ̂ per feature, f̂(θ̂) and Thm 3's rate for E[f(θ̂) − f*].
    """
    with _errors():
        from ldpcli.analysis.regress import regress, save_coefficients

        with _progress("reading", quiet) as (_, on_rows):
            result = regress(privatized, label=label, radius=radius, sidecar=sidecar, where=where or (),
                             verify=verify, on_rows=on_rows, trust=trust)
        if output is not None:
            save_coefficients(result, output, overwrite=overwrite)
    if quiet and output is not None:
        return
    if as_json:
        out.print(json.dumps(result.to_dict(), allow_nan=False), markup=False)
        return
    _print_regression(result)
    if output is not None:
        out.print(f"wrote {output}", markup=False)


def _print_regression(result: Any) -> None:
    """The human tables of a private least-squares fit."""
    fit = result.fit
    summary = _summary_table("Least squares from two private copies" + ("" if result.verified else " (UNVERIFIED)"))
    summary.add_row("rows n", str(fit.n), "people, each privatized twice")
    summary.add_row("label", result.label, f"{len(result.features)} features")
    summary.add_row("mechanism", f"{result.mechanism}, ε = {_fmt(result.epsilon_total)} in all", "both copies together")
    _signature_row(summary, result.signature)
    summary.add_row("radius R", _fmt(fit.radius), "θ̂ minimises f̂ over ‖θ‖ ≤ R" + (" (on the boundary)" if fit.on_boundary else ""))
    summary.add_row("f̂(θ̂)", _fmt(fit.objective), "unbiased estimate of (1/2n)Σ(θ̂ᵀz − l)²")
    summary.add_row("A indefinite", "yes" if fit.indefinite else "no", "the noisy quadratic; handled exactly")
    summary.add_row("Thm 3 rate", _fmt(result.rate.rate), result.rate.statement)
    out.print(summary)
    shown = min(len(result.features), 20)
    coefficients = Table(title="coefficients" + (f" (first {shown})" if shown < len(result.features) else ""),
                         title_justify="left")
    coefficients.add_column("feature")
    coefficients.add_column("θ̂", justify="right")
    for name, value in list(zip(result.features, fit.theta))[:shown]:
        coefficients.add_row(name, _fmt(float(value)))
    out.print(coefficients)
    out.print(f"Note: {result.intercept_note}.", markup=False)


@app.command("train", cls=_Command)
@_WithMechanismOptions
def train_cmd(
    data: Path = typer.Argument(
        ..., help="Training data (.parquet or .csv): one row per person, the features and a label column.",
        show_default=False, metavar="DATA",
    ),
    label: str = typer.Option(..., "--label", help="The label column (not a feature; never released as it is)."),
    loss: str = typer.Option(
        "logistic", "--loss", metavar="logistic|softmax|squared|hinge", help="logistic or hinge: two classes; softmax: "
        "two or more (multinomial logistic); squared: a numeric label (least squares)."
    ),
    eps: float = typer.Option(..., "--eps", "--epsilon", help="Privacy level ε of each released gradient, in [0.01, "
                              "10⁴] (outside it only with --force). Each row's ε is --epochs × ε."),
    mechanism: str = MECHANISM_OPTION,
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
        None, "--eta0", help="η₀ of the steps η_k = η₀·k^−β. Default: √(ε/p) for l2 (Bhowmick et al. 2018 Sec. 5.1, p "
        "parameters); √(2 log 2p)/(R·M∞) for l1 (M∞² bounds E‖Z‖∞² of one release)."
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
    memory: str = typer.Option("256MB", "--memory", help="Rows kept in memory: training rows that fit are read "
                               "once and shuffled together; a larger file is re-read each epoch and shuffled by window."),
    force: bool = FORCE_OPTION,
    ledger: Optional[Path] = LEDGER_OPTION,
    max_budget: Optional[float] = typer.Option(
        None, "--max-budget", metavar="EPS", help="Refuse (exit 1, nothing trained or written) when the ε this input "
        "has spent in the ledger plus epochs × ε would exceed EPS."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (model, privacy, training, evaluation)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar, notes or tables; warnings are still "
                               "shown."),
    options: dict[str, Any] = {},  # noqa: B006 - filled by _WithMechanismOptions, never mutated
) -> None:
    """Train a model by locally private stochastic gradient descent: each row releases only privatized gradients.

    The one-pass protocol of Duchi, Jordan and Wainwright (2014) and Bhowmick et al. (2018): at each
    step the current model θ is public; each of the step's rows computes its gradient of the loss,
    clips it to the public bound L and privatizes it with the chosen mechanism (default privunit2;
    separated for magnitude and direction apart, Eq. 22/23; duchi-l2 or duchi-linf as in the 2014
    paper); the server averages the releases, steps with η_k = η₀·k^−β and projects onto the
    parameter ball. The model is the average of the iterates (Polyak–Ruppert). Each row is used
    once per epoch, so each row's ε is epochs × ε, recorded in the budget ledger.
    """
    with _errors():
        from ldpcli.learn.train import train
        from ldpcli.release.ledger import Ledger

        owner_ledger = Ledger.open(ledger)
        with _progress("training", quiet) as (on_start, on_rows):
            result = train(
                data, label=label, epsilon=eps, loss=loss, mechanism=mechanism, calibration=calibration,
                norm_bound=_bound(norm_bound, r_max), options=options, geometry=geometry, radius=radius, eta0=eta0,
                beta=beta, batch=batch, epochs=epochs, intercept=intercept,
                classes=_split(classes) or None, column=column, columns=_split(columns) or None, baseline=baseline,
                test=test, holdout=holdout, seed=seed, memory=_bytes(memory, "--memory"), force=force, output=output,
                overwrite=overwrite, ledger=owner_ledger, max_budget=max_budget, on_start=on_start, on_rows=on_rows,
            )
    for text in result.notices:
        _warn(text)
    if result.classes_from_data:
        _warn(f"the class list ({', '.join(repr(c) for c in (result.classes or ())[:10])}) was read from the data and is "
              "released with the model unprivatized; pass --classes to make it a public choice")
    if result.clipped:
        _note(f"{result.clipped} of {result.train_rows * result.epochs} gradients were clipped to L = "
              f"{result.mechanism.norm_bound:g}: the model follows the clipped gradients (a larger public L clips less "
              "but adds noise); this count is shown here only, never stored", quiet)
    if result.reproducible:
        _warn("seeded run: reproducible by anyone who knows the seed; do not release it")
    if as_json:
        out.print(json.dumps(result.to_dict(), allow_nan=False, default=str), markup=False)
        return
    if not quiet:
        _print_training(result)


def _print_training(result: Any) -> None:
    """The human tables of a private training run."""
    privacy = result.privacy()
    mech = result.mechanism
    summary = _summary_table(f"Private {result.loss} model ({result.geometry} geometry)")
    summary.add_row("rows", str(result.train_rows), "trained on" + (f"; {result.holdout_rows} held out"
                                                                   if result.holdout_rows else ""))
    summary.add_row("parameters p", str(result.theta.size), f"{len(result.features)} features"
                    + (" (intercept included)" if result.intercept else "") + (f" × {result.outputs} classes"
                                                                               if result.outputs > 1 else ""))
    summary.add_row("mechanism", f"{mech.name}, ε = {_fmt(mech.epsilon_exact)} per use", f"gradients clipped to "
                    f"L = {_fmt(mech.norm_bound)} ({mech.domain})")
    summary.add_row("ε per row", _fmt(privacy["epsilon_per_row"]), f"{result.epochs} use(s) per row, basic composition")
    summary.add_row("steps", f"{result.steps} × {result.batch} rows", result.rule.describe())
    summary.add_row("radius R", _fmt(result.radius), "θ stays in the " + ("ℓ2" if result.geometry == "l2" else "ℓ1")
                    + " ball; the output is the averaged iterate")
    summary.add_row("rate", _fmt(result.rate()["value"]), result.rate()["form"] + " (Duchi et al. 2014; constant not "
                    "stated)")
    summary.add_row("time", f"{result.seconds:.3g} s", f"{result.steps / max(result.seconds, 1e-12):,.0f} steps/s")
    if result.output is not None:
        summary.add_row("model", str(result.output), f"sidecar {result.sidecar}")
    out.print(summary)
    report = result.to_dict()
    if result.metrics or report["baseline_distance"] is not None or report["minimizer"] is not None:
        table = Table(title="Evaluation" + (f" on the {result.evaluated_on} ({result.evaluation_rows} rows)"
                                            if result.evaluated_on else ""), title_justify="left")
        for name in ("model", "mean loss", "accuracy", "‖θ − θ̂‖"):
            table.add_column(name, justify="right" if name != "model" else "left")
        minimizer = report["minimizer"]
        distances = {"private": None if minimizer is None else minimizer["distance"],
                     "baseline": None if minimizer is None else minimizer["baseline_distance"], "minimizer": 0.0}
        names = {"private": "private (this model)", "baseline": "non-private SGD, same pass",
                 "minimizer": "θ̂: empirical minimiser"}
        for key in ("private", "baseline", "minimizer"):
            if key == "baseline" and result.baseline is None or key == "minimizer" and minimizer is None:
                continue
            metrics = result.metrics.get(key)
            table.add_row(names[key], "—" if metrics is None else _fmt(metrics.loss),
                          "—" if metrics is None or metrics.accuracy is None else f"{metrics.accuracy:.2%}",
                          _fmt(distances[key]))
        out.print(table)
    if result.minimizer_note:
        out.print(result.minimizer_note, markup=False)
    weights = result.theta.reshape(result.outputs, len(result.features))
    shown = min(len(result.features), 10)
    coefficients = Table(title="coefficients" + (f" (first {shown} of {len(result.features)})"
                                                  if shown < len(result.features) else ""), title_justify="left")
    coefficients.add_column("feature")
    heads = [str(c) for c in result.classes] if result.outputs > 1 else ["θ"]
    for head in heads[:4]:
        coefficients.add_column(head, justify="right")
    for j in range(shown):
        coefficients.add_row(result.features[j], *(_fmt(float(weights[c, j])) for c in range(min(result.outputs, 4))))
    out.print(coefficients)
    if shown < len(result.features) or result.outputs > 4:
        out.print("Use --json or -o MODEL.json for every coefficient.", markup=False)


@app.command("audit", cls=_Command)
@_WithMechanismOptions
def audit(
    mechanism: str = typer.Option(..., "--mechanism", "-m", help=""),
    d: int = D_OPTION,
    eps: float = EPS_OPTION,
    calibration: Optional[str] = CALIBRATION_OPTION,
    norm_bound: Optional[float] = NORM_OPTION,
    r_max: Optional[float] = R_MAX_OPTION,
    trials: int = typer.Option(20_000, "--trials", help="Privatized copies of each fixed input."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed for a reproducible audit. Default: OS entropy."),
    lower_bound_trials: Optional[int] = typer.Option(
        None, "--lower-bound-trials",
        help="Privatized copies of each input of the privacy lower bound (half choose the event, half measure "
             "it). Default: 20000, fewer above d = 2500 (at most 5e7 values per input, at least 100).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    options: dict[str, Any] = {},  # noqa: B006 - filled by _WithMechanismOptions, never mutated
) -> None:
    """Check a mechanism's claims: its exact ε by a second, independent route; by simulation that its
    outputs are unbiased, that its errors are the ones it reports and that the outputs follow their
    exact law; and that no event seen in samples shows more privacy loss than ε (a lower bound).
    Exit 1 if any check fails. An honest mechanism fails with probability at most 1e-3.
    """
    with _errors():
        from ldpcli.audit.claims import MIN_TRIALS
        from ldpcli.audit.claims import audit as run_audit

        check_count(trials, "trials", minimum=MIN_TRIALS)
        if lower_bound_trials is not None:
            check_count(lower_bound_trials, "lower_bound_trials", minimum=MIN_TRIALS)
        _warn(check_epsilon(eps, force=True))
        mech = MechanismSpec(mechanism, eps, calibration, _bound(norm_bound, r_max), options).calibrate(d)
        result = run_audit(mech, trials=trials, seed=seed, lower_bound_trials=lower_bound_trials)
    if as_json:
        out.print(json.dumps(result.to_dict(), allow_nan=False, default=float), markup=False)
    else:
        verdict = "[bold green]PASSED[/]" if result.passed else "[bold red]FAILED[/]"
        out.print(f"Audit of {mech.name} ({mech.calibration}) at d = {mech.d}, ε = {_fmt(mech.epsilon)}: {verdict}")
        privacy = Table(title="Exact privacy", show_header=False, title_justify="left")
        privacy.add_column("quantity", style="bold")
        privacy.add_column("value", justify="right")
        privacy.add_row("ε asked for", _fmt(mech.epsilon))
        privacy.add_row("ε exact (calibration)", repr(mech.epsilon_exact))
        privacy.add_row("ε exact (second route)", "—" if result.epsilon_second_route is None else repr(result.epsilon_second_route))
        privacy.add_row("route", result.privacy_route)
        privacy.add_row("agrees", "yes" if result.privacy_ok else "NO")
        out.print(privacy)
        alphas = result.to_dict()["family_alpha"]
        stats = Table(title=f"Statistics (family α = {alphas['statistics']:g}, Bonferroni)", title_justify="left")
        for name in ("input", "trials", "max |z| (mean)", "E‖Z − x‖² observed", "claimed", "z (error)", "verdict"):
            stats.add_column(name, justify="left" if name == "input" else "right")
        for check in result.inputs:
            ok = check.unbiased and check.error_ok
            stats.add_row(
                check.name, str(check.trials), f"{check.max_abs_z:.2f} ≤ {check.z_threshold:.2f}",
                _fmt(check.mean_squared_error), f"{check.comparison} {_fmt(check.predicted)}", f"{check.error_z:.2f}",
                "ok" if ok else "FAILED",
            )
        out.print(stats)
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
            out.print(
                f"Privacy lower bound: ε_lb = {bound.epsilon:.4f} at confidence {bound.confidence:g} "
                f"({bound.trials} trials per input) against ε exact = {mech.epsilon_exact!r}: {verdict}",
                markup=False,
            )
            out.print(f"  event: {bound.event}", markup=False)
        out.print(f"False-failure budget: {alphas['total']:g} = statistics {alphas['statistics']:g} + law "
                  f"{alphas['law_tests']:g} + lower bound {alphas['lower_bound']:g}", markup=False)
    if not result.passed:
        raise typer.Exit(1)


def _print_sweep(rows: list[dict[str, Any]]) -> None:
    """The human table of ``ldp sweep``: one line per mechanism × d × ε × n (every column: --json or -o)."""
    simulated = any(row["empirical_error"] is not None for row in rows)
    boundary = simulated and {row["inputs"] for row in rows} != {"data"}
    bounds = "/".join(_fmt(bound) for bound in sorted({row["norm_bound"] for row in rows}))
    table = Table(title=f"Error of the mean E‖mean − true mean‖², predicted worst case (expected_error_max / n), "
                  f"L = {bounds}", title_justify="left")
    headers = ["mechanism", "d", "ε", "n", "predicted", "× privunit2"]
    headers += (["boundary"] if boundary else []) + (["simulated ± 95%"] if simulated else [])
    baselines = {row["mechanism"]: row for row in rows if row["baseline"]}
    lines: list[tuple[list[str], str]] = []
    for row in rows:
        cells = [row["mechanism"], str(row["d"]), f"{row['epsilon']:.4g}", str(row["n"])]
        if row["error"] is not None:
            lines.append((cells + ["—"] * (len(headers) - 4), f"not available: {row['error']}"))
            continue
        cells += [f"{row['expected_error_mean']:.4g}",
                  "—" if row["ratio_to_privunit2"] is None else f"{row['ratio_to_privunit2']:.4g}"]
        if boundary:
            cells.append(f"{row['expected_error_mean_boundary']:.4g}")
        if simulated:
            low, high = row["empirical_lower"], row["empirical_upper"]
            cells.append("—" if row["empirical_error"] is None else
                         f"{row['empirical_error']:.3g} ± {(high - low) / 2:.2g}")
        if row["guarantee"] != "ε-LDP":
            cells[0] += " (ε,δ)"
        lines.append((cells, ""))
    for k, name in enumerate(headers):  # the grid's own columns are never cut short
        width = max([len(name)] + [len(cells[k]) for cells, _ in lines]) if k < 4 else None
        table.add_column(name, justify="left" if k == 0 else "right", no_wrap=True, min_width=width)
    noted = any(note for _, note in lines)
    if noted:
        table.add_column("note", overflow="fold")
    for cells, note in lines:
        table.add_row(*cells, *([note] if noted else []))
    out.print(table)
    if baselines:
        said = [f"{name} ({row['guarantee']} with δ = {row['delta']:.3g})" if row["delta"] is not None else name
                for name, row in baselines.items()]
        out.print(f"Baselines for comparison, not for release: {', '.join(said)}.", markup=False)
    if simulated:
        out.print(
            "Simulated: the mean of ‖mean − true mean‖² over the --empirical trials, for "
            + ("inputs on the boundary of each domain: it estimates the boundary column (expected_error / n)."
               if boundary else "the rows of --data (clipped to L): at most the predicted worst case."),
            markup=False,
        )


@app.command("sweep", cls=_Command)
def sweep(
    eps: str = typer.Option(
        ..., "--eps", "--epsilon", metavar="GRID", help="Privacy levels: a range such as 0.5:16 (--points log-spaced "
        "values, ends included), 0.5:16:20 (20 values) or a list 1,2,4. Outside [0.01, 10⁴] is a warning."
    ),
    d: Optional[str] = typer.Option(
        None, "--d", metavar="GRID", help="Dimensions, as --eps (ranges are rounded to integers), e.g. 384 or "
        "64,384,1024. Not with --data, whose d is used."
    ),
    n: Optional[str] = typer.Option(
        None, "--n", metavar="GRID", help="Rows averaged, as --d, e.g. 10000 or 1000:1000000. Not with --data, "
        "whose row count is used."
    ),
    mechanism: Optional[list[str]] = typer.Option(
        None, "--mechanism", "-m", metavar="NAME", help="A vector mechanism to include; repeat for several. Default: "
        "all of them."
    ),
    points: int = typer.Option(12, "--points", help="Values of each range A:B."),
    norm_bound: Optional[float] = NORM_OPTION,
    r_max: Optional[float] = R_MAX_OPTION,
    delta: Optional[float] = typer.Option(
        None, "--delta", help="δ of the gaussian baseline, which is (ε, δ)-DP, not ε-LDP (default 1e-6)."
    ),
    empirical: Optional[int] = typer.Option(
        None, "--empirical", metavar="TRIALS", help="Also simulate: TRIALS times privatize n rows on the boundary "
        "and measure ‖mean − true mean‖²; adds its mean and 95% interval."
    ),
    data: Optional[Path] = typer.Option(
        None, "--data", metavar="FILE", help="Simulate with the rows of this .parquet or .csv file (clipped to L) "
        "instead of boundary inputs; d and n are the file's. Needs --empirical."
    ),
    column: Optional[str] = typer.Option(None, "--column", help="With --data: the list column holding the vectors."),
    columns: Optional[str] = typer.Option(
        None, "--columns", metavar="COLUMNS", help="With --data: the numeric columns, one per coordinate, as for "
        "`ldp privatize`."
    ),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the simulation. Default: OS entropy."),
    threads: Optional[int] = typer.Option(
        None, "--threads", help="Threads simulating grid points (default: the available cores); the table does "
        "not depend on it."
    ),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Write the table: .csv, .parquet or .json (by extension)."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing -o file."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as a JSON list of rows."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no 'wrote' line."),
) -> None:
    """Tabulate the error of the mean over a grid of mechanisms × d × ε × n, to choose ε and a mechanism.

    One row per grid point: the predicted E‖mean − true mean‖² of n privatized rows (worst case
    expected_error_max / n and on the boundary expected_error / n), its ratio to optimal
    PrivUnit2, and with --empirical the simulated error with a 95% interval. A mechanism that
    cannot be calibrated at a point gets a row with an error. Draw the table with `ldp plot`.
    """
    with _errors():
        from ldpcli.planning.sweep import save_sweep, to_json
        from ldpcli.planning.sweep import sweep as run_sweep

        with _progress("simulating", quiet or empirical is None) as (on_start, on_rows):
            rows = run_sweep(
                d, eps, n, mechanisms=mechanism, norm_bound=_bound(norm_bound, r_max), delta=delta, points=points,
                empirical=empirical, data=data, column=column, columns=_split(columns) or None, seed=seed,
                threads=threads, on_start=on_start, on_rows=on_rows, on_warning=_warn,
            )
        if output is not None:
            save_sweep(rows, output, overwrite=overwrite)
    if as_json:
        out.print(to_json(rows), markup=False)
    elif output is None:
        _print_sweep(rows)
    if output is not None and not as_json and not quiet:
        failed = sum(row["error"] is not None for row in rows)
        extra = f", {failed} with an error" if failed else ""
        out.print(f"wrote {output} ({len(rows)} rows{extra})", markup=False)


@app.command("risk", cls=_Command)
def risk(
    eps: Optional[float] = typer.Option(
        None, "--eps", "--epsilon", help="The release's ε (with --mechanism: the level it is calibrated to)."
    ),
    mechanism: Optional[str] = typer.Option(
        None, "--mechanism", "-m", help="With --d: the bound uses this mechanism's exact ε (its default options; for "
        "others, `ldp params -m M … --risk-k K` or --sidecar) and says which ε counts."
    ),
    calibration: Optional[str] = CALIBRATION_OPTION,
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
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="--attack: no progress bar."),
) -> None:
    """What a release costs: the chance that anyone reconstructs a person's data from their output.

    If a release is ε-LDP, no guess made from one output does better than e^ε times the best guess
    made without it (Bhowmick et al. 2018, Lemma 2.2). With a diffuse prior on the direction of a
    k-dimensional view of the row, that chance stays tiny even at large ε unless ε is of the order of
    k (Prop. 1). Reports, per accuracy a, the paper's Prop. 1 bound (two branches) and the sharper
    exact bound with the uniform cap probability, as probabilities (powers of ten below 1e-4).

    Modes: the bound at --eps, at a --mechanism's exact ε (with --d) or at a --sidecar's release;
    --max-risk P: the largest ε that keeps the bound ≤ P; --model zipf: sparse histogram data
    (Lemma 2.3's bound and the exact best guess); --attack PRIVATIZED --raw RAW: the natural
    reconstruction run on real rows, against the guess the prior alone allows.
    """
    with _errors():
        accuracies = _floats(a, "--a")
        if attack is not None:
            _risk_attack(attack, raw, sidecar, k, basis, basis_seed, accuracies, as_json, quiet)
            return
        if raw is not None:
            raise UsageError("--raw goes with --attack PRIVATIZED")
        if model is not None:
            _risk_sparse(model, eps, mechanism, sidecar, m, d, precision, recall, as_json, calibration, norm_bound)
            return
        if max_risk is not None:
            if eps is not None or mechanism is not None or sidecar is not None:
                raise UsageError("--max-risk solves for ε: give --k (or --d) and --a, not --eps, --mechanism or --sidecar")
            _risk_max_epsilon(max_risk, k, d, rho0, accuracies, as_json)
            return
        mech = _risk_mechanism(eps, mechanism, sidecar, d, calibration, norm_bound)
        from ldpcli.risk.section import reconstruction

        if mech is not None:
            section = reconstruction(mech, k=k, rho0=rho0, a=accuracies)
            if section is None:
                raise UsageError(f"{mech.name} releases one number (d = 1): there is no direction to reconstruct; "
                                 "see --model zipf for sparse data")
        else:
            assert eps is not None
            section = _plain_section(eps, k, d, rho0, accuracies)
    if as_json:
        out.print(json.dumps(section, allow_nan=False), markup=False)
        return
    _print_reconstruction(section, title="Reconstruction risk")


def _risk_mechanism(
    eps: float | None, mechanism: str | None, sidecar: Path | None, d: int | None, calibration: str | None,
    norm_bound: float | None,
) -> Any:
    """The release whose exact ε counts: from a sidecar, a mechanism at (d, ε), or None for a bare ε."""
    if sidecar is not None:
        if eps is not None or mechanism is not None:
            raise UsageError("--sidecar gives the mechanism and ε; drop --eps and --mechanism")
        from ldpcli.release.sidecar import load_sidecar

        return load_sidecar(sidecar).mechanism
    if eps is None:
        raise UsageError("give --eps, --mechanism with --d and --eps, or --sidecar (or --max-risk, --model, --attack)")
    if mechanism is None:
        if calibration is not None:
            raise UsageError("--calibration needs --mechanism")
        return None
    if d is None:
        raise UsageError("--mechanism needs --d, the dimension it is calibrated for")
    from ldpcli.planning.compare import comparison_options

    options = comparison_options(get_mechanism(mechanism))  # δ for the Gaussian baseline, as `ldp params`
    return MechanismSpec(mechanism, eps, calibration, 1.0 if norm_bound is None else norm_bound, options).calibrate(d)


def _plain_section(eps: float, k: int | None, d: int | None, rho0: float, a: list[float] | None) -> dict[str, Any]:
    """The reconstruction section for a bare ε (any ε-LDP release)."""
    from ldpcli.mechanisms import RiskEpsilon
    from ldpcli.risk.section import reconstruction_for

    k = d if k is None else k
    if k is None:
        raise UsageError("--k is required with a bare --eps (the dimension of the reconstructed direction), or --d")
    level = RiskEpsilon("release", eps, f"any {_fmt(eps)}-LDP release, any prior", True)
    return reconstruction_for([level], k=k, rho0=rho0, a=a, d=d)


def _risk_max_epsilon(
    max_risk: float, k: int | None, d: int | None, rho0: float, a: list[float] | None, as_json: bool
) -> None:
    """``ldp risk --max-risk P``: the largest ε per a (closed form, ldpcli.risk.diffuse)."""
    from ldpcli.risk.diffuse import STANDARD_A, max_epsilon_for_risk

    k = d if k is None else k
    if k is None:
        raise UsageError("--max-risk needs --k (the dimension of the reconstructed direction) or --d")
    if d is not None and k > d:
        raise UsageError(f"--k must be an integer >= 2 and <= d = {d}, got {k}")
    results = [max_epsilon_for_risk(max_risk, k=k, a=value, rho0=rho0) for value in (STANDARD_A if a is None else a)]
    if as_json:
        out.print(json.dumps([r.to_dict() for r in results], allow_nan=False), markup=False)
        return
    table = Table(title=f"Largest ε keeping P(reconstruction) ≤ {_fmt(max_risk)}: direction of a k = {k} projection, "
                  f"prior ρ0 = {_fmt(rho0)}", title_justify="left")
    for name in ("a", "largest ε (exact cap)", "largest ε (Prop. 1)", "note"):
        table.add_column(name, justify="left" if name == "note" else "right")
    for r in results:
        table.add_row(_fmt(r.a), _fmt(r.epsilon_max), _fmt(r.epsilon_max_prop1), r.reason or "")
    out.print(table)
    out.print("Reading: an ε-LDP release at or below this ε keeps every onlooker's chance of a guess with "
              "⟨f(x), v̂⟩ ≥ a at most P, whatever the output (Lemma 2.2 with the exact uniform cap probability).",
              markup=False)


def _risk_sparse(
    model: str, eps: float | None, mechanism: str | None, sidecar: Path | None, m: int | None, d: int | None,
    precision: float | None, recall: float | None, as_json: bool, calibration: str | None,
    norm_bound: float | None,
) -> None:
    """``ldp risk --model zipf``: Lemma 2.3's bound and the exact best guess, times e^ε (Prop. 2)."""
    from ldpcli.risk.sparse import sparse_risk

    if model != "zipf":
        raise UsageError(f"--model must be zipf (the Zipfian prior of Bhowmick et al. Sec. 2.3.2), got {model!r}")
    missing = [flag for flag, value in (("--m", m), ("--d", d), ("--precision", precision), ("--recall", recall))
               if value is None]
    if missing:
        raise UsageError(f"--model zipf needs {', '.join(missing)}")
    assert m is not None and d is not None and precision is not None and recall is not None
    if mechanism is not None or sidecar is not None:
        mech = _risk_mechanism(eps, mechanism, sidecar, d if sidecar is None else None, calibration, norm_bound)
        level = mech.risk_epsilons()[0]
        if level.epsilon is None:
            raise UsageError(f"{mech.name}: {level.applies}")
        epsilon = level.epsilon
    elif eps is None:
        raise UsageError("--model zipf needs --eps (or --sidecar)")
    else:
        epsilon = eps
    result = sparse_risk(epsilon, m=m, d=d, precision=precision, recall=recall)
    info = result.to_dict()
    if as_json:
        out.print(json.dumps(info, allow_nan=False), markup=False)
        return
    table = Table(title=f"Reconstruction of a sparse histogram (Zipfian prior, m = {m}, d = {d}): precision ≥ "
                  f"{_fmt(precision)} and recall ≥ {_fmt(recall)}, at ε = {_fmt(epsilon)}", title_justify="left")
    for name in ("route", "prior alone", "after the release", "note"):
        table.add_column(name, justify="left" if name in ("route", "note") else "right")
    table.add_row("Lemma 2.3 (Bernstein, proof's constants)", _fmt_logp(result.log_prior_lemma),
                  _fmt_logp(result.log_bound_lemma), f"γ = {_fmt(result.gamma)}")
    if result.log_prior_exact is None:
        table.add_row("exact best guess", "—", "—", result.exact_reason or "")
    else:
        table.add_row("exact best guess", _fmt_logp(result.log_prior_exact), _fmt_logp(result.log_bound_exact),
                      f"the {result.best_size} most frequent words")
    out.print(table)
    out.print("Reading: no guess made from one output reaches both precision and recall with more than the "
              "'after the release' probability (Lemma 2.2: e^ε × the prior's best guess).", markup=False)


def _risk_attack(
    privatized: Path, raw: Path | None, sidecar: Path | None, k: int | None, basis: str, basis_seed: int,
    a: list[float] | None, as_json: bool, quiet: bool,
) -> None:
    """``ldp risk --attack PRIVATIZED --raw RAW``: the natural reconstruction (ldpcli.analysis.attack)."""
    from ldpcli.analysis.attack import attack

    if raw is None:
        raise UsageError("--attack needs --raw RAW, the file the release was made from")
    kwargs: dict[str, Any] = {"k": k, "basis": basis, "basis_seed": basis_seed, "sidecar": sidecar}
    if a is not None:
        kwargs["a"] = a
    with _progress("attacking", quiet) as (_, on_rows):
        report = attack(privatized, raw, on_rows=on_rows, **kwargs)
    info = report.to_dict()
    if as_json:
        out.print(json.dumps(info, allow_nan=False), markup=False)
        return
    _print_attack(info)


def _print_attack(info: dict[str, Any]) -> None:
    """The attack's tables: how close the natural reconstruction came, against the prior-only guess."""
    basis = "first k coordinates" if info["basis"] == "coordinates" else f"random basis, seed {info['basis_seed']}"
    table = Table(
        title=f"Reconstruction attack on {info['privatized']} ({info['mechanism']}, ε = {_fmt(info['epsilon'])}, "
        f"n = {info['n']}): ⟨f(x), v̂⟩ for the direction of k = {info['k']} of d = {info['d']} ({basis})",
        title_justify="left",
    )
    for name in ("guess", *info["release"].keys()):
        table.add_column(name, justify="left" if name == "guess" else "right")
    table.add_row("from the release", *(_fmt(v) for v in info["release"].values()))
    table.add_row("prior only", *(_fmt(v) for v in info["prior"].values()))
    out.print(table)
    success = Table(title=f"Fraction of rows reconstructed to ⟨f(x), v̂⟩ ≥ a ({info['interval']} intervals)",
                    title_justify="left")
    for name in ("a", "from the release", "prior only", "bound, uniform prior"):
        success.add_column(name, justify="right")
    for row in info["success"]:
        release, prior = row["release"], row["prior"]
        success.add_row(
            _fmt(row["a"]), f"{_fmt(release['fraction'])} [{_fmt(release['low'])}, {_fmt(release['high'])}]",
            f"{_fmt(prior['fraction'])} [{_fmt(prior['low'])}, {_fmt(prior['high'])}]", _fmt(row["uniform_bound"]),
        )
    out.print(success)
    out.print("Reading: 'prior only' is the best single guess made without the release (the rows' mean direction); "
              "the release adds what lies between the two columns. The bound holds for a prior uniform on the "
              "directions (ρ0 = 0), which real data is not.", markup=False)
    _warn(info["notice"])


@app.command("budget", cls=_Command)
def budget(
    ledger: Optional[Path] = LEDGER_OPTION,
    release: Optional[str] = typer.Option(
        None, "--release", metavar="ID", help="Remove the reservation ID (or a unique prefix of it) of a release that "
        "never appeared: its run ended before publishing. A reservation still running, or whose output is in place, "
        "is refused."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """The privacy budget each input has spent: every release recorded in the data owner's ledger.

    Releasing the same people's rows k times at ε₁, …, ε_k is (ε₁ + … + ε_k)-LDP (basic composition;
    for the Gaussian baseline also δ₁ + … + δ_k). Inputs are identified by a fingerprint of their
    values, so a copy or a re-encoded file counts as the same input. `ldp privatize` records every
    release; --max-budget there refuses one that would go past a cap.

    A release is reserved in the ledger before it is published and confirmed after; a run killed in
    between leaves its reservation, counted in full, and listed here as pending with what became of
    it. Remove one whose release never appeared with --release ID.
    """
    with _errors():
        from ldpcli.release.commit import pending_releases, release_reservation
        from ldpcli.release.ledger import Ledger

        book = Ledger.open(ledger)
        pending = pending_releases(book)  # rolls back what dead runs left first
        if release is not None:
            removed = release_reservation(book, release)
            err.print(f"ldp: removed reservation {removed.release} (ε = {_fmt(removed.epsilon_exact)} of "
                      f"{removed.input}, never published)", markup=False)
            book = Ledger.open(ledger)
            pending = pending_releases(book)
        spends = book.summary()
    if as_json:
        out.print(json.dumps({"ledger": str(book.path), "inputs": [_spend_dict(s) for s in spends],
                              "pending": [_pending_dict(p) for p in pending]}, allow_nan=False), markup=False)
        return
    if not spends:
        out.print(f"No release recorded in {book.path}.", markup=False)
        return
    table = Table(title=f"Privacy budget spent per input ({book.path})", title_justify="left")
    for name in ("input", "releases", "ε spent", "δ", "last release", "outputs"):
        table.add_column(name, justify="right" if name in ("releases", "ε spent", "δ") else "left")
    for spend in spends:
        releases = str(spend.releases) + (f" ({spend.reserved} pending)" if spend.reserved else "")
        table.add_row(", ".join(spend.inputs), releases, _fmt(spend.epsilon),
                      "—" if spend.delta is None else _fmt(spend.delta), spend.last, ", ".join(spend.outputs))
    out.print(table)
    out.print("Reading: each person in an input has lost at most 'ε spent' of privacy across its releases "
              "(the sum of their exact ε).", markup=False)
    if pending:
        table = Table(title="Reserved releases not confirmed (counted above)", title_justify="left")
        for name in ("id", "input", "ε", "output", "status"):
            table.add_column(name, justify="right" if name == "ε" else "left")
        for item in pending:
            table.add_row(item.entry.release, item.entry.input, _fmt(item.entry.epsilon_exact), item.entry.output,
                          item.status)
        out.print(table)
        out.print("A release 'not published' can be removed with `ldp budget --release ID`.", markup=False)


def _pending_dict(item: Any) -> dict[str, Any]:
    """One reservation of ``ldp budget --json``."""
    entry = item.entry
    return {"id": entry.release, "input": entry.input, "epsilon": entry.epsilon_exact, "output": entry.output,
            "created": entry.created, "status": item.status}


def _spend_dict(spend: Any) -> dict[str, Any]:
    """One input's line of ``ldp budget --json`` (the fingerprint stays in the ledger)."""
    return {"inputs": list(spend.inputs), "releases": spend.releases, "pending": spend.reserved,
            "epsilon": spend.epsilon,
            "epsilon_asked": spend.epsilon_asked, "delta": spend.delta, "first": spend.first, "last": spend.last,
            "outputs": list(spend.outputs)}


keys_app = typer.Typer(
    cls=_Group, no_args_is_help=True, rich_markup_mode="markdown",
    help="The data owner's signing key (Ed25519, beside the ledger): sign releases so that analysts can check who wrote "
    "them (`ldp verify`, `estimate-mean --trust`). Needs `pip install 'ldp[sign]'`.",
)
app.add_typer(keys_app, name="keys")


@keys_app.command("init", cls=_Command)
def keys_init(ledger: Optional[Path] = KEYS_LEDGER_OPTION) -> None:
    """Create the data owner's signing key beside the ledger (signing-key.pem, mode 0600) and print its public key.

    An existing key is never replaced. The private key stays with the ledger; give analysts the
    public key printed on stdout (`ldp keys show` prints it again).
    """
    with _errors():
        from ldpcli.release.signing import create_key

        signer = create_key(ledger)
    err.print(f"wrote {signer.path} (the private key: keep it as private as the ledger; share the public key below)",
              markup=False)
    out.print(signer.public_key.text, markup=False)


@keys_app.command("show", cls=_Command)
def keys_show(
    ledger: Optional[Path] = KEYS_LEDGER_OPTION,
    pem: bool = typer.Option(False, "--pem", help="Print the public key as a PEM block instead of ldpkey1-…."),
) -> None:
    """Print the data owner's public key: what analysts pass to `ldp verify --trust` and `estimate-mean --trust`."""
    with _errors():
        from ldpcli.release.signing import load_signer

        key = load_signer(ledger).public_key
        text = key.pem().rstrip("\n") if pem else key.text
    out.print(text, markup=False)


@app.command("verify", cls=_Command)
def verify_cmd(
    releases: list[Path] = typer.Argument(
        ..., help="Privatized files, directories of them, quoted globs, or dataset directories (their manifest and "
        "every part).", show_default=False, metavar="PATHS...",
    ),
    trust: Optional[str] = typer.Option(
        None, "--trust", metavar="KEY", help="The data owner's public key (ldpkey1-…, a PEM key, or a file holding "
        "either): a release signed by another key is untrusted."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Check who signed each release and that nothing changed since: its sidecar's signature and its bytes.

    Status per file: valid, unsigned, untrusted (signed by another key than --trust) or invalid (changed
    after signing). Exit 0 only if every release is valid (and, with --trust, signed by KEY), else 1.
    """
    with _errors():
        from ldpcli.release.signing import read_public_key, verify_paths

        trusted = None if trust is None else read_public_key(trust)
        results = verify_paths(releases, trusted)
    ok = all(result.ok for result in results)
    if as_json:
        payload = {"ok": ok, "trusted_key": None if trusted is None else trusted.text,
                   "releases": [result.to_dict() for result in results]}
        out.print(json.dumps(payload, allow_nan=False), markup=False)
    else:
        title = "Signatures" + ("" if trusted is None else f" (trusted key {trusted.short})")
        table = Table(title=title, title_justify="left")
        for name in ("release", "status", "key", "note"):
            table.add_column(name)
        for result in results:
            table.add_row(str(result.path), result.status.value.upper() if not result.ok else result.status.value,
                          "—" if result.key is None else result.key.short, result.reason)
        out.print(table)
        bad = sum(not result.ok for result in results)
        if bad:
            out.print(f"{bad} of {len(results)} releases are not valid" + ("" if trusted is None else " for this key")
                      + ".", markup=False)
        elif trusted is None:
            out.print("Every release is signed and unchanged; pass --trust KEY to require the data owner's key.",
                      markup=False)
    if not ok:
        raise typer.Exit(1)


@app.command("plot", cls=_Command)
def plot(
    table: Path = typer.Argument(
        ..., help="A table written by `ldp sweep -o` (.csv, .parquet or .json).", show_default=False, metavar="SWEEP"
    ),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="The figure: .png, .svg or .pdf (needs matplotlib: pip install 'ldp[plot]')."
    ),
    x: str = typer.Option("eps", "--x", metavar="eps|d|n", help="The variable along the x axis."),
    d: Optional[int] = typer.Option(
        None, "--d", help="Draw the rows at this d when the table has several (default: the middle value)."
    ),
    eps: Optional[float] = typer.Option(
        None, "--eps", "--epsilon", help="Draw the rows at this ε (with --x d or n; default: the middle value)."
    ),
    n: Optional[int] = typer.Option(
        None, "--n", help="Draw the rows at this n when the table has several (default: the middle value)."
    ),
    mechanism: Optional[list[str]] = typer.Option(
        None, "--mechanism", "-m", metavar="NAME", help="Draw only this mechanism; repeat for several. Default: every "
        "one."
    ),
    terminal: bool = typer.Option(
        False, "--terminal", help="Print a text chart (a log-scale sparkline per mechanism); needs no matplotlib."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing -o file."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No notes and no 'wrote' line."),
) -> None:
    """Draw a sweep table: the error of the mean against ε (or d, or n), one line per mechanism, on log axes.

    Simulated points (`ldp sweep --empirical`) are drawn with their 95% intervals over the
    predicted lines. The other variables are fixed at one value each (--d, --eps, --n; default
    the middle of the table's values), named in the title.
    """
    with _errors():
        from ldpcli.planning.plot import X_COLUMNS, plot_sweep, require_matplotlib, select_rows, text_chart
        from ldpcli.planning.sweep import read_sweep

        if output is None and not terminal:
            raise UsageError("give -o FIGURE (.png, .svg or .pdf), or --terminal for a text chart")
        if output is not None:
            require_matplotlib()
        selection = select_rows(read_sweep(table), x, at={"epsilon": eps, "d": d, "n": n}, mechanisms=mechanism)
        for column, values in selection.choices.items():
            if len(values) > 1 and column != X_COLUMNS.get(x):
                flag = "--eps" if column == "epsilon" else f"--{column}"
                _note(f"the table has {len(values)} values of {column}; drawing {column} = {selection.fixed[column]:g} "
                      f"(choose with {flag})", quiet)
        if output is not None:
            plot_sweep(selection, output, overwrite=overwrite)
    if terminal:
        out.print(text_chart(selection), markup=False)
    if output is not None and not quiet:
        out.print(f"wrote {output} ({len(selection.mechanisms)} mechanisms; {selection.title()})", markup=False)


queries_app = typer.Typer(
    cls=_Group, no_args_is_help=True, rich_markup_mode="markdown",
    help="Answer a public workload of queries over a finite universe: locally (encode, privatize, answer) or "
    "centrally (release). Błasiok, Bun, Nikolov, Steinke 2019.",
)
app.add_typer(queries_app, name="queries")

_WORKLOAD_HELP = (
    "The public workload: one row per item of the universe, a key column naming the item and one numeric column per "
    "query with its value on that item, in [0, 1] or [−1, 1]."
)


@queries_app.command("encode", cls=_Command)
def queries_encode(
    data: Path = typer.Argument(..., help="The private data: one row per person, with a key column.", show_default=False),
    workload: Path = typer.Option(..., "--workload", "-w", help=_WORKLOAD_HELP, show_default=False),
    key: str = typer.Option(..., "--key", help="The column naming each row's item, in the data and in the workload.",
                            show_default=False),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Where to write the vectors (.parquet or .csv). Default: DATA.queries.parquet."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or notes."),
) -> None:
    """Map each row to its query-answer vector minus the workload's public centroid, for `ldp privatize`.

    The output has one column per query and is as private as DATA: privatize it with the printed
    --norm-bound (any vector mechanism) and answer with `ldp queries answer`, which adds the
    centroid back. Centring shrinks the norm bound to the workload's radius about its centroid.
    """
    with _errors():
        from ldpcli.analysis.answer import encode_queries, read_workload

        target = output or data.with_name(data.name.split(".")[0] + ".queries.parquet")
        loaded = read_workload(workload, key=key)
        with _progress("encoding", quiet) as (_, on_rows):
            encoded = encode_queries(data, loaded, key, target, overwrite=overwrite, on_rows=on_rows)
    if as_json:
        out.print(json.dumps(encoded.to_dict(), allow_nan=False), markup=False)
        return
    out.print(f"wrote {target}: {encoded.rows} rows × {encoded.queries} queries (answers minus the workload's centroid)",
              markup=False)
    out.print(f"next: ldp privatize {target} --norm-bound {encoded.norm_bound:.7g} --eps EPS "
              f"(ℓ∞-box mechanisms: --norm-bound {encoded.box_bound:.7g}); then "
              f"ldp queries answer PRIVATIZED --workload {workload}", markup=False)
    _note(f"{target} is the private data re-expressed: keep it as private as {data} and publish only the privatized "
          "file", quiet)


@queries_app.command("answer", cls=_Command)
def queries_answer(
    privatized: list[Path] = typer.Argument(
        ..., help="The privatized encoded file(s) (`ldp privatize` of `ldp queries encode`'s output).",
        show_default=False, metavar="PRIVATIZED...",
    ),
    workload: Path = typer.Option(..., "--workload", "-w", help=_WORKLOAD_HELP, show_default=False),
    sidecar: Optional[Path] = typer.Option(None, "--sidecar", help="Its sidecar. Default: FILE.ldp.json beside it."),
    confidence: float = typer.Option(0.95, "--confidence", help="Confidence level of the raw answers' intervals."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also save the answers as .json."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing -o file."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or notes."),
    trust: Optional[str] = TRUST_OPTION,
) -> None:
    """Every query's answer from a local release: the raw average and its projection onto the workload's hull.

    The local projection mechanism (Błasiok et al. 2019, Sec. 5.1, Thm 5.1) when the rows were
    privatized with gaussian-sign; any vector mechanism works, and PrivUnit2 is the most accurate.
    The guaranteed error (expected_error_max / n) bounds both; the intervals are the raw answers'.
    """
    with _errors():
        from ldpcli.analysis.answer import answer_queries

        if output is not None and output.suffix.lower() != ".json":
            raise UsageError(f"{output}: save the answers as .json")
        with _progress("reading", quiet) as (_, on_rows):
            answers = answer_queries(privatized, workload, sidecar=sidecar, confidence=confidence, on_rows=on_rows,
                                     trust=trust)
        if output is not None:
            from ldpcli.io import atomic_write_text

            atomic_write_text(output, json.dumps(answers.to_dict(), allow_nan=False) + "\n", overwrite=overwrite)
    for text in answers.warnings:
        _warn(text)
    info = answers.to_dict()
    if as_json:
        out.print(json.dumps(info, allow_nan=False), markup=False)
        return
    est = answers.estimate
    summary = _summary_table("Query answers (local release)")
    summary.add_row("rows n", str(est.n), "privatized rows averaged")
    summary.add_row("queries m", str(answers.m), f"workload {workload}")
    summary.add_row("mechanism", f"{est.mechanism}, ε = {_fmt(est.epsilon)}", "from the sidecar")
    _signature_row(summary, est.signature)
    summary.add_row("RMS error per query", _fmt(answers.rms_error), "guaranteed, raw and projected (expected_error_max / n)")
    summary.add_row("moved by projection", _fmt(info["projection"]["distance_moved"]), "ℓ2 distance from raw to projected")
    summary.add_row("Thm 5.1 form", _fmt(answers.theorem_bound), "(Δ·g(𝒳)/(ε√(nm)))^½, up to an unspecified constant")
    out.print(summary)
    table = Table(title="answers" + (f" (first 20 of {answers.m})" if answers.m > 20 else ""), title_justify="left")
    for name in ("query", "projected", "raw", f"{est.confidence:.0%} interval (raw)"):
        table.add_column(name, justify="right")
    for row in info["queries"][:20]:
        interval = f"[{_fmt(row['lower'])}, {_fmt(row['upper'])}]" if "lower" in row else "—"
        table.add_row(row["query"], _fmt(row["projected"]), _fmt(row["raw"]), interval)
    out.print(table)
    if output is not None:
        out.print(f"wrote {output}", markup=False)


@queries_app.command("release", cls=_Command)
def queries_release(
    data: Path = typer.Argument(..., help="The private data: one row per person, with a key column.", show_default=False),
    workload: Path = typer.Option(..., "--workload", "-w", help=_WORKLOAD_HELP, show_default=False),
    key: str = typer.Option(..., "--key", help="The column naming each row's item, in the data and in the workload.",
                            show_default=False),
    rho: float = typer.Option(..., "--rho", help="The zCDP level ρ of the release (central model).", show_default=False),
    delta: float = typer.Option(1e-6, "--delta", help="δ at which the equivalent (ε, δ) is printed."),
    cover: Optional[float] = typer.Option(
        None, "--cover", metavar="ALPHA", help="The coarse projection mechanism: round items to a public α/2-separated "
        "cover of the universe (RMS per-query distance α/2) and project onto its hull. Default: the plain projection "
        "mechanism."
    ),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="The answers (.json, .csv or .parquet), with a sidecar OUTPUT.ldp.json. "
        "Default: DATA.answers.json."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing outputs."),
    seed: Optional[int] = typer.Option(
        None, "--seed", help="Seed the noise (reproducible, NOT for release; the sidecar says so). Default: OS entropy."
    ),
    ledger: Optional[Path] = LEDGER_OPTION,
    max_budget: Optional[float] = typer.Option(
        None, "--max-budget", metavar="EPS", help="Refuse the release if the ε the data has spent in the ledger plus "
        "this release's ε at --delta would exceed EPS (basic composition)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or notes."),
) -> None:
    """Release every query's answer centrally (a curator holds DATA): the projection mechanism, ρ-zCDP.

    Gaussian noise on the true answers with σ = diam/(n√(2ρ)) (the universe's ℓ2 diameter), then
    the projection onto the convex hull of the universe (or of a public cover with --cover). Prints
    the answers, the error bounds with their constants, and ρ as (ε, δ). The release is recorded in
    the data owner's privacy-budget ledger (--ledger; see `ldp budget`) at its exact (ε, δ).
    """
    with _errors():
        from ldpcli.analysis.answer import read_workload, release_queries, save_central_release
        from ldpcli.release.ledger import InputFingerprint, Ledger

        target = output or data.with_name(data.name.split(".")[0] + ".answers.json")
        loaded = read_workload(workload, key=key)
        owner_ledger = Ledger.open(ledger)
        fingerprint = InputFingerprint(loaded.distinct.shape[1])
        with _progress("counting", quiet) as (_, on_rows):
            release = release_queries(data, loaded, key, rho=rho, delta=delta, alpha=cover, seed=seed, on_rows=on_rows,
                                      fingerprint=fingerprint)
        side = save_central_release(release, loaded, target, overwrite=overwrite, ledger=owner_ledger, source=data,
                                    fingerprint=fingerprint, max_budget=max_budget)
    info = release.to_dict()
    if as_json:
        out.print(json.dumps({**info, "output": str(target), "sidecar": str(side)}, allow_nan=False), markup=False)
        return
    privacy, bounds = info["privacy"], info["bounds"]
    summary = _summary_table(f"Central release ({info['mechanism']} mechanism)")
    summary.add_row("rows n", str(release.n), "the dataset's size (public)")
    summary.add_row("privacy", f"ρ = {_fmt(release.rho)}-zCDP", "central model: one person's item may change")
    summary.add_row("as (ε, δ)", f"({_fmt(privacy['epsilon_exact_gaussian'])}, {release.delta:g})",
                    f"exact for this Gaussian release; Bun–Steinke Prop. 1.3 gives ε = {_fmt(privacy['epsilon_bun_steinke'])}")
    summary.add_row("noise σ", _fmt(release.sigma), f"diameter {_fmt(release.diameter)} / (n√(2ρ))")
    if release.alpha is not None:
        summary.add_row("cover", f"{release.items} of {release.distinct_items} items", f"α = {release.alpha:g}")
    summary.add_row("RMS error per query (noisy)", _fmt(bounds["noisy_rms_per_query"]), "√(σ²): before the projection")
    summary.add_row("RMS error per query (bound)", _fmt(bounds["projected_rms_per_query"]),
                    "√(σ·g(K)/m)" + (" + α/2" if release.alpha is not None else "") + ", g bounded by R√(2 log N)")
    out.print(summary)
    table = Table(title="answers" + (f" (first 20 of {release.m})" if release.m > 20 else ""), title_justify="left")
    for name in ("query", "answer", "noisy"):
        table.add_column(name, justify="right")
    for row in info["queries"][:20]:
        table.add_row(row["query"], _fmt(row["answer"]), _fmt(row["noisy"]))
    out.print(table)
    out.print(f"wrote {target} and {side}", markup=False)


def main() -> None:
    """Run the command line (the console script is :func:`ldpcli.cli.entry.main`, which routes
    SIGINT and SIGTERM to :mod:`ldpcli.io.interrupts` first).

    SIGTERM (and SIGINT) become an exception in the main thread, so every ``with`` block unwinds:
    temporary outputs are removed and the input is untouched (by default SIGTERM would kill the
    process on the spot and leave the temporary file behind).
    """
    interrupts.install()
    app()


if __name__ == "__main__":
    main()
