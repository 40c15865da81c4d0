"""The ``ldp`` command line: a thin Typer layer over the ``ldpcli`` library.

Results go to stdout (rich tables for people, ``--json`` for machines); messages, warnings and
progress bars go to stderr. Exit codes: 0 success, 1 bad data (or a missing optional package), 2 bad
usage, 141 when the reader closed stdout (:mod:`ldpcli.cli.pipes`). Library errors
(``ldpcli.errors``) become one line ``ldp: error: …`` without a traceback (:func:`_errors`).

Each command is a module of :mod:`ldpcli.cli.commands`, imported only when it runs (or when its
own help is asked for): ``ldp --help`` lists the commands from :data:`COMMANDS` and imports none
of them, nor numpy or pyarrow, so it starts fast.
"""

from __future__ import annotations

import functools
import importlib
import sys
from contextlib import contextmanager
from typing import Any, Iterator

import typer

from ldpcli._version import __version__
from ldpcli.cli import pipes
from ldpcli.cli._typer_compat import ClickException, ClickUsageError, Command, Group, NoArgsIsHelpError
from ldpcli.cli.flags import in_flags
from ldpcli.cli.render import err, out
from ldpcli.errors import Interrupted, LdpError
from ldpcli.io import _interrupts as interrupts

#: Every command, in the order ``ldp --help`` lists them: its name → the first paragraph of its help,
#: which that listing shows without importing the command's module, ``ldpcli.cli.commands.<name>``
#: (``-`` read as ``_``). tests/cli/test_cli_package.py checks that each is its command's own.
COMMANDS: dict[str, str] = {
    "params": "Show a mechanism's calibrated parameters, its exact ε and its expected error, for (d, ε).",
    "privatize": "Privatize every row of each INPUT (files, directories, quoted globs, or - for stdin) and write each "
    "privatized file plus its sidecar (OUTPUT.ldp.json).",
    "estimate-mean": "Estimate the mean of the raw rows from privatized rows alone, with error bars.",
    "regress": "Least-squares regression from two private copies of each row (Aliakbarpour et al. 2024, Alg. 3).",
    "train": "Train a model by locally private stochastic gradient descent: each row releases only privatized "
    "gradients.",
    "audit": "Check a mechanism's claims: its exact ε by a second, independent route; by simulation that its outputs "
    "are unbiased, that its errors are the ones it reports and that the outputs follow their exact law; and that no "
    "event seen in samples shows more privacy loss than ε (a lower bound). Exit 1 if any check fails. An honest "
    "mechanism fails with probability at most 1e-3.",
    "sweep": "Tabulate the error of the mean over a grid of mechanisms × d × ε × n, to choose ε and a mechanism.",
    "risk": "What a release costs: the chance that anyone reconstructs a person's data from their output.",
    "budget": "The privacy budget each input has spent: every release recorded in the data owner's ledger.",
    "verify": "Check who signed each release and that nothing changed since: its sidecar's signature and its bytes.",
    "plot": "Draw a sweep table: the error of the mean against ε (or d, or n), one line per mechanism, on log axes.",
    "keys": "The data owner's signing key (Ed25519, beside the ledger): sign releases so that analysts can check who "
    "wrote them (`ldp verify`, `estimate-mean --trust`). Needs `pip install 'ldp[sign]'`.",
    "queries": "Answer a public workload of queries over a finite universe: locally (encode, privatize, answer) or "
    "centrally (release). Błasiok, Bun, Nikolov, Steinke 2019.",
}


def load_command(name: str) -> Any:
    """The click command (or group) of ``ldp NAME``, from its module, each of its callbacks run in :func:`_errors`."""
    module = importlib.import_module(f"ldpcli.cli.commands.{name.replace('-', '_')}")
    command = typer.main.get_command(module.app)
    command.name = name
    _guard(command)
    return command


def _guard(command: Any) -> None:
    """Run the command's callback, and its subcommands', inside :func:`_errors`."""
    for sub in getattr(command, "commands", {}).values():
        _guard(sub)
    callback = command.callback
    if callback is None:
        return

    @functools.wraps(callback)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        with _errors():
            return callback(*args, **kwargs)

    command.callback = guarded


class _Root(Group):
    """The ``ldp`` group: its commands are loaded when resolved (listed by their :data:`COMMANDS` line until
    then); usage errors are one ``ldp: error: …`` line (exit 2), like every other error."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for name, summary in COMMANDS.items():
            self.add_command(Command(name=name, help=summary, rich_markup_mode=self.rich_markup_mode))

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name is not None:
            command = self.commands[name] = load_command(name)
        return name, command, rest

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None,  # type: ignore[override]
             standalone_mode: bool = True, **extra: Any) -> Any:
        run = functools.partial(super().main, args, prog_name, complete_var, standalone_mode=False, **extra)
        if not standalone_mode:
            return run()
        try:
            code = self._run(run)
        except NoArgsIsHelpError as exc:  # `ldp` alone: the help (rich prints it), exit 2 as a usage error
            text = exc.ctx.get_help()
            if text:
                self._run(lambda: out.print(text, markup=False))
            sys.exit(2)
        except ClickUsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            err.print(f"ldp: error: {exc.format_message()}{hint}", markup=False)
            sys.exit(2)
        except ClickException as exc:
            err.print(f"ldp: error: {exc.format_message()}", markup=False)
            sys.exit(exc.exit_code)
        sys.exit(code if isinstance(code, int) else 0)

    @staticmethod
    def _run(run: Any) -> Any:
        """``run()``, where a write to a closed stdout outside a command's callback (the help, the
        version: Typer and rich turn it into a silent exit 1) ends as :func:`ldpcli.cli.pipes.end_quietly`."""
        was_pipe = pipes.stdout_is_pipe()
        try:
            return run()
        except SystemExit as exc:
            if exc.code == 1 and (pipes.stdout_gone() or was_pipe and pipes.stdout_silenced()):
                pipes.end_quietly()
            raise
        except OSError as exc:
            if pipes.closed_stdout(exc):
                pipes.end_quietly()
            raise


app = typer.Typer(
    name="ldp",
    cls=_Root,
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
    """Turn library errors, Ctrl-C and a closed stdout into one-line messages (none for the last) and exit codes."""
    try:
        yield
    except LdpError as exc:
        raise _fail(in_flags(exc)) from None
    except KeyboardInterrupt as exc:
        raise _interrupted(exc.exit_code if isinstance(exc, Interrupted) else 130) from None
    except Exception as exc:
        if pipes.closed_stdout(exc):  # the reader of stdout is gone (`| head`): quietly, exit 141
            pipes.end_quietly()
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


def _version(value: bool) -> None:
    if value:
        out.print(f"ldp {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Privatize vector datasets under local differential privacy, and estimate from the result.

    Each row of a data file (`ldp privatize --help` lists the formats read) is one person's vector.
    `ldp privatize` replaces every row by an unbiased ε-LDP randomization and writes a sidecar JSON
    with the exact public parameters; `ldp estimate-mean` estimates the mean from the privatized rows
    alone; `ldp params` shows the parameters and the expected error before you privatize anything.
    """


def main() -> None:
    """Run the command line (the console script is :func:`ldpcli.cli.entry.main`, which routes
    SIGINT and SIGTERM to :mod:`ldpcli.io._interrupts` first).

    SIGTERM (and SIGINT) become an exception in the main thread, so every ``with`` block unwinds:
    temporary outputs are removed and the input is untouched (by default SIGTERM would kill the
    process on the spot and leave the temporary file behind).
    """
    interrupts.install()
    try:
        app()
    finally:
        pipes.flush_stdout()  # now, not in the interpreter's exit, where a closed pipe prints "Exception ignored"


if __name__ == "__main__":
    main()
