"""Seed-compressed reports in a dataset directory (issue 40 item 3): ``-o DIR/`` and the Dask engine write each
part's rows as seeds, bit for bit the seeds ``privatize_file`` writes for the same input and seed (keyed
randomness), every part's sidecar carries the ``reports`` block, and the directory is estimated as one release,
on the local engine and on Dask, with the reports' exact error. The Dask runs skip where Dask is not installed.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import ldp, unit_rows, write_list

from ldpcli.analysis._estimate import estimate_file_mean
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._engines import DaskEngine
from ldpcli.release._file import write_file_release
from ldpcli.release._inputs import MANIFEST_NAME
from ldpcli.release._options import ReleaseOptions, Resources
from ldpcli.release._sidecar import load_sidecar

D = 16  # key blocks of 512 rows


def seeds_of(path: Path) -> np.ndarray:
    column = pq.read_table(path).column("report").combine_chunks()
    return np.asarray(column.flatten().to_numpy(), dtype=np.uint64).reshape(len(column), -1) if column.type.num_fields \
        else np.asarray(column.to_numpy(), dtype=np.uint64).reshape(-1, 1)


@pytest.mark.parametrize("bits", [64, 128])
def test_a_dataset_of_seed_reports_is_the_file_release_cut_into_parts(tmp_path: Path, bits: int) -> None:
    source = write_list(tmp_path / "in.parquet", unit_rows(2600, D, seed=1), row_group_size=700)
    options = ReleaseOptions(seed=9, report_bits=bits)
    single = write_file_release(source, tmp_path / "single.parquet", epsilon=3.0, options=options)
    engines = {"local": None}
    if importlib.util.find_spec("dask") is not None:
        engines["dask"] = DaskEngine("threads")
    for name, engine in engines.items():
        out = tmp_path / name
        run = write_dataset_release(source, out, engine=engine, epsilon=3.0,
                                    options=options if engine is not None else
                                    ReleaseOptions(seed=9, report_bits=bits, resources=Resources(threads=3)))
        assert run.reports == single.reports and run.summary()["reports"]["bits"] == bits
        parts = [out / part["file"] for part in json.loads((out / MANIFEST_NAME).read_text())["parts"]]
        assert len(parts) == 4
        for part in parts:
            meta = load_sidecar(part.with_name(part.name + ".ldp.json"))
            assert meta.reports == single.reports and meta.dtype == "uint64"
        assert np.array_equal(np.concatenate([seeds_of(part) for part in parts]), seeds_of(single.output))
        estimate = estimate_file_mean(out, engine=engine)
        assert estimate.n == 2600
        assert estimate.expected_error == single.reports.expected_error_mean(2600)
        assert np.allclose(estimate.mean, estimate_file_mean(single.output).mean, rtol=1e-12, atol=1e-15)  # sums in another order


def test_the_cli_writes_a_directory_of_seed_reports(tmp_path: Path) -> None:
    source = write_list(tmp_path / "in.parquet", unit_rows(1500, D, seed=2), row_group_size=700)
    result = ldp("privatize", source, "--eps", 3, "--compress-reports", "-o", f"{tmp_path}/out/", "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["reports"]["bits"] == 64 and summary["layout"]["columns"] == ["report"]
    estimate = ldp("estimate-mean", tmp_path / "out", "--json")
    assert estimate.exit_code == 0, estimate.stderr
    assert json.loads(estimate.stdout)["n"] == 1500
