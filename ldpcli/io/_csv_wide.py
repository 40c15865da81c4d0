"""Wide CSV files: more than :data:`CSV_WIDE_COLUMNS` columns, read in blocks of lines parsed by numpy.

pyarrow's CSV reader makes one column (a builder and a converter) per field, about 6 KB each
whatever the row count: 3 rows of 10⁶ columns peaked above 6 GB. Here a batch of ``batch_rows``
lines is read (one ``readline`` per line, never one call per value), its field counts are checked
by counting each line's commas, and the whole block is parsed by one ``np.fromstring`` call, so memory is O(batch rows × d) (the block's bytes and its float64 values).

The same checks as pyarrow's path, with the same one-line messages (:func:`~ldpcli.io._csv_text._csv_error`,
fed pyarrow's own wording): a row with another number of fields than the first line, a cell that is
not a number (located by the regular expression of :mod:`ldpcli.io._csv_text`, vectorized over the line),
a missing cell, and NaN/inf (by :class:`~ldpcli.io._read.VectorReader`). Every column must be a
coordinate or left out (``columns``; a column left out may hold text): ``keep`` columns are read by
pyarrow up to :data:`CSV_MAX_COLUMNS` columns and refused above, and cells are not quoted.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ldpcli.errors import DataError
from ldpcli.io._columns import _Choice, _Columns, _positions, _resolve
from ldpcli.io._csv_text import (
    _NULL_CELLS,
    CSV_PRECISION,
    _check_header,
    _check_no_header,
    _csv_error,
    _first_cells,
    _parse_numbers,
)
from ldpcli.io._formats import compression_of
from ldpcli.io._layout import VectorLayout
from ldpcli.io._messages import _no_rows, _reason, _row
from ldpcli.io._read import VectorBatch, VectorReader, _check_finite

#: Files with more columns than this (and no ``keep`` columns) are read here rather than by pyarrow's CSV
#: reader, which is the faster of the two up to this width and holds ~6 KB per column (``benchmarks/wide_csv.py``,
#: one run, 2 busy cores, pyarrow vs wide MB/s: 51.1 vs 20.8 at 500 columns, 28.7 vs 20.0 at 1000,
#: 26.1 vs 21.5 at 1500, 17.5 vs 22.9 at 2000, 12.9 vs 23.7 at 3000).
CSV_WIDE_COLUMNS = 1_500
#: The widest CSV file read with ``keep`` columns (by pyarrow's reader, which holds ~6 KB per column: 3 rows
#: of 10⁶ columns peaked above 6 GB); a file without them is read here from
#: :data:`CSV_WIDE_COLUMNS` columns up, in memory that grows with its rows, not its width.
CSV_MAX_COLUMNS = 100_000
_PROBE_ROWS = 16  # data lines that type the columns (pyarrow: its first block)
_VECTORS = "\x00vectors"  # the one list column the raw batches hold (no CSV column can be named so)


class _WideReader(VectorReader):
    """A :class:`VectorReader` whose raw batches hold the vectors as one fixed-size list column
    (:data:`_VECTORS`) whatever the layout says: d columns of a few rows each would cost pyarrow an
    array per column and batch."""

    def _convert(self, record: pa.RecordBatch, first_row: int) -> VectorBatch:
        """The batch's values: the list column viewed as (rows, d), checked as a list layout's (a NaN/inf
        named by its column first, as the narrow path names it)."""
        if not self.skip_invalid:
            values = record.column(0).flatten().to_numpy().reshape(record.num_rows, -1)
            _check_finite(values, first_row, self._label, lambda j: f"column {self.layout.columns[j]!r}")
        list_layout = VectorLayout("list", (_VECTORS,), self.layout.d, ())
        columns_layout, self.layout = self.layout, list_layout
        try:
            batch = super()._convert(record, first_row)
        finally:
            self.layout = columns_layout
        return batch


def _open_wide_csv(
    path: Path, label: str, choice: _Choice, batch_rows: Callable[[int], int], has_header: bool
) -> VectorReader:
    """Open a wide CSV file (see the module): its first line, the vector columns chosen
    (:func:`~ldpcli.io._columns._resolve`) among its columns typed from its first data lines
    (:func:`_text_columns`, as pyarrow's path types them from its first block), and a stream of its batches. The first line is checked as the narrow path checks
    it (a header of numbers, or without ``has_header`` a first line that looks like a header)."""
    def fail(message: str, names: Sequence[str]) -> DataError:
        return _csv_error(label, message, names, 0, None, has_header)

    stream = _open_stream(path, label)
    try:
        first = stream.readline()
        cells = _first_cells(first)
        if cells is None:
            cells = first.rstrip(b"\r\n").decode("utf-8", "replace").split(",")
        names = cells if has_header else [f"f{i}" for i in range(len(cells))]
        if has_header:
            _check_header(label, names, choice.offer_no_header)
        else:
            _check_no_header(label, cells, names)
        if choice.keep or (choice.layout is not None and choice.layout.keep):
            raise DataError(
                f"{label}: has more than {CSV_MAX_COLUMNS} columns ({len(names)}), the most a CSV file with `keep` "
                "columns is read with (pyarrow's CSV reader holds ~6 KB per column); leave `keep` out, or convert "
                "it to Parquet (e.g. pyarrow: pa.table({'vector': pa.array(list(rows)), 'id': ids}))."
            )
        pending, numbers, line = ([], [], 1) if has_header else ([first], [1], 1)
        probe = max(1, min(_PROBE_ROWS, batch_rows(len(names))))  # within the first batch: its memory
        while len(pending) < probe:
            text = stream.readline()
            if not text:
                break
            if text.strip():
                line += 1
                pending.append(text)
                numbers.append(line)
        if not pending:
            raise _no_rows(label)
        types = [pa.float64()] * len(names)  # one type object for every number column, not one field each
        for i in _text_columns(pending, len(names), label):
            types[i] = pa.string()
        kind, vector, _, _ = _resolve(_Columns(names, types), label, choice, check_types=False)
        if not has_header:
            _check_no_header(label, cells, names, vector)
        layout = choice.layout if choice.layout is not None else VectorLayout(kind, vector, len(vector), ())
        chosen = _chosen(names, layout.columns)
        rows = batch_rows(layout.width)
        parse = _Parse(label, names, chosen, has_header, choice.skip_invalid, fail)
        batches = _batches(stream, rows, parse, pending, numbers, line + 1)
    except BaseException:
        stream.close()
        raise
    return _WideReader(
        path=path, label=label, format="csv", layout=layout, num_rows=None, batch_rows=rows, keep_schema=None,
        batches=batches, release=stream.close, precision=CSV_PRECISION, columns_in_file=names,
    )


def _chosen(names: Sequence[str], vector: Sequence[str]) -> np.ndarray | None:
    """The places of the ``vector`` columns among the file's ``names`` (the first of a repeated name),
    ``None`` when they are all the columns in file order (no place is looked up then)."""
    if len(vector) == len(names) and all(a == b for a, b in zip(vector, names)):
        return None
    at = _positions(names)
    return np.array([at[name] for name in vector])


def _cells(text: bytes) -> pa.Array:
    """The comma-separated cells of a line (without its line break), as one binary array: no Python
    object per cell."""
    return pc.split_pattern(pa.array([text], pa.binary()), ",").flatten()


def _text_columns(lines: Sequence[bytes], d: int, label: str) -> set[int]:
    """The columns that are text in the first lines of data: more than half of their cells there that
    are not missing are not numbers (the rule of pyarrow's path, ``_numbers_read_as_text`` in :mod:`ldpcli.io._csv`), so that a
    column of names is left out automatically while a coordinate with one bad cell is a coordinate,
    whose bad cell is then reported. A line with another number of fields is left to the parse."""
    present, numbers = np.zeros(d), np.zeros(d)
    for text in lines:
        cells = _cells(text.rstrip(b"\r\n"))
        if len(cells) != d:
            continue
        present += pc.invert(pc.is_in(cells, value_set=_NULL_CELLS)).to_numpy(zero_copy_only=False)
        numbers += pc.is_valid(_parse_numbers(cells, label, "?")).to_numpy(zero_copy_only=False)
    return set(np.flatnonzero((present > 0) & (2 * numbers < present)).tolist())


def _open_stream(path: Path, label: str) -> BinaryIO:
    """The file's bytes (decompressed for ``.csv.gz``/``.csv.zst``), buffered for ``readline``."""
    codec = compression_of(path)
    try:
        if codec is None:
            return path.open("rb")
        return io.BufferedReader(pa.input_stream(path, compression=codec))
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{label}: cannot read the file ({_reason(exc)}); check it and its permissions.") from exc


def _batches(
    stream: BinaryIO, rows: int, parse: _Parse, block: list[bytes], numbers: list[int], line: int
) -> Generator[pa.RecordBatch, None, None]:
    """Batches of ``rows`` lines, the first starting with the lines already read (``block``, the file's
    lines ``numbers``), then the next lines, from ``line`` on. Blank lines are dropped and not counted,
    as pyarrow drops them: line N is the file's N-th line that is not blank, so that messages name the
    same rows as pyarrow's path."""
    while True:
        while len(block) < rows:
            try:
                text = stream.readline()
            except (OSError, pa.ArrowException) as exc:  # a damaged .csv.gz, say
                raise DataError(f"{parse.label}: cannot read the file ({_reason(exc)}); check that it is whole.") from exc
            if not text:
                break
            if text.strip():
                block.append(text)
                numbers.append(line)
                line += 1
        if not block:
            return
        batch = parse(block, numbers)
        block, numbers = [], []  # not held while the batch is privatized: a line of 10⁶ cells is ~10 MB
        yield batch


class _Parse:
    """Parsing a block of lines of one wide file into a raw batch (see :meth:`__call__`)."""

    def __init__(self, label: str, names: Sequence[str], chosen: np.ndarray | None, has_header: bool, skip: bool,
                 fail: Callable[[str, Sequence[str]], DataError]) -> None:
        """``chosen``: the indexes of the vector columns (None: all, in order); ``fail`` as for :func:`_open_wide_csv`."""
        self.label, self.names, self.chosen, self.skip, self.fail = label, names, chosen, skip, fail
        self.skipped = 1 if has_header else 0  # line N of the file is data row N - skipped

    def __call__(self, lines: list[bytes], numbers: list[int]) -> pa.RecordBatch:
        """A block of lines (at the file's lines ``numbers``; no blank line) as a batch of one
        list column of the chosen columns: its field counts from each line's commas, its values by one
        ``np.fromstring`` over the block; :class:`DataError` naming the first bad row and
        column (with ``skip``: a cell that is not a number, or is missing, makes its row NaN, which the
        reader marks invalid)."""
        d = len(self.names)
        fields = np.array([text.count(b",") + 1 for text in lines])  # one call per line, at C speed
        ragged = np.flatnonzero(fields != d)
        if ragged.size:
            i = int(ragged[0])
            raise self.fail(f"CSV parse error: Row #{numbers[i]}: Expected {d} columns, got {int(fields[i])}", self.names)
        try:
            values = np.fromstring(b",".join([text.rstrip(b"\r\n") for text in lines]), dtype=np.float64, sep=",")
        except ValueError:  # a cell that is not a number, or is missing
            values = None
        if values is None or values.size != len(lines) * d:
            values = self._line_by_line(lines, numbers)
        matrix = values.reshape(len(lines), d)
        if self.chosen is not None:
            matrix = matrix[:, self.chosen]
        flat_values = pa.array(np.ascontiguousarray(matrix).reshape(-1))
        return pa.RecordBatch.from_arrays([pa.FixedSizeListArray.from_arrays(flat_values, matrix.shape[1])],
                                          names=[_VECTORS])

    def _line_by_line(self, lines: list[bytes], numbers: list[int]) -> np.ndarray:
        """The block's values parsed line by line, after the parse of the whole block failed. A line
        numpy cannot read is parsed cell by cell, vectorized over the line
        (:func:`~ldpcli.io._csv_text._parse_numbers`, the CSV reader's own rules): a cell that is missing or
        not a number is an error only in a vector column (a column left out may hold text), and with
        ``skip`` makes its row NaN instead."""
        d = len(self.names)
        values = np.empty((len(lines), d))
        for i, text in enumerate(lines):
            text = text.rstrip(b"\r\n")
            try:
                row = np.fromstring(text, dtype=np.float64, sep=",")
            except ValueError:
                row = None
            if row is not None and row.size == d:
                values[i] = row
                continue
            cells = _cells(text)
            parsed = _parse_numbers(cells, self.label, self.names[0])  # null: missing or not a number
            bad = parsed.is_null().to_numpy(zero_copy_only=False)
            wanted = bad if self.chosen is None else bad[self.chosen]
            if not wanted.any():
                values[i] = np.where(bad, 0.0, parsed.to_numpy(zero_copy_only=False))
                continue
            if self.skip:
                values[i] = np.nan
                continue
            j = int(np.argmax(wanted))
            column = j if self.chosen is None else int(self.chosen[j])
            if pc.is_in(cells[column: column + 1], value_set=_NULL_CELLS)[0].as_py():
                raise DataError(
                    f"{self.label}: {_row(numbers[i] - self.skipped)}, column {self.names[column]!r}: value is "
                    "missing; remove or impute missing values before privatizing."
                )
            raise self.fail(
                f"In CSV column #{column}: Row #{numbers[i]}: CSV conversion error to double: invalid value '?'",
                self.names,
            )
        return values.reshape(-1)
