"""The command line as a package: one module per command, loaded only when its command runs."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from helpers import ldp

from ldpcli.cli.app import COMMANDS, load_command

COMMANDS_DIR = Path(__file__).resolve().parents[2] / "ldpcli" / "cli" / "commands"


def test_every_command_module_is_listed_once() -> None:
    modules = {path.stem for path in COMMANDS_DIR.glob("*.py") if path.stem != "__init__"}
    assert {name.replace("-", "_") for name in COMMANDS} == modules


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_listed_summary_is_the_first_paragraph_of_the_commands_help(name: str) -> None:
    command = load_command(name)
    first = inspect.cleandoc(command.help or "").split("\n\n")[0].replace("\n", " ")
    assert COMMANDS[name] == first
    assert name in ldp(name, "--help", terminal_width=200).stdout


def test_help_imports_no_command_numpy_or_pyarrow() -> None:
    code = ("import sys; from ldpcli.cli.app import main; sys.argv = ['ldp', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "loaded = [m for m in sys.modules if m.startswith('ldpcli.cli.commands.') or m in ('numpy', 'pyarrow')]\n"
            "sys.stderr.write(repr(sorted(loaded)))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "privatize" in run.stdout
    assert run.stderr == "[]"


def test_a_command_loads_its_own_module_only() -> None:
    code = ("import sys; from ldpcli.cli.app import main; sys.argv = ['ldp', 'budget', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write(repr(sorted(m for m in sys.modules if m.startswith('ldpcli.cli.commands.'))))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stderr == "['ldpcli.cli.commands.budget']"


def test_library_errors_inside_a_loaded_command_are_one_line() -> None:
    result = ldp("risk")
    assert result.exit_code == 2
    assert result.stderr.startswith("ldp: error: give --eps") and result.stderr.count("\n") == 1


def test_command_modules_import_the_library_at_the_top() -> None:
    for path in COMMANDS_DIR.glob("*.py"):
        nested = [line for line in path.read_text(encoding="utf-8").splitlines()
                  if line.startswith((" ", "\t")) and line.lstrip().startswith(("import ", "from "))]
        assert nested == [], path.name


def test_no_cli_module_is_over_700_lines() -> None:
    for path in COMMANDS_DIR.parent.rglob("*.py"):
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 700, path


def test_no_module_of_the_package_is_over_700_lines() -> None:
    """The cap holds for the whole package (issue 37): a module past it holds more than one thing."""
    package = COMMANDS_DIR.parents[1]
    long = {str(path.relative_to(package)): n for path in package.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 700}
    assert not long, f"split these modules along their seams: {long}"


def test_the_app_stays_a_typer_app() -> None:
    from ldpcli.cli.app import app

    assert isinstance(app, typer.Typer)
