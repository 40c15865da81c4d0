"""``ldp privatize --shuffle`` end to end (issue 28 item 2): the output is the unshuffled output permuted,
its sidecar states the central guarantee and validates against the schema, the ledger carries the same
claim, estimators read it as any release, every refusal is one line with exit 2, and a kill, a full disk
or Ctrl-C during the shuffle leaves no output and no temporary file.

The runs are seeded and small; a budget of ``--memory 1MB`` (half of it for the shuffle: 8192 rows of
d = 8) makes 20000 rows go through the bucket files.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from helpers import ldp, ldp_process, ldp_without, ledger_document, read_list, unit_rows, write_list

from ldpcli.errors import Interrupted
from ldpcli.io import _interrupts as interrupts
from ldpcli.release._file import write_file_release
from ldpcli.release._options import Columns, ReleaseOptions, Resources
from ldpcli.release._shuffle import SCATTERED, ExternalShuffle
from ldpcli.release._sidecar import sidecar_schema

ROWS, D = 20_000, 8


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One input released twice with the same seed, plainly and shuffled through bucket files."""
    base = tmp_path_factory.mktemp("shuffled")
    source = write_list(base / "in.parquet", unit_rows(ROWS, D, seed=4))
    ledger = base / "ledger.json"
    common = ("--eps", 4, "--seed", 7, "--memory", "1MB", "--ledger", ledger)
    plain = ldp("privatize", source, "-o", base / "plain.parquet", *common)
    assert plain.exit_code == 0, plain.stderr
    shuffled = ldp("privatize", source, "-o", base / "shuffled.parquet", "--shuffle", "--json", *common)
    assert shuffled.exit_code == 0, shuffled.stderr
    return {"base": base, "source": source, "ledger": ledger, "summary": json.loads(shuffled.stdout),
            "stderr": shuffled.stderr,
            "sidecar": json.loads((base / "shuffled.parquet.ldp.json").read_text())}


def by_rows(values: np.ndarray) -> np.ndarray:
    return values[np.lexsort(values.T[::-1])]


def test_a_seeded_shuffled_release_is_the_unshuffled_one_permuted(released: dict[str, Any]) -> None:
    plain = read_list(released["base"] / "plain.parquet")
    shuffled = read_list(released["base"] / "shuffled.parquet")
    assert shuffled.shape == plain.shape == (ROWS, D)
    assert np.array_equal(by_rows(shuffled), by_rows(plain))  # the same multiset of rows, bit for bit
    moved = np.mean(np.any(shuffled != plain, axis=1))
    assert moved > 0.99  # a uniform order leaves about 1/n of the rows in place


def test_the_sidecar_states_the_central_guarantee_and_what_it_rests_on(released: dict[str, Any]) -> None:
    content = released["sidecar"]
    jsonschema.Draft202012Validator(sidecar_schema()).validate(content)
    claim = content["release"]["shuffled"]
    assert claim["n"] == content["data"]["n"] == ROWS
    assert claim["delta"] == pytest.approx(1 / ROWS**2)  # the default δ
    assert claim["epsilon_local"] == content["mechanism"]["epsilon_exact"] == 4.0
    assert 0 < claim["epsilon_central_lower"] <= claim["epsilon_central_upper"] < 4.0
    assert "Feldman" in claim["theorem"]
    said = " ".join(claim["assumptions"])
    for words in ("honest shuffler", "drops no report", "one report per person", "identical shapes",
                  "never publish the unshuffled output", "seeded run"):
        assert words in said
    assert released["summary"]["shuffled"] == claim


def test_the_ledger_entry_carries_the_same_claim(released: dict[str, Any]) -> None:
    entries = ledger_document(released["ledger"])["entries"]
    plain, shuffled = entries
    assert "shuffled" not in plain
    assert shuffled["shuffled"] == released["sidecar"]["release"]["shuffled"]
    assert shuffled["state"] == "confirmed"


def test_the_summary_line_says_the_central_upper_bound(tmp_path: Path, released: dict[str, Any]) -> None:
    result = ldp("privatize", released["source"], "-o", tmp_path / "out.arrows", "--eps", 4, "--shuffle",
                 "--shuffle-delta", 1e-10)
    assert result.exit_code == 0, result.stderr
    claim = json.loads((tmp_path / "out.arrows.ldp.json").read_text())["release"]["shuffled"]
    assert claim["delta"] == 1e-10
    assert "shuffled: central ε ≤ " in result.stdout and "δ = 1.0000e-10 over n = 20000" in result.stdout
    shown = float(result.stdout.split("central ε ≤ ")[1].split()[0])
    assert claim["epsilon_central_upper"] <= shown <= claim["epsilon_central_upper"] * (1 + 1e-3)  # rounded up
    assert "honest shuffler" in result.stderr
    assert "not for release" not in " ".join(claim["assumptions"])  # unseeded: the order came from the OS's key


def test_estimators_read_a_shuffled_release_as_any_other(released: dict[str, Any]) -> None:
    means = []
    for name in ("plain", "shuffled"):
        result = ldp("estimate-mean", released["base"] / f"{name}.parquet", "--json")
        assert result.exit_code == 0, result.stderr
        means.append(json.loads(result.stdout))
    plain, shuffled = means
    assert np.allclose(shuffled["mean"], plain["mean"], rtol=0, atol=1e-12)  # the same rows summed in another order
    assert shuffled["n"] == plain["n"] == ROWS


# --- refusals ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("extra", "words"), [
    (("--keep", "id"), "--shuffle does not allow --keep columns (id)"),
    (("--copies", "2"), "one report per person"),
    (("-m", "gaussian", "--delta", "1e-6"), "no shuffle claim"),
    (("--shuffle-delta", "0.5"), "(0, 1/n)"),
    (("--layout", "dataset"), "not shuffled across parts"),
])
def test_a_shuffle_it_cannot_stand_behind_is_refused_in_one_line(tmp_path: Path, extra: tuple[str, ...],
                                                                words: str) -> None:
    source = write_list(tmp_path / "in.parquet", unit_rows(40, 4, seed=1), ids=True)
    target = f"{tmp_path}/out/" if "--layout" in extra else tmp_path / "out.parquet"
    result = ldp("privatize", source, "--column", "vec", "--eps", 2, "--shuffle", "-o", target, *extra)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert words in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


@pytest.mark.parametrize("mechanism", ["privunit2", "duchi-l2"])
def test_a_secure_rendering_with_a_delta_is_refused_for_that_delta(tmp_path: Path, mechanism: str) -> None:
    """--secure's grid rendering adds a δ, so the reports are not pure ε0-LDP: the refusal says exactly that,
    and does not suggest the very mechanism that was asked for."""
    source = write_list(tmp_path / "in.parquet", unit_rows(40, 4, seed=1))
    result = ldp("privatize", source, "-m", mechanism, "--eps", 2, "--shuffle", "--secure", "-o", tmp_path / "o.parquet")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"--shuffle with --secure: {mechanism}'s secure rendering adds δ = " in result.stderr
    assert "pure ε0-LDP reports only" in result.stderr and "drop --secure" in result.stderr
    assert "use a pure ε-LDP mechanism" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


def test_a_finite_secure_rendering_keeps_the_shuffle_claim(tmp_path: Path) -> None:
    """A finite rendering (δ = 0) leaves a pure mechanism pure: --shuffle --secure is released with its claim."""
    source = write_list(tmp_path / "in.parquet", unit_rows(40, 4, seed=1))
    result = ldp("privatize", source, "-m", "duchi-linf", "--eps", 2, "--shuffle", "--secure", "-o",
                 tmp_path / "o.parquet", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["shuffled"]["n"] == 40


def test_shuffle_delta_without_shuffle_is_refused(tmp_path: Path) -> None:
    source = write_list(tmp_path / "in.parquet", unit_rows(40, 4, seed=1))
    result = ldp("privatize", source, "--eps", 2, "--shuffle-delta", 1e-6, "-o", tmp_path / "out.parquet")
    assert result.exit_code == 2 and "--shuffle-delta" in result.stderr and "needs --shuffle" in result.stderr


def test_without_randomgen_a_shuffle_runs_on_ldps_own_stream(tmp_path: Path) -> None:
    """The order keys come from ldp's ChaCha20 stream: a fresh ``pip install .`` (no randomgen) shuffles, and the
    output holds the same multiset of rows as the unshuffled release of the same seed, in another order."""
    source = write_list(tmp_path / "in.parquet", unit_rows(40, 4, seed=1))
    ledger = tmp_path / "owner" / "ledger.json"
    shuffled = ldp_without("randomgen", "privatize", source, "--eps", 2, "--shuffle", "--seed", 4, "-q",
                           "-o", tmp_path / "out.parquet", ledger=ledger)
    assert shuffled.returncode == 0, shuffled.stderr
    plain = ldp_without("randomgen", "privatize", source, "--eps", 2, "--seed", 4, "-q", "-o", tmp_path / "plain.parquet",
                        ledger=ledger)
    assert plain.returncode == 0, plain.stderr
    rows, reference = read_list(tmp_path / "out.parquet"), read_list(tmp_path / "plain.parquet")
    assert not np.array_equal(rows, reference)
    assert np.array_equal(np.unique(rows, axis=0), np.unique(reference, axis=0))


# --- a run that stops during the shuffle leaves nothing -------------------------------------------------------


def run(*args: object, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return ldp_process(*args, env=env, timeout=300)


@pytest.mark.slow
def test_a_kill_or_a_full_disk_during_the_shuffle_leaves_no_output_and_no_temporary_file(tmp_path: Path) -> None:
    source = write_list(tmp_path / "in.parquet", unit_rows(ROWS, D, seed=4))
    out = tmp_path / "out.parquet"
    ledger = tmp_path / "owner" / "ledger.json"
    args = ("privatize", source, "--eps", 4, "--shuffle", "-o", out, "--memory", "1MB", "--ledger", ledger, "-q")

    killed = run(*args, env={"LDP_FAULT": f"{SCATTERED}:kill"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not out.exists() and not out.with_name("out.parquet.ldp.json").exists()
    # the bucket files never had names, nor (Linux) the output's temporary; else it is the one hidden file, of the dead pid
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert all(name.startswith(".out.parquet.ldp-") and name.endswith(".tmp") for name in left), left
    assert ledger_document(ledger)["entries"] == []  # killed before its reservation: nothing counted

    full = run(*args, env={"LDP_FAULT": f"{SCATTERED}:enospc"})
    assert full.returncode == 1 and full.stderr.count("\n") == 1, full.stderr
    assert "could not write the shuffle's temporary files" in full.stderr
    # the failed run swept the dead run's temporary and removed its own
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet", "owner"]
    assert ledger_document(ledger)["entries"] == []


def test_an_interrupt_during_the_shuffle_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the shuffled rows are written (recorded, as the signal handler does, even where a library
    swallowed its exception): the run stops at the next batch and removes the output's temporary file."""
    source = write_list(tmp_path / "in.parquet", unit_rows(ROWS, D, seed=4))
    ordered = ExternalShuffle._ordered

    def interrupted(self: ExternalShuffle, block: np.ndarray, batch_rows: int) -> Any:
        try:
            interrupts.handler(signal.SIGINT, None)
        except Interrupted:
            pass  # swallowed: only the record remains
        return ordered(self, block, batch_rows)

    monkeypatch.setattr(ExternalShuffle, "_ordered", interrupted)
    try:
        with pytest.raises(Interrupted):
            write_file_release(source, tmp_path / "out.parquet", mechanism="privunit2", epsilon=4.0, options=ReleaseOptions(
                shuffle=True, columns=Columns(column="vec"), resources=Resources(memory=2**20, threads=1)))
    finally:
        interrupts.reset()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]
