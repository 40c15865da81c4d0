"""A shuffled release's claim as a reader gets it (issue 28): ``load_sidecar`` checks ``release.shuffled`` and
refuses a malformed one naming the file, ``ldpcli.open_release(...).shuffled`` is the checked claim (None for
an unshuffled release), and ``ldp estimate-mean`` says on one stderr line, and in ``--json``, that the rows were
shuffled and with which central ε.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from helpers import ldp, unit_rows, write_list

import ldpcli
from ldpcli.errors import DataError
from ldpcli.release._shuffle_claim import ShuffleClaim
from ldpcli.release._sidecar import load_sidecar

ROWS = 200


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One input released plainly and shuffled (unseeded, at δ = 10⁻⁶), recorded in a ledger of its own."""
    base = tmp_path_factory.mktemp("claim")
    source = write_list(base / "in.parquet", unit_rows(ROWS, 4, seed=6))
    for name, extra in (("plain", ()), ("shuffled", ("--shuffle", "--shuffle-delta", 1e-6))):
        result = ldp("privatize", source, "-o", base / f"{name}.parquet", "--eps", 3, "-q",
                     "--ledger", base / "ledger.json", *extra)
        assert result.exit_code == 0, result.stderr
    return base


def test_open_release_exposes_the_checked_claim(released: Path) -> None:
    recorded = json.loads((released / "shuffled.parquet.ldp.json").read_text())["release"]["shuffled"]
    claim = ldpcli.open_release(released / "shuffled.parquet").shuffled
    assert isinstance(claim, ShuffleClaim)
    assert {**dataclasses.asdict(claim), "assumptions": list(claim.assumptions)} == recorded
    assert claim.n == ROWS and claim.delta == 1e-6 and claim.epsilon_local == 3.0
    assert claim.epsilon_central_lower <= claim.epsilon_central_upper < 3.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        claim.n = 1  # type: ignore[misc]
    assert ldpcli.open_release(released / "plain.parquet").shuffled is None


def edited(released: Path, tmp_path: Path, change: Any) -> Path:
    """A copy of the shuffled sidecar with ``change(claim)`` applied to its ``release.shuffled``."""
    content = json.loads((released / "shuffled.parquet.ldp.json").read_text())
    content["release"]["shuffled"] = change(content["release"]["shuffled"])
    path = tmp_path / "edited.ldp.json"
    path.write_text(json.dumps(content))
    return path


@pytest.mark.parametrize(("change", "words"), [
    (lambda c: [c], "is not an object"),
    (lambda c: {**c, "n": "200"}, "field 'n' is missing or not a finite integer"),
    (lambda c: {**c, "n": True}, "field 'n' is missing or not a finite integer"),
    (lambda c: {**c, "n": ROWS + 1}, f"field 'n' is {ROWS + 1} but the release has {ROWS} rows"),
    (lambda c: {k: v for k, v in c.items() if k != "delta"}, "field 'delta' is missing"),
    (lambda c: {**c, "delta": 0.0}, "field 'delta' is 0.0, outside (0, 1/n)"),
    (lambda c: {**c, "delta": 1 / ROWS}, "outside (0, 1/n)"),
    (lambda c: {**c, "epsilon_local": -1.0}, "'epsilon_local' must be > 0"),
    (lambda c: {**c, "epsilon_central_upper": c["epsilon_central_lower"] / 2}, "at least 'epsilon_central_lower'"),
    (lambda c: {**c, "epsilon_central_lower": -0.5}, "at least 'epsilon_central_lower'"),
    (lambda c: {**c, "epsilon_central_upper": float("inf")}, "'epsilon_central_upper' is missing or not a finite"),
    (lambda c: {**c, "epsilon_central_closed_form": 0}, "'epsilon_central_closed_form' must be null or > 0"),
    (lambda c: {**c, "theorem": ""}, "field 'theorem'"),
    (lambda c: {**c, "assumptions": "an honest shuffler"}, "field 'assumptions'"),
    (lambda c: {**c, "assumptions": []}, "field 'assumptions'"),
])
def test_a_malformed_claim_is_refused_with_the_file_named(released: Path, tmp_path: Path, change: Any,
                                                         words: str) -> None:
    path = edited(released, tmp_path, change)
    with pytest.raises(DataError) as info:
        load_sidecar(path)
    message = str(info.value)
    assert message.startswith(f"{path}: 'release.shuffled' ") and words in message, message


def test_a_well_formed_claim_loads(released: Path, tmp_path: Path) -> None:
    """The checks refuse only what is malformed: no closed form (null) is a valid claim."""
    path = edited(released, tmp_path, lambda c: {**c, "epsilon_central_closed_form": None})
    claim = load_sidecar(path).shuffled
    assert claim is not None and claim.epsilon_central_closed_form is None


def test_estimate_mean_says_the_rows_were_shuffled_and_their_central_epsilon(released: Path) -> None:
    recorded = json.loads((released / "shuffled.parquet.ldp.json").read_text())["release"]["shuffled"]
    shown = ldp("estimate-mean", released / "shuffled.parquet")
    assert shown.exit_code == 0, shown.stderr
    lines = [line for line in shown.stderr.splitlines() if "shuffled" in line]
    assert len(lines) == 1 and "ldp privatize --shuffle" in lines[0] and f"n = {ROWS} reports" in lines[0], lines
    upper = float(lines[0].split("ε ≤ ")[1].split(",")[0])
    assert recorded["epsilon_central_upper"] <= upper <= recorded["epsilon_central_upper"] * (1 + 1e-5)  # rounded up
    assert "δ = 1.0000e-06" in lines[0] and "local ε = 3" in lines[0] and "honest shuffler" in lines[0]
    as_json = ldp("estimate-mean", released / "shuffled.parquet", "--json")
    assert json.loads(as_json.stdout)["shuffled"] == [{key: recorded[key] for key in (
        "n", "delta", "epsilon_local", "epsilon_central_upper")}]
    plain = ldp("estimate-mean", released / "plain.parquet", "--json")
    assert json.loads(plain.stdout)["shuffled"] is None and "shuffled" not in plain.stderr
    assert "shuffled" not in ldp("estimate-mean", released / "shuffled.parquet", "-q").stderr


def test_the_assumptions_state_the_orders_distance_from_uniform_and_the_delta_it_adds(released: Path) -> None:
    """n²/2¹²⁹ bounds the chance that two of the n 128-bit keys tie; (1 + e^ε)·n²/2¹²⁹ the δ that adds. Both are
    shown rounded up."""
    import math

    claim = ldpcli.open_release(released / "shuffled.parquet").shuffled
    assert claim is not None
    said = [text for text in claim.assumptions if "128 random bits" in text]
    assert len(said) == 1 and "total variation" in said[0], claim.assumptions
    distance = float(said[0].split("n²/2¹²⁹ ≤ ")[1].split()[0])
    slack = float(said[0].split("(1 + e^ε)·n²/2¹²⁹ ≤ ")[1].split()[0])
    exact = ROWS**2 / 2**129
    assert exact <= distance <= exact * 1.01
    assert (1 + math.exp(claim.epsilon_central_upper)) * exact <= slack <= (1 + math.exp(claim.epsilon_central_upper)) * exact * 1.01
