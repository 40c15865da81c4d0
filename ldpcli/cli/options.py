"""The options several commands share, and one flag per option a registered mechanism declares.

Each shared option is declared once here (``--eps``, ``--norm-bound``, ``--ledger``, …) with the
small parsers of option text (:func:`public_bound`, :func:`split`, :func:`floats`, :func:`byte_size`).
:class:`WithMechanismOptions` gives a command the mechanisms' own flags (``--k``, ``--alpha``, …)
from the registry when the app runs. :func:`command_app` is the Typer app of one command module.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, Callable, Optional

import typer

from ldpcli.cli._typer_compat import Group
from ldpcli.errors import UsageError
from ldpcli.mechanisms import OptionSpec, get_mechanism, mechanism_names
from ldpcli.risk._diffuse import DEFAULT_THRESHOLD


def command_app(help: str | None = None) -> typer.Typer:
    """The Typer app of one command module (``ldp`` loads it when the command runs): markdown help,
    no completion flags of its own (the root has them); with several commands, a group with ``help``."""
    return typer.Typer(cls=Group, no_args_is_help=True, add_completion=False, rich_markup_mode="markdown", help=help)


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


class WithMechanismOptions:
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


# Options shared by several commands (one definition each). The help of --mechanism and
# --calibration is filled in from the registry when the app runs (WithMechanismOptions).
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
RISK_THRESHOLD_OPTION = typer.Option(
    DEFAULT_THRESHOLD, "--risk-threshold", metavar="P", help="Reconstruction verdicts: a bound at most P reads "
    "'protected', one above P 'at risk', one that reaches 1 'no guarantee'. A probability in (0, 1)."
)
SCHEDULER_OPTION = typer.Option(
    None, "--scheduler", metavar="ADDRESS", help="With --engine dask: threads (default), synchronous or processes on "
    "this machine, or the address of a running Dask scheduler (tcp://host:8786), whose workers must see the same "
    "paths and have ldp installed."
)
FORCE_OPTION = typer.Option(
    False, "--force", help="Allow ε outside [0.01, 10⁴], where ldp's guarantees are not computed and tested."
)
SECURE_OPTION = typer.Option(
    False, "--secure", help="Render the output securely (docs/floating-point.md): the hypercube and scalar "
    "mechanisms release one of their finitely many public values (ε with δ = 0); privunit2 and duchi-l2 "
    "compute in extended precision and round each coordinate without bias to a public power-of-two grid, "
    "separated renders its direction so, and gaussian-sign computes its sign in extended precision: an (ε, δ) guarantee with a computed δ that "
    "the ledger counts. Other mechanisms are refused."
)
SECURE_DELTA_OPTION = typer.Option(
    None, "--secure-delta", metavar="DELTA", show_default=False, help="With --secure: the δ the grid is "
    "chosen for, in (0, 1) (default 1e-10): the finest power-of-two grid whose δ is at most DELTA."
)
REPORT_BITS_OPTION = typer.Option(
    None, "--report-bits", metavar="64|128", show_default=False, help="With --compress-reports: the bits of each "
    "row's seed, 64 (the default: 8 bytes a row) or 128 (16 bytes)."
)
WORKLOAD_OPTION = typer.Option(
    ..., "--workload", "-w", show_default=False, help="The public workload: one row per item of the universe, a key "
    "column naming the item and one numeric column per query with its value on that item, in [0, 1] or [−1, 1]."
)


def public_bound(norm_bound: Optional[float], r_max: Optional[float]) -> float:
    """The public bound from --norm-bound or its alias --r-max (default 1)."""
    if norm_bound is not None and r_max is not None and norm_bound != r_max:
        raise UsageError(f"--norm-bound {norm_bound} and --r-max {r_max} disagree; give one of them")
    if r_max is not None:
        return r_max
    return 1.0 if norm_bound is None else norm_bound


def byte_size(text: str, option: str) -> int:
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


def split(value: Optional[str]) -> list[str]:
    """A comma-separated list of names (empty when not given)."""
    return [] if not value else [part.strip() for part in value.split(",") if part.strip()]


def floats(value: Optional[str], option: str) -> list[float] | None:
    """A comma-separated list of numbers (None when not given)."""
    if value is None:
        return None
    try:
        return [float(part) for part in split(value)] or None
    except ValueError:
        raise UsageError(f"{option} takes comma-separated numbers, e.g. {option} 0.1,0.5; got {value!r}") from None


def report_bits(compress: bool, bits: Optional[int]) -> int | None:
    """The bits of each seed report: ``bits`` (default 64) with --compress-reports, None without; UsageError
    for --report-bits alone."""
    if not compress:
        if bits is not None:
            raise UsageError("--report-bits sets the length of --compress-reports' seeds: add --compress-reports")
        return None
    return 64 if bits is None else bits
