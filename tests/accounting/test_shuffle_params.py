"""`ldp params --shuffle N`: the central ε of N shuffled reports beside the local ε, per mechanism."""

from __future__ import annotations

import json

import pytest
from helpers import ldp

from ldpcli.cli.render import fmt_bound
from ldpcli.math._shuffling import ASSUMPTIONS, shuffle_bound
from ldpcli.planning._shuffle import NO_CLAIM

WIDE = {"terminal_width": 220}


def flat(text: str) -> str:
    """A table's text with its borders dropped and its whitespace collapsed: a last column's wrapped
    cell reads as one phrase."""
    return " ".join(text.translate(str.maketrans("│┃", "  ")).split())


def test_the_comparison_shows_central_beside_local_epsilon() -> None:
    """The issue's command: every pure mechanism's row gets the bound at ε0 = its exact ε, N, δ."""
    res = ldp("params", "--d", 500, "--eps", 4, "--shuffle", 100000, "--delta", 1e-6, **WIDE)
    assert res.exit_code == 0, res.output
    expected = shuffle_bound(4.0, 100000, 1e-6)
    assert "central ε" in res.stdout and "closed form" in res.stdout
    # bounds are printed rounded away from what they bound (cli.render.fmt_bound), so the digits stay bounds
    assert fmt_bound(expected.epsilon_upper) in res.stdout and fmt_bound(expected.epsilon_closed_form) in res.stdout
    assert float(fmt_bound(expected.epsilon_upper)) >= expected.epsilon_upper
    assert NO_CLAIM in flat(res.stdout)  # the gaussian baseline's row (its note, the last column)
    assert "certified upper bound" in res.stdout and "honest shuffler" in res.stdout
    assert "taken as the central δ" in res.stderr  # --delta's meaning here is said


def test_json_has_a_shuffle_object_per_mechanism() -> None:
    res = ldp("params", "--d", 50, "--eps", 2, "--shuffle", 10000, "--shuffle-delta", 1e-7, "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    by_name = {row["mechanism"]: row for row in rows}
    assert by_name["gaussian"]["shuffle"] is None and NO_CLAIM in by_name["gaussian"]["shuffle_reason"]
    assert by_name["gaussian"]["delta"] == 1e-6  # --shuffle-delta leaves the baseline's own δ alone
    claim = by_name["privunit2"]["shuffle"]
    bound = shuffle_bound(by_name["privunit2"]["epsilon_exact"], 10000, 1e-7)
    assert claim == bound.to_dict()
    assert {"n", "delta", "epsilon_upper", "epsilon_lower", "epsilon_closed_form", "theorem", "assumptions"} <= set(claim)
    assert claim["n"] == 10000 and claim["delta"] == 1e-7 and claim["assumptions"] == list(ASSUMPTIONS)
    assert claim["epsilon_lower"] <= claim["epsilon_upper"] < by_name["privunit2"]["epsilon_exact"]
    assert all("shuffle" in row for row in rows)


def test_default_delta_is_one_over_n_squared() -> None:
    res = ldp("params", "--d", 20, "--eps", 1, "-m", "privunit2", "--shuffle", 1000, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["shuffle"]["delta"] == pytest.approx(1e-6, rel=1e-12)


def test_one_mechanism_table_has_the_central_rows() -> None:
    res = ldp("params", "--d", 20, "--eps", 2, "-m", "duchi-l2", "--shuffle", 10000, **WIDE)
    assert res.exit_code == 0, res.output
    bound = shuffle_bound(2.0, 10000, 1e-8)
    assert "central ε, shuffled" in res.stdout and f"{bound.epsilon_upper:.6g}" in res.stdout
    assert "upper bound for n = 10000 shuffled reports, δ = 1e-08" in flat(res.stdout)


def test_gaussian_gets_no_claim_and_its_delta_stays_its_own() -> None:
    res = ldp("params", "--d", 20, "--eps", 2, "-m", "gaussian", "--delta", 1e-5, "--shuffle", 1000,
              "--shuffle-delta", 1e-7, "--json")
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    assert info["delta"] == 1e-5 and info["shuffle"] is None
    assert info["shuffle_reason"].startswith(NO_CLAIM)
    table = ldp("params", "--d", 20, "--eps", 2, "-m", "gaussian", "--delta", 1e-5, "--shuffle", 1000,
                "--shuffle-delta", 1e-7, **WIDE)
    assert NO_CLAIM in flat(table.stdout)


def test_delta_is_the_central_delta_for_a_mechanism_without_its_own() -> None:
    with_delta = ldp("params", "--d", 20, "--eps", 2, "-m", "privunit2", "--shuffle", 1000, "--delta", 1e-7, "--json")
    named = ldp("params", "--d", 20, "--eps", 2, "-m", "privunit2", "--shuffle", 1000, "--shuffle-delta", 1e-7,
                "--json")
    assert with_delta.exit_code == 0 and named.exit_code == 0, with_delta.output + named.output
    assert json.loads(with_delta.stdout)["shuffle"] == json.loads(named.stdout)["shuffle"]
    assert json.loads(named.stdout)["shuffle"]["delta"] == 1e-7


@pytest.mark.parametrize(("args", "message"), [
    (["-m", "gaussian", "--delta", "1e-6", "--shuffle", "1000"], "--shuffle-delta"),
    (["--shuffle", "1000", "--shuffle-delta", "1e-3"], "--shuffle-delta must be in (0, 1/n)"),
    (["--shuffle", "1000", "--delta", "0.01"], "--shuffle-delta must be in (0, 1/n)"),
    (["--shuffle", "1"], "--shuffle must be >= 2"),
    (["--shuffle-delta", "1e-9"], "--shuffle-delta needs --shuffle"),
    (["--n", "100", "--target-rmse", "1", "--shuffle", "1000"], "does not combine"),
])
def test_refusals(args: list[str], message: str) -> None:
    base = ["params", "--d", "20"] + ([] if "--target-rmse" in args else ["--eps", "2"])
    res = ldp(*base, *args)
    assert res.exit_code == 2, res.output
    assert message in res.stderr


@pytest.mark.parametrize("value", [0.1234564, 0.169774, 3.0967e-07, 5.37009e-11, 2.0, 2.5e8])
def test_a_bound_is_printed_rounded_away_from_what_it_bounds(value: float) -> None:
    assert float(fmt_bound(value)) >= value
    assert float(fmt_bound(value, up=False)) <= value
    assert float(fmt_bound(0.1234564)) == 0.123457  # where rounding to nearest would print 0.123456, below the bound
