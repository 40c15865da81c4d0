"""The file pipeline at scale: batches, threads, memory budget, shards, streaming moments."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import ldp, read_list, unit_rows, write_list

from ldpcli.analysis._estimate import estimate_file_mean
from ldpcli.errors import DataError, UsageError
from ldpcli.estimators._moments import RunningMoments
from ldpcli.release._file import write_file_release
from ldpcli.release._options import ReleaseOptions, Resources


def test_seeded_output_does_not_depend_on_the_thread_count(tmp_path: Path) -> None:
    src = tmp_path / "x.parquet"
    write_list(src, unit_rows(3000, 8))
    outs = []
    for threads in (1, 2, 3, 12):
        result = write_file_release(src, tmp_path / f"o{threads}.parquet", epsilon=2.0, options=ReleaseOptions(seed=7, resources=Resources(threads=threads, memory=2**20)))
        assert result.n == 3000
        outs.append(pq.read_table(result.output))
    assert pq.ParquetFile(tmp_path / "o1.parquet").num_row_groups > 3  # really several batches
    assert outs[0].equals(outs[1]) and outs[0].equals(outs[2]) and outs[0].equals(outs[3])
    # Past 6 threads the budget is shared by threads + 2 batches (no cap at 6): smaller batches, the same rows.
    groups = {}
    for threads in (6, 12):
        out = tmp_path / f"big{threads}.parquet"
        write_file_release(src, out, epsilon=2.0, options=ReleaseOptions(seed=7, resources=Resources(threads=threads, memory=2**22)))
        assert pq.read_table(out).equals(outs[0])
        groups[threads] = pq.ParquetFile(out).num_row_groups
    assert groups[12] > groups[6]


def test_rows_keep_their_order_with_threads(tmp_path: Path) -> None:
    """With ε huge the output is (almost exactly) the input direction: order is visible."""
    src = tmp_path / "x.parquet"
    x = unit_rows(2000, 3)
    write_list(src, x)
    result = write_file_release(src, tmp_path / "o.parquet", epsilon=5000.0, options=ReleaseOptions(resources=Resources(threads=2, memory=2**20)))
    z = read_list(result.output)
    assert np.allclose(z, x, atol=1e-9)


def test_memory_budget_sets_the_batch_size(tmp_path: Path) -> None:
    src = tmp_path / "x.parquet"
    write_list(src, unit_rows(4000, 16))
    small = write_file_release(src, tmp_path / "a.parquet", epsilon=1.0, options=ReleaseOptions(seed=1, resources=Resources(memory=2**20)))
    large = write_file_release(src, tmp_path / "b.parquet", epsilon=1.0, options=ReleaseOptions(seed=1, resources=Resources(memory=2**30)))
    assert pq.ParquetFile(small.output).num_row_groups > pq.ParquetFile(large.output).num_row_groups == 1


@pytest.mark.parametrize("options, fragment", [(ReleaseOptions(resources=Resources(threads=0)), "threads"),
                                               (ReleaseOptions(resources=Resources(memory=1000)), "memory"),
                                               (ReleaseOptions(seed=-1), "seed")])
def test_bad_scale_options(tmp_path: Path, options: ReleaseOptions, fragment: str) -> None:
    src = tmp_path / "x.parquet"
    write_list(src, unit_rows(10, 3))
    with pytest.raises(UsageError, match=fragment):
        write_file_release(src, epsilon=1.0, options=options)


def test_memory_option_parsing(tmp_path: Path) -> None:
    src = tmp_path / "x.parquet"
    write_list(src, unit_rows(10, 3))
    assert ldp("privatize", src, "--eps", "1", "--memory", "64MB", "--threads", "2").exit_code == 0
    res = ldp("privatize", src, "--eps", "1", "--memory", "lots", "--overwrite")
    assert res.exit_code == 2 and "--memory" in res.stderr


def test_running_moments_match_numpy_and_merge_exactly() -> None:
    x = np.random.default_rng(0).standard_normal((1001, 5)) * 1e3 + 1e6  # large offset: naive sums lose digits
    whole = RunningMoments(5)
    for part in np.array_split(x, 7):
        whole.add(part)
    a, b = RunningMoments(5), RunningMoments(5)
    a.add(x[:400])
    b.add(x[400:])
    a.merge(b)
    for m in (whole, a):
        assert m.n == 1001
        assert np.allclose(m.mean, x.mean(axis=0), rtol=1e-15)
        assert np.allclose(m.m2, ((x - x.mean(axis=0)) ** 2).sum(axis=0), rtol=1e-10)


def test_shards_combine_into_one_estimate(tmp_path: Path) -> None:
    x = unit_rows(900, 6)
    parts = []
    for i, chunk in enumerate(np.array_split(x, 3)):
        src = tmp_path / f"in-{i}.parquet"
        write_list(src, chunk)
        parts.append(write_file_release(src, tmp_path / f"part-{i}.parquet", epsilon=3.0).output)
    est = estimate_file_mean(parts)
    assert est.n == 900 and est.files == tuple(parts)
    single = [estimate_file_mean(p) for p in parts]
    weighted = sum(e.mean * e.n for e in single) / 900
    assert np.allclose(est.mean, weighted, rtol=1e-12)
    assert est.expected_error == pytest.approx(single[0].expected_error * single[0].n / 900)
    res = ldp("estimate-mean", *parts, "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["n"] == 900


def test_shards_from_different_privatizations_are_refused(tmp_path: Path) -> None:
    outs = []
    for i, eps in enumerate((3.0, 4.0)):
        src = tmp_path / f"in-{i}.parquet"
        write_list(src, unit_rows(50, 6, seed=i))
        outs.append(write_file_release(src, tmp_path / f"part-{i}.parquet", epsilon=eps).output)
    with pytest.raises(DataError, match="shards of one estimate must come from one privatization"):
        estimate_file_mean(outs)
    with pytest.raises(UsageError, match="given twice"):
        estimate_file_mean([outs[0], outs[0]])
    with pytest.raises(UsageError, match="^sidecar names one sidecar"):
        estimate_file_mean(outs, sidecar=tmp_path / "part-0.parquet.ldp.json")


def test_sidecar_records_the_sha256_of_its_data_file(tmp_path: Path) -> None:
    import hashlib

    src = tmp_path / "x.parquet"
    write_list(src, unit_rows(100, 4))
    result = write_file_release(src, epsilon=1.0)
    recorded = json.loads(result.sidecar.read_text())["data"]["sha256"]
    assert recorded == hashlib.sha256(result.output.read_bytes()).hexdigest()


def test_estimate_refuses_data_changed_after_privatization(tmp_path: Path) -> None:
    """Same n, same d, same layout: only the hash can tell."""
    src = tmp_path / "x.parquet"
    write_list(src, unit_rows(100, 4))
    result = write_file_release(src, epsilon=1.0)
    values = read_list(result.output)
    values[0, 0] += 1.0
    write_list(result.output, values)
    with pytest.raises(DataError, match="do not match the SHA-256 in its sidecar"):
        estimate_file_mean(result.output)


def test_estimate_refuses_a_sidecar_written_for_another_file(tmp_path: Path) -> None:
    outs = []
    for i in range(2):
        src = tmp_path / f"in{i}.parquet"
        write_list(src, unit_rows(100, 4, seed=i))
        outs.append(write_file_release(src, epsilon=1.0, options=ReleaseOptions(seed=i)))
    with pytest.raises(DataError, match="written for 'in0.privatized.parquet'"):
        estimate_file_mean(outs[1].output, sidecar=outs[0].sidecar)


def test_read_only_batches_are_views_and_give_the_same_estimate(tmp_path: Path) -> None:
    from ldpcli.io import open_vectors

    src = tmp_path / "x.parquet"
    write_list(src, unit_rows(500, 6))
    with open_vectors(src) as reader:
        copies = [batch.values for batch in reader]
    with open_vectors(src, writable=False) as reader:
        views = [batch.values for batch in reader]
    assert all(c.flags.writeable for c in copies)
    assert np.array_equal(np.vstack(copies), np.vstack(views))
    result = write_file_release(src, epsilon=2.0, options=ReleaseOptions(seed=3))
    assert estimate_file_mean(result.output).n == 500
