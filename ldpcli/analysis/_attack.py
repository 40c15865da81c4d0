"""The reconstruction demonstration: run the natural reconstruction on a release, against its raw data.

Bhowmick et al. 2018, Sec. 2.3.1: the adversary wants the direction of a k-dimensional orthonormal
projection of a row, f_A(x) = Ax/‖Ax‖ (Eq. 8; A a k×d matrix with orthonormal rows), and succeeds
at accuracy a when ⟨f_A(X), v̂⟩ ≥ a, i.e. ‖f_A(X) − v̂‖ ≤ √(2 − 2a). Given the released row z, the
natural reconstruction is v̂ = Az/‖Az‖ (every mechanism here is unbiased, so z points on average
towards x). :func:`attack` computes, for every row of a release and its raw row, the cosine
⟨f_A(x), v̂⟩, and beside it the cosine of the best single guess made *without* the release: the
normalised mean direction of f_A(x) over the raw rows, which maximises the expected cosine for an
adversary who knows the population (the "prior only" column).

How to read it. Lemma 2.2 bounds the chance of success after seeing an ε-LDP output by e^ε times
the chance of the best fixed guess under the adversary's prior; Prop. 1 turns this into
e^{ε + ρ0}·P(⟨Y, v0⟩ ≥ a) (Y uniform on S^{k−1}) for priors whose density on the directions is at
most e^{ρ0} times uniform. ``uniform_bound`` in the report is that bound with ρ0 = 0: it holds for
rows whose directions are uniform (up to sampling error) and for nothing else. Real data is not
uniform: its directions cluster, so a guess made from the population alone already succeeds far
more often than P(⟨Y, v0⟩ ≥ a), which is exactly what the prior-only column shows, and the release
can add at most the factor e^ε to the posterior of each row (the ρ0 of real data is large). Compare
the two columns: what the release adds is the difference.

The report is for the data owner. It contains statistics of the raw data (the quantiles of the
cosines, the success fractions, the concentration of the directions), so it must never be
published with a release, nor written beside it where the release goes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ldpcli.analysis._scan import scan
from ldpcli.audit._lower_bound import cp_lower, cp_upper
from ldpcli.errors import DataError, UsageError, counted
from ldpcli.io import VectorLayout, VectorReader, open_vectors
from ldpcli.math import _rows as rowmath
from ldpcli.mechanisms._hooks import risk_epsilons
from ldpcli.risk._cosine import expected_cosine
from ldpcli.risk._diffuse import diffuse_risk

#: The accuracies a reported by default (cosines; ‖f(x) − v̂‖ ≤ √(2 − 2a)).
DEFAULT_A = (0.1, 0.3, 0.5, 0.9)
#: A random basis is a dense k×d matrix of floats; above this many entries use the coordinate basis.
MAX_BASIS_ENTRIES = 50_000_000
BASES = ("coordinates", "random")
#: The quantile levels reported (with the mean), by name.
QUANTILES = (("min", 0.0), ("p01", 0.01), ("p05", 0.05), ("p25", 0.25), ("p50", 0.5), ("p75", 0.75),
             ("p95", 0.95), ("p99", 0.99), ("max", 1.0))
#: Two-sided level of the Clopper–Pearson intervals.
CONFIDENCE = 0.95
NOTICE = (
    "this report contains statistics of the raw data: it is for the data owner only and must never be "
    "published with a release"
)


@dataclass(frozen=True)
class SuccessFraction:
    """How many of n rows were reconstructed to accuracy a, with a 95% Clopper–Pearson interval."""

    count: int
    n: int
    low: float
    high: float

    @property
    def fraction(self) -> float:
        """count / n."""
        return self.count / self.n

    def to_dict(self) -> dict[str, Any]:
        """``{"count", "n", "fraction", "low", "high"}``."""
        return {"count": self.count, "n": self.n, "fraction": self.fraction, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class SuccessAt:
    """The success of the release's and of the prior-only reconstruction at one accuracy a.

    ``uniform_bound`` = min(1, e^ε·P(⟨Y, v0⟩ ≥ a)), Y uniform on S^{k−1}: the bound of Lemma 2.2 /
    Prop. 1 for a prior uniform on the directions (ρ0 = 0), which real data does not have.
    """

    a: float
    release: SuccessFraction
    prior: SuccessFraction
    uniform_bound: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"a": self.a, "release": self.release.to_dict(), "prior": self.prior.to_dict(),
                "uniform_bound": self.uniform_bound}


@dataclass
class AttackReport:
    """What :func:`attack` found: the cosines ⟨f(x), v̂⟩ of the release's and of the prior-only guess.

    ``release`` and ``prior`` are quantiles (min, 1%, …, 99%, max) and the mean of the cosines over
    the rows where they are defined (None if there is none); ``success`` gives, per accuracy a, the
    fraction of all n rows with cosine ≥ a (an undefined row counts as a failure). Rows whose raw
    projection Ax is 0 have no target (``undefined_raw``: both columns fail there); rows whose
    released projection Az is 0 give no reconstruction (``undefined_release``).
    ``prior_mean_length`` is ‖mean of f(x)‖ over the raw rows (0 for directions spread evenly, 1
    when all are equal): how much a guess without the release already knows. ``epsilon`` is the
    release's exact level (``epsilon_exact`` from its sidecar). ``expected_boundary`` is the
    expected cosine of this reconstruction for a row on the boundary (‖x‖ = L, a unit embedding
    with L = 1), from public parameters (:func:`ldpcli.risk._cosine.expected_cosine`), and
    ``expected_how`` how it was computed; both None when k < d or the mechanism has no formula.
    For the data owner only (see :data:`NOTICE`): never publish it with a release.
    """

    privatized: str
    raw: str
    n: int
    d: int
    k: int
    basis: str
    basis_seed: int | None
    mechanism: str
    epsilon: float
    release: dict[str, float | None]
    prior: dict[str, float | None]
    success: tuple[SuccessAt, ...]
    undefined_release: int
    undefined_raw: int
    prior_mean_length: float
    expected_boundary: float | None = None
    expected_how: str | None = None
    confidence: float = CONFIDENCE

    @property
    def a(self) -> tuple[float, ...]:
        """The accuracies reported."""
        return tuple(s.a for s in self.success)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (finite numbers or null)."""
        return {
            "notice": NOTICE,
            "privatized": self.privatized,
            "raw": self.raw,
            "n": self.n,
            "d": self.d,
            "k": self.k,
            "basis": self.basis,
            "basis_seed": self.basis_seed,
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "target": "f(x) = Ax/‖Ax‖, success when ⟨f(x), v̂⟩ ≥ a (Bhowmick et al. 2018, Sec. 2.3.1, Eq. 8)",
            "release": dict(self.release),
            "prior": dict(self.prior),
            "success": [s.to_dict() for s in self.success],
            "interval": f"{self.confidence:.0%} Clopper–Pearson",
            "undefined_release": self.undefined_release,
            "undefined_raw": self.undefined_raw,
            "prior_mean_length": self.prior_mean_length,
            "expected_boundary": self.expected_boundary,
            "expected_how": self.expected_how,
        }


def check_accuracies(a: Any) -> tuple[float, ...]:
    """The accuracies as sorted distinct floats in [0, 1], else a UsageError naming --a."""
    if isinstance(a, (str, bytes)) or not isinstance(a, Sequence) or len(a) == 0:
        raise UsageError(f"`a` takes one or more cosines in [0, 1], e.g. `a` 0.1 `a` 0.5, got {a!r}")
    for value in a:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not (
            0.0 <= value <= 1.0
        ):
            raise UsageError(f"`a`: each accuracy is a cosine in [0, 1], got {value!r}")
    return tuple(sorted({float(value) for value in a}))


def random_basis(k: int, d: int, seed: int = 0) -> np.ndarray:
    """A public k×d matrix with orthonormal rows (A Aᵀ = I_k): Haar-distributed, from ``default_rng(seed)``.

    The QR factorisation of a d×k standard Gaussian matrix, with the signs of R's diagonal moved
    into Q (so the law is exactly Haar), transposed.
    """
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((d, k)))
    signs = np.sign(np.diag(r))
    signs[signs == 0.0] = 1.0
    return np.ascontiguousarray((q * signs).T)


def attack(
    privatized: str | os.PathLike[str],
    raw: str | os.PathLike[str],
    *,
    k: int | None = None,
    basis: str = "coordinates",
    basis_seed: int = 0,
    a: Sequence[float] = DEFAULT_A,
    sidecar: str | os.PathLike[str] | None = None,
    batch_rows: int | None = None,
    on_rows: Callable[[int], None] | None = None,
) -> AttackReport:
    """Reconstruct f(x) = Ax/‖Ax‖ of every row of a release from its released row, and score it against the raw row.

    ``privatized`` is opened with :func:`ldpcli.analysis._scan.scan` (its sidecar, beside it or ``sidecar``, is
    verified: the rows and bytes must be those released). ``raw`` is the file that was privatized:
    its vector columns must be the release's (the output of ``ldp privatize`` keeps the input's
    column names and layout; kept columns are ignored) and row i of it must be row i of the release,
    so a release made with ``skip_invalid`` that left rows out, or a different file, is refused
    (DataError) when the row counts differ. Both are read in lockstep, batch by batch; the raw file
    is read a second time for the prior-only guess. Memory: the batches plus 2n floats (the cosines).

    ``k`` (default d, 2 ≤ k ≤ d) and ``basis``: A is the first k coordinates (``coordinates``) or a
    public random k×d matrix with orthonormal rows (``random``, :func:`random_basis` with
    ``basis_seed``; at most 5e7 entries). ``a``: the accuracies (cosines in [0, 1]). ``on_rows`` is
    called with each batch's size in both passes (2n rows in all). See the module docstring for what
    the numbers mean, what bounds them (Lemma 2.2, Prop. 1: only for priors of bounded density ratio
    ρ0 against the uniform direction, which real data does not have: the prior-only column shows
    how far from it the data is), and why the report must never be published with a release.
    """
    accuracies = check_accuracies(a)
    if basis not in BASES:
        raise UsageError(f"`basis` must be one of {', '.join(BASES)}, got {basis!r}")
    if isinstance(basis_seed, bool) or not isinstance(basis_seed, (int, np.integer)) or basis_seed < 0:
        raise UsageError(f"`basis_seed` must be a non-negative integer, got {basis_seed!r}")
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer))):
        raise UsageError(f"`k` must be an integer, got {k!r}")

    release = scan(privatized, sidecar=sidecar, batch_rows=batch_rows, on_rows=on_rows)
    meta = release.sidecars[0]
    if meta.reports is not None:
        raise UsageError(f"{privatized}: holds seed reports, whose column is not the raw file's vectors; the "
                         "demonstration pairs each raw row with its release by the same columns: run it on a "
                         "release of the same mechanism without compressed reports")
    mech = meta.mechanism
    d = meta.d
    k = d if k is None else int(k)
    if not 2 <= k <= d:
        raise UsageError(
            f"`k` must be between 2 and d = {d} (the release's dimension), got {k}"
            + ("; a release of d = 1 has no direction to reconstruct" if d < 2 else "")
        )
    matrix: np.ndarray | None = None
    if basis == "random":
        if k * d > MAX_BASIS_ENTRIES:
            raise UsageError(
                f"`k` {k} with `basis` random needs a {k}×{d} matrix ({k * d:.3g} entries, more than "
                f"{MAX_BASIS_ENTRIES:.0e}); use `basis` coordinates or a smaller `k`"
            )
        matrix = random_basis(k, d, basis_seed)

    def directions(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        projected = values[:, :k] if matrix is None else values @ matrix.T
        norms = rowmath.row_norms(projected)
        defined = np.isfinite(norms) & (norms > 0.0)
        safe = np.where(defined, norms, 1.0)
        return projected / safe[:, None], defined

    raw_path, release_path = Path(raw), Path(privatized)
    layout = VectorLayout(meta.layout.kind, meta.layout.columns, meta.layout.d)  # the keep columns are ignored

    cosines: list[np.ndarray] = []
    total = np.zeros(k)
    undefined_raw = undefined_release = 0
    with _open_raw(raw_path, release_path, layout, batch_rows) as reader:
        if reader.num_rows is not None and reader.num_rows != meta.n:
            raise _count_mismatch(raw_path, release_path, reader.num_rows, meta.n)
        rows = _Rows(iter(reader))
        seen = 0
        for batch in release:
            z = batch.values
            x = rows.take(z.shape[0])
            if x.shape[0] < z.shape[0]:
                raise _count_mismatch(raw_path, release_path, seen + x.shape[0], meta.n, fewer=True)
            seen += z.shape[0]
            fx, raw_ok = directions(x)
            fz, release_ok = directions(z)
            cos = np.einsum("ij,ij->i", fx, fz)
            cos[~(raw_ok & release_ok)] = np.nan
            cosines.append(cos)
            total += fx[raw_ok].sum(axis=0)
            undefined_raw += int(np.count_nonzero(~raw_ok))
            undefined_release += int(np.count_nonzero(raw_ok & ~release_ok))
        if rows.take(1).shape[0]:
            raise _count_mismatch(raw_path, release_path, None, seen)
    release_cos = np.concatenate(cosines) if cosines else np.empty(0)
    n = release_cos.shape[0]

    defined = n - undefined_raw
    mean = total / defined if defined else total
    length = float(np.sqrt(mean @ mean))
    guess = mean / length if length > 0.0 else np.eye(k)[0]  # no preferred direction: any fixed one
    prior_parts: list[np.ndarray] = []
    with _open_raw(raw_path, release_path, layout, batch_rows) as reader:
        for raw_batch in reader:
            if on_rows is not None:
                on_rows(raw_batch.values.shape[0])
            fx, raw_ok = directions(raw_batch.values)
            cos = fx @ guess
            cos[~raw_ok] = np.nan
            prior_parts.append(cos)
    prior_cos = np.concatenate(prior_parts) if prior_parts else np.empty(0)
    if prior_cos.shape[0] != n:  # the raw file changed between the two passes
        raise DataError(f"{raw_path}: changed while it was read (it had {counted(n, 'row')}, then {prior_cos.shape[0]})")

    epsilon = float(mech.epsilon_exact)
    level = risk_epsilons(mech)[0].epsilon  # None: no per-output guarantee (the Gaussian baseline), bound 1
    success = tuple(
        SuccessAt(value, _fraction(release_cos, value), _fraction(prior_cos, value),
                  1.0 if level is None else diffuse_risk(level, k=k, a=value).probability_bound)
        for value in accuracies
    )
    expected = expected_cosine(mech) if k == d else None  # the whole direction: any basis gives the same cosine
    return AttackReport(
        privatized=os.fspath(privatized), raw=os.fspath(raw), n=n, d=d, k=k, basis=basis,
        basis_seed=int(basis_seed) if basis == "random" else None, mechanism=mech.name, epsilon=epsilon,
        release=_summary(release_cos), prior=_summary(prior_cos), success=success,
        undefined_release=undefined_release, undefined_raw=undefined_raw, prior_mean_length=min(length, 1.0),
        expected_boundary=None if expected is None else expected.value,
        expected_how=None if expected is None else expected.how,
    )


def _open_raw(raw: Path, release: Path, layout: VectorLayout, batch_rows: int | None) -> VectorReader:
    """The raw file with the release's vector columns; DataError saying so if it lacks them."""
    try:
        return open_vectors(raw, layout=layout, batch_rows=batch_rows, writable=False, offer_no_header=False)
    except DataError as exc:
        columns = ", ".join(repr(name) for name in layout.columns)
        shape = "one list column" if layout.kind == "list" else f"{layout.d} numeric columns"
        raise DataError(
            f"{raw}: the raw file must hold the vector columns of the release {release} ({shape}: {columns}); "
            f"pass the file that was privatized ({exc.template})"
        ) from exc


def _count_mismatch(
    raw: Path, release: Path, raw_rows: int | None, release_rows: int, fewer: bool = False
) -> DataError:
    """The refusal of a raw file whose rows are not the release's, one for one."""
    raw_text = f"has more rows than the {release_rows}"
    if raw_rows is not None:
        raw_text = f"{'ends after' if fewer else 'has'} {counted(raw_rows, 'row')}"
    return DataError(
        f"{raw}: {raw_text} but the release {release} has {release_rows}; row i of the raw file must be row i of "
        "the release: pass the file that was privatized (a release made with `skip_invalid=True` that left rows out "
        "cannot be matched to its input)"
    )


class _Rows:
    """Rows of a reader handed out in chunks of any size (the two files' batches need not align)."""

    def __init__(self, batches: Iterator[Any]) -> None:
        self._batches = batches
        self._held: list[np.ndarray] = []
        self._count = 0

    def take(self, rows: int) -> np.ndarray:
        """The next ``rows`` rows (fewer at the end of the file)."""
        while self._count < rows:
            batch = next(self._batches, None)
            if batch is None:
                break
            self._held.append(batch.values)
            self._count += batch.values.shape[0]
        if not self._held:
            return np.empty((0, 0))
        joined = self._held[0] if len(self._held) == 1 else np.concatenate(self._held)
        out, rest = joined[:rows], joined[rows:]
        self._held = [rest] if rest.shape[0] else []
        self._count = rest.shape[0]
        return out


def _fraction(cosines: np.ndarray, a: float) -> SuccessFraction:
    n = cosines.shape[0]
    with np.errstate(invalid="ignore"):
        count = int(np.count_nonzero(cosines >= a))  # NaN (undefined) is never a success
    tail = (1.0 - CONFIDENCE) / 2.0  # two-sided Clopper–Pearson: each one-sided bound at level tail
    low, high = (float(cp_lower(count, n, tail)), float(cp_upper(count, n, tail))) if n else (0.0, 1.0)
    return SuccessFraction(count, n, low, high)


def _summary(cosines: np.ndarray) -> dict[str, float | None]:
    """Quantiles (numpy's default, linear interpolation) and mean of the defined cosines; None where none is."""
    values = cosines[np.isfinite(cosines)]
    if values.size == 0:
        empty: dict[str, float | None] = {name: None for name, _ in QUANTILES}
        return empty | {"mean": None, "defined": 0}
    levels = np.quantile(values, [level for _, level in QUANTILES])
    out: dict[str, float | None] = {name: float(v) for (name, _), v in zip(QUANTILES, levels)}
    out["mean"] = float(values.mean())
    out["defined"] = int(values.size)
    return out
