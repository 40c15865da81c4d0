"""One reading of a shuffled release's recorded claim (``release.shuffled``): the sidecar and the ledger both
check it through :func:`ldpcli.release._shuffle_claim.read_shuffle_claim`, so a malformed record gets the same one-line
reason from each, naming the file; and ``ldp estimate-mean`` takes the claims from the sidecars its scan read
(the estimate carries them) instead of reading each sidecar a second time.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers import ldp, unit_rows, write_list

import ldpcli.release._sidecar as sidecar_module
from ldpcli.errors import DataError
from ldpcli.release._accounting import compose_central
from ldpcli.release._ledger_file import LedgerEntry
from ldpcli.release._shuffle_claim import ShuffleClaim
from ldpcli.release._sidecar import load_sidecar

ROWS = 120


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two inputs, each released shuffled (unseeded, at δ = 10⁻⁶), and a third released plainly, recorded in
    a ledger of their own."""
    base = tmp_path_factory.mktemp("readers")
    for index, extra in enumerate((("--shuffle", "--shuffle-delta", 1e-6),) * 2 + ((),)):
        source = write_list(base / f"in{index}.parquet", unit_rows(ROWS, 3, seed=20 + index))
        result = ldp("privatize", source, "-o", base / f"out{index}.parquet", "--eps", 3, "-q",
                     "--ledger", base / "ledger.json", *extra)
        assert result.exit_code == 0, result.stderr
    return base


def recorded(released: Path) -> dict[str, Any]:
    return json.loads((released / "out0.parquet.ldp.json").read_text())["release"]["shuffled"]


MALFORMED = [
    lambda c: [c],
    lambda c: {"n": 10},
    lambda c: {k: v for k, v in c.items() if k != "delta"},
    lambda c: {**c, "delta": 0.5},
    lambda c: {**c, "epsilon_central_upper": "0.3"},
    lambda c: {**c, "epsilon_central_lower": c["epsilon_central_upper"] * 2},
    lambda c: {**c, "assumptions": []},
]


@pytest.mark.parametrize("change", MALFORMED)
def test_each_reader_gives_the_same_one_line_reason_naming_the_file(released: Path, tmp_path: Path,
                                                                    change: Any) -> None:
    bad = change(recorded(released))
    with pytest.raises(ValueError) as parsed:
        ShuffleClaim.from_dict(bad, ROWS)
    reason = str(parsed.value)
    assert reason and "\n" not in reason

    content = json.loads((released / "out0.parquet.ldp.json").read_text())
    content["release"]["shuffled"] = bad
    path = tmp_path / "edited.ldp.json"
    path.write_text(json.dumps(content))
    with pytest.raises(DataError) as from_sidecar:
        load_sidecar(path)
    assert str(from_sidecar.value).startswith(f"{path}: 'release.shuffled' {reason}; ")

    entry = LedgerEntry(fingerprint="a" * 64, input="/data/people.parquet", rows=ROWS, d=3, columns=["x"],
                        output="/releases/out.parquet", mechanism="privunit2", epsilon=3.0, epsilon_exact=3.0,
                        delta=None, created="2026-01-01T00:00:00+00:00", tag="t", reproducible=False, shuffled=bad)
    with pytest.raises(DataError) as from_ledger:
        compose_central([entry], None)
    assert str(from_ledger.value).startswith(f"/releases/out.parquet: its ledger entry's 'shuffled' {reason}; ")
    for message in (str(from_sidecar.value), str(from_ledger.value)):
        assert "\n" not in message and "edited" in message


def test_a_missing_field_list_names_every_one() -> None:
    with pytest.raises(ValueError, match="fields 'delta', 'epsilon_local', 'epsilon_central_upper', "
                                         "'epsilon_central_lower', 'theorem', 'assumptions' are missing"):
        ShuffleClaim.from_dict({"n": 10})


def test_the_ledger_reads_the_claim_the_sidecar_reads(released: Path) -> None:
    """A well-formed record reads the same through the ledger (no row count to check it against) as through
    its sidecar; the ledger states its (ε upper, δ) and n."""
    claim = load_sidecar(released / "out0.parquet.ldp.json").shuffled
    assert claim is not None and ShuffleClaim.from_dict(recorded(released)) == claim
    entry = LedgerEntry(fingerprint="a" * 64, input="/data/people.parquet", rows=ROWS, d=3, columns=["x"],
                        output="/releases/out.parquet", mechanism="privunit2", epsilon=3.0, epsilon_exact=3.0,
                        delta=None, created="2026-01-01T00:00:00+00:00", tag="t", reproducible=False,
                        shuffled=recorded(released))
    guarantee, note = compose_central([entry], None)
    assert guarantee is not None and (guarantee.epsilon, guarantee.delta) == (claim.epsilon_central_upper, claim.delta)
    assert f"n = {ROWS} reports" in note
    with pytest.raises(DataError, match="outside"):  # the ledger's δ must be below 1/n too
        compose_central([replace(entry, shuffled={**recorded(released), "delta": 0.5})], None)


@pytest.fixture()
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every sidecar file read from now on (``load_sidecar``'s one read of the JSON), in order."""
    seen: list[Path] = []
    original = sidecar_module.read_json

    def counted(path: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(Path(path))
        return original(path, *args, **kwargs)

    monkeypatch.setattr(sidecar_module, "read_json", counted)
    return seen


@pytest.mark.parametrize("as_json", [False, True])
def test_estimate_mean_reads_each_sidecar_once(released: Path, reads: list[Path], as_json: bool) -> None:
    files = [released / f"out{index}.parquet" for index in range(2)]
    result = ldp("estimate-mean", *files, *(("--json",) if as_json else ()))
    assert result.exit_code == 0, result.stderr
    assert sorted(reads) == sorted(Path(f"{file}.ldp.json") for file in files), reads
    assert "2 of the 2 files were each shuffled" in " ".join(result.stderr.split())
    if as_json:
        claims = json.loads(result.stdout)["shuffled"]
        assert [claim["n"] for claim in claims] == [ROWS, ROWS]


def test_the_estimate_carries_each_files_claim(released: Path) -> None:
    from ldpcli.analysis._estimate import estimate_file_mean

    files = [released / f"out{index}.parquet" for index in (0, 2)]
    estimate = estimate_file_mean(files)
    first = load_sidecar(released / "out0.parquet.ldp.json").shuffled
    assert estimate.shuffled == (first, None)
    assert "shuffled" not in estimate.to_dict()
