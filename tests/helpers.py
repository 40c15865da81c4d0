"""Helpers shared by the test files: ``from helpers import …`` (tests/conftest.py puts tests/ on sys.path).

- ``bonferroni_z``: the one critical z of the Monte Carlo mean tests;
- ``ldp``: the command line in process, through one typer ``CliRunner``; ``ldp_process``: in a process
  of its own, as a user runs it (``LDP``, the console script; or ``python -m ldpcli``); ``ldp_peak_memory``:
  the same, with that process's peak memory; ``ldp_without``: in a subprocess where an optional package
  cannot be imported;
- the (d, ε) grids the mechanism and audit tests sweep;
- ``unit_rows``, ``write_list`` and ``read_list``: rows on the sphere, and Parquet files that hold
  them as one fixed-size list column;
- ``python_calls``: the work a call does, counted, for tests of how it grows (never a wall-clock time);
- ``files_under``: what a folder holds, caches left out (to show a run left nothing in the repository).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from scipy import stats
from typer.testing import CliRunner, Result

from ldpcli.cli.app import app
from ldpcli.release._ledger_log import compact_ledger

# --- work ----------------------------------------------------------------------------------------


def python_calls(fn: Callable[[], object]) -> int:
    """How many Python and C functions ``fn()`` calls (counted with ``sys.setprofile``).

    A deterministic measure of work: tests of speed compare it across sizes (work that must not
    grow with d, or grow at most linearly), since tests never assert wall-clock times.
    """
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(previous)
    return count


# --- statistics ------------------------------------------------------------------------------------


def bonferroni_z(alpha_family: float, tests: int, two_sided: bool = True) -> float:
    """The per-test |z| (or z, one-sided) threshold so that all ``tests`` tests pass together with
    probability at least 1 − ``alpha_family`` (Bonferroni): the upper α/(2·tests) normal quantile
    (α/tests one-sided), computed from the tail so that it keeps its digits for tiny α/tests."""
    tail = alpha_family / (2 * tests) if two_sided else alpha_family / tests
    return float(stats.norm.isf(tail))


# --- the command line ------------------------------------------------------------------------------

RUNNER = CliRunner()


def ldp(*args: Any, **invoke_options: Any) -> Result:
    """``ldp ARGS…`` in process: every argument through ``str`` (paths and numbers welcome); stdout and
    stderr apart, as typer's ``CliRunner`` keeps them. ``invoke_options`` go to ``CliRunner.invoke``
    (``terminal_width=…``, ``input=…``)."""
    return RUNNER.invoke(app, [str(a) for a in args], **invoke_options)


#: This checkout: first on every subprocess's path, so a subprocess runs the ldpcli under test.
ROOT = Path(__file__).resolve().parents[1]
#: The ``ldp`` console script beside this interpreter: the command a user types.
LDP = str(Path(sys.executable).with_name("ldp"))
#: ``python -m ldpcli`` (ldpcli/__main__.py): the same entry, started through the interpreter.
LDP_MODULE = (sys.executable, "-m", "ldpcli")


@functools.cache
def tool(name: str) -> ModuleType:
    """``tools/NAME.py`` (a script that writes part of the site), imported from its path: tools/ is not a package."""
    spec = importlib.util.spec_from_file_location(f"ldp_tools_{name}", ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ldp_process(*args: Any, env: Mapping[str, str] | None = None, timeout: float | None = 120,
                module: bool = False, cwd: Path | None = None, input: str | bytes | None = None,
                text: bool = True) -> subprocess.CompletedProcess[Any]:
    """``ldp ARGS…`` in a process of its own, as a user runs it: what a test needs where the behaviour is at
    the process's edges (exit codes, signals, kills, pipes, the files left behind), which ``ldp`` in process
    cannot show. The console script ``LDP`` (``module=True``: ``python -m ldpcli``), every argument through
    ``str``; stdout and stderr captured (``text=False``: as bytes); this test's environment (its own ledger,
    conftest's scratch home) plus ``env``, with this checkout first on ``PYTHONPATH``; ``input`` on stdin;
    never checked (the test reads ``returncode``). One helper, so every test starts ldp the same way."""
    command, environment = _ldp_command(args, env, module)
    return subprocess.run(command, capture_output=True, text=text, timeout=timeout, cwd=cwd, input=input,
                          env=environment, check=False)


def ldp_peak_memory(*args: Any, env: Mapping[str, str] | None = None,
                    timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], int]:
    """:func:`ldp_process` (the same command and environment; stdout and stderr as text), and the peak
    resident memory of that process alone, in bytes: its own usage, from ``os.wait4``, where
    ``getrusage(RUSAGE_CHILDREN)`` would report the largest child this test process ever had. Killed past
    ``timeout`` seconds (then its return code is -9)."""
    command, environment = _ldp_command(args, env, module=False)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, env=environment)
        timer = threading.Timer(timeout, process.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        run = subprocess.CompletedProcess(command, process.returncode, out.read().decode(), err.read().decode())
    return run, usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)


def _ldp_command(args: tuple[Any, ...], env: Mapping[str, str] | None, module: bool) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of :func:`ldp_process`."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    command = [*(LDP_MODULE if module else (LDP,)), *map(str, args)]
    return command, {**os.environ, "PYTHONPATH": path, **(env or {})}


def ldp_without(package: str | tuple[str, ...], *args: Any, ledger: Path) -> subprocess.CompletedProcess[str]:
    """``ldp ARGS…`` in a fresh interpreter where ``import package`` raises ImportError (``sys.modules[package]
    = None``; a tuple: each of them), with this checkout first on the path and ``ledger`` as the owner's ledger."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LDP_LEDGER": str(ledger)}
    hidden = "".join(f"sys.modules[{name!r}] = None; " for name in ((package,) if isinstance(package, str) else package))
    code = (f"import sys; {hidden}from ldpcli.cli.app import main; "
            f"sys.argv = ['ldp', *{[str(a) for a in args]!r}]; main()")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


# --- (d, ε) grids ----------------------------------------------------------------------------------

#: The grid of "finite, exact and monotone over the whole range" for PrivUnitG, duchi-l2 and the
#: Laplace and Gaussian baselines, from one coordinate to 10^7 and from ε = 0.01 to 10^4.
EPS_GRID = [0.01, 0.1, 1.0, 4.0, 8.0, 100.0, 10_000.0]
D_GRID = [1, 2, 3, 10, 1000, 10**7]

#: PrivUnit2's denser grid over the same range.
PRIVUNIT2_EPS_GRID = [0.01, 0.1, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 50.0, 100.0, 1000.0, 10_000.0]
PRIVUNIT2_D_GRID = [1, 2, 3, 4, 5, 10, 64, 341, 342, 500, 1000, 10**5, 10**7]

#: The grid over which every second route to ε must agree with ``epsilon_exact``.
AUDIT_EPS_GRID = [0.1, 2.0, 8.0, 100.0]
AUDIT_D_GRID = [1, 2, 9, 500, 10**5]


# --- rows and files --------------------------------------------------------------------------------


def unit_rows(n: int, d: int, seed: int = 0, radius: float = 1.0) -> np.ndarray:
    """n seeded rows of norm ``radius``, uniform in direction."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    return radius * x / np.linalg.norm(x, axis=1, keepdims=True)


def write_headerless(path: Path, n: int, d: int, *, seed: int, scale: float) -> np.ndarray:
    """A CSV file of ``n`` rows of ``d`` uniform(-scale, scale) values and no header row (``--no-header``); its rows."""
    x = np.random.default_rng(seed).uniform(-scale, scale, (n, d))
    np.savetxt(path, x, delimiter=",", fmt="%.17g")
    return x


def write_list(path: Path | pa.NativeFile, rows: np.ndarray, *, column: str = "vec", ids: bool = False,
               row_group_size: int | None = None, **columns: Any) -> Path | pa.NativeFile:
    """A Parquet file (or stream) with the rows as one fixed-size list column, after an ``id`` column
    0..n−1 (if ``ids``) and the given ``columns``, in that order."""
    leading = {"id": pa.array(np.arange(len(rows)))} if ids else {}
    flat = pa.array(np.ascontiguousarray(rows).reshape(-1))
    table = pa.table({**leading, **columns, column: pa.FixedSizeListArray.from_arrays(flat, rows.shape[1])})
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def read_list(path: Path, column: str = "vec") -> np.ndarray:
    """The rows of a Parquet file's list column as an (n, d) array of its own (writable)."""
    values = pq.read_table(path).column(column).combine_chunks()
    return np.array(values.flatten()).reshape(len(values), -1)


# --- documents -------------------------------------------------------------------------------------


def keys_anywhere(value: Any) -> Iterator[str]:
    """Every key of a JSON document, at any depth (to show a field is absent everywhere)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key
            yield from keys_anywhere(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from keys_anywhere(inner)


#: What a test run may leave in the repository: caches, never a file of its own.
CACHES = frozenset({".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", "__pycache__"})


def files_under(folder: Path, *, depth: int = 1) -> set[str]:
    """The paths under ``folder`` (relative, ``/``-separated), ``depth`` levels down, caches left out."""
    found: set[str] = set()
    for path in folder.iterdir():
        if path.name in CACHES or path.name.startswith(".coverage"):
            continue
        found.add(path.name)
        if depth > 1 and path.is_dir():
            found |= {f"{path.name}/{name}" for name in files_under(path, depth=depth - 1)}
    return found


def files_open_for_writing(pid: int, directory: Path) -> dict[str, int]:
    """The files in ``directory`` that process ``pid`` holds open for writing, named as Linux shows them
    (``/proc/PID/fd``: a file without a name, ``O_TMPFILE``, reads ``DIR/#INODE (deleted)``), with their sizes.
    How a test sees that a run is writing its output, whether the temporary has a name or not (issue 36)."""
    found: dict[str, int] = {}
    fds = Path(f"/proc/{pid}/fd")
    try:
        entries = list(fds.iterdir())
    except OSError:  # the process is gone
        return found
    for entry in entries:
        try:
            target = os.readlink(entry)
            flags = int((fds.parent / "fdinfo" / entry.name).read_text().split("flags:")[1].split()[0], 8)
            size = entry.stat().st_size
        except (OSError, IndexError, ValueError):  # closed meanwhile
            continue
        if Path(target).parent == directory and flags & os.O_ACCMODE != os.O_RDONLY:
            found[target] = size
    return found


def ledger_document(path: Path) -> dict[str, Any]:
    """The ledger file's JSON document with its log folded in: a change is a line appended to ``<ledger>.log``,
    folded into the file when the log outgrows it (issue 36), so a test reading the entries compacts first."""
    compact_ledger(path)
    return json.loads(Path(path).read_text())  # type: ignore[no-any-return]
