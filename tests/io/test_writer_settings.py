"""Writer settings for privatized floats (issue 27 item 2): what ldp writes into a Parquet or Arrow
file, `--compression`, and its refusals.

Privatized columns carry no min/max statistics and no dictionary; a codec, when asked, comes with
BYTE_STREAM_SPLIT. Kept columns keep pyarrow's defaults. The values are the same whatever the codec.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import ldp, read_list, unit_rows, write_list

from ldpcli.errors import UsageError
from ldpcli.io._formats import get_format
from ldpcli.io._parquet import PARQUET_CODECS
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._file import write_file_release
from ldpcli.release._options import Columns, ReleaseOptions


def _chunks(path: Path) -> dict[str, pq.ColumnChunkMetaData]:
    """Each column chunk of the first row group, by its path."""
    meta = pq.ParquetFile(path).metadata.row_group(0)
    return {meta.column(i).path_in_schema: meta.column(i) for i in range(meta.num_columns)}


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    path = tmp_path / "in.parquet"
    write_list(path, unit_rows(300, 8, seed=3), ids=True)
    return path


def test_privatized_columns_have_no_statistics_no_dictionary_and_no_codec_by_default(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    write_file_release(source, out, mechanism="privunit2", epsilon=4.0, options=ReleaseOptions(columns=Columns(keep=("id",)), seed=1))
    chunks = _chunks(out)
    vec = chunks["vec.list.element"]
    assert not vec.is_stats_set
    assert vec.compression == "UNCOMPRESSED" and PARQUET_CODECS[0] == "none"
    assert not any("DICTIONARY" in e for e in vec.encodings)
    ident = chunks["id"]  # a kept column keeps what readers filter on
    assert ident.is_stats_set and ident.compression == "SNAPPY" and any("DICTIONARY" in e for e in ident.encodings)


@pytest.mark.parametrize("codec", ["zstd", "lz4", "snappy"])
def test_a_codec_comes_with_byte_stream_split_and_changes_no_value(source: Path, tmp_path: Path, codec: str) -> None:
    plain, packed = tmp_path / "plain.parquet", tmp_path / f"{codec}.parquet"
    write_file_release(source, plain, mechanism="privunit2", epsilon=4.0, options=ReleaseOptions(seed=7))
    write_file_release(source, packed, mechanism="privunit2", epsilon=4.0, options=ReleaseOptions(seed=7, compression=codec))
    vec = _chunks(packed)["vec.list.element"]
    assert vec.compression == codec.upper() and "BYTE_STREAM_SPLIT" in vec.encodings and not vec.is_stats_set
    np.testing.assert_array_equal(read_list(packed), read_list(plain))


def test_one_column_per_coordinate_gets_the_same_settings(tmp_path: Path) -> None:
    src, out = tmp_path / "wide.parquet", tmp_path / "out.parquet"
    rows = unit_rows(50, 3, seed=1)
    pq.write_table(pa.table({f"x{j}": rows[:, j] for j in range(3)}), src)
    write_file_release(src, out, mechanism="privunit2", epsilon=2.0, options=ReleaseOptions(seed=1, compression="zstd"))
    for j in range(3):
        chunk = _chunks(out)[f"x{j}"]
        assert chunk.compression == "ZSTD" and "BYTE_STREAM_SPLIT" in chunk.encodings and not chunk.is_stats_set


def test_an_arrow_stream_takes_a_codec_and_reads_back_the_same(source: Path, tmp_path: Path) -> None:
    plain, packed = tmp_path / "plain.parquet", tmp_path / "out.arrows"
    write_file_release(source, plain, mechanism="privunit2", epsilon=4.0, options=ReleaseOptions(seed=5))
    write_file_release(source, packed, mechanism="privunit2", epsilon=4.0, options=ReleaseOptions(seed=5, compression="zstd"))
    with pa.ipc.open_stream(packed) as reader:
        table = reader.read_all()
    values = np.asarray(table.column("vec").combine_chunks().flatten()).reshape(len(table), -1)
    np.testing.assert_array_equal(values, read_list(plain))
    assert get_format("arrow").codecs == ("none", "lz4", "zstd")


def test_the_library_refuses_a_codec_the_format_cannot_apply_before_writing(source: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"a csv file takes no compression of its own; compress it as a whole by its "
                                         r"suffix \(\.csv\.gz"):
        write_file_release(source, tmp_path / "out.csv", mechanism="privunit2", epsilon=4.0, options=ReleaseOptions(compression="zstd"))
    with pytest.raises(UsageError, match=r"compression must be one of none, snappy, lz4, zstd, gzip, brotli for a "
                                         r"parquet file, got 'zip'"):
        write_file_release(source, tmp_path / "out.parquet", mechanism="privunit2", epsilon=4.0,
                       options=ReleaseOptions(compression="zip"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


def test_the_cli_names_the_flag_and_writes_nothing(source: Path, tmp_path: Path) -> None:
    result = ldp("privatize", source, "-o", tmp_path / "out.npy", "--eps", "4", "--compression", "zstd")
    assert result.exit_code == 2
    assert "a npy file takes no --compression of its own; write Parquet or Arrow" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]
    result = ldp("privatize", source, "-o", tmp_path / "out.parquet", "--eps", "4", "--compression", "zstd",
                 "--seed", "2", "--json")
    assert result.exit_code == 0, result.stderr
    assert _chunks(tmp_path / "out.parquet")["vec.list.element"].compression == "ZSTD"
    assert json.loads(result.stdout)["n"] == 300


def test_dataset_parts_get_the_codec_and_a_bad_one_stops_before_any_part(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "release"
    write_dataset_release([source], out, engine=None, epsilon=4.0, options=ReleaseOptions(seed=4, compression="zstd"))
    parts = sorted(out.glob("*.parquet"))
    assert parts
    assert all(_chunks(part)["vec.list.element"].compression == "ZSTD" for part in parts)
    with pytest.raises(UsageError, match="compression must be one of none, snappy"):
        write_dataset_release([source], tmp_path / "other", engine=None, epsilon=4.0,
                          options=ReleaseOptions(compression="lzma"))
    assert not (tmp_path / "other").exists() and not list(tmp_path.glob(".*other*"))


def test_the_help_names_every_codec_and_no_missing_document() -> None:
    """The --compression help lists the codecs by hand (the help must not import pyarrow): it must
    name each one the formats accept, and cite only files that exist."""
    import inspect

    from ldpcli.cli.commands.privatize import privatize as command

    option = inspect.signature(command).parameters["compression"].default
    text = option.help
    for fmt in ("parquet", "arrow"):
        for codec in get_format(fmt).codecs:
            assert codec in text, (fmt, codec)
    assert "docs/performance.md" not in text and "benchmarks/writer_settings.py" in text
    assert (Path(__file__).parents[2] / "benchmarks" / "writer_settings.py").is_file()
