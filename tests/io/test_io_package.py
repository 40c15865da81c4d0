"""Tests for the layout of the ldpcli.io package: pyarrow-free modules, the format registry, sinks."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ldpcli.errors import UsageError
from ldpcli.io import (
    FORMATS,
    AtomicFileSink,
    AtomicVectorWriter,
    VectorLayout,
    VectorWriter,
    _atomic as atomic,
    file_format,
    _formats as formats,
    get_format,
    open_vectors,
    register_format,
)


def imports_without_pyarrow(statement: str) -> None:
    """Run ``statement`` in a fresh interpreter and check that it loaded no pyarrow."""
    check = f"import sys\n{statement}\nassert 'pyarrow' not in sys.modules, 'pyarrow was imported'"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "statement",
    [
        "import ldpcli.io._layout, ldpcli.io._atomic, ldpcli.io._publication",
        "import ldpcli.io",
        "import ldpcli.io._messages, ldpcli.io._formats",
        "from ldpcli.io import VectorLayout, atomic_write_text, remove_temporaries",
    ],
)
def test_modules_that_need_no_pyarrow_do_not_load_it(statement: str) -> None:
    imports_without_pyarrow(statement)


def test_the_layout_needs_only_the_standard_library() -> None:
    imports_without_pyarrow("import ldpcli.io._layout\nassert 'numpy' not in sys.modules")


def test_the_registry_maps_suffixes_to_the_built_in_formats() -> None:
    assert FORMATS == ("parquet", "csv", "arrow", "npy")
    assert get_format("parquet").suffixes == (".parquet", ".pq")
    assert get_format("csv").suffixes == (".csv",)
    assert get_format("arrow").suffixes == (".arrows",)
    assert get_format("npy").suffixes == (".npy",)
    assert [file_format(name) for name in ("a.parquet", "b.PQ", "c.Csv")] == ["parquet", "parquet", "csv"]
    with pytest.raises(UsageError, match=r"unsupported file type \('\.txt'\); use a \.parquet, \.pq, \.csv, \.arrows or \.npy file\."):
        file_format("d.txt")
    with pytest.raises(ValueError, match="format must be one of"):
        get_format("xlsx")


@pytest.fixture
def vec_format(monkeypatch: pytest.MonkeyPatch) -> formats.Format:
    """A format "vec" (``.vec`` files holding Parquet), registered for one test only."""
    monkeypatch.setattr(formats, "_FORMATS", dict(formats._registry()))
    parquet = get_format("parquet")
    return register_format("vec", [".VEC"], parquet.open_reader, parquet.encoder)


def test_a_registered_format_is_found_by_suffix_and_read_and_written(tmp_path: Path, vec_format: formats.Format) -> None:
    assert vec_format.suffixes == (".vec",)
    assert formats.FORMATS == ("parquet", "csv", "arrow", "npy", "vec")
    assert file_format(tmp_path / "x.Vec") == "vec"
    with pytest.raises(UsageError, match=r"use a \.parquet, \.pq, \.csv, \.arrows, \.npy or \.vec file\."):
        file_format("d.txt")
    x = np.arange(12, dtype=np.float64).reshape(4, 3)
    path = tmp_path / "x.vec"
    with AtomicVectorWriter(path, VectorLayout("list", ("v",), 3)) as writer:
        assert writer.format == "vec"
        writer.write(x)
        writer.commit()
    with open_vectors(path) as reader:
        assert reader.format == "parquet"  # the reader of the format it borrowed
        np.testing.assert_array_equal(np.concatenate([batch.values for batch in reader]), x)


def test_the_registered_format_is_gone_after_its_test() -> None:
    assert FORMATS == ("parquet", "csv", "arrow", "npy")
    with pytest.raises(UsageError, match="unsupported file type"):
        file_format("x.vec")


def test_a_name_or_suffix_is_registered_once(vec_format: formats.Format) -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_format("vec", [".other"], vec_format.open_reader, vec_format.encoder)
    with pytest.raises(ValueError, match="'.pq' already selects format 'parquet'"):
        register_format("other", [".pq"], vec_format.open_reader, vec_format.encoder)


@pytest.mark.usefixtures("named_temporaries")  # it looks at the temporary's name (issue 36: none on Linux)
def test_a_discarded_file_sink_leaves_no_temporary_file(tmp_path: Path) -> None:
    sink = AtomicFileSink(tmp_path / "out.bin")
    sink.write(b"partial")
    assert len(list(tmp_path.iterdir())) == 1
    sink.discard()
    sink.discard()
    assert list(tmp_path.iterdir()) == []
    assert not [path for path in atomic._LIVE_TEMPORARIES if path.parent == tmp_path]
    with pytest.raises(RuntimeError, match="only after commit"):
        _ = sink.sha256
    with AtomicFileSink(tmp_path / "out.bin") as sink:
        sink.write(b"abandoned without commit")
    assert list(tmp_path.iterdir()) == []


def test_a_committed_file_sink_publishes_its_bytes_and_their_hash(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    with AtomicFileSink(target) as sink:
        assert (sink.write(b"abc"), sink.write(memoryview(b"de")), sink.tell()) == (3, 2, 5)
        assert not sink.published
        sink.commit()
    assert sink.published and sink.closed
    assert target.read_bytes() == b"abcde"
    assert sink.sha256 == hashlib.sha256(b"abcde").hexdigest()
    assert list(tmp_path.iterdir()) == [target]


class MemorySink:
    """A sink that keeps the bytes in memory; commit makes them available."""

    label = "memory"

    def __init__(self) -> None:
        self._buffer = io.BytesIO()
        self.committed: bytes | None = None
        self.discarded = False

    @property
    def closed(self) -> bool:
        return self._buffer.closed

    def write(self, data: bytes | bytearray | memoryview) -> int:
        return self._buffer.write(data)

    def tell(self) -> int:
        return self._buffer.tell()

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def commit(self) -> None:
        self.committed = self._buffer.getvalue()

    def discard(self) -> None:
        self.discarded = True


def test_a_vector_writer_encodes_into_any_sink() -> None:
    sink = MemorySink()
    layout = VectorLayout("columns", ("x", "y"), 2, keep=("id",))
    with VectorWriter(sink, layout, "parquet") as writer:
        writer.write(np.array([[1.0, 2.0], [3.0, 4.0]]), pa.table({"id": ["a", "b"]}))
        writer.commit()
    assert sink.committed is not None and not sink.discarded
    table = pq.read_table(pa.BufferReader(sink.committed))
    assert table.to_pydict() == {"id": ["a", "b"], "x": [1.0, 3.0], "y": [2.0, 4.0]}
    unused = MemorySink()
    with VectorWriter(unused, layout, "csv"):
        pass
    assert unused.discarded and unused.committed is None
    with pytest.raises(UsageError, match="CSV holds one column per coordinate"):
        VectorWriter(MemorySink(), VectorLayout("list", ("v",), 2), "csv")
