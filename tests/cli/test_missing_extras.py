"""A missing optional package: one line that names every package the run needs and lacks, the one
``pip install`` line (both forms) that adds them all, and exit 1 whichever extra it is (issue 36:
`--central-radius` named one of its two extras, and Dask alone exited 2). Real processes, with the
packages hidden by ``helpers.ldp_without``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import ldp_without, unit_rows, write_list

CENTRAL = ("--central-radius", 1, "--sampling-rate", 0.1, "--noise-multiplier", 1)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    rows = unit_rows(50, 4)
    return write_list(tmp_path / "train.parquet", rows, column="x", label=pa.array(np.arange(50) % 2))


def test_the_central_layer_names_both_of_its_extras_at_once(data: Path, tmp_path: Path) -> None:
    result = ldp_without(("dp_accounting", "randomgen"), "train", data, "--label", "label", "--eps", 2, *CENTRAL,
                         ledger=tmp_path / "ledger.json")
    assert result.returncode == 1, result.stderr
    assert result.stderr == ("ldp: error: the central layer needs dp-accounting and randomgen, which are not installed: "
                             "pip install 'ldp[central,secure]' (from a clone of ldp: pip install -e "
                             "'.[central,secure]')\n")
    assert not (tmp_path / "ledger.json").exists()


@pytest.mark.parametrize(("hidden", "named", "extra"), [("dp_accounting", "dp-accounting", "central"),
                                                        ("randomgen", "randomgen", "secure")])
def test_one_missing_extra_of_the_central_layer_is_named_alone(data: Path, tmp_path: Path, hidden: str, named: str,
                                                               extra: str) -> None:
    result = ldp_without(hidden, "train", data, "--label", "label", "--eps", 2, *CENTRAL, ledger=tmp_path / "l.json")
    assert result.returncode == 1
    assert f"the central layer needs {named}, which is not installed: pip install 'ldp[{extra}]'" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("command", ["privatize", "estimate-mean"])
def test_dask_missing_exits_1_like_every_other_extra(data: Path, tmp_path: Path, command: str) -> None:
    args = ("--eps", 2, "-o", tmp_path / "out/") if command == "privatize" else ()
    result = ldp_without("dask", command, data, *args, "--engine", "dask", ledger=tmp_path / "l.json")
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("ldp: error: --engine dask needs Dask: pip install 'ldp[dask]' (from a clone of ldp: "
                                    "pip install -e '.[dask]')")
    signing = ldp_without("cryptography", "keys", "init", ledger=tmp_path / "l.json")
    assert signing.returncode == result.returncode == 1
