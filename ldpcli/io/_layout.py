"""Where the vectors live in a file: :class:`VectorLayout`.

Standard library only (no pyarrow, no numpy), so the math modules and the sidecar can use a
layout without loading pyarrow.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ldpcli.errors import DataError, counted


@dataclass(frozen=True)
class VectorLayout:
    """Where the vectors live in a file.

    ``kind="list"``: one list column, ``columns == (name,)``, every list of length ``d``.
    ``kind="columns"``: one numeric column per coordinate, ``len(columns) == d``, in order.
    ``keep``: pass-through columns (an id, a label) copied unchanged to the output.
    ``copies``: a release of ``copies`` independent privatized copies of each row (``ReleaseOptions.copies``,
    for estimators that need two independent copies, as least squares does): the
    vector columns of each copy in turn (``copies`` list columns, or ``copies·d`` numeric
    columns), and a batch's values hold the copies side by side, shape ``(rows, copies·d)``.
    """

    kind: Literal["list", "columns"]
    columns: tuple[str, ...]
    d: int
    keep: tuple[str, ...] = ()
    copies: int = 1

    def __post_init__(self) -> None:
        """Reject inconsistent layouts (a programming error; files go through ``from_dict``)."""
        problem = _layout_problem(self.kind, self.columns, self.d, self.keep, self.copies)
        if problem is not None:
            raise ValueError(f"invalid VectorLayout: {problem}")

    @property
    def width(self) -> int:
        """The number of values per row: ``copies·d``."""
        return self.copies * self.d

    def copy_columns(self, copy: int) -> tuple[str, ...]:
        """The vector columns of copy ``copy`` (0-based)."""
        size = len(self.columns) // self.copies
        return self.columns[copy * size: (copy + 1) * size]

    def with_copies(self, copies: int) -> VectorLayout:
        """The layout of a release of ``copies`` copies of rows with this (one-copy) layout.

        Copy 1 keeps the column names; copy j ≥ 2 adds ``_copy{j}`` to each (``vec`` → ``vec``,
        ``vec_copy2``). ValueError if a new name is already taken by a kept column.
        """
        if self.copies != 1:
            raise ValueError("with_copies() starts from a one-copy layout")
        names = list(self.columns)
        for copy in range(2, copies + 1):
            names.extend(f"{name}_copy{copy}" for name in self.columns)
        kept = set(self.keep)
        taken = [name for name in names[len(self.columns):] if name in kept]
        if taken:
            raise ValueError(f"the copy column {taken[0]!r} would replace a kept column of that name")
        return VectorLayout(self.kind, tuple(names), self.d, self.keep, copies)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict: ``{"kind", "columns", "d", "keep"}``, and ``copies`` when above 1."""
        out: dict[str, Any] = {"kind": self.kind, "columns": list(self.columns), "d": self.d, "keep": list(self.keep)}
        if self.copies != 1:
            out["copies"] = self.copies
        return out

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
                problem = _layout_problem(
                    data.get("kind"), tuple(columns), data.get("d"), tuple(keep), data.get("copies", 1)
                )
        if problem is not None:
            raise DataError(
                f"{prefix}malformed vector layout ({problem}); "
                "the file may be damaged, so re-run the privatization to recreate it."
            )
        return cls(data["kind"], tuple(data["columns"]), data["d"], tuple(data.get("keep", [])), data.get("copies", 1))


def _layout_problem(
    kind: Any, columns: tuple[Any, ...], d: Any, keep: tuple[Any, ...], copies: Any = 1
) -> str | None:
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
    if not isinstance(copies, int) or isinstance(copies, bool) or copies < 1:
        return f"copies must be a positive integer, got {copies!r}"
    if kind == "list" and len(columns) != copies:
        return f"a list layout has one column per copy, got {len(columns)} for {counted(copies, 'copy', 'copies')}"
    if kind == "columns" and len(columns) != copies * d:
        return f"a columns layout has d columns per copy, got {counted(len(columns), 'column')} for d={d}, copies={copies}"
    vector = set(columns)
    both = [name for name in keep if name in vector]
    if both:
        return f"column {both[0]!r} is both a vector column and a keep column"
    return None
