"""The workhorses of the Python API for arrays and tables: :func:`privatize_rows` and :func:`estimate_mean`.

``privatize_rows(x, epsilon=…)`` privatizes a numpy array of rows, a pyarrow Table or a pandas
DataFrame in memory, or a PyTorch, CuPy or JAX array on its device (the Array API:
:mod:`ldpcli.math._devices`), and returns the privatized rows (same kind as ``x``) with a
:class:`ReleaseRecord`, the public description of what was done (what a sidecar holds for a
file). :func:`estimate_mean` estimates the mean of the raw rows from the privatized ones. Both run
the same code as ``ldp privatize`` and ``ldp estimate-mean``: the registered mechanisms, the
domain's projection, the safety checks of :mod:`ldpcli.release._safety` (ε range, near-exact
releases, clipping, baselines, id and free-text columns), in batches so that memory stays bounded.

Users reach them as ``ldpcli.privatize`` (:func:`ldpcli.analysis._handle.privatize`, which wraps the
record into the one :class:`ldpcli.Release <ldpcli.analysis._handle.Release>`, a subclass of
:class:`ReleaseRecord`) and ``ldpcli.estimate_mean``. The record lives here, in the release layer,
because privatizing needs nothing above it; the jobs a Release runs on its files are in
``ldpcli.analysis``.

Errors speak Python: bad arguments raise :class:`ValueError` (or :class:`TypeError` for a wrong
type, ``eps="4"``, or a seed by another library's keyword, ``seed=1``, which points to ``rng``)
naming the keyword (``epsilon``, ``norm_bound``), not a CLI flag. Warnings (a baseline mechanism,
many clipped rows, kept columns released as they are, a bcdp level clipped to ε) are
:class:`LdpWarning`\\ s, in Python words too.
"""

from __future__ import annotations

import numbers
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from ldpcli.errors import LdpError, UsageError, counted, python_text
from ldpcli.estimators._mean import MeanEstimate, MeanEstimator
from ldpcli.math._devices import device_namespace, host_copy
from ldpcli.math._domains import FLOAT32_PRECISION, FLOAT64_PRECISION
from ldpcli.mechanisms import Mechanism, MechanismSpec
from ldpcli.mechanisms._rendering import as_recorded, secured
from ldpcli.release._randomness import rng_from
from ldpcli.release._safety import (
    CLIP_REFUSE_FRACTION,
    check_clip_fraction,
    check_clipping,
    check_epsilon,
    clip_warning,
    release_warnings,
)

#: Rows privatized at once (the memory of a batch is a few copies of rows × d doubles).
_BATCH_VALUES = 2**22
RecordT = TypeVar("RecordT", bound="ReleaseRecord")


class LdpWarning(UserWarning):
    """A release that is legal but should make its author stop and look (see :mod:`ldpcli.release._safety`)."""


@dataclass(frozen=True)
class ReleaseRecord:
    """The public description of one privatization: what a sidecar records for a file.

    The base of :class:`ldpcli.Release <ldpcli.analysis._handle.Release>`, which adds where the
    privatized rows are (files with their sidecars, or the caller's memory) and the jobs on them.

    Parameters
    ----------
    mechanism : Mechanism
        The calibrated mechanism (its ``spec`` re-creates it).
    n : int
        The rows released.
    columns : tuple of str or None
        The vector columns of a table input (None for an array).
    keep : tuple of str
        The columns passed through unprivatized.
    dtype : str
        ``"float32"`` or ``"float64"``: the type the rows were released as.
    reproducible : bool or None
        True for an integer seed, False for OS entropy, None for a caller's generator
        (reproducible by whoever can re-create it).
    warnings : tuple of str
        The sentences a receiver of the rows should read (a baseline, ε forced out of range, kept columns).
    n_clipped : int
        Rows moved onto the bound, those only the rounding of float32 values put outside excepted
        (:meth:`ldpcli.math._domains.Domain.rounded`): a statistic of the raw data, for the caller
        only; left out of :meth:`to_dict` and of comparisons.
    generator : str or None
        Which generator drew the n·d normals: ``"numpy PCG64"`` (the bit generator of ``rng``) for
        numpy arrays and tables, the device's own for a PyTorch, CuPy or JAX array
        (:func:`ldpcli.math._devices.device_normals`: not cryptographic, and reproducible only on the
        same device and library version); the per-row draws are numpy's on the host in every case.
        None when not recorded (a release opened from files: numpy's keyed PCG64, :mod:`ldpcli.release._randomness`).
    """

    mechanism: Mechanism
    n: int
    columns: tuple[str, ...] | None = None
    keep: tuple[str, ...] = ()
    dtype: str = "float64"
    reproducible: bool | None = False
    warnings: tuple[str, ...] = ()
    n_clipped: int = field(default=0, compare=False)
    generator: str | None = None

    @property
    def d(self) -> int:
        """Dimension of the rows."""
        return self.mechanism.d

    @property
    def expected_error_mean(self) -> float:
        """Worst-case E‖mean of the released rows − mean of the raw (clipped) rows‖²."""
        return self.mechanism.expected_error_mean(self.n)

    def to_dict(self) -> dict[str, Any]:
        """The public description as a JSON-able dict.

        Returns
        -------
        dict
            Public parameters and counts only (no seed, no clipped count): what a sidecar holds.
        """
        return {
            "mechanism": {"spec": self.mechanism.spec.to_dict(), **self.mechanism.describe()},
            "n": self.n,
            "d": self.d,
            "columns": None if self.columns is None else list(self.columns),
            "unprivatized_columns": list(self.keep),
            "dtype": self.dtype,
            "reproducible": self.reproducible,
            "warnings": list(self.warnings),
            "expected_error_mean": self.expected_error_mean,
            "generator": self.generator,
        }

    @classmethod
    def from_dict(cls: type[RecordT], data: Mapping[str, Any]) -> RecordT:
        """Inverse of :meth:`to_dict`: the mechanism is re-calibrated from its public spec.

        Parameters
        ----------
        data : Mapping
            What :meth:`to_dict` returned (after a JSON round trip, say).

        Returns
        -------
        ReleaseRecord
            An instance of the class it is called on (``ldpcli.Release.from_dict`` gives a Release).
        """
        try:
            spec = MechanismSpec.from_dict(data["mechanism"]["spec"])
            mechanism = spec.calibrate(int(data["d"]))
            mechanism = as_recorded(mechanism, data["mechanism"].get("rendering"))  # a secure release's
            columns = data.get("columns")
            return cls(
                mechanism=mechanism, n=int(data["n"]), columns=None if columns is None else tuple(columns),
                keep=tuple(data.get("unprivatized_columns", ())), dtype=str(data.get("dtype", "float64")),
                reproducible=data.get("reproducible"), warnings=tuple(data.get("warnings", ())),
                generator=data.get("generator"),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a Release description: {exc!r} is missing or malformed") from None
        except LdpError as exc:
            raise ValueError(str(exc)) from None


@contextmanager
def _python_errors(keywords: Mapping[str, str] | None = None) -> Iterator[None]:
    """Re-raise the library's one-line errors as ValueError, naming the keywords this call was given:
    ``keywords`` maps a library parameter to the caller's keyword (``{"epsilon": "eps"}`` when ε came
    by its alias, :func:`_epsilon`)."""
    try:
        yield
    except LdpError as exc:
        names = keywords or {}
        raise ValueError(exc.render(lambda parameter: names.get(parameter, parameter))) from None


def _warn(text: str | None) -> None:
    """``text`` as an :class:`LdpWarning` in Python words, attributed to the caller's line that called
    ``ldpcli.privatize`` (stack level 4: past this function, :func:`privatize_rows` and ``privatize``)."""
    if text:
        warnings.warn(python_text(text), LdpWarning, stacklevel=4)


def _is_pandas(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "pandas"


def privatize_rows(
    x: Any,
    *,
    epsilon: float | None = None,
    mechanism: str = "privunit2",
    norm_bound: float = 1.0,
    calibration: str | None = None,
    rng: np.random.Generator | int | None = None,
    column: str | None = None,
    columns: Sequence[str] | None = None,
    keep: Sequence[str] = (),
    keep_unsafe: bool = False,
    force: bool = False,
    fail_on_clip: float | None = CLIP_REFUSE_FRACTION,
    dtype: str | None = None,
    eps: float | None = None,
    secure: bool = False,
    secure_delta: float | None = None,
    **options: Any,
) -> tuple[Any, ReleaseRecord]:
    """Privatize every row of ``x`` under ε-LDP; return ``(privatized, record)``.

    The workhorse of ``ldpcli.privatize`` (:func:`ldpcli.analysis._handle.privatize`, which
    documents the parameters and returns a :class:`~ldpcli.analysis._handle.Release` in place of
    the record). Every output row is an unbiased estimate of its (clipped) input row.

    Parameters
    ----------
    x : numpy.ndarray, Array API array, pyarrow.Table or pandas.DataFrame
        An (n, d) array of real numbers, or a table (one list column of vectors, or one numeric
        column per coordinate: ``column``/``columns`` choose, by the rules of ``ldp privatize``).
        An array of another library (PyTorch, CuPy, JAX: :func:`ldpcli.math._devices.device_namespace`)
        is privatized on its device (:func:`_privatize_on_device`) and returned there.
    epsilon, eps : float
        The privacy level ε (``eps`` is an alias; give one of them).
    mechanism, calibration, norm_bound, **options
        The mechanism's public spec (:class:`~ldpcli.mechanisms.MechanismSpec`).
    rng : numpy.random.Generator, int or None
        A generator, an int seed (reproducible: not for release) or None (OS entropy).
    column, columns, keep, keep_unsafe, force, fail_on_clip, dtype, secure, secure_delta
        As for ``ldpcli.privatize``.

    Returns
    -------
    tuple
        The privatized rows, of the kind of ``x``, and the :class:`ReleaseRecord`.
    """
    from ldpcli.io._write import check_dtype, dtype_of_precision

    level, name = _epsilon(epsilon, eps)
    _refuse_seed_option(mechanism, options)
    with _python_errors({"epsilon": name}):
        spec = MechanismSpec(mechanism, level, calibration, norm_bound, options).validated()
        forced = check_epsilon(spec.epsilon, force=force, name=name)
        limit = check_clip_fraction(fail_on_clip, "fail_on_clip")
        if dtype is not None:
            check_dtype(dtype)
        generator, reproducible = rng_from(rng)
        table = _is_pandas(x) or _is_arrow(x)
        xp = None if table else device_namespace(x)
        table_out: _TableShape | None = None
        if not table:
            if column is not None or columns is not None or keep:
                raise TypeError("column, columns and keep apply to tables; x is an array")
            values, precision = _array_rows(x) if xp is None else _device_rows(xp, x)
        else:
            values, table_out = _table_rows(x, column, columns, keep, keep_unsafe)
            precision = table_out.precision
        out_dtype = dtype or (dtype_of_precision(precision) if xp is None else _dtype_name(xp, values.dtype))
        names = table_out.layout.columns if table_out is not None and table_out.layout.kind == "columns" else None
        spec, notes = spec.bind_columns(names, values.shape[1])
        mech = spec.calibrate(values.shape[1])
        if secure or secure_delta is not None:
            if xp is not None or not secure:
                raise UsageError("`secure` renders on the host, for numpy arrays and tables; `secure_delta` goes with it")
            mech = secured(mech, secure_delta)
        mech.describe()  # a ValueError now if a number would not be finite
        if xp is None:
            privatized, n_clipped = _privatize_rows(mech, values, generator, precision)
            normals = f"numpy {type(generator.bit_generator).__name__}"
        else:
            privatized, n_clipped, normals = _privatize_on_device(xp, mech, values, generator, precision, out_dtype)
        check_clipping(n_clipped, values.shape[0], limit, "x", mech, "fail_on_clip")
    keep_names = table_out.layout.keep if table_out is not None else ()
    texts = release_warnings(mech, keep_names, forced)
    for text in (*notes, *texts):
        _warn(text)
    clipped = clip_warning(n_clipped, values.shape[0], mech)
    if clipped is not None and clipped[1]:
        _warn(clipped[0])
    release = ReleaseRecord(
        mechanism=mech, n=values.shape[0], columns=table_out.layout.columns if table_out is not None else None,
        keep=tuple(keep_names), dtype=out_dtype, reproducible=reproducible,
        warnings=tuple(python_text(text) for text in texts), n_clipped=n_clipped, generator=normals,
    )
    if xp is not None:
        return privatized, release
    if table_out is None:
        return privatized.astype(out_dtype, copy=False), release
    return table_out.build(privatized.astype(out_dtype, copy=False)), release


def _epsilon(epsilon: float | None, eps: float | None) -> tuple[float, str]:
    """The privacy level given as ``epsilon`` or as its alias ``eps``, and the keyword it came by.

    TypeError for a level that is not a real number (``eps="4"``, ``eps=True``): a wrong type, not
    a wrong value; the value (> 0, in range) is the mechanism's check.
    """
    if epsilon is not None and eps is not None:
        raise TypeError(f"give the privacy level once: epsilon={epsilon!r} and its alias eps={eps!r} were both given")
    if epsilon is None and eps is None:
        raise TypeError("missing the privacy level: pass epsilon=ε (or its alias eps=ε)")
    level, name = (epsilon, "epsilon") if epsilon is not None else (eps, "eps")
    if isinstance(level, (bool, np.bool_)) or not isinstance(level, numbers.Real):
        raise TypeError(f"{name} must be a real number (the privacy level ε, e.g. {name}=2.0), "
                        f"got {type(level).__name__} {level!r}")
    return level, name


#: Keywords other libraries take for a seed; here the seed is ``rng``, and these would be read as
#: an option of the mechanism.
_SEED_KEYWORDS = ("seed", "random_state")


def _refuse_seed_option(mechanism: str, options: Mapping[str, Any]) -> None:
    """TypeError pointing to ``rng=`` when a seed came by another library's keyword (``seed=1``)."""
    for keyword in _SEED_KEYWORDS:
        if keyword in options:
            value = options[keyword]
            seeded = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            how = f"rng={value!r}" if seeded else "it as rng="
            raise TypeError(f"{keyword} is not an option of {mechanism}; for a reproducible run pass {how} "
                            "(an int seed or a numpy Generator)")


def _array_rows(x: Any) -> tuple[np.ndarray, float]:
    """The rows of an array-like as a checked (n, d) float64 array (a view when already float64),
    and the unit roundoff of its values as given (float32 rows on the sphere stay on it)."""
    array = np.asarray(x)
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise TypeError(f"x must hold real numbers, got dtype {array.dtype}")
    if np.iscomplexobj(array):
        raise TypeError(_COMPLEX)
    _check_shape(tuple(array.shape))
    values = np.asarray(array, dtype=np.float64)
    finite = np.isfinite(values)
    if not finite.all():
        row, j = divmod(int(np.argmin(finite, axis=None)), values.shape[1])
        raise _not_finite(row, j, values[row, j])
    return values, FLOAT32_PRECISION if array.dtype == np.float32 else FLOAT64_PRECISION


_COMPLEX = "x must hold real numbers, not complex ones"


def _check_shape(shape: tuple[int, ...]) -> None:
    """ValueError unless ``shape`` is that of n ≥ 1 rows of d ≥ 1 coordinates."""
    if len(shape) != 2:
        raise ValueError(
            f"x must be 2-D (n rows, d coordinates), got shape {shape}; for one row use x[None, :], "
            "for n scalars x[:, None]"
        )
    if shape[0] == 0 or shape[1] == 0:
        raise ValueError(f"x has no rows or no coordinates (shape {shape})")


def _not_finite(row: int, j: int, value: float) -> ValueError:
    """The error for the first value of x that is NaN or infinite, at ``x[row, j]``."""
    return ValueError(f"x[{row}, {j}] is {value}: rows must be finite; remove or impute it")


def _privatize_rows(
    mech: Mechanism, values: np.ndarray, rng: np.random.Generator, precision: float
) -> tuple[np.ndarray, int]:
    """Project and privatize in batches; (the privatized rows, how many rows were clipped)."""
    n, d = values.shape
    step = max(1, _BATCH_VALUES // d)
    out = np.empty((n, d), dtype=np.float64)
    moved = 0
    for start in range(0, n, step):
        batch, count = mech.project(values[start:start + step], precision)
        out[start:start + step] = mech.privatize(batch, rng)
        moved += count
    return out, moved


#: Values of one batch on a device (256 MiB of float32): its rows, normals and output are a few
#: such arrays at once, and each batch's host draws are one array of its rows.
_DEVICE_BATCH_VALUES = 2**26


def _device_rows(xp: Any, x: Any) -> tuple[Any, float]:
    """The rows of a device array as a checked (n, d) floating array on its device, and the unit
    roundoff of its values (:func:`_array_rows` for the Array API): float32 and float64 stay as
    they are; integers, booleans and other floats become the namespace's default floating dtype
    on that device."""
    from ldpcli.math._devices import device_of

    if xp.isdtype(x.dtype, "complex floating"):
        raise TypeError(_COMPLEX)
    if not xp.isdtype(x.dtype, ("real floating", "integral", "bool")):
        raise TypeError(f"x must hold real numbers, got dtype {x.dtype}")
    _check_shape(tuple(x.shape))
    floating = xp.isdtype(x.dtype, "real floating")
    precision = float(xp.finfo(x.dtype).eps) / 2.0 if floating else FLOAT64_PRECISION
    if not (x.dtype == xp.float32 or x.dtype == xp.float64):
        x = xp.astype(x, xp.__array_namespace_info__().default_dtypes(device=device_of(x))["real floating"])
    if floating and not bool(xp.all(xp.isfinite(x))):
        first = int(xp.argmin(xp.astype(xp.reshape(xp.isfinite(x), (-1,)), xp.int8)))
        row, j = divmod(first, x.shape[1])
        raise _not_finite(row, j, float(x[row, j]))
    return x, precision


def _dtype_name(xp: Any, dtype: Any) -> str:
    """``"float32"`` or ``"float64"``: the name of a floating dtype of ``xp`` that :func:`_device_rows` kept."""
    return "float32" if dtype == xp.float32 else "float64"


def _privatize_on_device(
    xp: Any, mech: Mechanism, values: Any, rng: np.random.Generator, precision: float, out_dtype: str
) -> tuple[Any, int, str]:
    """Privatize device rows where they live; (the rows as ``out_dtype`` on their device, how many
    rows were clipped, the name of the generator of the normals).

    In batches of :data:`_DEVICE_BATCH_VALUES` values: the per-row draws of the mechanism (the
    rounding's uniforms, then its cap events and cosines, :class:`~ldpcli.mechanisms._hooks.RoundedCap`)
    come from ``rng`` on the host, in numpy's order, and are sent to the device; the normals come
    from the device's generator (:func:`~ldpcli.math._devices.device_normals`, seeded by 128 bits
    of ``rng``) and the rest runs there (:func:`~ldpcli.math._devices.device_rounded_cap_directions`), in
    the wider of the rows' and the output's dtype. Rows beyond L are counted as the domain's
    projection counts them (:meth:`ldpcli.math._domains.Domain.project`) but not moved: the
    sampler uses only a row's direction and a sign whose probability (1 + ‖x‖/L)/2 saturates at
    ‖x‖ ≥ L, so its output has the law it has for the projected row.
    """
    from ldpcli.math._devices import (
        RowStack,
        device_normals,
        device_of,
        device_rounded_cap_directions,
        scaled_rows,
        without_autograd,
    )
    from ldpcli.mechanisms._hooks import rounded_cap

    try:
        sampler = rounded_cap(mech)
    except NotImplementedError as exc:
        raise TypeError(f"{exc}; for {mech.name}, pass x as a numpy array (torch: x.cpu().numpy(), cupy: "
                        "x.get(), jax: numpy.asarray(x))") from None
    device = device_of(values)
    out = getattr(xp, out_dtype)
    work = xp.result_type(values.dtype, out)
    host = np.float32 if work == xp.float32 else np.float64
    below_one = np.nextafter(host(1.0), host(0.0))  # 2U − 1 rounded to 1 would flip a row with ‖x‖ ≥ L
    normals = device_normals(xp, device, work, np.random.SeedSequence(rng.integers(2**32, size=4).tolist()))
    bound, (n, d) = mech.norm_bound, values.shape
    step = max(1, _DEVICE_BATCH_VALUES // d)
    released, clipped = RowStack(xp, (n, d), out, device), 0
    with without_autograd(xp):
        for start in range(0, n, step):
            rows = xp.astype(values[start:min(n, start + step), :], work, copy=False)
            m = rows.shape[0]
            scaled, norms, factors = scaled_rows(xp, rows)
            rho = norms * factors / bound
            clipped += _device_clipped(xp, mech, rows, rho, precision)
            below = np.minimum(2.0 * rng.random(m) - 1.0, below_one)
            t, r = sampler.cap_cosines(m, rng)
            below, t, r = (xp.asarray(draw.astype(host), device=device) for draw in (below, t, r))
            z = device_rounded_cap_directions(xp, scaled, norms, rho, below, t, r, bound * sampler.scale, normals)
            released.append(xp.astype(z, out, copy=False))
        return released.rows(), clipped, normals.name


def _device_clipped(xp: Any, mech: Mechanism, rows: Any, rho: Any, precision: float) -> int:
    """The rows of a batch beyond the ℓ2 ball by more than its slack at ``precision``, those within
    float32's slack whose values are all exact in float32 excepted (:meth:`~ldpcli.math._domains.Domain.rounded`:
    float32 data held as float64); ``rho`` = ‖x‖/L."""
    d = rows.shape[1]
    slack, wider = mech.domain.slack(precision, d), mech.domain.slack(FLOAT32_PRECISION, d)
    over = rho > 1.0 + slack
    count = int(xp.count_nonzero(over))
    if count and wider > slack:
        exact = xp.all(xp.astype(xp.astype(rows, xp.float32), rows.dtype) == rows, axis=1)
        count -= int(xp.count_nonzero(over & exact & (rho <= 1.0 + wider)))
    return count


def _is_arrow(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "pyarrow"


@dataclass(frozen=True)
class _TableShape:
    """Where a table's vectors are and how to put privatized ones back."""

    layout: Any  # ldpcli.io.VectorLayout
    precision: float
    pandas: bool
    table: Any  # the input as a pyarrow Table

    def build(self, values: np.ndarray) -> Any:
        """The output table: privatized vector columns, then the kept columns (as ``ldp privatize``)."""
        import pyarrow as pa

        table = self.table
        n, d = values.shape
        arrays: list[pa.Array] = []
        names: list[str] = []
        if self.layout.kind == "list":
            arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), d))
            names.append(self.layout.columns[0])
        else:
            arrays.extend(pa.array(values[:, j]) for j in range(d))
            names.extend(self.layout.columns)
        for name in self.layout.keep:
            arrays.append(table.column(name))
            names.append(name)
        result = pa.Table.from_arrays(arrays, names=names)
        return result.to_pandas() if self.pandas else result


def _table_rows(
    x: Any, column: str | None, columns: Sequence[str] | None, keep: Sequence[str], keep_unsafe: bool
) -> tuple[np.ndarray, _TableShape]:
    """The checked float64 rows of a table, and how to rebuild one, by the file readers' rules."""
    from ldpcli.io._read import open_table

    table = _as_table(x, "x")
    values, layout, precision = open_table(
        table, label="x", column=column, columns=columns, keep=keep, keep_unsafe=keep_unsafe
    )
    return values, _TableShape(layout, precision, _is_pandas(x), table)


def _as_table(x: Any, name: str) -> Any:
    """A pyarrow Table from a Table, a RecordBatch or a pandas DataFrame (its index left out)."""
    import pyarrow as pa

    table = pa.Table.from_pandas(x, preserve_index=False) if _is_pandas(x) else x
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        raise TypeError(f"{name} must be a numpy array, a pyarrow Table or a pandas DataFrame, got {type(x).__name__}")
    return table


def _description(description: Any) -> Mechanism:
    """The calibrated mechanism behind a release record, its dict, a sidecar file or a mechanism."""
    if isinstance(description, ReleaseRecord):
        return description.mechanism
    if isinstance(description, Mechanism):
        return description
    if isinstance(description, Mapping):
        if "schema_version" in description:  # a sidecar's content
            spec = MechanismSpec.from_dict(description["mechanism"]["spec"])
            return as_recorded(spec.calibrate(int(description["mechanism"]["d"])),
                               description.get("release", {}).get("rendering"))
        return ReleaseRecord.from_dict(description).mechanism
    if isinstance(description, (str, os.PathLike)):
        from ldpcli.release._sidecar import load_sidecar

        with _python_errors():
            return load_sidecar(description).mechanism
    raise TypeError(
        "description must be a Release (from ldpcli.privatize), its to_dict(), a sidecar path or a Mechanism, "
        f"got {type(description).__name__}"
    )


def estimate_mean(z: Any, description: Any, *, confidence: float = 0.95) -> MeanEstimate:
    """The mean of the raw rows estimated from privatized rows ``z`` held in memory, with error bars.

    ``ldpcli.estimate_mean``. For the rows of privatized files, ``ldpcli.open_release(paths).mean()``
    reads them (verified against their sidecars); this function takes rows the caller holds.

    Parameters
    ----------
    z : numpy.ndarray, Array API array, pyarrow.Table or pandas.DataFrame
        The privatized (n, d) rows, or any subset of them (each row is unbiased on its own); a
        table needs the release of the table privatization (it names the vector columns). Rows on
        a device (PyTorch, CuPy, JAX) are copied to the host (:func:`~ldpcli.math._devices.host_copy`).
    description : Release, dict, path or Mechanism
        The :class:`~ldpcli.analysis._handle.Release` that ``ldpcli.privatize`` returned (or any
        :class:`ReleaseRecord`), its ``to_dict()``, a sidecar path, or the calibrated mechanism.
    confidence : float
        The level of the per-coordinate Student-t intervals.

    Returns
    -------
    MeanEstimate
        The mean, its guaranteed expected squared error ``expected_error_max / n``,
        per-coordinate standard errors and intervals (:class:`~ldpcli.estimators._mean.MeanEstimate`).

    References
    ----------
    Bhowmick, Duchi, Freudiger, Kapoor, Rogers (2018), "Protection against reconstruction and its
    applications in private federated learning": each released row is unbiased, so their average is.
    """
    mech = _description(description)
    if _is_pandas(z) or _is_arrow(z):
        if not isinstance(description, ReleaseRecord) or description.columns is None:
            raise TypeError("a table z needs the Release of the table privatization (it names the vector columns)")
        z = _release_table_values(z, description)
    elif device_namespace(z) is not None:
        z = host_copy(z)
    values, _ = _array_rows(z)
    if values.shape[1] != mech.d:
        raise ValueError(f"z has d = {counted(values.shape[1], 'coordinate')} but the release has d = {mech.d}")
    with _python_errors():
        estimator = MeanEstimator(mech.d, confidence)
    estimator.add(values, None)
    return estimator.finalize(mech, values.shape[0])


def _release_table_values(z: Any, release: ReleaseRecord) -> np.ndarray:
    """The vector columns of a privatized table as an (n, d) array, read by the file readers' rules."""
    import pyarrow as pa

    from ldpcli.io._read import open_table

    table = _as_table(z, "z")
    assert release.columns is not None
    names = list(release.columns)
    is_list = len(names) == 1 and names[0] in table.column_names and pa.types.is_nested(
        table.schema.field(names[0]).type)
    with _python_errors():
        values, _, _ = open_table(table, label="z", column=names[0] if is_list else None,
                                  columns=None if is_list else names)
    return values


__all__ = ["LdpWarning", "ReleaseRecord", "estimate_mean", "privatize_rows"]
