"""Regenerate the bundled example datasets from scikit-learn's UCI digits.

The UCI handwritten digits (1797 images of 8x8 pixels, each pixel an integer
0..16) ship inside the scikit-learn package, so nothing is downloaded. This
script writes three files next to itself:

``digits.parquet``
    ``id`` (int64, 0..1796), ``label`` (int64, the digit 0..9) and ``pixels``
    (FixedSizeList<float64>[64]) with the raw pixel values. The largest
    possible l2 norm of a row is 16 * sqrt(64) = 128, known from the data
    format alone; that is the public norm bound to use with ``ldp``.

``digits_unit.parquet``
    ``id``, ``label`` and ``embedding`` (FixedSizeList<float64>[64]): each
    pixel row divided by its own l2 norm, so every row has norm 1 up to
    rounding. This mimics an embedding file whose public norm bound is 1.

``digits_unit.csv``
    The same unit-norm rows in per-column layout: ``id``, ``label``, then
    ``p00`` .. ``p63``. Floats are written with Python's shortest round-trip
    representation, so reading them back gives the identical float64 values.

The ``label`` column is not part of the vector; pass it through with
``--keep id,label`` or leave it out.

Usage::

    pip install -e '.[dev]'        # scikit-learn is a dev-only dependency
    python examples/make_digits.py

The output is deterministic: the same values on every run, and the same bytes
for a given pyarrow version.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE: Path = Path(__file__).resolve().parent
DIM: int = 64
MAX_PIXEL: float = 16.0
# Row norms of the unit file must equal 1 within this tolerance.
UNIT_NORM_TOL: float = 1e-12


def load_pixels() -> tuple[np.ndarray, np.ndarray]:
    """Return ``(pixels, labels)``: a (1797, 64) float64 array and int64 labels."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        sys.exit("make_digits.py needs scikit-learn: pip install -e '.[dev]'")
    bunch = load_digits()
    pixels = np.ascontiguousarray(bunch.data, dtype=np.float64)
    labels = np.asarray(bunch.target, dtype=np.int64)
    assert pixels.shape == (1797, DIM), pixels.shape
    assert labels.shape == (pixels.shape[0],), labels.shape
    assert pixels.min() >= 0.0 and pixels.max() <= MAX_PIXEL
    return pixels, labels


def unit_rows(pixels: np.ndarray) -> np.ndarray:
    """Divide each row by its l2 norm; every row must be non-zero."""
    norms = np.linalg.norm(pixels, axis=1)
    assert np.all(norms > 0.0), "a digits row is all zero; cannot normalise it"
    unit = pixels / norms[:, None]
    check = np.linalg.norm(unit, axis=1)
    assert np.all(np.abs(check - 1.0) <= UNIT_NORM_TOL), float(np.abs(check - 1.0).max())
    return unit


def vector_column(matrix: np.ndarray) -> pa.FixedSizeListArray:
    """Pack an (n, d) float64 matrix into a FixedSizeList<float64>[d] array."""
    n, d = matrix.shape
    flat = pa.array(np.ascontiguousarray(matrix, dtype=np.float64).reshape(n * d), type=pa.float64())
    return pa.FixedSizeListArray.from_arrays(flat, d)


def write_parquet(path: Path, ids: np.ndarray, labels: np.ndarray, name: str, matrix: np.ndarray) -> None:
    """Write ``id``, ``label`` and a vector column ``name`` to ``path``."""
    table = pa.table(
        {
            "id": pa.array(ids, type=pa.int64()),
            "label": pa.array(labels, type=pa.int64()),
            name: vector_column(matrix),
        }
    )
    pq.write_table(table, path, compression="zstd")


def write_csv(path: Path, ids: np.ndarray, labels: np.ndarray, matrix: np.ndarray) -> None:
    """Write ``id,label,p00..p63`` with exact (round-trip) float text."""
    header = ["id", "label"] + [f"p{j:02d}" for j in range(matrix.shape[1])]
    lines = [",".join(header)]
    for i, label, row in zip(ids.tolist(), labels.tolist(), matrix.tolist()):
        # repr() of a Python float is the shortest string that parses back to it.
        lines.append(",".join([str(i), str(label)] + [repr(x) for x in row]))
    path.write_text("\n".join(lines) + "\n", encoding="ascii", newline="\n")


def main() -> None:
    pixels, labels = load_pixels()
    ids = np.arange(pixels.shape[0], dtype=np.int64)
    unit = unit_rows(pixels)

    outputs = [HERE / "digits.parquet", HERE / "digits_unit.parquet", HERE / "digits_unit.csv"]
    write_parquet(outputs[0], ids, labels, "pixels", pixels)
    write_parquet(outputs[1], ids, labels, "embedding", unit)
    write_csv(outputs[2], ids, labels, unit)

    for path in outputs:
        print(f"wrote {path.name} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
