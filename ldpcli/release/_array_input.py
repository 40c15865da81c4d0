"""The rows an array release is given, checked: a numpy array, a device array (the Array API) or a
table (a pyarrow Table or RecordBatch, a pandas DataFrame, read by the file readers' rules), and how to
put privatized rows back into a table. Used by :func:`ldpcli.release._arrays.privatize_rows` and
:func:`ldpcli.release._array_estimate.estimate_mean`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.math._domains import FLOAT32_PRECISION, FLOAT64_PRECISION


def _is_pandas(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "pandas"


def _is_arrow(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "pyarrow"


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
