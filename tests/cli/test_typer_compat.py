"""What ldp needs from Typer's internals (ldpcli/cli/_typer_compat.py): a Typer upgrade that drops
any of it fails here, by name, instead of changing ldp's help or exit codes silently."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import typer
from helpers import ldp
from typer.core import TyperArgument

PACKAGE = Path(__file__).resolve().parents[2] / "ldpcli"
# Typer 0.29 vendors click as typer._click; older Typer (0.20, which Flower pins) depends on the click package.
VENDORS_CLICK = tuple(int(part) for part in typer.__version__.split(".")[:2]) >= (0, 29)


def test_typer_still_has_the_vendored_click_exceptions() -> None:
    where = "typer._click" if VENDORS_CLICK else "click"
    try:
        exceptions = importlib.import_module(f"{where}.exceptions")
        ClickException, NoArgsIsHelpError, UsageError = (
            exceptions.ClickException, exceptions.NoArgsIsHelpError, exceptions.UsageError)
    except (ImportError, AttributeError) as exc:
        raise AssertionError(f"typer {typer.__version__}: {where}.exceptions lacks what ldp uses ({exc}); update "
                             "ldpcli/cli/_typer_compat.py") from exc
    from ldpcli.cli import _typer_compat
    assert _typer_compat.ClickUsageError is UsageError and _typer_compat.NoArgsIsHelpError is NoArgsIsHelpError, (
        f"typer {typer.__version__}: the compat layer took its exceptions from elsewhere than {where}")
    assert issubclass(NoArgsIsHelpError, UsageError) and issubclass(UsageError, ClickException), (
        f"typer {typer.__version__}: NoArgsIsHelpError < UsageError < ClickException no longer holds; update "
        "ldpcli/cli/_typer_compat.py")
    assert UsageError.exit_code == 2, f"typer {typer.__version__}: a usage error no longer exits with 2"


@pytest.mark.skipif(not VENDORS_CLICK, reason="Typer before 0.29 shows an argument by its metavar without the hooks "
                    "(test_the_hooks_still_shape_the_help checks the help either way)")
def test_typer_still_has_the_argument_display_hooks() -> None:
    for name in ("_usage_display_name", "display_type_rich", "display_name_raw"):
        assert hasattr(TyperArgument, name), (
            f"typer {typer.__version__}: TyperArgument.{name} is gone; ldpcli/cli/_typer_compat.py._Argument "
            "overrides it to show arguments by their metavar")


def test_the_hooks_still_shape_the_help() -> None:
    shown = ldp("privatize", "--help").stdout
    assert "Usage: ldp privatize [OPTIONS] INPUTS... " in shown and "{INPUTS...}" not in shown  # _Argument: the metavar
    assert "<list[str]>" not in shown and "<bool>" not in shown  # no types for arguments and flags
    alone = ldp()
    assert alone.exit_code == 2 and "Usage: ldp [OPTIONS] COMMAND [ARGS]..." in alone.stdout


def test_only_the_compat_module_uses_typer_internals() -> None:
    users = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
             if "typer._click" in path.read_text(encoding="utf-8")]
    assert users == ["cli/_typer_compat.py"]
