"""Wide CSV output: more than :data:`~ldpcli.io._csv_wide.CSV_WIDE_COLUMNS` columns (the wide reader's
threshold), written from the values themselves rather than by pyarrow's CSV writer.

pyarrow's CSV writer takes a table of one array per column, and that table and the writer hold a few KB
per column whatever the row count: 3 rows of 10⁶ columns peaked at 3.1 GB. Here a batch's values (rows ×
coordinates, a numpy array) are turned into text block by block, at most :data:`_CELLS` values a block,
by the cast pyarrow's CSV writer itself applies to a number column (``pyarrow.compute.cast`` to a string:
the fewest digits that read back as the same float64, or float32), joined into lines by pyarrow's string
kernels, and handed to the sink as bytes; memory is that of the batch plus one block's text.

The bytes are those pyarrow's writer writes for the same table: a header of every name in double quotes
(a quote inside doubled) and lines ended by ``\\n``. The kept columns, few, are written by pyarrow's
writer itself (its types, quoting and missing values), one line per row put before that row's values.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ldpcli.io import _csv_wide
from ldpcli.io._layout import VectorLayout

#: The most values turned into text at once: a block of whole rows, or a part of one row.
_CELLS = 1 << 18
_TEXT = pa.large_binary()
_COMMA = pa.scalar(b",", _TEXT)
_NOTHING = pa.scalar(b"", _TEXT)
_ENDS = {b",": _COMMA, b"\n": pa.scalar(b"\n", _TEXT)}
_NO_HEADER = pacsv.WriteOptions(include_header=False)


def open_wide_writer(sink: pa.NativeFile, layout: VectorLayout, keep_schema: pa.Schema | None) -> WideCsvEncoder | None:
    """The wide writer into ``sink`` of a file laid out by ``layout`` (its kept columns, then its vector
    columns) when it has more columns than the wide reader's threshold; None for a narrower one, which
    pyarrow's CSV writer writes. The kept columns' types (``keep_schema``) are pyarrow's to write."""
    if len(layout.keep) + len(layout.columns) <= _csv_wide.CSV_WIDE_COLUMNS:
        return None
    return WideCsvEncoder(sink, layout)


def header_line(names: Sequence[str]) -> bytes:
    """The header line pyarrow's CSV writer writes for these column names: each in double quotes, a
    quote inside doubled, whatever else it holds (a comma, a line break), separated by commas."""
    return (",".join('"' + name.replace('"', '""') + '"' for name in names) + "\n").encode()


class WideCsvEncoder:
    """Writes the header on creation, then each batch's lines (:meth:`write_values`)."""

    def __init__(self, sink: pa.NativeFile, layout: VectorLayout) -> None:
        """The columns are the kept columns of ``layout``, then its vector columns (one a coordinate)."""
        self._sink = sink
        self._keeps = bool(layout.keep)
        sink.write(header_line([*layout.keep, *layout.columns]))

    def write_values(self, values: np.ndarray, keep: pa.Table | None) -> None:
        """Append one line per row of ``values`` (rows × width, float64 or float32), after that row's
        ``keep`` cells when the layout keeps columns."""
        rows, width = values.shape
        prefixes = _keep_lines(keep) if self._keeps and keep is not None else None
        block_rows, block_columns = max(1, _CELLS // width), min(width, _CELLS)
        for start in range(0, rows, block_rows):
            stop = min(rows, start + block_rows)
            for first in range(0, width, block_columns):
                last = min(width, first + block_columns)
                before = prefixes[start:stop] if prefixes is not None and first == 0 else None
                self._sink.write(_text(values[start:stop, first:last], before, b"\n" if last == width else b","))

    def close(self) -> None:
        """Nothing to finish: every line is in the sink (its owner closes it)."""


def _text(block: np.ndarray, before: pa.Array | None, end: bytes) -> pa.Buffer:
    """The text of a block of values (rows × columns): each row's values joined by commas, after its
    ``before`` text and a comma (if any), followed by ``end``, the rows one after the other."""
    rows, columns = block.shape
    cells = pc.cast(pa.array(np.ascontiguousarray(block).reshape(-1)), pa.large_string()).view(_TEXT)
    lists = pa.LargeListArray.from_arrays(pa.array(np.arange(0, rows * columns + 1, columns), pa.int64()), cells)
    lines = pc.binary_join(lists, _COMMA)
    if before is not None:
        lines = pc.binary_join_element_wise(before, lines, _COMMA)
    lines = pc.binary_join_element_wise(lines, _ENDS[end], _NOTHING)
    offsets = np.frombuffer(lines.buffers()[1], np.int64, count=len(lines) + 1, offset=8 * lines.offset)
    return lines.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def _keep_lines(keep: pa.Table) -> pa.Array:
    """Each row's kept cells as pyarrow's CSV writer writes them (without the line's end), as binary.

    Written at once and split at the line breaks, unless a cell holds one (the text then has more
    breaks than rows): then one row at a time."""
    text = _csv(keep)
    if text.count(b"\n") == keep.num_rows:
        lines = text.split(b"\n")[:-1]
    else:
        lines = [_csv(keep.slice(row, 1))[:-1] for row in range(keep.num_rows)]
    return pa.array(lines, _TEXT)


def _csv(table: pa.Table) -> bytes:
    """``table``'s rows as pyarrow's CSV writer writes them, without the header."""
    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink, _NO_HEADER)
    return sink.getvalue().to_pybytes()
