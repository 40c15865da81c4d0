"""What ``ldp train`` does around its non-private reference θ̂ and its clipping, in real processes.

- ``--no-reference`` skips θ̂: the numbers that need it are absent, not 0, and the release (model
  and sidecar) is the same byte for byte;
- nothing of θ̂ reaches the model file, the sidecar or the ledger, and ``--json`` marks it owner-only;
- on a terminal a status line shows θ̂'s progress (stderr on a pseudo-terminal), hidden by ``-q``;
- ``--reference-seconds`` caps it, with a note on how far it got;
- a softmax run that clips most gradients warns with the data-independent L that would fit.

The solver itself: tests/learn/test_reference.py.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import ldp_process, ledger_document, write_list

pytestmark = pytest.mark.slow


def _embeddings(path: Path, n: int = 400, d: int = 16, k: int = 5, scale: float = 1.0) -> Path:
    """Unit rows (times ``scale``) with a text label of k classes, as Parquet."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    centres = rng.standard_normal((k, d))
    labels = np.array([f"topic {c}" for c in range(k)])[np.argmax(X @ centres.T + rng.gumbel(size=(n, k)), axis=1)]
    return write_list(path, X * scale, column="embedding", label=pa.array(labels))


def _ldp(*args: object) -> subprocess.CompletedProcess[str]:
    return ldp_process(*args, timeout=300, module=True)


def test_no_reference_skips_it_and_leaves_its_numbers_out(tmp_path: Path) -> None:
    data = _embeddings(tmp_path / "emb.parquet")
    common = ("train", data, "--label", "label", "--loss", "softmax", "--eps", 8, "-L", 2, "--seed", 3,
              "--holdout", 0.25, "--classes", ",".join(f"topic {c}" for c in range(5)))
    skipped = _ldp(*common, "--no-reference", "--json", "-o", tmp_path / "a.json")
    assert skipped.returncode == 0, skipped.stderr
    report = json.loads(skipped.stdout)
    assert report["minimizer"] is None and "--no-reference" in report["minimizer_note"]
    assert set(report["evaluation"]) == {"on", "rows", "private"}  # no θ̂ row, no distance, rather than 0
    table = _ldp(*common, "--no-reference", "-o", tmp_path / "b.json")
    assert table.returncode == 0 and "θ̂ not computed (--no-reference)" in table.stdout
    assert "‖θ − θ̂‖" not in table.stdout and "empirical minimiser" not in table.stdout
    computed = _ldp(*common, "--json", "-o", tmp_path / "c.json")
    with_reference = json.loads(computed.stdout)
    assert with_reference["minimizer"]["distance"] > 0 and "minimizer" in with_reference["evaluation"]
    # the release is the same with or without the yardstick
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "c.json").read_bytes()
    sides = [json.loads((tmp_path / f"{name}.json.ldp.json").read_text()) for name in "ac"]
    for side in sides:
        del side["release"]["created"]
        side["model"].pop("file")
    assert sides[0] == sides[1]


def test_nothing_of_the_reference_reaches_the_sidecar_or_the_ledger(tmp_path: Path) -> None:
    data = _embeddings(tmp_path / "emb.parquet")
    ledger = tmp_path / "ledger.json"
    result = _ldp("train", data, "--label", "label", "--loss", "softmax", "--eps", 8, "-L", 2, "--holdout", 0.25,
                  "--json", "-o", tmp_path / "m.json", "--ledger", ledger)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert "minimizer" in report["owner_only"]["entries"] and "never written" in report["owner_only"]["statement"]
    reference = report["minimizer"]
    ledger_document(ledger)  # its log folded into the file (issue 36), so the file's text is all the ledger holds
    written = (tmp_path / "m.json.ldp.json").read_text() + ledger.read_text() + (tmp_path / "m.json").read_text()
    for key in ("minimizer", "objective", "distance_bound", "gap", "evaluation", "accuracy"):
        assert f'"{key}"' not in written
    for number in (reference["objective"], reference["distance"], report["evaluation"]["minimizer"]["loss"]):
        assert repr(number)[:10] not in written


def _on_a_terminal(*args: object) -> str:
    """``ldp ARGS`` with stderr on a pseudo-terminal (stdout a pipe): what the terminal was sent."""
    main, terminal = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "200"}
    process = subprocess.Popen([sys.executable, "-m", "ldpcli", *map(str, args)], stdout=subprocess.PIPE,
                               stderr=terminal, env=env)
    os.close(terminal)
    shown = b""
    while True:
        ready, _, _ = select.select([main], [], [], 300)
        if not ready:
            break
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the terminal closed: the process ended
            break
        if not chunk:
            break
        shown += chunk
    process.stdout.read()
    assert process.wait(timeout=300) == 0, shown.decode(errors="replace")
    os.close(main)
    return shown.decode(errors="replace")


def test_a_status_line_shows_the_reference_on_a_terminal_and_q_hides_it(tmp_path: Path) -> None:
    data = _embeddings(tmp_path / "emb.parquet")
    args = ("train", data, "--label", "label", "--loss", "softmax", "--eps", 8, "-L", 2, "--classes",
            ",".join(f"topic {c}" for c in range(5)))
    assert "non-private reference θ̂ (--no-reference skips it)" in _on_a_terminal(*args)
    assert "reference" not in _on_a_terminal(*args, "-q")


def test_a_time_cap_ends_the_reference_with_a_note(tmp_path: Path) -> None:
    data = _embeddings(tmp_path / "emb.parquet")
    result = _ldp("train", data, "--label", "label", "--loss", "softmax", "--eps", 8, "-L", 2, "--json",
                  "--reference-seconds", 1e-9)
    report = json.loads(result.stdout)
    assert report["minimizer"]["stopped"] == "time" and report["minimizer"]["converged"] is False
    assert "θ̂ stopped after 1e-09 s (--reference-seconds)" in report["minimizer_note"]
    assert "--no-reference" in report["minimizer_note"]
    refused = _ldp("train", data, "--label", "label", "--eps", 8, "--reference-seconds", 0)
    assert refused.returncode == 2 and "--reference-seconds must be a number of seconds > 0" in refused.stderr


def test_clipping_most_softmax_gradients_warns_with_a_public_bound(tmp_path: Path) -> None:
    """Unit rows and an intercept: at θ = 0 every softmax gradient has norm √(2(k − 1)/k) > 1, so L = 1 clips
    all of them (and nearly all later). The warning (shown even with -q) gives the formula and the L for unit rows, the same for
    data of another norm: nothing in it comes from the data."""
    texts = []
    for scale in (1.0, 0.8):
        data = _embeddings(tmp_path / f"emb{scale}.parquet", scale=scale)
        result = _ldp("train", data, "--label", "label", "--loss", "softmax", "--eps", 8, "--no-reference", "-q",
                      "--seed", 1)
        assert result.returncode == 0, result.stderr
        line = next(line for line in result.stderr.splitlines() if "clipped to L = 1" in line)
        clipped = re.match(r"ldp: warning: (\d+) of 400 gradients \([\d.]+%\) were clipped to L = 1: ", line)
        assert clipped is not None and int(clipped[1]) > 200  # more than half: loud
        count, advice = line.split("the model follows the clipped gradients. ")
        assert "√((k − 1)/k)·‖x‖ = 0.894·‖x‖" in advice and "(k = 5 classes)" in advice
        assert "L = √2·√(r² + 1) clips none (L = 2 for unit rows, r = 1)" in advice and "--norm-bound" in advice
        texts.append(advice)
    assert texts[0] == texts[1]
    fits = _ldp("train", _embeddings(tmp_path / "e.parquet"), "--label", "label", "--loss", "softmax", "--eps", 8,
                "-L", 2, "--no-reference")
    assert fits.returncode == 0 and "clipped" not in fits.stderr
