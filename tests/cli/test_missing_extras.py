"""A missing optional package: one line that names every package the run needs and lacks, the one
``pip install`` line (both forms) that adds them all, and exit 1 whichever extra it is (issue 36:
`--central-radius` named one of its two extras, and Dask alone exited 2). Real processes, with the
packages hidden by ``helpers.ldp_without``."""

from __future__ import annotations

import json
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


def test_the_central_layer_names_dp_accounting_and_needs_no_randomgen(data: Path, tmp_path: Path) -> None:
    """Its accountant is the one extra it needs, named at once before any row is read; its Poisson samples and noise
    are ldp's own ChaCha20 stream, so with randomgen hidden it trains and states that stream."""
    result = ldp_without(("dp_accounting", "randomgen"), "train", data, "--label", "label", "--eps", 2, *CENTRAL,
                         ledger=tmp_path / "ledger.json")
    assert result.returncode == 1, result.stderr
    assert result.stderr == ("ldp: error: the central layer needs dp-accounting, which is not installed: "
                             "pip install 'ldp[central]' (from a clone of ldp: pip install -e '.[central]')\n")
    assert not (tmp_path / "ledger.json").exists()
    trained = ldp_without("randomgen", "train", data, "--label", "label", "--eps", 2, *CENTRAL, "-o",
                          tmp_path / "model.json", ledger=tmp_path / "ledger.json")
    assert trained.returncode == 0, trained.stderr
    randomness = json.loads((tmp_path / "model.json.ldp.json").read_text())["central"]["randomness"]
    assert (randomness["bit_generator"], randomness["package"], randomness["cryptographic"]) == ("ChaCha20", "ldp", True)


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
