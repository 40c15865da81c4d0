"""The sidecar: a JSON file beside each privatized file that records exactly what was done.

It holds only public parameters and counts: the mechanism's description (``Mechanism.describe``:
ε, the exact ε, γ, p, the expected errors …), n, d, the norm bound, the column layout, the data
file's name, the creation time and whether the run was seeded (``reproducible``). Never the seed,
never a statistic of the raw data (not even how many rows were clipped).

``load_sidecar`` validates a sidecar and re-derives its mechanism from the public parameters, so
the error bars of ``estimate-mean`` come from the code, and a sidecar whose numbers disagree with
its own parameters is refused. The sidecar also records the SHA-256 of its data file (computed
while the file was written), which ``estimate-mean`` checks.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ldpcli import __version__
from ldpcli.errors import DataError, LdpError
from ldpcli.io import VectorLayout, atomic_write_text
from ldpcli.mechanisms import Mechanism, get_mechanism

FORMAT = "ldp-sidecar"
SCHEMA_VERSION = 1
SUFFIX = ".ldp.json"
# Numbers recomputed from the public parameters must agree with the recorded ones to this
# relative tolerance (they differ only if the file was edited or another version computed them).
_REL_TOL = 1e-9
_CHECKED_FIELDS = ("epsilon_exact", "gamma", "p", "scale", "expected_error_max")


def sidecar_path(data_path: str | os.PathLike[str]) -> Path:
    """The sidecar of a data file: its suffix replaced by ``.ldp.json``."""
    path = Path(data_path)
    return path.with_name(path.stem + SUFFIX)


def build_sidecar(
    mechanism: Mechanism, *, n: int, layout: VectorLayout, data_path: Path, sha256: str, reproducible: bool
) -> dict[str, Any]:
    """The sidecar's content for ``n`` rows privatized by ``mechanism`` into ``data_path``.

    ``sha256`` is the hash of the data file's bytes, computed while writing it; it binds the
    sidecar to exactly that file.
    """
    content: dict[str, Any] = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "ldp_version": __version__}
    content.update(mechanism.describe())
    content.update(
        {
            "expected_error_mean": mechanism.expected_error_mean(n),
            "n": n,
            "layout": layout.to_dict(),
            "data_file": data_path.name,
            "sha256": sha256,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "reproducible": reproducible,
        }
    )
    if reproducible:
        content["note"] = "seeded run: reproducible by whoever knows the seed; not for release"
    return content


def write_sidecar(path: Path, content: dict[str, Any], *, overwrite: bool = False) -> None:
    """Write the sidecar atomically (temporary file, then rename)."""
    atomic_write_text(path, json.dumps(content, indent=2, allow_nan=False) + "\n", overwrite=overwrite)


@dataclass(frozen=True)
class Sidecar:
    """A validated sidecar: its raw content, the mechanism it describes and the data layout."""

    path: Path
    content: dict[str, Any]
    mechanism: Mechanism
    layout: VectorLayout
    n: int
    sha256: str  # of the data file this sidecar describes

    @property
    def d(self) -> int:
        """The dimension of the privatized rows."""
        return self.mechanism.d


def load_sidecar(path: str | os.PathLike[str]) -> Sidecar:
    """Read and validate a sidecar; DataError naming the file and the field if anything is off."""
    path = Path(path)
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: no such sidecar; pass the privatized file's sidecar with --sidecar") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        # ValueError: JSONDecodeError, or an integer beyond Python's digit limit; RecursionError: deep nesting.
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: not a readable ldp sidecar ({reason}); restore it from the privatize run") from exc
    if not isinstance(content, dict) or content.get("format") != FORMAT:
        raise DataError(f"{path}: not an ldp sidecar (no \"format\": \"{FORMAT}\"); pass the right --sidecar")

    def field(name: str, kind: type | tuple[type, ...]) -> Any:
        value = content.get(name)
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            raise DataError(f"{path}: field {name!r} is missing or malformed; restore the sidecar from the privatize run")
        return value

    n = field("n", int)
    if n < 1:
        raise DataError(f"{path}: field 'n' must be >= 1")
    try:
        cls = get_mechanism(field("mechanism", str))
        mechanism = cls.calibrate(
            field("d", int), float(field("epsilon", (int, float))),
            norm_bound=float(field("norm_bound", (int, float))), calibration=field("calibration", str),
            **{name: content.get(name) for name in cls.options},
        )
        recomputed = mechanism.describe()
    except LdpError as exc:
        raise DataError(f"{path}: describes no valid mechanism ({exc})") from exc
    except (ArithmeticError, ValueError, TypeError) as exc:  # absurd values (d = 10**30) the checks let through
        raise DataError(
            f"{path}: describes no valid mechanism (its parameters cannot be evaluated: {type(exc).__name__}: {exc}); "
            "restore the sidecar from the privatize run"
        ) from exc
    for name in _CHECKED_FIELDS:
        if name in recomputed:
            recorded, expected = content.get(name), recomputed[name]
            if expected is None:
                agrees = recorded is None
            else:
                agrees = isinstance(recorded, (int, float)) and math.isclose(recorded, expected, rel_tol=_REL_TOL)
            if not agrees:
                raise DataError(
                    f"{path}: field {name!r} is {recorded!r} but the recorded parameters give {expected!r}; "
                    "the sidecar was edited or made by an incompatible ldp version"
                )
    sha256 = field("sha256", str)
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise DataError(f"{path}: field 'sha256' is not a SHA-256 hex digest; restore the sidecar from the privatize run")
    layout = VectorLayout.from_dict(field("layout", dict), source=path)
    if layout.d != mechanism.d:
        raise DataError(f"{path}: the layout has d = {layout.d} but the mechanism has d = {mechanism.d}")
    return Sidecar(path=path, content=content, mechanism=mechanism, layout=layout, n=n, sha256=sha256)
