"""The label column of a training file: its type checked against the loss, the public class list,
and each batch's labels turned into the loss's targets with the first bad row named.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.errors import DataError, UsageError
from ldpcli.learn._losses import Loss


@dataclass
class Labels:
    """Turns a batch's label column into the loss's targets (class codes or numbers), row-checked."""

    loss: type[Loss]
    label: str
    classes: tuple[Any, ...] | None = None
    _value_set: Any = None

    def set_classes(self, classes: Sequence[Any], arrow_type: Any, where: str = "") -> None:
        import pyarrow as pa

        self.classes = tuple(classes)
        value_type = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
        try:
            self._value_set = pa.array(list(classes), type=value_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            shown = ", ".join(repr(c) for c in classes[:10])
            raise DataError(f"{where}: label column {self.label!r} is {value_type}, which cannot hold the model's "
                            f"classes ({shown}); its labels must be of the training data's type") from None

    def codes(self, column: Any, first_row: int, where: str) -> np.ndarray:
        """Class indices (classification) or float values, a DataError naming the first bad row."""
        import pyarrow as pa
        import pyarrow.compute as pc

        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if pa.types.is_dictionary(column.type):  # a categorical column: its values
            column = column.cast(column.type.value_type)
        if column.null_count:
            row = int(np.flatnonzero(np.asarray(column.is_null()))[0])
            raise DataError(f"{where}: row {first_row + row + 1} (counting from 1), column {self.label!r}: the label "
                            "is missing; fill it in or drop the row")
        if not self.loss.classification:
            values = np.asarray(column.cast(pa.float64()), dtype=np.float64)
            bad = ~np.isfinite(values)
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise DataError(f"{where}: row {first_row + row + 1} (counting from 1), column {self.label!r}: the "
                                f"label is {values[row]!r}; a squared-loss label must be a finite number")
            return values
        codes = pc.index_in(column, value_set=self._value_set)
        if codes.null_count:
            row = int(np.flatnonzero(np.asarray(codes.is_null()))[0])
            shown = ", ".join(repr(c) for c in (self.classes or ())[:10])
            raise DataError(f"{where}: row {first_row + row + 1} (counting from 1), column {self.label!r}: the label "
                            f"is not one of the classes ({shown}); pass every class in `classes`")
        return np.asarray(codes, dtype=np.int64)


def check_label_type(arrow_type: Any, loss: type[Loss], label: str, where: str) -> None:
    import pyarrow as pa

    numeric = pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type)
    if not loss.classification and not numeric:
        raise DataError(f"{where}: label column {label!r} is {arrow_type}, not numbers; `loss` squared needs a numeric "
                        "label (use logistic, hinge or softmax for classes)")
    if loss.classification and pa.types.is_floating(arrow_type):
        return  # float class labels (0.0/1.0) are allowed; the class list shows them
    if loss.classification and not (numeric or pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
                                    or pa.types.is_boolean(arrow_type) or pa.types.is_dictionary(arrow_type)):
        raise DataError(f"{where}: label column {label!r} is {arrow_type}; class labels must be numbers, text or "
                        "booleans")


def parse_classes(classes: Sequence[Any], arrow_type: Any, label: str) -> tuple[Any, ...]:
    """The ``classes`` values as values of the label column's type (UsageError naming the first bad one)."""
    import pyarrow as pa

    target = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
    try:
        values = pa.array([str(c) if not isinstance(c, (int, float, bool)) else c for c in classes]).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise UsageError(f"`classes`: {list(classes)!r} are not all values of label column {label!r} ({target}): "
                         f"{exc}") from None
    out = tuple(values.to_pylist())
    if len(set(out)) != len(out):
        raise UsageError(f"`classes`: {list(classes)!r} names a class twice")
    return out
