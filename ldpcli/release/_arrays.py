"""The workhorse of the Python API for arrays and tables: :func:`privatize_rows` (the rows checked by
:mod:`ldpcli.release._array_input`, a device's privatized by :mod:`ldpcli.release._array_device`; the
estimator of rows in memory is :mod:`ldpcli.release._array_estimate`).

``privatize_rows(x, epsilon=…)`` privatizes a numpy array of rows, a pyarrow Table or a pandas
DataFrame in memory, or a PyTorch, CuPy or JAX array on its device (the Array API:
:mod:`ldpcli.math._devices`), and returns the privatized rows (same kind as ``x``) with a
:class:`ReleaseRecord`, the public description of what was done (what a sidecar holds for a
file). :func:`~ldpcli.release._array_estimate.estimate_mean` estimates the mean of the raw rows from the privatized ones. Both run
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
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from ldpcli.errors import LdpError, UsageError, python_text
from ldpcli.math._counter_rng import CounterGenerator
from ldpcli.math._devices import device_namespace
from ldpcli.mechanisms import Mechanism, MechanismSpec
from ldpcli.mechanisms._rendering import as_recorded, secured
from ldpcli.release._array_device import _privatize_on_device
from ldpcli.release._array_input import (
    _array_rows,
    _device_rows,
    _dtype_name,
    _is_arrow,
    _is_pandas,
    _table_rows,
    _TableShape,
)
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
        Which generator drew the n·d normals: for numpy arrays and tables ``"ldp ChaCha20"`` (ldp's
        cryptographic stream: ``rng`` None, the default, or a ``CounterGenerator``) or ``"numpy PCG64"`` (the bit
        generator of an integer seed's or a given ``numpy.random.Generator``), the device's own for a PyTorch, CuPy or JAX array
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
    rng : numpy.random.Generator, ldpcli.math.CounterGenerator, int or None
        A generator, an int seed (numpy's PCG64 of it: reproducible, not for release) or None (the default: ldp's
        ChaCha20 stream keyed by 256 bits from the OS, cryptographic).
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
            normals = ("ldp ChaCha20" if isinstance(generator, CounterGenerator)
                       else f"numpy {type(generator.bit_generator).__name__}")
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


__all__ = ["LdpWarning", "ReleaseRecord", "privatize_rows"]
