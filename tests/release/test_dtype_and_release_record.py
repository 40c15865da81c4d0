"""The output dtype (float32 or float64) and what the sidecar records about the release.

``write_file_release`` writes the vectors as the input's own precision by default (float32 Parquet in,
float32 out; float64, integers and CSV text in, float64 out), or as ``dtype``; the sidecar records
``data.dtype``; the verified scan refuses a file whose vector type disagrees with it, and the mean
estimated from a float32 release matches the float64 one of the same seeded run to float32
rounding. The sidecar also records the kept columns as ``release.unprivatized_columns``, the
caller's and the baseline mechanisms' ``release.warnings`` and ``mechanism.baseline``; sidecars
written before these fields existed still load.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from helpers import read_list, unit_rows, write_list

from ldpcli.analysis._estimate import estimate_file_mean
from ldpcli.analysis._scan import scan
from ldpcli.errors import DataError, UsageError, python_text
from ldpcli.io import VectorLayout, open_vectors
from ldpcli.io._write import AtomicVectorWriter, output_dtype
from ldpcli.mechanisms import MechanismSpec, get_mechanism
from ldpcli.release._file import write_file_release
from ldpcli.release._options import Columns, ReleaseOptions
from ldpcli.release._safety import unprivatized_warning
from ldpcli.release._sidecar import baseline_warning, load_sidecar, sidecar_schema

N, D = 400, 32
F32_ROUND = 2.0**-24  # relative rounding of float64 → float32 (to nearest)


def float32_list(tmp_path: Path, name: str = "emb.parquet", **columns: Any) -> Path:
    """N unit rows of dimension D as one fixed-size list<float32> column ``vec`` (after ``columns``)."""
    return write_list(tmp_path / name, unit_rows(N, D, seed=1).astype(np.float32), **columns)  # type: ignore[return-value]


def float32_columns(tmp_path: Path, name: str = "cols.parquet") -> Path:
    """N unit rows as D float32 columns x0..x{D-1}."""
    rows = unit_rows(N, D, seed=2).astype(np.float32)
    path = tmp_path / name
    pq.write_table(pa.table({f"x{j}": rows[:, j] for j in range(D)}), path)
    return path


def vector_type(path: Path, column: str = "vec") -> pa.DataType:
    return pq.read_schema(path).field(column).type


def sidecar_of(result: Any) -> dict[str, Any]:
    return json.loads(result.sidecar.read_text(encoding="utf-8"))


def privatize(src: Path, out: Path, *, mechanism: str = "privunit2", options: dict[str, Any] | None = None,
              keep: Sequence[str] = (), **release: Any) -> Any:
    """write_file_release at ε = 2 with seed 7 (``release``: the other ReleaseOptions)."""
    release.setdefault("seed", 7)
    return write_file_release(src, out, mechanism=MechanismSpec(mechanism, 2.0, options=options or {}),
                          options=ReleaseOptions(columns=Columns(keep=keep), **release))


# --- the dtype written ------------------------------------------------------------------------------


def test_float32_list_input_is_written_as_float32_at_half_the_size(tmp_path: Path) -> None:
    src = float32_list(tmp_path)
    small = privatize(src, tmp_path / "out32.parquet")
    large = privatize(src, tmp_path / "out64.parquet", dtype="float64")
    assert vector_type(small.output) == pa.list_(pa.float32(), D)
    assert vector_type(large.output) == pa.list_(pa.float64(), D)
    assert sidecar_of(small)["data"]["dtype"] == "float32" and sidecar_of(large)["data"]["dtype"] == "float64"
    ratio = small.output.stat().st_size / large.output.stat().st_size
    assert 0.4 < ratio < 0.6, ratio
    # the same seeded run: float32 output is exactly the float64 output rounded to nearest
    assert np.array_equal(read_list(small.output), read_list(large.output).astype(np.float32))


def test_float32_columns_input_is_written_as_float32_columns(tmp_path: Path) -> None:
    src = float32_columns(tmp_path)
    small = privatize(src, tmp_path / "out32.parquet")
    large = privatize(src, tmp_path / "out64.parquet", dtype="float64")
    schema32, schema64 = pq.read_schema(small.output), pq.read_schema(large.output)
    assert schema32.names == [f"x{j}" for j in range(D)]
    assert all(field.type == pa.float32() for field in schema32)
    assert all(field.type == pa.float64() for field in schema64)
    assert sidecar_of(small)["data"]["dtype"] == "float32"
    ratio = small.output.stat().st_size / large.output.stat().st_size
    assert 0.4 < ratio < 0.65, ratio
    t32, t64 = pq.read_table(small.output), pq.read_table(large.output)
    for name in schema32.names:
        assert np.array_equal(t32.column(name).to_numpy(), t64.column(name).to_numpy().astype(np.float32))


def test_float64_and_integer_inputs_stay_float64(tmp_path: Path) -> None:
    src64 = write_list(tmp_path / "x64.parquet", unit_rows(N, 4))
    assert vector_type(privatize(src64, tmp_path / "o64.parquet").output) == pa.list_(pa.float64(), 4)
    ints = tmp_path / "ints.parquet"
    pq.write_table(pa.table({"a": [0, 1, 0, -1] * 10, "b": [1, 0, 0, 0] * 10}), ints)
    result = privatize(ints, tmp_path / "oi.parquet")
    assert pq.read_schema(result.output).field("a").type == pa.float64()
    assert sidecar_of(result)["data"]["dtype"] == "float64"


@pytest.mark.parametrize("out_name", ["out.parquet", "out.csv"])
def test_csv_input_is_written_as_float64(tmp_path: Path, out_name: str) -> None:
    rows = unit_rows(N, 4, seed=3).astype(np.float32)  # float32 values, but CSV text has no type
    src = tmp_path / "in.csv"
    pacsv.write_csv(pa.table({f"x{j}": rows[:, j] for j in range(4)}), src)
    result = privatize(src, tmp_path / out_name)
    assert sidecar_of(result)["data"]["dtype"] == "float64"
    if out_name.endswith(".parquet"):
        assert pq.read_schema(result.output).field("x0").type == pa.float64()


def test_an_explicit_dtype_wins_both_ways(tmp_path: Path) -> None:
    src64 = write_list(tmp_path / "x64.parquet", unit_rows(N, 4))
    up = privatize(src64, tmp_path / "down.parquet", dtype="float32")
    assert vector_type(up.output) == pa.list_(pa.float32(), 4) and sidecar_of(up)["data"]["dtype"] == "float32"
    src32 = float32_list(tmp_path)
    down = privatize(src32, tmp_path / "up.parquet", dtype="float64")
    assert vector_type(down.output) == pa.list_(pa.float64(), D) and sidecar_of(down)["data"]["dtype"] == "float64"


@pytest.mark.parametrize("bad", ["float16", "double", "FLOAT32", "", 32])
def test_an_unknown_dtype_is_a_usage_error_and_leaves_nothing(tmp_path: Path, bad: Any) -> None:
    src = float32_list(tmp_path)
    out = tmp_path / "out.parquet"
    with pytest.raises(UsageError, match="^dtype must be float32 or float64"):
        privatize(src, out, dtype=bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]


def test_csv_output_of_float32_reads_back_as_the_same_float32_values(tmp_path: Path) -> None:
    src = float32_columns(tmp_path)
    text32 = privatize(src, tmp_path / "out32.csv")
    text64 = privatize(src, tmp_path / "out64.csv", dtype="float64")
    assert sidecar_of(text32)["data"]["dtype"] == "float32"
    exact = pacsv.read_csv(text64.output)
    as32 = pacsv.read_csv(
        text32.output, convert_options=pacsv.ConvertOptions(column_types={f"x{j}": pa.float32() for j in range(D)})
    )
    for name in exact.column_names:
        assert np.array_equal(as32.column(name).to_numpy(), exact.column(name).to_numpy().astype(np.float32)), name
    assert text32.output.stat().st_size < 0.8 * text64.output.stat().st_size


def test_output_dtype_follows_the_reader(tmp_path: Path) -> None:
    with open_vectors(float32_list(tmp_path)) as reader:
        assert output_dtype(None, reader) == "float32"
        assert output_dtype("float64", reader) == "float64"
    with open_vectors(write_list(tmp_path / "x64.parquet", unit_rows(5, 3))) as reader:
        assert output_dtype(None, reader) == "float64"
    assert output_dtype(None, SimpleNamespace(format="parquet", precision=2.0**-11)) == "float32"  # type: ignore[arg-type]
    assert output_dtype(None, SimpleNamespace(format="csv", precision=1e-6)) == "float64"  # type: ignore[arg-type]
    assert output_dtype(None) == "float64"
    with pytest.raises(UsageError, match="^dtype must be float32 or float64"):
        output_dtype("float16")


def test_the_writer_defaults_to_float64_and_writes_float32_when_asked(tmp_path: Path) -> None:
    layout = VectorLayout("list", ("v",), 3)
    values = np.array([[0.1, 0.2, 0.3], [1 / 3, -2 / 3, 1e-40]])
    for dtype, arrow in ((None, pa.float64()), ("float32", pa.float32())):
        target = tmp_path / f"{dtype}.parquet"
        with AtomicVectorWriter(target, layout, dtype=dtype) as writer:
            writer.write(values)
            writer.commit()
        assert writer.dtype == ("float64" if dtype is None else dtype)
        assert vector_type(target, "v") == pa.list_(arrow, 3)
        assert np.array_equal(read_list(target, "v"), values.astype(arrow.to_pandas_dtype()))


def test_a_value_beyond_the_float32_range_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    src = write_list(tmp_path / "big.parquet", unit_rows(50, 4, radius=1e37).astype(np.float32))
    with pytest.raises(UsageError, match="beyond the float32 range.*dtype float64"):
        write_file_release(src, tmp_path / "out.parquet", mechanism="laplace", epsilon=0.01, norm_bound=1e37, options=ReleaseOptions(seed=1))
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]
    result = write_file_release(src, tmp_path / "out.parquet", mechanism="laplace", epsilon=0.01, norm_bound=1e37, options=ReleaseOptions(seed=1, dtype="float64"))
    assert np.isfinite(read_list(result.output)).all()


# --- estimating from a float32 release --------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_estimate_mean_of_a_float32_release_matches_the_float64_one(tmp_path: Path, suffix: str) -> None:
    src = float32_columns(tmp_path)
    small = privatize(src, tmp_path / f"out32{suffix}", dtype="float32")
    large = privatize(src, tmp_path / f"out64{suffix}", dtype="float64")
    m32, m64 = estimate_file_mean(small.output), estimate_file_mean(large.output)
    assert m32.verified and m32.n == m64.n == N
    assert m32.expected_error == m64.expected_error
    # each value moved by at most half an ulp of float32, so the mean by at most that of the largest
    table = pq.read_table(large.output) if suffix == ".parquet" else pacsv.read_csv(large.output)
    biggest = max(float(np.max(np.abs(column.to_numpy()))) for column in table.columns)
    # CSV: the shortest text of the float32 adds at most another half ulp when read as float64
    assert np.max(np.abs(m32.mean - m64.mean)) <= biggest * F32_ROUND * (1 if suffix == ".parquet" else 2)
    assert not np.array_equal(m32.mean, m64.mean)  # it really was rounded


def test_scan_reads_float32_files_as_float64(tmp_path: Path) -> None:
    result = privatize(float32_list(tmp_path), tmp_path / "out.parquet")
    batches = list(scan(result.output))
    values = np.concatenate([batch.values for batch in batches])
    assert values.dtype == np.float64 and values.shape == (N, D)
    assert np.array_equal(values, read_list(result.output).astype(np.float64))


@pytest.mark.parametrize("written, claimed", [("float64", "float32"), ("float32", "float64")])
def test_scan_refuses_a_file_whose_vector_type_disagrees_with_its_sidecar(
    tmp_path: Path, written: str, claimed: str
) -> None:
    result = privatize(float32_list(tmp_path), tmp_path / "out.parquet", dtype=written)
    content = sidecar_of(result)
    content["data"]["dtype"] = claimed
    result.sidecar.write_text(json.dumps(content))
    with pytest.raises(DataError) as excinfo:
        scan(result.output)
    text = str(excinfo.value)
    stored = "double" if written == "float64" else "float"
    assert text.startswith(f"{result.output}: column 'vec' holds fixed_size_list<element: {stored}>[{D}], "
                           f"i.e. {written} values, but its sidecar {result.sidecar} records data.dtype {claimed!r}"), text
    assert "\n" not in text
    with pytest.raises(DataError, match="data.dtype"):
        estimate_file_mean(result.output)
    # --no-verify: the check is a binding check, like n and the hash
    assert estimate_file_mean(result.output, verify=False).n == N


def test_scan_refuses_a_release_re_encoded_as_float64_before_reading_it(tmp_path: Path) -> None:
    result = privatize(float32_columns(tmp_path), tmp_path / "out.parquet")
    table = pq.read_table(result.output)
    pq.write_table(table.cast(pa.schema([pa.field(f.name, pa.float64()) for f in table.schema])), result.output)
    with pytest.raises(DataError, match=r"column 'x0' holds double, i.e. float64 values, but .* records data.dtype 'float32'"):
        scan(result.output)


# --- the release record -------------------------------------------------------------------------------


def test_new_sidecars_validate_against_the_schema(tmp_path: Path) -> None:
    check = jsonschema.Draft202012Validator(sidecar_schema())
    src = float32_list(tmp_path, ids=True)
    for i, (mechanism, options) in enumerate([("privunit2", {}), ("gaussian", {"delta": 1e-6}), ("laplace", {})]):
        result = privatize(src, tmp_path / f"o{i}.parquet", mechanism=mechanism, options=options, keep=["id"],
                           warnings=["a caller's warning"])
        content = sidecar_of(result)
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in check.iter_errors(content)]
        assert not errors, errors


@pytest.mark.parametrize("keep", [[], ["id"], ["label", "id"]])
def test_unprivatized_columns_are_the_keep_columns(tmp_path: Path, keep: list[str]) -> None:
    src = float32_list(tmp_path, ids=True, label=pa.array(np.arange(N) % 3))
    result = privatize(src, tmp_path / "out.parquet", keep=keep)
    release = sidecar_of(result)["release"]
    assert release["unprivatized_columns"] == keep
    assert release["warnings"] == ([python_text(unprivatized_warning(keep))] if keep else [])  # recorded unmarked
    meta = load_sidecar(result.sidecar)
    assert meta.unprivatized_columns == tuple(keep) == meta.layout.keep


def test_caller_warnings_are_recorded(tmp_path: Path) -> None:
    result = privatize(float32_list(tmp_path), tmp_path / "out.parquet", warnings=["first", "second", "first"])
    assert sidecar_of(result)["release"]["warnings"] == ["first", "second"]
    assert load_sidecar(result.sidecar).warnings == ("first", "second")


def test_a_gaussian_sidecar_is_marked_baseline_with_a_warning_naming_delta(tmp_path: Path) -> None:
    result = privatize(float32_list(tmp_path), tmp_path / "out.parquet", mechanism="gaussian",
                       options={"delta": 1e-6}, warnings=["from the caller"])
    content = sidecar_of(result)
    assert content["mechanism"]["baseline"] is True
    first, second = content["release"]["warnings"]
    assert first == baseline_warning(result.mechanism) and second == "from the caller"
    assert "(ε, δ)-DP" in first and "δ = 1e-06" in first and "not pure ε-LDP" in first and "not for release" in first
    meta = load_sidecar(result.sidecar)
    assert meta.baseline is True and meta.warnings == (first, second)


def test_a_laplace_sidecar_is_marked_baseline_with_the_floating_point_warning(tmp_path: Path) -> None:
    result = privatize(float32_list(tmp_path), tmp_path / "out.parquet", mechanism="laplace")
    content = sidecar_of(result)
    assert content["mechanism"]["baseline"] is True
    (text,) = content["release"]["warnings"]
    assert text == baseline_warning(result.mechanism)
    assert "Mironov 2012" in text and "floating-point" in text and "privunit2" in text and "not for release" in text
    # the caller may print the same sentence: recorded once
    again = privatize(float32_list(tmp_path, "b.parquet"), tmp_path / "again.parquet", mechanism="laplace",
                      warnings=[text])
    assert sidecar_of(again)["release"]["warnings"] == [text]


def test_non_baselines_are_marked_so_and_get_no_warning(tmp_path: Path) -> None:
    for name in ("privunit2", "privunitg", "duchi-l2"):
        mech = get_mechanism(name).calibrate(8, 1.0)
        assert baseline_warning(mech) is None
    result = privatize(float32_list(tmp_path), tmp_path / "out.parquet")
    content = sidecar_of(result)
    assert content["mechanism"]["baseline"] is False and content["release"]["warnings"] == []
    assert load_sidecar(result.sidecar).baseline is False


def test_sidecars_written_before_these_fields_still_load(tmp_path: Path) -> None:
    src = write_list(tmp_path / "x.parquet", unit_rows(N, 4), ids=True)
    for mechanism, options in (("privunit2", {}), ("gaussian", {"delta": 1e-5})):
        result = privatize(src, tmp_path / f"{mechanism}.parquet", keep=["id"], mechanism=mechanism, options=options)
        content = sidecar_of(result)
        del content["data"]["dtype"], content["mechanism"]["baseline"]
        del content["release"]["unprivatized_columns"], content["release"]["warnings"]
        result.sidecar.write_text(json.dumps(content))
        meta = load_sidecar(result.sidecar)
        assert meta.dtype == "float64" and meta.dtype_recorded is False
        assert meta.unprivatized_columns == ("id",) and meta.warnings == ()
        assert meta.baseline is (mechanism == "gaussian")
        assert estimate_file_mean(result.output).n == N


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (lambda c: c["data"].update(dtype="float16"), "'data.dtype' is missing or malformed"),
        (lambda c: c["data"].update(dtype=32), "'data.dtype' is missing or malformed"),
        (lambda c: c["release"].update(unprivatized_columns="id"), "'release.unprivatized_columns' is missing"),
        (lambda c: c["release"].update(unprivatized_columns=[]), "'release.unprivatized_columns' is [] but the layout"),
        (lambda c: c["release"].update(warnings=[1]), "'release.warnings' is missing or malformed"),
        (lambda c: c["mechanism"].update(baseline=True), "'mechanism.baseline' is true but privunit2 is not a baseline"),
        (lambda c: c["mechanism"].update(baseline="no"), "'mechanism.baseline' is missing or malformed"),
    ],
)
def test_malformed_new_fields_are_refused(tmp_path: Path, edit: Any, fragment: str) -> None:
    src = write_list(tmp_path / "x.parquet", unit_rows(20, 4), ids=True)
    result = privatize(src, tmp_path / "out.parquet", keep=["id"])
    content = sidecar_of(result)
    edit(content)
    result.sidecar.write_text(json.dumps(content))
    with pytest.raises(DataError) as excinfo:
        load_sidecar(result.sidecar)
    assert fragment in str(excinfo.value), str(excinfo.value)
