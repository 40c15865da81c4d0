"""Issue 25 item 3: errors speak Python in the library and flags in the CLI.

A library error names the Python parameter (``norm_bound``), the command line shows the same message
with its flag (``--norm-bound``), and no module outside ``ldpcli/cli/`` writes a ``--flag`` into an
error or a warning.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import ldp

import ldpcli
from ldpcli.cli.app import load_command
from ldpcli.cli.flags import flag_of
from ldpcli.errors import UsageError, python_text, render_text
from ldpcli.mechanisms import PrivUnit2
from ldpcli.release._safety import check_epsilon

PACKAGE = Path(ldpcli.__file__).parent
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")


def _flag_texts_outside_cli() -> list[str]:
    """``file:line`` of every exception or warning built outside ``ldpcli/cli/`` from a string
    literal that holds a ``--flag``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if not (name.endswith(("Error", "Warning", "Exception")) or name == "warn"):
                continue
            if any(isinstance(s, ast.Constant) and isinstance(s.value, str) and FLAG.search(s.value)
                   for s in ast.walk(node)):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def test_no_flag_text_in_messages_raised_outside_the_cli() -> None:
    assert _flag_texts_outside_cli() == []


HISTORY = re.compile(r"\bissue \d+", re.IGNORECASE)


def _docstrings_with_cli_words() -> list[str]:
    """``file:line`` of every docstring outside ``ldpcli/cli/`` that names a ``--flag`` or an issue number
    (issue 38 item 4: a library docstring names the library's parameters and carries no version history).
    ``errors.py`` is the exception: its docstring describes how messages are rendered with flags."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "cli" or relative == Path("errors.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False) or ""
                if FLAG.search(doc) or HISTORY.search(doc):
                    found.append(f"{relative}:{getattr(node, 'lineno', 1)}")
    return found


def test_library_docstrings_name_parameters_not_flags() -> None:
    assert _docstrings_with_cli_words() == []


def test_the_scan_finds_a_flag_in_a_raised_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "planted.py").write_text('raise UsageError("--eps must be > 0")\n', encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.PACKAGE", tmp_path)
    assert _flag_texts_outside_cli() == ["planted.py:1"]


def test_a_library_error_names_the_python_parameter() -> None:
    with pytest.raises(UsageError) as info:
        PrivUnit2.calibrate(4, 1.0, norm_bound=-1.0)
    message = str(info.value)
    assert message.startswith("norm_bound: ") and "--" not in message
    assert info.value.parameters == ("norm_bound",)
    with pytest.raises(UsageError, match=r"^epsilon = 1e\+06 is above .* pass force=True to use it anyway$"):
        check_epsilon(1e6)


def test_the_array_api_names_its_own_keywords() -> None:
    with pytest.raises(ValueError, match=r"^eps: epsilon must be a finite number > 0") as info:
        ldpcli.privatize(np.zeros((3, 4)), eps=-1.0)
    assert "--" not in str(info.value)


def test_the_cli_renders_the_same_error_with_its_flags(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        PrivUnit2.calibrate(4, 1.0, norm_bound=-1.0)
    res = ldp("params", "--d", 4, "--eps", 1, "--norm-bound", -1, "-m", "privunit2")
    assert res.exit_code == 2
    assert res.stderr == f"ldp: error: {str(info.value).replace('norm_bound', '--norm-bound', 1)}\n"
    data = tmp_path / "in.csv"
    data.write_text("a,b\n0.1,0.2\n", encoding="utf-8")
    res = ldp("privatize", data, "--eps", 1e6, "-o", tmp_path / "out.parquet")
    assert res.exit_code == 2 and "ldp: error: --eps = 1e+06 is above" in res.stderr
    assert res.stderr.endswith("pass --force to use it anyway\n")
    res = ldp("params", "--d", 4, "--eps", 1e6, "-m", "privunit2")  # a warning here, through the same mapping
    assert res.exit_code == 0 and "ldp: warning: --eps = 1e+06 is above" in res.stderr


def test_flags_come_from_the_running_command() -> None:
    params = load_command("estimate-mean").params  # the command itself (the group lists a lazy stand-in)
    assert flag_of("verify=False", params) == "--no-verify"
    assert flag_of("verify", params) == "--verify"
    privatize = load_command("privatize").params
    assert flag_of("epsilon", privatize) == "--eps"  # the alias: the library's epsilon is --eps
    assert flag_of("norm_bound", privatize) == "--norm-bound"
    assert flag_of("overwrite=True", privatize) == "--overwrite"
    assert flag_of("risk_k", privatize) == "--risk-k"
    assert flag_of("part_rows", ()) == "--part-rows"  # a parameter the command lacks: written as its flag


def test_only_marked_parameters_are_rewritten() -> None:
    text = "in.csv: `columns` pattern 'a`b' matches no column; see `ldp budget` and pass `overwrite=True`"
    assert python_text(text) == "in.csv: columns pattern 'a`b' matches no column; see `ldp budget` and pass overwrite=True"
    assert render_text(text, lambda p: "<" + p + ">") == (
        "in.csv: <columns> pattern 'a`b' matches no column; see `ldp budget` and pass <overwrite=True>"
    )


def test_recorded_warnings_are_plain_python_words(tmp_path: Path) -> None:
    """The warnings a release records (sidecar, --json summary) are documents for any reader: Python names,
    no backtick markup and no flags; the same warnings on the terminal name the command's flags."""
    import json

    data = tmp_path / "in.csv"
    data.write_text("id,a,b\n1,0.1,0.2\n2,0.3,0.1\n", encoding="utf-8")
    out = tmp_path / "out.parquet"
    res = ldp("privatize", data, "--eps", 5e4, "--force", "--columns", "a,b", "--keep", "id", "-o", out, "--json")
    assert res.exit_code == 0, res.stderr
    assert "ldp: warning: --eps = 50000 is above" in res.stderr and "(--keep)" in res.stderr
    recorded = json.loads(Path(f"{out}.ldp.json").read_text(encoding="utf-8"))["release"]["warnings"]
    summary = json.loads(res.stdout)["warnings"]
    for texts in (recorded, summary):
        assert any(text.startswith("epsilon = 50000 is above") for text in texts), texts
        assert any("released unprivatized (keep)" in text for text in texts), texts
        assert not any("`" in text or "--" in text for text in texts), texts


def test_quoted_text_keeps_its_backticks_in_both_renderings() -> None:
    """Another library's words inside a message (pyarrow: "`fsspec` is required …") are not parameters
    of ldp: they read the same in Python and on the command line, never as a --flag."""
    from ldpcli.errors import quoted
    from ldpcli.io._messages import _reason

    foreign = ImportError("`fsspec` is required to handle `hf://` URIs.")
    exc = UsageError(f"hf://x.parquet: {_reason(foreign)}; pass `force=True` to go on")
    assert str(exc) == "hf://x.parquet: `fsspec` is required to handle `hf://` URIs.; pass force=True to go on"
    assert exc.render(lambda parameter: "--" + parameter.split("=")[0]) == (
        "hf://x.parquet: `fsspec` is required to handle `hf://` URIs.; pass --force to go on")
    assert exc.parameters == ("force",)
    assert python_text(quoted("`a` and `b`")) == "`a` and `b`"


def test_a_missing_fsspec_is_named_as_pyarrow_names_it(tmp_path: Path) -> None:
    """pyarrow's own words for a missing fsspec ("`fsspec` is required …") reach the terminal unchanged,
    not as a flag of ldp (fsspec and huggingface_hub blocked in the subprocess, as on a fresh install)."""
    import os
    import subprocess
    import sys

    blocked = tmp_path / "blocked"
    blocked.mkdir()
    for name in ("fsspec", "huggingface_hub"):
        (blocked / f"{name}.py").write_text('raise ImportError("blocked for this test")\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocked), *sys.path])}
    res = subprocess.run([sys.executable, "-m", "ldpcli", "privatize", "hf://datasets/user/x.parquet", "--eps", "1"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("ldp: error: hf://datasets/user/x.parquet: ")
    assert "`fsspec` is required" in res.stderr and "--fsspec" not in res.stderr  # pyarrow's words, as they were
