"""Seed-compressed reports in files (issue 40 item 3): ``ldp privatize --compress-reports`` writes one uint64
seed (or two words) per row in a Parquet column, the sidecar's ``reports`` block states them and is rebuilt
when read, and every reader of a release decodes them: bit for bit the library's decoder, whatever the batch
size, unbiased with the exact error the estimate reports. Every way a file or sidecar can disagree with its
reports, and every option the reports cannot honour, is one clear refusal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import bonferroni_z, ldp, ledger_document, unit_rows, write_list

from ldpcli.analysis._estimate import estimate_file_mean
from ldpcli.analysis._scan import scan
from ldpcli.errors import DataError, UsageError
from ldpcli.mechanisms import MechanismSpec, SeedReports
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._file import write_file_release
from ldpcli.release._options import Columns, ReleaseOptions, Resources
from ldpcli.release._sidecar import load_sidecar, sidecar_schema

ROWS, D = 1200, 6


def release(tmp: Path, name: str, *, mechanism: str = "privunit2", epsilon: float = 3.0, bits: int = 64,
            rows: np.ndarray | None = None, **options: Any) -> Path:
    """A seeded release of seed reports of ``rows`` (default ROWS unit rows of d = D) into ``tmp/name``."""
    source = tmp / f"{name}.in.parquet"
    if not source.exists():
        write_list(source, unit_rows(ROWS, D, seed=3) if rows is None else rows, ids=True)
    target = tmp / name
    write_file_release(source, target, mechanism=mechanism, epsilon=epsilon,
                       options=ReleaseOptions(report_bits=bits, seed=options.pop("seed", 11), **options))
    return target


def column_words(path: Path) -> np.ndarray:
    """The report column read straight from the Parquet file, as (n, words) uint64."""
    column = pq.read_table(path).column("report").combine_chunks()
    if pa.types.is_integer(column.type):
        return np.asarray(column.to_numpy(), dtype=np.uint64).reshape(-1, 1)
    return np.asarray(column.flatten().to_numpy(), dtype=np.uint64).reshape(len(column), -1)


@pytest.mark.parametrize(("mechanism", "bits"), [("privunit2", 64), ("privunit2", 128), ("privunitg", 64),
                                                  ("privunitg", 128)])
def test_a_release_is_one_seed_per_row_and_every_reader_decodes_it_bit_for_bit(
        tmp_path: Path, mechanism: str, bits: int) -> None:
    target = release(tmp_path, "out.parquet", mechanism=mechanism, bits=bits, columns=Columns(keep=("id",)))
    schema = pq.read_schema(target)
    assert schema.names == ["id", "report"]
    assert schema.field("report").type == (pa.uint64() if bits == 64 else pa.list_(pa.uint64(), 2))
    content = json.loads(target.with_name(target.name + ".ldp.json").read_text())
    jsonschema.Draft202012Validator(sidecar_schema()).validate(content)
    meta = load_sidecar(target.with_name(target.name + ".ldp.json"))
    expected = SeedReports.build(MechanismSpec(mechanism, 3.0, None, 1.0).calibrate(D), bits)
    assert meta.reports == expected and meta.d == D and meta.dtype == "uint64"
    assert content["reports"]["bits"] == bits and content["reports"]["tries"] == expected.tries
    assert content["data"]["d"] == D and content["data"]["layout"]["d"] == bits // 64
    assert content["reports"]["epsilon_exact"] <= content["mechanism"]["epsilon_exact"]
    decoded = expected.decode(column_words(target))
    for batch_rows in (1, 7, None):  # the same bits whatever the batch
        values = np.concatenate([batch.values for batch in scan(target, batch_rows=batch_rows)])
        assert np.array_equal(values, decoded)
    ids = np.concatenate([batch.keep.column("id").to_numpy() for batch in scan(target)])
    assert np.array_equal(ids, np.arange(ROWS))


def test_a_seeded_release_is_the_same_whatever_the_threads_and_batches(tmp_path: Path) -> None:
    one = release(tmp_path, "one.parquet", resources=Resources(threads=1, batch_rows=100))
    two = release(tmp_path, "two.parquet", resources=Resources(threads=2, batch_rows=333))
    assert np.array_equal(column_words(one), column_words(two))
    other = release(tmp_path, "other.parquet", seed=12)
    assert np.mean(column_words(other) == column_words(one)) < 0.01  # another seed, other seeds


def test_a_release_is_eight_bytes_a_row(tmp_path: Path) -> None:
    rows = unit_rows(20_000, 500, seed=1)
    target = release(tmp_path, "big.parquet", epsilon=2.0, rows=rows)
    assert target.stat().st_size < 20_000 * 8 + 4096  # the seeds and Parquet's few hundred bytes of framing
    assert (tmp_path / "big.parquet.in.parquet").stat().st_size > 20_000 * 500 * 8


@pytest.mark.parametrize(("mechanism", "bits"), [("privunit2", 64), ("privunitg", 128)])
@pytest.mark.parametrize("where", ["vertex", "interior"])
def test_the_decoded_rows_are_unbiased_with_the_exact_error(tmp_path: Path, mechanism: str, bits: int,
                                                            where: str) -> None:
    """Every row is the same x, so the estimate's mean has E = x and E‖mean − x‖² = E‖Z − x‖²/n; each
    coordinate is checked against x at Bonferroni level 1e-6 over the 2 × d tests of this file, with the
    standard error from the rows, and E‖Z − x‖² (at the vertex, ‖x‖ = L) against the reports' exact value."""
    n, d = 20_000, 3
    x = np.zeros(d)
    if where == "vertex":
        x[0] = 1.0
    else:
        x[:] = 0.4 / np.sqrt(d)
    target = release(tmp_path, "mc.parquet", mechanism=mechanism, bits=bits, epsilon=2.0, rows=np.tile(x, (n, 1)),
                     seed=5)
    estimate = estimate_file_mean(target)
    reports = load_sidecar(target.with_name(target.name + ".ldp.json")).reports
    assert reports is not None
    assert estimate.expected_error == reports.expected_error_mean(n)
    assert estimate.expected_error > reports.base.expected_error_mean(n)  # the fallback's share, exactly counted
    z = bonferroni_z(1e-6, 2 * d)
    assert estimate.std_error is not None
    assert np.all(np.abs(estimate.mean - x) <= z * estimate.std_error)
    if where == "vertex":
        values = np.concatenate([batch.values for batch in scan(target)])
        errors = np.sum((values - x) ** 2, axis=1)
        assert abs(errors.mean() - reports.expected_error) <= z * errors.std(ddof=1) / np.sqrt(n)


def test_the_cli_round_trip_and_the_ledger(tmp_path: Path) -> None:
    source = write_list(tmp_path / "in.parquet", unit_rows(ROWS, D, seed=2))
    ledger = tmp_path / "ledger.json"
    out = f"{tmp_path}/out/"
    result = ldp("privatize", source, "-o", out, "--layout", "files", "--eps", 3, "--compress-reports",
                 "--report-bits", 128, "--ledger", ledger, "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["reports"]["bits"] == 128 and summary["dtype"] == "uint64"
    assert "list column 'vec'" in result.stderr  # the input's vectors, not the output's report column
    target = tmp_path / "out" / "in.privatized.parquet"
    estimate = ldp("estimate-mean", target, "--json")
    assert estimate.exit_code == 0, estimate.stderr
    reports = load_sidecar(target.with_name(target.name + ".ldp.json")).reports
    assert reports is not None
    assert json.loads(estimate.stdout)["expected_error"] == reports.expected_error_mean(ROWS)
    (entry,) = ledger_document(ledger)["entries"]
    assert entry["epsilon_exact"] == 3.0 >= reports.epsilon_exact  # the ledger charges the base's exact ε
    params = ldp("params", "--d", D, "--eps", 3, "-m", "privunit2", "--compress-reports", "--report-bits", 128,
                 "--json")
    assert json.loads(params.stdout)["reports"] == {key: value for key, value in summary["reports"].items()
                                                    if key != "column"}


@pytest.mark.parametrize(("edit", "field"), [
    (lambda c: c["reports"].update(tries=c["reports"]["tries"] - 1), "reports.tries"),
    (lambda c: c["reports"].update(fallback_probability=0.0), "reports.fallback_probability"),
    (lambda c: c["reports"].update(bits=128), "not that of 128-bit reports"),
    (lambda c: c["reports"].update(prg="another generator"), "reports.prg"),
    (lambda c: c.pop("reports"), "the layout has d = 1"),
    (lambda c: c["data"].update(dtype="float64"), "data.dtype"),
])
def test_a_sidecar_that_disagrees_with_its_reports_is_refused(tmp_path: Path, edit: Any, field: str) -> None:
    target = release(tmp_path, "out.parquet")
    side = target.with_name(target.name + ".ldp.json")
    content = json.loads(side.read_text())
    edit(content)
    side.write_text(json.dumps(content))
    with pytest.raises(DataError, match="out.parquet.ldp.json") as caught:
        load_sidecar(side)
    assert field in str(caught.value)


def test_a_report_file_that_is_not_what_its_sidecar_says_is_refused(tmp_path: Path) -> None:
    target = release(tmp_path, "out.parquet", columns=Columns(keep=("id",)))
    side = target.with_name(target.name + ".ldp.json")
    table = pq.read_table(target)
    as_floats = table.set_column(1, "report", pc.cast(table.column("report"), pa.float64(), safe=False))
    pq.write_table(as_floats, target)
    with pytest.raises(DataError, match="report.*double|holds double"):
        estimate_file_mean(target)
    with pytest.raises(DataError, match="holds double"):
        estimate_file_mean(target, verify=False)
    words = table.column("report").to_pylist()
    words[5] = None
    pq.write_table(table.set_column(1, "report", pa.array(words, pa.uint64())), target)
    with pytest.raises(DataError, match=r"row 6 \(counting from 1\) has no report"):
        estimate_file_mean(target, verify=False)
    pq.write_table(table, target)  # the rows as written, in other bytes: its SHA-256 differs
    assert estimate_file_mean(target, verify=False).n == ROWS
    assert side.exists()


def test_shards_of_other_report_lengths_are_refused(tmp_path: Path) -> None:
    short = release(tmp_path, "a.parquet")
    long = release(tmp_path, "b.parquet", bits=128, seed=12)
    with pytest.raises(DataError, match="as 64-bit seed reports"):
        scan([short, long])


@pytest.mark.parametrize(("options", "message"), [
    ({"copies": 2}, "do not take copies"),
    ({"secure": True}, "do not take secure"),
    ({"dtype": "float32"}, "do not take dtype"),
    ({"report_bits": 32}, "report_bits must be 64 or 128"),
    ({"columns": Columns(keep=("report",))}, "share its name"),
])
def test_what_reports_cannot_honour_is_refused_before_a_row_is_read(tmp_path: Path, options: dict[str, Any],
                                                                     message: str) -> None:
    source = write_list(tmp_path / "in.parquet", unit_rows(10, D), report=pa.array(np.arange(10)))
    options = {"report_bits": 64, **options}
    with pytest.raises(UsageError, match=message):
        write_file_release(source, tmp_path / "out.parquet", epsilon=3.0, options=ReleaseOptions(**options))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.parquet"]


def test_other_outputs_mechanisms_and_costs_are_refused(tmp_path: Path) -> None:
    source = write_list(tmp_path / "in.parquet", unit_rows(10, 500))
    options = ReleaseOptions(report_bits=64)
    with pytest.raises(UsageError, match="written to Parquet"):
        write_file_release(source, tmp_path / "out.csv", epsilon=3.0, options=options)
    with pytest.raises(UsageError, match="not duchi-l2"):
        write_file_release(source, tmp_path / "out.parquet", mechanism="duchi-l2", epsilon=3.0, options=options)
    with pytest.raises(UsageError, match="3.69e\\+05 tries per row"):
        write_file_release(source, tmp_path / "out.parquet", epsilon=16.0, options=options)
    with pytest.raises(UsageError, match="not duchi-l2"):
        write_dataset_release(source, tmp_path / "dataset", engine=None, mechanism="duchi-l2", epsilon=3.0,
                              options=options)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.parquet"]
    alone = ldp("privatize", source, "-o", tmp_path / "x.parquet", "--eps", 3, "--report-bits", 128)
    assert alone.exit_code == 2 and "add --compress-reports" in alone.stderr
    csv = ldp("privatize", source, "-o", tmp_path / "x.csv", "--eps", 3, "--compress-reports")
    assert csv.exit_code == 2 and "name a .parquet output" in csv.stderr


def test_the_reconstruction_demonstration_refuses_seed_reports(tmp_path: Path) -> None:
    target = release(tmp_path, "out.parquet")
    result = ldp("risk", "--attack", target, "--raw", tmp_path / "out.parquet.in.parquet")
    assert result.exit_code != 0 and "seed reports" in result.stderr


def test_privatizing_a_release_of_seed_reports_is_refused(tmp_path: Path) -> None:
    target = release(tmp_path, "out.parquet")
    result = ldp("privatize", target, "-o", tmp_path / "again.parquet", "--eps", 2)
    assert result.exit_code == 2 and "holds seed-compressed reports" in result.stderr, result.stderr
    assert not (tmp_path / "again.parquet").exists()


def test_shuffled_seed_reports_are_the_unshuffled_ones_permuted_with_the_central_claim(tmp_path: Path) -> None:
    """--shuffle with --compress-reports: the same multiset of seeds in another order (bit for bit, through the
    bucket files of a 1 MB budget), the central claim in the sidecar, and the same mean."""
    rows = unit_rows(50_000, 4, seed=6)  # 24 bytes a record: 1.2 MB, past the half of the budget the shuffle holds
    plain = release(tmp_path, "plain.parquet", rows=rows, resources=Resources(memory=2**20))
    shuffled = release(tmp_path, "shuffled.parquet", rows=rows, shuffle=True, resources=Resources(memory=2**20))
    a, b = column_words(plain), column_words(shuffled)
    assert np.array_equal(np.sort(a, axis=0), np.sort(b, axis=0))
    assert np.mean(a != b) > 0.99
    content = json.loads((tmp_path / "shuffled.parquet.ldp.json").read_text())
    jsonschema.Draft202012Validator(sidecar_schema()).validate(content)
    assert content["release"]["shuffled"]["n"] == 50_000 and content["reports"]["bits"] == 64
    assert np.allclose(estimate_file_mean(shuffled).mean, estimate_file_mean(plain).mean, rtol=1e-12, atol=1e-14)
