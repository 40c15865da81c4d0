"""Reading a wide CSV file and writing its sidecar and ledger record in memory that does not hold a few
hundred bytes per column (issue 36): the columns are chosen from their names and one type object per
kind (``ldpcli.io._columns._Columns``), not from a pyarrow schema of one field per column, and the long
lists of names in the sidecar and the ledger are encoded by json's C encoder (``indented_json``), the
same text as ``json.dumps(..., indent=2)``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ldpcli.io._jsonfile import indented_json
from tests.io.test_wide_csv_write import narrow_and_wide_peaks

#: Names whose JSON text holds quotes, backslashes, ``", "`` and characters escaped or not by ensure_ascii.
ODD = ('a", "b', "c\\", '\\"', '", "', "é", "\u2028", "\x00", '"', ", ", '" , "', '\\\\", "x', "\U0001f4a5", "")


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_indented_json_is_the_text_json_dumps_writes(ensure_ascii: bool) -> None:
    rng = random.Random(0)
    names = [rng.choice(ODD) + str(i) + rng.choice(ODD) for i in range(3_000)]
    document = {"a": names, "b": [{"c": tuple(names[:1_500]), "e": [], "f": [names[:999]], "g": [names, [names]]}],
                1: None, "h": 1.5, "n": names[:5], "m": [*names, 1]}
    for value in (document, [names, names], names, {"x": {"y": {"z": names}}}):
        assert indented_json(value, ensure_ascii=ensure_ascii) == json.dumps(
            value, indent=2, allow_nan=False, ensure_ascii=ensure_ascii)
    with pytest.raises(ValueError):
        indented_json({"a": names, "b": float("nan")})


@pytest.mark.slow
def test_privatizing_a_wide_csv_takes_memory_by_the_rows_not_the_names(tmp_path: Path) -> None:
    """3 rows of 400000 columns (28 MB of text) into CSV, one thread: the run peaked ~335 MB above that of
    10 columns while the columns were chosen from a schema of 400000 fields (615 MB against 280 MB),
    ~130 MB after (the 10⁶-column case: 1.23 GB before, ~600 MB after)."""
    d = 400_000
    peaks, output = narrow_and_wide_peaks(tmp_path, d, "--threads", "1")
    assert peaks[1] - peaks[0] < 200 * 2**20, [peak // 2**20 for peak in peaks]
    with output.open("rb") as text:
        assert text.readline().count(b",") == d - 1 and len(text.read().splitlines()) == 3
    sidecar = json.loads(Path(f"{output}.ldp.json").read_text())
    assert sidecar["data"]["layout"]["columns"] == [f"c{j}" for j in range(d)]
