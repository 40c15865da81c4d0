"""`ldp sweep`: the error of the mean over a grid of mechanisms × d × ε × n, predicted and simulated.

:func:`sweep` returns a tidy table: one row (a dict with the keys of :data:`COLUMNS`) per
mechanism × d × ε × n, in that order. Each row holds the mechanism's exact predicted error of the
mean of n independently privatized rows, E‖mean − true mean‖²:

- ``expected_error_mean``: ``expected_error_max / n``, the guarantee (worst case over the domain);
- ``expected_error_mean_boundary``: ``expected_error / n``, for rows on the boundary of the domain
  (‖x‖ = L for the ℓ2 ball, a vertex of the box for the ℓ∞ mechanisms);
- ``ratio_to_privunit2``: ``expected_error_max`` over optimal PrivUnit2's at the same (d, ε, L),
  the yardstick of ``ldp params`` (no unbiased ε-LDP mechanism on the sphere does better).

With ``empirical=TRIALS`` it also measures that error by simulation: TRIALS times, n rows are
privatized and the squared ℓ2 distance between their mean and the mean of the inputs is recorded;
the row gets the average (``empirical_error``), its standard error and a 95% normal confidence
interval. The inputs are fixed points on the boundary of each mechanism's domain (a seeded pool of
:data:`POOL` of them, used in turn), so the average estimates ``expected_error_mean_boundary``
exactly: rows are independent and unbiased, hence E‖Σ(Zᵢ − xᵢ)‖² = Σ E‖Zᵢ − xᵢ‖² = n·E‖Z − x‖².
With ``data=FILE`` the inputs are the file's rows instead (moved onto each mechanism's domain as
``ldp privatize`` moves them; the true mean is the mean of those clipped rows), d and n are the
file's, and the average lies at most at ``expected_error_mean``.

Memory stays bounded whatever n, d and TRIALS: rows are privatized in chunks of about
:data:`CHUNK_VALUES` values, and only the running sum of Z − x per trial (TRIALS × d doubles) is
kept. Every grid point has its own generator, derived from ``seed`` and the point itself (the
mechanism, d, ε, n, L, options), so a point's result does not depend on the other points in the
sweep, their order or the number of threads. A mechanism that cannot be calibrated at a point
gets a row with an ``error`` column instead of stopping the sweep.

:func:`parse_grid` reads the grids (``0.5:16`` log-spaced, ``0.5:16:20``, ``1,2,4``);
:func:`save_sweep` and :func:`read_sweep` write (atomically) and read the table as ``.csv``,
``.parquet`` or ``.json``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np

from ldpcli.errors import DataError, LdpError, UsageError, python_text
from ldpcli.io._jsonfile import read_json
from ldpcli.mechanisms import Mechanism, MechanismSpec, PrivUnit2, get_mechanism, mechanism_names
from ldpcli.mechanisms._base import check_common, check_count
from ldpcli.planning._compare import DEFAULT_DELTA as DEFAULT_DELTA  # re-exported: the sweep table's δ is params'
from ldpcli.planning._compare import comparison_options
from ldpcli.release._randomness import digest_key, keyed_generator, root_seed
from ldpcli.release._safety import check_epsilon, clip_warning

#: Points of a range grid ``A:B`` when none is given.
DEFAULT_POINTS = 12
#: The most values one grid may hold.
MAX_POINTS = 1000
#: Confidence level of the empirical intervals.
CONFIDENCE = 0.95
_Z = 1.959963984540054  # the two-sided 95% normal quantile
#: Values (rows × d) privatized at once: 8 MiB of float64 per working copy (a key block of
#: :mod:`ldpcli.release._randomness`); larger chunks are no faster.
CHUNK_VALUES = 2**20
#: Distinct boundary inputs of one simulated grid point (row i gets input i mod POOL).
POOL = 64

#: The table's columns and their Arrow types, in order.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("mechanism", "string"),
    ("calibration", "string"),
    ("guarantee", "string"),
    ("delta", "float64"),
    ("baseline", "bool"),
    ("d", "int64"),
    ("epsilon", "float64"),
    ("epsilon_exact", "float64"),
    ("n", "int64"),
    ("norm_bound", "float64"),
    ("domain", "string"),
    ("expected_error_mean", "float64"),
    ("expected_error_mean_boundary", "float64"),
    ("ratio_to_privunit2", "float64"),
    ("inputs", "string"),
    ("trials", "int64"),
    ("empirical_error", "float64"),
    ("empirical_se", "float64"),
    ("empirical_lower", "float64"),
    ("empirical_upper", "float64"),
    ("error", "string"),
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)
#: The columns a table must have to be read back (and drawn).
REQUIRED_COLUMNS = ("mechanism", "d", "epsilon", "n", "expected_error_mean")
#: What a pure ε-LDP row and an (ε, δ) row say in ``guarantee``.
PURE, APPROXIMATE = "ε-LDP", "(ε,δ)-DP"
#: Suffixes :func:`save_sweep` and :func:`read_sweep` know.
TABLE_SUFFIXES = (".csv", ".parquet", ".pq", ".json")

OnRows = Callable[[int], None]


# --- grids -------------------------------------------------------------------------------------------


def parse_grid(
    value: str | float | Sequence[float], option: str, *, integer: bool = False, points: int = DEFAULT_POINTS
) -> tuple[Any, ...]:
    """The sorted distinct values of a grid.

    ``value``: a number, a sequence of numbers, or text: ``A:B`` (``points`` log-spaced values from A
    to B, both included), ``A:B:K`` (K of them) or a comma list ``1,2,4``. ``integer`` grids (d, n)
    round a range to integers (so ``1:10`` may hold fewer than K values) and refuse fractions in a
    list. Every value must be > 0 (≥ 1 for integers); :class:`UsageError` naming ``option`` (the caller's
    keyword: ``epsilon``, ``d``, ``n``) otherwise.
    """
    syntax = f"write A:B ({points} log-spaced values), A:B:K or a comma list such as 1,2,4"
    if isinstance(value, str):
        text = value.strip()
        if ":" in text:
            values = _range(text, option, points, syntax)
            if integer:
                values = [float(round(v)) for v in values]
        else:
            values = [_number(part, option, syntax) for part in text.split(",")]
    elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        values = [float(value)]
    elif isinstance(value, Sequence) and value and all(isinstance(v, (int, float, np.integer, np.floating))
                                                       and not isinstance(v, bool) for v in value):
        values = [float(v) for v in value]
    else:
        raise UsageError(f"`{option}`: cannot read {value!r} as a grid; {syntax}")
    for v in values:
        if not (math.isfinite(v) and v > 0):
            raise UsageError(f"`{option}`: every value must be a finite number > 0, got {v:g}")
        if integer and (not v.is_integer() or v < 1):
            raise UsageError(f"`{option}`: every value must be an integer >= 1, got {v:g}")
    distinct = sorted(set(values))
    if len(distinct) > MAX_POINTS:
        raise UsageError(f"`{option}`: {len(distinct)} values; a grid holds at most {MAX_POINTS}")
    return tuple(int(v) for v in distinct) if integer else tuple(distinct)


def _number(text: str, option: str, syntax: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise UsageError(f"`{option}`: cannot read {text.strip()!r} as a number; {syntax}") from None


def _range(text: str, option: str, points: int, syntax: str) -> list[float]:
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise UsageError(f"`{option}`: cannot read {text!r} as a grid; {syntax}")
    low, high = (_number(part, option, syntax) for part in parts[:2])
    count = points
    if len(parts) == 3:
        number = _number(parts[2], option, syntax)
        if not number.is_integer():
            raise UsageError(f"`{option}`: the K of A:B:K must be an integer, got {parts[2].strip()!r}")
        count = int(number)
    if count < 2 or count > MAX_POINTS:
        raise UsageError(f"`{option}`: a range A:B needs between 2 and {MAX_POINTS} values, got {count}")
    if not (math.isfinite(low) and math.isfinite(high) and 0 < low < high):
        raise UsageError(f"`{option}`: a range A:B needs 0 < A < B, got {text!r}")
    values = [float(v) for v in np.geomspace(low, high, count)]
    values[0], values[-1] = low, high  # the ends exactly as written
    return values


# --- the sweep ---------------------------------------------------------------------------------------


def vector_mechanisms() -> list[str]:
    """The registered mechanisms that privatize vectors, in registration order (the default sweep)."""
    return [name for name in mechanism_names() if get_mechanism(name).vector and get_mechanism(name).compared]


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _empty_row(**values: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(COLUMN_NAMES)
    row.update(values)
    return row


def sweep(
    d: str | int | Sequence[int] | None = None,
    epsilon: str | float | Sequence[float] = "0.5:16",
    n: str | int | Sequence[int] | None = None,
    *,
    mechanisms: Sequence[str] | None = None,
    norm_bound: float = 1.0,
    delta: float | None = None,
    points: int = DEFAULT_POINTS,
    empirical: int | None = None,
    data: str | os.PathLike[str] | None = None,
    column: str | None = None,
    columns: Sequence[str] | None = None,
    seed: int | None = None,
    threads: int | None = None,
    on_start: Callable[[int | None], None] | None = None,
    on_rows: OnRows | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """The sweep table: one dict per mechanism × d × ε × n (keys: :data:`COLUMN_NAMES`).

    ``d``, ``epsilon`` and ``n`` are grids (:func:`parse_grid`; ``points`` values per range).
    ``mechanisms``: default every vector mechanism (:func:`vector_mechanisms`); the Gaussian
    baseline uses ``delta`` (default :data:`DEFAULT_DELTA`) and is marked ``(ε,δ)-DP``.
    ``empirical``: TRIALS (≥ 2) simulated repetitions per grid point; ``data``: a Parquet or CSV file
    of rows to simulate with instead of boundary inputs (its d and n; ``column``/``columns`` choose
    the vectors as in ``ldp privatize``; needs ``empirical``). ``seed`` None draws OS entropy.
    ``threads`` (default: the available cores) simulate grid points in parallel; the table does not
    depend on it. ``on_start(total rows)``/``on_rows(rows)`` report the simulation's progress;
    ``on_warning(text)`` receives warnings (ε outside [0.01, 10⁴], clipped data rows; parameters marked as
    in :mod:`ldpcli.errors`), by default issued with :func:`warnings.warn`.
    """
    warn = on_warning or (lambda text: warnings.warn(python_text(text), UserWarning, stacklevel=3))
    eps_grid = parse_grid(epsilon, "epsilon", points=points)
    for eps in eps_grid:
        text = check_epsilon(eps, force=True)
        if text:
            warn(text)
    names = _check_mechanisms(mechanisms)
    check_common(1, 1.0, norm_bound)
    norm_bound = float(norm_bound)
    takes_delta = [name for name in names if "delta" in get_mechanism(name).options]
    if delta is not None:
        if not takes_delta:
            raise UsageError(f"`delta` applies to {', '.join(_delta_users()) or 'no registered mechanism'}, "
                             "which the sweep does not include")
        for name in takes_delta:
            delta = float(get_mechanism(name).options["delta"].check(delta))
    trials = None if empirical is None else check_count(empirical, "empirical", minimum=2)
    if threads is not None:
        threads = check_count(threads, "threads")
    source: _DataSource | None = None
    if data is not None:
        if d is not None or n is not None:
            raise UsageError("`data` fixes d and n (the file's dimension and rows); leave out `d` and `n`")
        if trials is None:
            raise UsageError("`data` is the input of the simulation; give `empirical` TRIALS with it")
        source = _DataSource.open(data, column, columns)
        d_grid: tuple[int, ...] = (source.d,)
        n_grid: tuple[int, ...] = (source.n,)
    else:
        if d is None or n is None:
            raise UsageError(f"give {' and '.join(flag for flag, v in (('`d`', d), ('`n`', n)) if v is None)} "
                             "(or `data` FILE, whose d and n are used)")
        d_grid = parse_grid(d, "d", integer=True, points=points)
        n_grid = parse_grid(n, "n", integer=True, points=points)

    rows: list[dict[str, Any]] = []
    jobs: list[tuple[dict[str, Any], Mechanism]] = []
    references: dict[tuple[int, float], float | None] = {}
    for name in names:
        cls = get_mechanism(name)
        options = comparison_options(cls, delta)
        for dim in d_grid:
            for eps in eps_grid:
                common = {
                    "mechanism": name, "baseline": cls.baseline, "d": dim, "epsilon": eps, "norm_bound": norm_bound,
                    "guarantee": APPROXIMATE if "delta" in options else PURE, "delta": options.get("delta"),
                }
                try:
                    mech = MechanismSpec(name, eps, None, norm_bound, options).calibrate(dim)
                    info = mech.describe()
                except LdpError as exc:
                    rows.extend(_empty_row(**common, n=count, error=str(exc)) for count in n_grid)
                    continue
                reference = _reference(references, dim, eps, norm_bound)
                for count in n_grid:
                    row = _empty_row(
                        **common, calibration=mech.calibration, epsilon_exact=info["epsilon_exact"], n=count,
                        domain=str(mech.domain), expected_error_mean=info["expected_error_max"] / count,
                        expected_error_mean_boundary=info["expected_error"] / count,
                        ratio_to_privunit2=None if reference is None else info["expected_error_max"] / reference,
                    )
                    rows.append(row)
                    if trials is not None:
                        row.update(inputs="boundary" if source is None else "data", trials=trials)
                        jobs.append((row, mech))
    if jobs and trials is not None:
        _simulate_all(jobs, trials, source, seed, threads, on_start, on_rows, warn)
    return rows


def _check_mechanisms(mechanisms: Sequence[str] | None) -> list[str]:
    if mechanisms is None or len(mechanisms) == 0:
        return vector_mechanisms()
    if isinstance(mechanisms, str):
        mechanisms = [mechanisms]
    names = list(dict.fromkeys(mechanisms))
    for name in names:
        if not get_mechanism(name).vector:
            raise UsageError(
                f"`mechanism` {name}: a mechanism of one scalar column; the sweep compares vector mechanisms "
                f"({', '.join(vector_mechanisms())})"
            )
    return names


def _delta_users() -> list[str]:
    return [name for name in mechanism_names() if "delta" in get_mechanism(name).options]


def _reference(cache: dict[tuple[int, float], float | None], d: int, eps: float, norm_bound: float) -> float | None:
    """Optimal PrivUnit2's worst-case error at (d, ε, L), or None where it cannot be calibrated."""
    if (d, eps) not in cache:
        try:
            cache[(d, eps)] = PrivUnit2.calibrate(d, eps, norm_bound=norm_bound).expected_error_max
        except LdpError:
            cache[(d, eps)] = None
    return cache[(d, eps)]


# --- simulation --------------------------------------------------------------------------------------


class _Stopped(Exception):
    """Another grid point failed or the sweep was interrupted: stop simulating."""


class _DataSource:
    """A file of rows to simulate with: its path, vector columns, d and row count."""

    def __init__(self, path: Path, column: str | None, columns: Sequence[str] | None, d: int, n: int) -> None:
        self.path, self.column, self.columns, self.d, self.n = path, column, columns, d, n

    @classmethod
    def open(cls, path: str | os.PathLike[str], column: str | None, columns: Sequence[str] | None) -> _DataSource:
        from ldpcli.io import open_vectors

        with open_vectors(path, column=column, columns=columns, writable=False) as reader:
            d = reader.layout.d
            count = reader.num_rows
            if count is None:  # CSV: count the rows (every batch is checked on the way)
                count = sum(batch.values.shape[0] for batch in reader)
        if count == 0:
            raise DataError(f"{os.fspath(path)}: the file has no rows to simulate with")
        return cls(Path(path), column, columns, d, count)

    def batches(self, d: int) -> Any:
        from ldpcli.io import open_vectors

        rows = max(1, CHUNK_VALUES // d)
        return open_vectors(self.path, column=self.column, columns=self.columns, writable=False,
                            batch_rows=rows, granule=lambda _d: 1)


def _generator(root: np.random.SeedSequence, row: dict[str, Any], mech: Mechanism) -> np.random.Generator:
    """The grid point's own generator: the run's root and a key naming the point."""
    key = json.dumps({"spec": mech.spec.to_dict(), "d": row["d"], "n": row["n"], "inputs": row["inputs"]},
                     sort_keys=True)
    return keyed_generator(root, *digest_key(hashlib.sha256(key.encode()).digest()))


def _simulate_all(
    jobs: list[tuple[dict[str, Any], Mechanism]],
    trials: int,
    source: _DataSource | None,
    seed: int | None,
    threads: int | None,
    on_start: Callable[[int | None], None] | None,
    on_rows: OnRows | None,
    warn: Callable[[str], None],
) -> None:
    """Fill the empirical columns of every job's row."""
    root = root_seed(seed)
    if on_start is not None:
        on_start(sum(trials * row["n"] for row, _ in jobs))
    lock = threading.Lock()
    stop = threading.Event()

    def report(count: int) -> None:
        if stop.is_set():
            raise _Stopped
        if on_rows is not None:
            with lock:
                on_rows(count)

    clipped: dict[tuple[str, float], tuple[int, Mechanism]] = {}

    def run(row: dict[str, Any], mech: Mechanism) -> None:
        rng = _generator(root, row, mech)
        if source is None:
            errors = simulate_boundary(mech, row["n"], trials, rng, report)
        else:
            errors, moved = _simulate_data(mech, source, trials, rng, report)
            with lock:
                clipped.setdefault((str(mech.domain), mech.norm_bound), (moved, mech))
        row.update(_summary(errors))

    workers = min(_available_cores() if threads is None else threads, len(jobs))
    if workers <= 1:
        for row, mech in jobs:
            run(row, mech)
    else:
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ldp-sweep")
        futures: list[Future[None]] = []
        try:
            futures = [pool.submit(run, row, mech) for row, mech in jobs]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                if future.done() and future.exception() is not None:
                    raise future.exception()  # type: ignore[misc]
        except BaseException:
            stop.set()
            for future in futures:
                future.cancel()
            raise
        finally:
            pool.shutdown(wait=True)
    if source is not None:
        for moved, mech in clipped.values():
            said = clip_warning(moved, source.n, mech)
            if said is not None:
                warn(said[0] + "; the simulated error is that of the mean of the clipped rows")


def _summary(errors: np.ndarray) -> dict[str, float]:
    """The average squared error over the trials, its standard error and 95% interval."""
    trials = errors.shape[0]
    mean = float(errors.mean())
    se = float(errors.std(ddof=1) / math.sqrt(trials))
    return {
        "empirical_error": mean,
        "empirical_se": se,
        "empirical_lower": max(0.0, mean - _Z * se),
        "empirical_upper": mean + _Z * se,
    }


def _no_report(count: int) -> None:
    return None


def boundary_inputs(mech: Mechanism, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` seeded inputs on the boundary of the mechanism's domain (the audit's boundary
    point: ‖x‖ = L in the ℓ2 ball, a vertex of the ℓ∞ box), as a (count, d) array."""
    points = []
    for _ in range(count):
        point = next(x for _, x, boundary in mech.domain.test_points(mech.d, mech.norm_bound, rng) if boundary)
        points.append(np.asarray(point, dtype=np.float64))
    return np.stack(points)


def simulate_boundary(
    mech: Mechanism, n: int, trials: int, rng: np.random.Generator, on_rows: OnRows = _no_report
) -> np.ndarray:
    """‖mean − true mean‖² of n privatized boundary rows, for each of ``trials`` repetitions.

    Row i of every repetition is input i mod :data:`POOL` of :func:`boundary_inputs`. Its
    expectation is ``mech.expected_error / n``.
    """
    pool = boundary_inputs(mech, min(n, POOL), rng)
    sums = np.zeros((trials, mech.d))
    _accumulate(mech, n, lambda a, b: pool[np.arange(a, b) % pool.shape[0]], sums, rng, on_rows)
    return np.einsum("ij,ij->i", sums, sums) / float(n) ** 2


def _simulate_data(
    mech: Mechanism, source: _DataSource, trials: int, rng: np.random.Generator, on_rows: OnRows
) -> tuple[np.ndarray, int]:
    """As :func:`simulate_boundary` on the file's rows, moved onto the domain; and how many were moved."""
    sums = np.zeros((trials, mech.d))
    moved = 0
    with source.batches(mech.d) as reader:
        for batch in reader:
            x, count = mech.project(batch.values, reader.precision)
            moved += count
            _accumulate(mech, x.shape[0], functools.partial(_rows_of, x), sums, rng, on_rows)
    return np.einsum("ij,ij->i", sums, sums) / float(source.n) ** 2, moved


def _rows_of(x: np.ndarray, start: int, stop: int) -> np.ndarray:
    return x[start:stop]


def _accumulate(
    mech: Mechanism, m: int, rows: Callable[[int, int], np.ndarray], sums: np.ndarray, rng: np.random.Generator,
    on_rows: OnRows,
) -> None:
    """Add Σᵢ (Zᵢ − xᵢ) over the m rows ``rows(0, m)`` to ``sums[t]`` for every trial t.

    Each call to the mechanism privatizes about :data:`CHUNK_VALUES` values: several trials of a
    few rows at once, or one trial of many rows in parts.
    """
    trials, d = sums.shape
    chunk = max(1, CHUNK_VALUES // d)
    if m <= chunk:
        x = rows(0, m)
        reps = max(1, chunk // m)
        for first in range(0, trials, reps):
            count = min(reps, trials - first)
            block = np.tile(x, (count, 1)) if count > 1 else x
            z = mech.privatize(block, rng)
            z -= block
            sums[first:first + count] += z.reshape(count, m, d).sum(axis=1)
            on_rows(count * m)
        return
    for trial in range(trials):
        for start in range(0, m, chunk):
            x = rows(start, min(m, start + chunk))
            z = mech.privatize(x, rng)
            z -= x
            sums[trial] += z.sum(axis=0)
            on_rows(x.shape[0])


# --- files -------------------------------------------------------------------------------------------


def _suffix(path: Path, what: str) -> str:
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        shown = repr(suffix) if suffix else "no extension"
        raise UsageError(f"{path}: cannot {what} a sweep table as {shown}; use .csv, .parquet or .json")
    return suffix


def to_json(rows: Sequence[dict[str, Any]]) -> str:
    """The table as a JSON list of objects (every column, null where empty)."""
    return json.dumps([{name: row.get(name) for name in COLUMN_NAMES} for row in rows], allow_nan=False)


def save_sweep(rows: Sequence[dict[str, Any]], path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
    """Write the table to ``path`` by its suffix: ``.csv``, ``.parquet`` (``.pq``) or ``.json``. Atomic."""
    from ldpcli.io import atomic_write_bytes, atomic_write_text, file_format, table_bytes

    path = Path(path)
    if _suffix(path, "write") == ".json":
        atomic_write_text(path, to_json(rows) + "\n", overwrite=overwrite)
        return
    import pyarrow as pa

    types = _arrow_types()
    columns = {name: pa.array([row.get(name) for row in rows], type=types[name]) for name in COLUMN_NAMES}
    atomic_write_bytes(path, table_bytes(columns, file_format(path)), overwrite=overwrite)


def _rows_of_table(rows: list[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    """Every column of the sweep in each row (None where the file has none); DataError without the columns a
    chart needs."""
    present = set().union(*(row.keys() for row in rows)) if rows else set(REQUIRED_COLUMNS)
    missing = [name for name in REQUIRED_COLUMNS if name not in present]
    if missing:
        raise DataError(f"{label}: not a sweep table: no column {', '.join(missing)}; give a table written by "
                        "`ldp sweep -o`")
    return [_empty_row(**row) for row in rows]


def _arrow_types() -> dict[str, Any]:
    import pyarrow as pa

    kinds = {"string": pa.string(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}
    return {name: kinds[kind] for name, kind in COLUMNS}


def read_sweep(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a table written by :func:`save_sweep` (or any table with its columns)."""
    path = Path(path)
    suffix = _suffix(path, "read")
    label = os.fspath(path)
    if not path.is_file():
        raise UsageError(f"{label}: no such file; give a table written by `ldp sweep -o`")
    try:
        if suffix == ".json":
            rows = read_json(path)
            if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
                raise DataError(f"{label}: a sweep table in JSON is a list of objects")
            return _rows_of_table(rows, label)
        if suffix == ".csv":
            import pyarrow.csv as pacsv

            table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=_arrow_types(),
                                                                              strings_can_be_null=True))
        else:
            import pyarrow.parquet as pq

            table = pq.read_table(path)
    except (OSError, ValueError) as exc:  # pyarrow's errors are ValueError or OSError subclasses
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{label}: cannot read the sweep table ({reason})") from None
    return _rows_of_table(table.to_pylist(), label)
