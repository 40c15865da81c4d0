"""Where the vectors live in a file: :class:`VectorLayout`.

Standard library only (no pyarrow, no numpy), so the math modules and the sidecar can use a
layout without loading pyarrow.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ldpcli.errors import DataError


@dataclass(frozen=True)
class VectorLayout:
    """Where the vectors live in a file.

    ``kind="list"``: one list column, ``columns == (name,)``, every list of length ``d``.
    ``kind="columns"``: one numeric column per coordinate, ``len(columns) == d``, in order.
    ``keep``: pass-through columns (an id, a label) copied unchanged to the output.
    """

    kind: Literal["list", "columns"]
    columns: tuple[str, ...]
    d: int
    keep: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Reject inconsistent layouts (a programming error; files go through ``from_dict``)."""
        problem = _layout_problem(self.kind, self.columns, self.d, self.keep)
        if problem is not None:
            raise ValueError(f"invalid VectorLayout: {problem}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict: ``{"kind", "columns", "d", "keep"}``."""
        return {"kind": self.kind, "columns": list(self.columns), "d": self.d, "keep": list(self.keep)}

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, source: str | os.PathLike[str] | None = None
    ) -> VectorLayout:
        """Inverse of :meth:`to_dict`; :class:`DataError` (naming ``source``) if ``data`` is malformed."""
        prefix = f"{os.fspath(source)}: " if source is not None else ""
        if not isinstance(data, Mapping):
            problem: str | None = f"expected an object, got {type(data).__name__}"
        else:
            columns, keep = data.get("columns"), data.get("keep", [])
            if not isinstance(columns, list) or not isinstance(keep, list):
                problem = "'columns' and 'keep' must be lists of column names"
            else:
                problem = _layout_problem(data.get("kind"), tuple(columns), data.get("d"), tuple(keep))
        if problem is not None:
            raise DataError(
                f"{prefix}malformed vector layout ({problem}); "
                "the file may be damaged, so re-run the privatization to recreate it."
            )
        return cls(data["kind"], tuple(data["columns"]), data["d"], tuple(data.get("keep", [])))


def _layout_problem(kind: Any, columns: tuple[Any, ...], d: Any, keep: tuple[Any, ...]) -> str | None:
    """What is wrong with these layout fields, or ``None`` if they are consistent."""
    if kind not in ("list", "columns"):
        return f"kind must be 'list' or 'columns', got {kind!r}"
    for field, names in (("columns", columns), ("keep", keep)):
        if not isinstance(names, tuple) or not all(isinstance(n, str) and n for n in names):
            return f"'{field}' must hold non-empty column names"
        if len(set(names)) != len(names):
            return f"'{field}' names a column twice"
    if not columns:
        return "'columns' must name at least one column"
    if not isinstance(d, int) or isinstance(d, bool) or d < 1:
        return f"d must be a positive integer, got {d!r}"
    if kind == "list" and len(columns) != 1:
        return f"a list layout has exactly one column, got {len(columns)}"
    if kind == "columns" and len(columns) != d:
        return f"a columns layout has d columns, got {len(columns)} columns for d={d}"
    both = [name for name in keep if name in columns]
    if both:
        return f"column {both[0]!r} is both a vector column and a keep column"
    return None
