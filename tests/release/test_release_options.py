"""ReleaseOptions: one value for what a release is asked beyond its mechanism and paths."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers import unit_rows, write_list

from ldpcli.errors import UsageError
from ldpcli.learn._train import train
from ldpcli.mechanisms import MechanismSpec
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._file import write_file_release
from ldpcli.release._options import Budget, Columns, ReleaseOptions, Resources, RiskSection, mechanism_spec


def test_options_are_frozen_and_report_what_was_set() -> None:
    options = ReleaseOptions(seed=3, columns=Columns(keep=["id"]), resources=Resources(threads=2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.seed = 4  # type: ignore[misc]
    assert options.given() == ["columns.keep", "seed", "resources.threads"]
    assert ReleaseOptions(columns=Columns(keep=[]), risk=RiskSection(rho0=0.0)).given() == []


def test_a_mechanism_is_a_spec_or_a_name_with_its_epsilon() -> None:
    assert mechanism_spec("laplace", 2.0, None) == MechanismSpec("laplace", 2.0, None, 1.0)
    spec = MechanismSpec("privunit2", 1.0, norm_bound=3.0)
    assert mechanism_spec(spec, None, None) is spec
    with pytest.raises(UsageError, match="epsilon is required"):
        mechanism_spec("privunit2", None, None)
    with pytest.raises(UsageError, match="holds epsilon and norm_bound"):
        mechanism_spec(spec, 2.0, None)


def test_one_options_value_gives_the_same_release_as_the_cli_flags(tmp_path: Path) -> None:
    src = write_list(tmp_path / "x.parquet", unit_rows(300, 4), ids=True)
    options = ReleaseOptions(columns=Columns(column="vec", keep=["id"]), seed=5, copies=2, overwrite=True,
                             risk=RiskSection(k=2), resources=Resources(threads=1, batch_rows=64))
    one = write_file_release(src, tmp_path / "a.parquet", epsilon=2.0, options=options)
    two = write_file_release(src, tmp_path / "b.parquet", mechanism=MechanismSpec("privunit2", 2.0),
                         options=dataclasses.replace(options, resources=Resources()))
    assert one.output.read_bytes() == two.output.read_bytes()
    assert one.layout.copies == 2 and one.layout.keep == ("id",)


def test_options_a_call_cannot_honour_are_refused(tmp_path: Path) -> None:
    src = write_list(tmp_path / "x.parquet", unit_rows(50, 4))
    with pytest.raises(UsageError, match="write_dataset_release does not take options.copies"):
        write_dataset_release(src, tmp_path / "out", engine=None, epsilon=1.0, options=ReleaseOptions(copies=2))
    with pytest.raises(UsageError, match="train does not take options.risk.k"):
        train(src, label="y", epsilon=1.0, options=ReleaseOptions(risk=RiskSection(k=2)))
    with pytest.raises(UsageError, match="max_budget needs the privacy-budget ledger"):
        write_file_release(src, epsilon=1.0, options=ReleaseOptions(budget=Budget(max_budget=1.0)))
