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
import signal
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import typer
from rich.console import Console
from rich.table import Table
from typer._click.exceptions import ClickException, NoArgsIsHelpError
from typer._click.exceptions import UsageError as ClickUsageError
from typer.core import TyperArgument, TyperCommand, TyperGroup

from ldpcli import __version__
from ldpcli.errors import Interrupted, LdpError, UsageError
from ldpcli.mechanisms import MechanismSpec, OptionSpec, get_mechanism, mechanism_names
from ldpcli.mechanisms.base import check_count
from ldpcli.safety import check_epsilon, clip_warning, near_exact_warning

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
        raise _fail(exc) from None
    except KeyboardInterrupt as exc:
        io_module = sys.modules.get("ldpcli.io")  # loaded if anything was being written
        if io_module is not None:
            io_module.remove_temporaries()
        err.print("ldp: interrupted; no output was left behind", markup=False)
        raise typer.Exit(exc.exit_code if isinstance(exc, Interrupted) else 130) from None


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
        state["total"] = total

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
    eps: float = EPS_OPTION,
    mechanism: Optional[str] = typer.Option(
        None, "--mechanism", "-m", help=" Without it: a comparison of all vector mechanisms."
    ),
    calibration: Optional[str] = CALIBRATION_OPTION,
    norm_bound: Optional[float] = NORM_OPTION,
    r_max: Optional[float] = R_MAX_OPTION,
    n: Optional[int] = typer.Option(None, "--n", help="Number of rows, to report the expected error of their mean."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (an object, or a list for the comparison)."),
    options: dict[str, Any] = {},  # noqa: B006 - filled by _WithMechanismOptions, never mutated
) -> None:
    """Show a mechanism's calibrated parameters, its exact ε and its expected error, for (d, ε).

    Without --mechanism (and without --calibration, which implies privunit2), compare every vector mechanism at (d, ε) by its worst-case error over the
    ℓ2 ball of radius L, as a ratio to optimal PrivUnit2 (no unbiased ε-LDP mechanism does better).
    """
    with _errors():
        if n is not None:
            check_count(n, "--n")
        bound = _bound(norm_bound, r_max)
        _warn(check_epsilon(eps, force=True))  # params touches no data: out of range is a warning here
        if mechanism is None and calibration is not None:
            mechanism = "privunit2"  # a calibration names the default mechanism's, not a comparison
        if mechanism is None:
            if set(options) - {"delta"}:
                raise UsageError("--k, --alpha, --nu and --eps-split need --mechanism")
            from ldpcli.compare import compare_mechanisms, recommendation

            rows = compare_mechanisms(d, eps, norm_bound=bound, delta=options.get("delta"))
            if n is not None:
                for row in rows:
                    if "expected_error_max" in row:
                        row["n"] = n
                        row["expected_error_mean"] = row["expected_error_max"] / n
            _print_comparison(rows, recommendation(rows), as_json)
            return
        mech = MechanismSpec(mechanism, eps, calibration, bound, options).calibrate(d)
        info = mech.describe()
        _warn(near_exact_warning(mech))
        if n is not None:
            info["n"] = n
            info["expected_error_mean"] = mech.expected_error_mean(n)
    if as_json:
        out.print(json.dumps(info, allow_nan=False), markup=False)
        return
    _print_parameters(mech, info, n)


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


FORCE_OPTION = typer.Option(
    False, "--force", help="Allow ε outside [0.01, 10⁴], where ldp's guarantees are not computed and tested."
)


def _warn(text: str | None) -> None:
    """A warning on stderr; never hidden by --quiet (which is for progress and notes)."""
    if text:
        err.print(f"ldp: warning: {text}", markup=False)


def _note(text: str, quiet: bool) -> None:
    """A note on stderr, hidden by --quiet."""
    if not quiet:
        err.print(f"ldp: note: {text}", markup=False)


@app.command("privatize", cls=_Command)
@_WithMechanismOptions
def privatize(
    input: Path = typer.Argument(
        ..., help="Input .parquet or .csv file; each row is one vector.", show_default=False, metavar="INPUT"
    ),
    eps: float = EPS_OPTION,
    mechanism: str = MECHANISM_OPTION,
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Output file (.parquet or .csv). Default: `<input stem>.privatized.<ext>` beside the input."
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
    threads: Optional[int] = typer.Option(
        None, "--threads", help="Threads privatizing batches (default: the available cores). The output for a "
        "--seed does not depend on it."
    ),
    memory: str = typer.Option(
        "256MB", "--memory", help="Memory budget for the batches in flight (e.g. 256MB, 2GB); sets the batch size."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary of the run instead of a line."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar, no notes and no summary line; warnings "
                               "are still shown."),
    options: dict[str, Any] = {},  # noqa: B006 - filled by _WithMechanismOptions, never mutated
) -> None:
    """Privatize every row of INPUT and write the privatized file plus its sidecar (OUTPUT.ldp.json).

    The vectors are a list column (the only one, or --column) or one numeric column per
    coordinate (--columns, or all numeric columns). Rows with ‖x‖ > L are moved onto the bound, so
    the release and every estimate from it are of the **clipped** rows: choose a public L that the
    rows respect (a warning says when more than 1% were clipped; --fail-on-clip refuses). Inside
    the ball each row is rounded without bias to the sphere, then randomized. The output is
    unbiased for every row: averaging privatized rows estimates the mean of the (clipped) raw ones.
    """
    with _errors():
        from ldpcli.pipeline import privatize_file

        bound = _bound(norm_bound, r_max)
        with _progress("privatizing", quiet) as (on_start, on_rows):
            result = privatize_file(
                input, output, epsilon=eps, mechanism=mechanism, calibration=calibration, norm_bound=bound,
                options=options, threads=threads, memory=_bytes(memory, "--memory"),
                column=column, columns=_split(columns) or None, keep=_split(keep), keep_unsafe=keep_unsafe,
                seed=seed, overwrite=overwrite, force=force, fail_on_clip=fail_on_clip, skip_invalid=skip_invalid,
                dtype=dtype, on_start=on_start, on_rows=on_rows,
            )
    if column is None and not columns:  # the layout was detected: say which columns became the vector
        names = result.layout.columns
        shown = ", ".join(repr(name) for name in names[:6]) + (", …" if len(names) > 6 else "")
        plural = "s" if len(names) > 1 else ""
        what = f"list column {shown}" if result.layout.kind == "list" else f"{len(names)} numeric column{plural} {shown}"
        _note(f"vectors from {what} (d = {result.d}); pass --column/--columns to choose", quiet)
    for text in result.warnings:
        _warn(text)
    if result.n_skipped:
        first = ", ".join(str(row) for row in result.skipped_rows)
        more = ", …" if result.n_skipped > len(result.skipped_rows) else ""
        _warn(f"--skip-invalid: left out {result.n_skipped} invalid rows (rows {first}{more}, counting from 1); "
              "this count is shown here only, never stored")
    clipped = clip_warning(result.n_clipped, result.n, result.mechanism)
    if clipped is not None:
        text, loud = clipped
        if loud:
            _warn(text)
        else:
            _note(text, quiet)
    if result.reproducible:
        _warn("seeded run: reproducible by anyone who knows the seed; do not release it")
    if as_json:
        out.print(json.dumps(result.summary(), allow_nan=False), markup=False)
    elif not quiet:
        out.print(
            f"wrote {result.output} ({result.n} rows, d = {result.d}, {result.mechanism.name}, "
            f"ε = {_fmt(result.mechanism.epsilon)}) and {result.sidecar}",
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
    verify: bool = typer.Option(
        True, "--verify/--no-verify", help="Check each file's row count and SHA-256 against its sidecar (default). "
        "--no-verify accepts a file filtered or re-encoded after privatization; the estimate is then marked unverified."
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="Print nothing but the result (no progress bar, notes or 'wrote' line); with -o, "
        "print nothing."
    ),
) -> None:
    """Estimate the mean of the raw rows from privatized rows alone, with error bars.

    Reports n, d, the mean, its guaranteed expected squared ℓ2 error (expected_error_max / n from
    the mechanism), per-coordinate standard errors from the data, and confidence intervals.
    Several files (e.g. `part-*.parquet`) are combined; their sidecars must agree. --where and
    --group-by select rows by kept columns (privatize with --keep).
    """
    with _errors():
        from ldpcli.estimate import estimate_group_means, estimate_mean, save_group_means, save_mean

        if not verify:
            _note(
                "--no-verify: the files are not checked against their sidecars' row counts and SHA-256; the "
                "estimate is only as sound as the claim that they hold privatized rows of that release", quiet,
            )
        with _progress("reading", quiet) as (_, on_rows):
            if group_by is not None:
                groups = estimate_group_means(
                    privatized, group_by, sidecar=sidecar, confidence=confidence, where=where or (), verify=verify,
                    on_rows=on_rows,
                )
            else:
                est = estimate_mean(
                    privatized, sidecar=sidecar, confidence=confidence, where=where or (), verify=verify,
                    on_rows=on_rows,
                )
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


def _print_mean(est: Any) -> None:
    """The human tables of one mean estimate, and a one-line reading of its error against its size."""
    summary = Table(title="Mean estimate" + ("" if est.verified else " (UNVERIFIED: read with --no-verify)"),
                    show_header=False, title_justify="left")
    summary.add_column("quantity", style="bold")
    summary.add_column("value", justify="right")
    summary.add_column("meaning")
    summary.add_row("rows n", str(est.n), "privatized rows averaged")
    summary.add_row("dimension d", str(est.d), "")
    summary.add_row("mechanism", f"{est.mechanism}, ε = {_fmt(est.epsilon)}", "from the sidecar")
    if est.norm_bound is not None:
        summary.add_row("norm bound L", _fmt(est.norm_bound), "rows were clipped to it: this is the mean of the clipped rows")
    summary.add_row("‖mean‖", _fmt(est.mean_norm), "ℓ2 norm of the estimate (noise inflates it slightly)")
    summary.add_row("expected squared error", _fmt(est.expected_error), "E‖mean − true mean‖², guaranteed (max error / n)")
    summary.add_row("RMS ℓ2 error", _fmt(est.rms_error), "its square root")
    out.print(summary)
    shown = min(est.d, 10)
    coords = Table(title=f"coordinates (first {shown} of {est.d})" if shown < est.d else "coordinates", title_justify="left")
    for name in ("j", "mean", "std error", f"{est.confidence:.0%} interval"):
        coords.add_column(name, justify="right")
    for j in range(shown):
        if est.std_error is None or est.lower is None or est.upper is None:
            coords.add_row(str(j), _fmt(float(est.mean[j])), "—", "—")
        else:
            coords.add_row(
                str(j), _fmt(float(est.mean[j])), _fmt(float(est.std_error[j])),
                f"[{_fmt(float(est.lower[j]))}, {_fmt(float(est.upper[j]))}]",
            )
    out.print(coords)
    if shown < est.d:
        out.print("Use --json or -o FILE for every coordinate.", markup=False)
    out.print(_reading(est), markup=False)


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
    out.print("Use --json or -o FILE.json for every coordinate and the intervals.", markup=False)


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
        from ldpcli.audit import MIN_TRIALS
        from ldpcli.audit import audit as run_audit

        check_count(trials, "--trials", minimum=MIN_TRIALS)
        if lower_bound_trials is not None:
            check_count(lower_bound_trials, "--lower-bound-trials", minimum=MIN_TRIALS)
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
        from ldpcli.sweep import save_sweep, to_json
        from ldpcli.sweep import sweep as run_sweep

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
        from ldpcli.plot import X_COLUMNS, plot_sweep, require_matplotlib, select_rows, text_chart
        from ldpcli.sweep import read_sweep

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


def _raise_interrupted(signum: int, frame: object) -> None:
    raise Interrupted(signum)


def main() -> None:
    """Console-script entry point.

    SIGTERM (and SIGINT) become an exception in the main thread, so every ``with`` block unwinds:
    temporary outputs are removed and the input is untouched (by default SIGTERM would kill the
    process on the spot and leave the temporary file behind).
    """
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _raise_interrupted)
    app()


if __name__ == "__main__":
    main()
