"""The secure rendering (``secure=True``): released doubles whose law is a proven
post-processing of the exact mechanism, up to a computed δ (the proof is docs/floating-point.md).

Three kinds, chosen by what the mechanism is:

- ``finite`` (the hypercube mechanisms, the scalar ones, any mechanism at d = 1 with a constant output
  norm): every output coordinate is one of finitely many public doubles, computed from the public
  parameters by the mechanism's ``output_value`` (:class:`~ldpcli.mechanisms._hooks.FiniteOutputs`), so the
  released double is a function of the sampled discrete choice only. The guarantee stays ε with δ = 0.
- ``grid`` (PrivUnit2 and duchi-l2 at d ≥ 2: L·scale·(t·u + r·w),
  :class:`~ldpcli.mechanisms._hooks.RoundedCap`): the output Ẑ is computed in extended precision
  (``numpy.longdouble``, 64-bit significand) with pairwise sums, and each coordinate is rounded
  without bias to the public grid gℤ, g a power of two, with an exactly drawn Bernoulli(frac(Ẑ_j/g)).
  The released value is an integer times g, an exact double. If Z is the exact mechanism's output
  from the same random variates, ``E Σ_j |Ẑ_j − Z_j| ≤ g·τ`` (:func:`cap_error_sum`, proven step by
  step in docs/floating-point.md §3), so the release and a post-processing of the exact ε-LDP output
  differ with probability at most τ, and the release is (ε, (1 + e^ε)·τ)-LDP (§2).
  PrivUnitG (s·(z·u + g⊥), :class:`GaussianCap`) has unbounded coordinates: the same arithmetic and
  grid, with τ from the expected floating-point error (:func:`gaussian_error_sum`, §8) and each
  coordinate clipped at ±(2⁵³ − 1)·g.
- ``sign`` (gaussian-sign, :class:`~ldpcli.mechanisms._hooks.PrivateSign`): ±fl(s·Z_j), magnitudes from the
  normals alone; only the sign of ⟨Z, u⟩ depends on the input, computed in extended precision, and τ
  bounds the chance that it is wrong (§5).

Model (docs/floating-point.md §1): the generator's uniforms, normals and the cap cosine are treated as
exact draws of their laws; everything computed after them is covered.

Here: the kind and grid of each mechanism (:func:`secure_rendering`), the release through them
(:func:`secure_privatize`), their law tests, and the secured mechanism (:func:`secured`). The
extended-precision steps are :mod:`ldpcli.math._extended`'s, their error bounds :mod:`ldpcli.math._roundoff`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ldpcli.errors import DataError, UsageError
from ldpcli.math import _logspace as logspace
from ldpcli.math import _rows as rowmath
from ldpcli.math._extended import (
    WORK,
    combine_rows,
    gaussian_combine,
    orthogonal_part,
    orthogonal_rows,
    pairwise_sum,
    require_extended_precision,
    round_to_grid,
    secure_unit_rows,
)
from ldpcli.math._lawtests import LawTest, deterministic
from ldpcli.math._roundoff import cap_error_sum, chi_mean, gaussian_bounds, step_bounds, unit_roundoff
from ldpcli.mechanisms._base import Mechanism
from ldpcli.mechanisms._hooks import (
    DirectionTimesMagnitude,
    PrivateSign,
    RiskEpsilon,
    RoundedCap,
    finite_outputs,
    law_tests,
    risk_epsilons,
)

#: The δ a secure release aims at by default: the grid is the finest power of two whose δ is at most this.
SECURE_DELTA = 1e-10
#: Where the proof is, as the sidecar records it.
PROOF = "docs/floating-point.md"
#: Rows per chunk of the grid kind's arithmetic (n·d values of 16 bytes each stay in cache).
_CHUNK_VALUES = 2**15
#: PrivUnitG's grid is at least 2^{⌈log₂ ρ⌉ − 22}, ρ = √E‖Z‖²: the clip at ±(2⁵³ − 1)·g ≥ 2³⁰·ρ is never met
#: in practice (Chebyshev: P ≤ 2⁻⁶⁰ per coordinate), and the added error d·g²/4 stays below d·2⁻⁴⁴·ρ².
_GAUSSIAN_GRID_FLOOR = 22


@runtime_checkable
class GaussianCap(Protocol):
    """A mechanism that releases s·(z·u + g⊥): u the unbiased rounding of the row to the unit sphere, z a
    per-row scalar draw, g⊥ = g − ⟨g, u⟩u for d standard normals g (PrivUnitG, Asi et al. 2022, Alg. 2).
    Its coordinates are unbounded, so its grid rests on the expected error (docs/floating-point.md §8)."""

    @property
    def output_scale(self) -> float:
        """s, the public factor of z·u + g⊥."""
        ...

    @property
    def radial_second_moment(self) -> float:
        """E[z²], which bounds E|z| (Cauchy–Schwarz)."""
        ...

    def split_normals(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """The per-row z, drawn after the rounding uniforms as the plain sampler draws them."""
        ...


#: How a rendering's working precision is recorded.
_PRECISION = "longdouble (u = 2^-64)"


def gaussian_error_sum(mech: GaussianCap, d: int, u: float) -> float:
    """A bound S on E Σ_j |Ẑ_j − Z_j| / s for PrivUnitG's grid kind (docs/floating-point.md §8).

    With Σ_j ≤ √d·‖·‖₂ and z independent of g: S = √d·(along·E|z| + across·E‖g‖), E|z| ≤ √E[z²]
    (Cauchy–Schwarz) and E‖g‖ = E[χ_d]. 0 at d = 1, where û = ±1 and w̃ = 0 exactly, so Ẑ = fl(s·z·u)
    is a function of the exact output.
    """
    if d == 1:
        return 0.0
    b = gaussian_bounds(d, u)
    return math.sqrt(d) * (b.along * math.sqrt(mech.radial_second_moment) + b.across * chi_mean(d))


@dataclass(frozen=True)
class Rendering:
    """How a secure release renders its outputs, and what that costs in δ and in error.

    ``kind``: ``finite`` (δ = 0) or ``grid``; ``target``: the δ asked for. ``grid``: g (None for ``finite``). ``tau``: the bound on
    P(release ≠ a post-processing of the exact output) (0 for ``finite``); ``delta`` = (1 + e^ε)·τ.
    ``added_error``: the bound d·g²/4 on E‖R − Ẑ‖² that the rounding adds; ``error_ratio`` the
    worst-case error of the secure release over the plain one's, (E_max + d·g²/4)/E_max. ``detail``:
    what the claim adds for this mechanism (PrivUnitG's).
    """

    kind: str
    target: float
    grid: float | None
    tau: float
    delta: float
    added_error: float
    error_ratio: float
    working_precision: str
    detail: str = ""

    def describe(self) -> dict[str, Any]:
        """The sidecar's ``release.rendering`` and the secure section of ``ldp params``."""
        claims = {
            "finite": "each coordinate is one of finitely many public doubles, a function of the sampled discrete "
                      "choice only: ε-LDP with δ = 0",
            "sign": "each coordinate is ±s·Z_j, its magnitude a function of the normals alone; the input decides "
                    "only the sign, computed in extended precision: (ε, δ)-LDP with this δ, an upper bound on a "
                    "wrong sign (δ = 0 at d = 1, where the sign is exact)",
            "grid": f"each coordinate an integer multiple of g = 2^{int(math.log2(self.grid or 1.0))} (for separated, "
                    "the direction's, times the magnitude's public value), rounded without bias from an "
                    "extended-precision output: (ε, δ)-LDP with this δ, an upper bound",
        }
        claim = claims[self.kind] + self.detail
        return {
            "kind": "secure", "rendering": self.kind, "grid": self.grid, "tau": self.tau, "delta": self.delta,
            "delta_target": self.target,
            "added_error_max": self.added_error, "error_ratio": self.error_ratio,
            "working_precision": self.working_precision, "claim": claim,
            "assumption": "the generator's uniforms, normals and cap cosines are treated as exact draws of their "
                          "laws; every step computed after them is covered by the proof",
            "proof": PROOF,
        }


def _constant_norm_values(mech: Mechanism) -> bool:
    return mech.d == 1 and isinstance(mech, RoundedCap)


def secure_rendering(mech: Mechanism, delta: float | None = None) -> Rendering:
    """The secure rendering of ``mech`` at a target δ (default :data:`SECURE_DELTA`).

    ``grid``: g = the smallest power of two with (1 + e^ε)·τ(g) ≤ δ, τ(g) = c·``cap_error_sum``/g.
    UsageError for a mechanism without a secure rendering, a δ outside (0, 1), or a grid that would be
    coarser than the output's own norm c (the rendering would then be mostly noise).
    """
    target = SECURE_DELTA if delta is None else float(delta)
    if not 0.0 < target < 1.0:
        raise UsageError(f"`secure_delta` {delta!r} must be in (0, 1)")
    if finite_outputs(mech) is not None or _constant_norm_values(mech):
        return Rendering("finite", target, None, 0.0, 0.0, 0.0, 1.0, "float64")
    if isinstance(mech, PrivateSign):
        return _sign_rendering(mech, target)
    if isinstance(mech, DirectionTimesMagnitude):
        return _product_rendering(mech, target)
    if isinstance(mech, GaussianCap):
        return _gaussian_rendering(mech, target)
    if not isinstance(mech, RoundedCap):
        raise UsageError(f"mechanism {mech.name!r} has no secure rendering yet; the mechanisms with one: privunit2, "
                         "duchi-l2, privunitg, gaussian-sign, separated, privunit-inf, duchi-linf, scalar, scalar-rel")
    c = mech.norm_bound * mech.scale
    a = c * cap_error_sum(mech.d, unit_roundoff())
    # g ≥ 2^{⌈log₂ c⌉ − 52}: every |Ẑ_j|/g + 1 ≤ 2⁵³, so the released integer times g is an exact double.
    return _grid_rendering(mech, target, a, max(_finest_grid(mech, target, a, c, "the output norm"),
                                                math.frexp(c)[1] - 52))


def _finest_grid(mech: Mechanism, target: float, a: float, ceiling: float, what: str) -> int:
    """log₂ of the finest power-of-two grid g with (1 + e^ε)·a/g ≤ ``target`` (τ = a/g); UsageError where
    g would exceed ``ceiling`` (``what``: the output's own size, so the rendering would be mostly noise)."""
    log2_grid = math.ceil((math.log(a) + logspace.softplus(mech.epsilon_exact) - math.log(target)) / math.log(2.0))
    if log2_grid > math.log2(ceiling):
        raise UsageError(f"{mech.name} at d = {mech.d}, ε = {mech.epsilon:g}: a secure rendering with δ ≤ {target:g} "
                         f"needs a grid g = 2^{log2_grid} above {what} {ceiling:.6g}; allow a larger `secure_delta`")
    return log2_grid


def _grid_rendering(mech: Mechanism, target: float, a: float, log2_grid: int, detail: str = "") -> Rendering:
    """The grid kind at g = 2^``log2_grid``: τ = a/g, δ = (1 + e^ε)·τ, and the rounding's added error d·g²/4."""
    grid = math.ldexp(1.0, log2_grid)
    tau = a / grid
    added = mech.d * grid * grid / 4.0
    return Rendering("grid", target, grid, tau, math.exp(logspace.softplus(mech.epsilon_exact)) * tau, added,
                     (mech.expected_error_max + added) / mech.expected_error_max, _PRECISION, detail)


def _gaussian_rendering(mech: Mechanism, target: float) -> Rendering:
    """PrivUnitG's rendering (docs/floating-point.md §8): τ = s·``gaussian_error_sum``/g and g the finest
    power of two with (1 + e^ε)·τ ≤ the target, but at least 2^{⌈log₂ ρ⌉ − 22}, ρ = √E‖Z‖²
    (``expected_error_max``, E‖Z‖² whatever x); UsageError where g would exceed ρ, as the grid kind
    refuses a g above the output norm (the rendering would then be mostly noise)."""
    if not isinstance(mech, GaussianCap):
        raise ValueError(f"{mech.name!r} does not release s·(z·u + g⊥)")
    a = mech.output_scale * gaussian_error_sum(mech, mech.d, unit_roundoff())
    rms = math.sqrt(mech.expected_error_max)
    log2_grid = math.frexp(rms)[1] - _GAUSSIAN_GRID_FLOOR
    if a > 0.0:
        log2_grid = max(log2_grid, _finest_grid(mech, target, a, rms, "the output's root-mean-square norm"))
    detail = ("; PrivUnitG's coordinates are unbounded, so τ = δ/(1 + e^ε) bounds the expected floating-point "
              "error over g (the coupling needs no worst case), each coordinate is clipped at ±(2^53 − 1)·g (a "
              "post-processing, reached with probability below 2^-60 per coordinate), and the truncated normal "
              "along u is treated as an exact draw of its law"
              + ("; at d = 1 the computed output is a function of the exact one: δ = 0" if mech.d == 1 else ""))
    return _grid_rendering(mech, target, a, log2_grid, detail)


def _product_rendering(mech: Mechanism, target: float) -> Rendering:
    """separated's rendering: its direction's (at ε₁: the magnitude is pure ε₂-LDP, so δ is the
    direction's by basic composition), the added error times the largest squared magnitude value."""
    if not isinstance(mech, DirectionTimesMagnitude):
        raise ValueError(f"{mech.name!r} is not a product of a direction and a magnitude")
    part = secure_rendering(mech.direction, target)
    values = finite_outputs(mech.magnitude)
    if values is None:
        raise UsageError(f"mechanism {mech.name!r}: its magnitude has no finite public values to render")
    top = float(np.max(np.abs(values.output_value(np.array([0, values.output_count - 1])))))
    added = top * top * part.added_error
    worst = float(mech.expected_error_max)  # the plain product's (secured passes the plain mechanism)
    return Rendering(part.kind, target, part.grid, part.tau, part.delta, added, (worst + added) / worst,
                     part.working_precision)


def _sign_rendering(mech: Mechanism, target: float) -> Rendering:
    """gaussian-sign's rendering (docs/floating-point.md §5): τ = P(the computed sign of ⟨Z, û⟩ is not the
    exact one) ≤ √(2/π)·e_c/(1 − e_c)·E[χ_{d−1}] (0 at d = 1), δ = (1 + e^ε)·τ; UsageError above the target."""
    u = unit_roundoff()
    tau = 0.0
    if mech.d > 1:
        e_c = step_bounds(mech.d, u).e_c
        tau = math.sqrt(2.0 / math.pi) * e_c / (1.0 - e_c) * chi_mean(mech.d - 1)
    delta = math.exp(logspace.softplus(mech.epsilon_exact)) * tau
    if delta > target:
        raise UsageError(f"{mech.name} at d = {mech.d}, ε = {mech.epsilon:g}: its secure rendering has δ = {delta:.3g}, "
                         f"above {target:g}; allow a larger `secure_delta`")
    return Rendering("sign", target, None, tau, delta, 0.0, 1.0, _PRECISION)


def _signed_normals(mech: Mechanism, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """gaussian-sign securely: the draws of its plain sampler (rounding uniforms, kept signs, then per chunk
    the normals Z), with ⟨Z, û⟩ in :data:`WORK` (:func:`secure_unit_rows`, a pairwise sum), and the release
    ±fl(s·Z_j): a magnitude from Z alone and a sign (a zero is +0.0, as a −0.0 would tell the sign)."""
    if not isinstance(mech, PrivateSign):
        raise ValueError(f"the sign rendering is gaussian-sign's, not {mech.name!r}'s")
    n = x.shape[0]
    flips: np.ndarray = rng.random((n,))
    keep = mech.kept_signs(n, rng)
    scale = mech.gaussian_scale

    def signed(rows: slice, u: np.ndarray) -> np.ndarray:
        normals = rng.standard_normal(u.shape)
        positive = pairwise_sum(normals.astype(WORK) * u) >= 0
        return normals * np.where(positive == keep[rows], scale, -scale)[:, None]

    out = _by_chunks(x, flips, float(mech.norm_bound), rng, signed)
    out += 0.0
    return out


def _by_chunks(x: np.ndarray, flips: np.ndarray, radius: float, rng: np.random.Generator,
               rows_out: Callable[[slice, np.ndarray], np.ndarray]) -> np.ndarray:
    """The release, chunk by chunk of rows (:data:`_CHUNK_VALUES` values): each chunk's û
    (:func:`secure_unit_rows`), then ``rows_out(rows, û)``, which draws the chunk's own variates after it."""
    n, d = x.shape
    out = np.empty((n, d))
    for rows in rowmath.row_chunks(n, d, _CHUNK_VALUES):
        out[rows] = rows_out(rows, secure_unit_rows(x[rows], flips[rows], radius, rng))
    return out


def secure_privatize(mech: Mechanism, rendering: Rendering, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``mech.privatize`` with the secure rendering (:func:`secure_rendering`) of ``mech``.

    ``finite``: the mechanism's own ``privatize``, whose outputs are its public values. ``grid``: the
    draw order of the plain sampler for the rounding uniforms and the cap draws (n each, then
    ``cap_cosines``), then per chunk the normals (a fair bit per row at d = 2), then the rounding's bits;
    PrivUnitG's (:func:`_gaussian_privatize`) draws its z in place of the cap draws and d normals per row
    at every d.
    """
    if rendering.kind == "finite":
        return mech.privatize(x, rng)
    require_extended_precision()
    if rendering.kind == "sign":
        return _signed_normals(mech, x, rng)
    if isinstance(mech, GaussianCap) and rendering.grid is not None:
        return _gaussian_privatize(mech, rendering.grid, x, rng)
    if isinstance(mech, DirectionTimesMagnitude):  # separated: its direction rendered, times the magnitude
        part = secure_rendering(mech.direction, rendering.target)
        return mech.privatize_parts(x, rng, lambda u, gen: secure_privatize(mech.direction, part, u, gen))
    if rendering.grid is None or not isinstance(mech, RoundedCap):
        raise ValueError(f"a grid rendering needs a grid and a rounded-cap mechanism, not {mech.name!r}")
    grid = rendering.grid
    flips: np.ndarray = rng.random((x.shape[0],))
    t, _ = mech.cap_cosines(x.shape[0], rng)
    c = mech.norm_bound * mech.scale
    return _by_chunks(x, flips, mech.norm_bound, rng,
                      lambda rows, u: round_to_grid(combine_rows(u, orthogonal_rows(u, rng)[0], t[rows], c), grid, rng))


def _gaussian_privatize(mech: Mechanism, grid: float, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """PrivUnitG securely: the plain sampler's rounding uniforms and z (n each), then per chunk the unit
    rows (:func:`secure_unit_rows`), the d normals of each row, w̃ (:func:`orthogonal_part`), Ẑ
    (:func:`gaussian_combine`) and the rounding's bits."""
    if not isinstance(mech, GaussianCap):
        raise ValueError(f"{mech.name!r} does not release s·(z·u + g⊥)")
    flips: np.ndarray = rng.random((x.shape[0],))
    z = mech.split_normals(x.shape[0], rng)
    s = mech.output_scale

    def rendered(rows: slice, u: np.ndarray) -> np.ndarray:
        w = orthogonal_part(rng.standard_normal(u.shape).astype(WORK), u)
        return round_to_grid(gaussian_combine(u, w, z[rows], s), grid, rng)

    return _by_chunks(x, flips, float(mech.norm_bound), rng, rendered)


#: The largest set of public values the law tests enumerate (:func:`rendered_law_tests`).
_ENUMERATED_VALUES = 2**20


def rendered_law_tests(plain: Mechanism, rendering: Rendering, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
    """The audit's law tests of a secure release ``z`` of input ``x`` (the audit of a secure release).

    ``finite``: every coordinate one of the public values (enumerated up to 2²⁰ of them), then the plain
    mechanism's tests, whose law is unchanged. ``grid`` for PrivUnitG: every coordinate an integer multiple
    of g, then the plain tests on the release (short of the clip, no coordinate moved by g or more, far below
    their resolution). ``grid``: every coordinate an integer multiple of g, each
    row's norm within √d·g of c = L·scale (each coordinate moves by less than g), then the plain tests of
    the rows scaled back onto the sphere of radius c (the cosines move by at most √d·g/c), without
    the plain norm test that this scaling makes void.
    """
    n, d = z.shape
    if rendering.kind == "sign":  # the plain law, up to τ
        return law_tests(plain, x, z)
    if isinstance(plain, DirectionTimesMagnitude) and rendering.kind == "grid":
        return _product_law_tests(plain, rendering, x, z)
    if rendering.kind == "finite":
        tests = law_tests(plain, x, z)
        mech = finite_outputs(plain)
        if mech is not None and mech.output_count <= _ENUMERATED_VALUES:
            off = int(np.count_nonzero(~np.isin(z, mech.output_value(np.arange(mech.output_count))).all(axis=1)))
            tests.insert(0, deterministic(f"Z ∈ the {mech.output_count} public values", off, n, "off them"))
        return tests
    grid = float(rendering.grid or 0.0)
    steps = z / grid
    off_grid = int(np.count_nonzero((steps != np.round(steps)).any(axis=1)))
    on_grid = deterministic(f"Z ∈ gℤ^d, g = 2^{round(math.log2(grid))}", off_grid, n, "off the grid")
    if isinstance(plain, GaussianCap):  # each coordinate moved by less than g: the plain law, checked as is
        return [on_grid] + law_tests(plain, x, z)
    c = plain.norm_bound * float(plain.scale or 0.0)
    norms = np.linalg.norm(z, axis=1)
    off_norm = int(np.count_nonzero(np.abs(norms - c) > math.sqrt(d) * grid))
    tests = [on_grid, deterministic(f"|‖Z‖ − {c:.6g}| ≤ √d·g", off_norm, n, "farther")]
    scaled = z * (c / np.where(norms > 0, norms, 1.0))[:, None]
    return tests + [test for test in law_tests(plain, x, scaled) if "‖Z‖ =" not in test.name]


def _product_law_tests(plain: Mechanism, rendering: Rendering, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
    """separated's secure outputs R̂·R (R the direction on the grid): each row's norm within √d·g·|R̂| of
    |R̂|·c₁ for one magnitude value R̂ (c₁ the direction's norm), then the plain tests of the rows
    scaled to that norm (the magnitude's values enumerated up to 2²⁰; beyond, the plain tests skip)."""
    n, d = z.shape
    mag = finite_outputs(plain.magnitude) if isinstance(plain, DirectionTimesMagnitude) else None
    if mag is None or mag.output_count > _ENUMERATED_VALUES or not isinstance(plain, DirectionTimesMagnitude):
        return law_tests(plain, x, z)
    direction = plain.direction
    c1 = direction.norm_bound * float(direction.scale or 0.0)
    sizes = np.unique(np.abs(mag.output_value(np.arange(mag.output_count)))) * c1
    norms = np.linalg.norm(z, axis=1)
    upper = np.clip(np.searchsorted(sizes, norms), 1, max(1, sizes.size - 1))
    lower = upper - 1
    snapped = np.where(np.abs(norms - sizes[lower]) <= np.abs(sizes[upper % sizes.size] - norms),
                       sizes[lower], sizes[upper % sizes.size])
    grid = float(rendering.grid or 0.0)
    off = int(np.count_nonzero(np.abs(norms - snapped) > math.sqrt(d) * grid * snapped / c1))
    scaled = z * (snapped / np.where(norms > 0, norms, 1.0))[:, None]
    return [deterministic("|‖Z‖ − |R̂|·c₁| ≤ √d·g·|R̂|", off, n, "farther")] + law_tests(plain, x, scaled)


#: The secure subclass made for each mechanism class (:func:`secured`), made once.
_SECURE_CLASSES: dict[type[Mechanism], type[Mechanism]] = {}


def _secure_class(base: type[Mechanism]) -> type[Mechanism]:
    """``base`` with the secure rendering: ``privatize`` renders securely, ``delta_exact`` adds the
    rendering's δ (so a release's cost, its ledger entry and its sidecar count it:
    :func:`ldpcli.mechanisms._composition.release_cost`), the expected errors add the rounding's d·g²/4
    (E‖R − x‖² = E‖Ẑ − x‖² + E Σ g²f_j(1 − f_j), the rounding being unbiased; the floating-point error
    of Ẑ itself, a relative 1e−16 of the output, is below the printed digits), the reconstruction levels
    say that their bounds hold up to an additive δ (Bhowmick et al. 2018, Lemma 2.2 with δ), and
    ``describe`` has a ``rendering`` section. δ is read through ``super()`` and the errors from ``plain()``, which
    serve a ``property`` and a ``functools.cached_property`` alike (scalar-rel's ``expected_error_max`` is one), and
    keep privunitg's ``expected_error_max`` (its ``expected_error`` + L²) from counting the rounding twice.
    The name, spec, options and hooks are the base's: the sidecar's spec re-creates the plain mechanism."""
    if base in _SECURE_CLASSES:
        return _SECURE_CLASSES[base]

    def privatize(self: Any, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self.rendering.kind == "finite":
            return base.privatize(self, x, rng)  # its outputs are already its public values
        return secure_privatize(self, self.rendering, x, rng)

    def delta_exact(self: Any) -> float:
        return float(super(cls, self).delta_exact) + self.rendering.delta

    def describe_more(self: Any) -> dict[str, Any]:
        return {**base._describe(self), "rendering": self.rendering.describe()}

    def expected_error(self: Any) -> float:
        return float(self.plain().expected_error) + self.rendering.added_error

    def expected_error_max(self: Any) -> float:  # the plain one's: PrivUnitG's adds L² to its expected_error
        return float(self.plain().expected_error_max) + self.rendering.added_error

    def levels(self: Any) -> list[RiskEpsilon]:
        plain = risk_epsilons(self.plain())
        if self.rendering.delta == 0.0:
            return plain
        extra = (f"; the secure rendering is (ε, δ)-LDP with δ = {self.rendering.delta:.3g}, so each bound holds "
                 "up to an additive δ")
        return [level._replace(applies=level.applies + extra) for level in plain]

    def law_tests(self: Any, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
        return rendered_law_tests(self.plain(), self.rendering, x, z)

    def reduce(self: Any) -> tuple[Any, ...]:
        return secured, (self.plain(), self.rendering.target)

    def plain(self: Any) -> Mechanism:
        return base(**{item.name: getattr(self, item.name) for item in fields(base)})

    namespace = {
        "__annotations__": {"rendering": "Rendering | None"}, "rendering": None, "__module__": __name__,
        "privatize": privatize, "delta_exact": property(delta_exact), "_describe": describe_more,
        "risk_epsilons": levels, "law_tests": law_tests, "expected_error": property(expected_error), "expected_error_max": property(expected_error_max),
        "__reduce__": reduce, "plain": plain,
        "__doc__": f"{base.__name__} with the secure rendering (ldpcli.mechanisms._rendering, {PROOF}).",
    }
    cls: type[Mechanism] = dataclass(frozen=True)(type(f"Secure{base.__name__}", (base,), namespace))
    _SECURE_CLASSES[base] = cls
    return cls


def secured(mech: Mechanism, delta: float | None = None) -> Mechanism:
    """``mech`` releasing through its secure rendering at target δ (:func:`secure_rendering`): the same
    mechanism for every caller (name, spec, ε, hooks), whose ``privatize`` renders securely and whose
    ``delta_exact`` includes the rendering's δ. UsageError where :func:`secure_rendering` has none."""
    plain = mech.plain() if hasattr(mech, "plain") else mech
    rendering = secure_rendering(plain, delta)
    values = {item.name: getattr(plain, item.name) for item in fields(plain)}
    return _secure_class(type(plain))(**values, rendering=rendering)  # type: ignore[call-arg]


def as_recorded(mech: Mechanism, rendering: Any) -> Mechanism:
    """The mechanism of a release read back: ``mech`` (from its spec) secured again when the release
    recorded a rendering (a sidecar's ``release.rendering``, a description's ``rendering``), at the
    recorded target δ; DataError when the record has no target δ or is not the rendering that the spec and
    that target give (an edited or foreign record: the reader's one message names the file)."""
    if rendering is None:
        return mech
    if not isinstance(rendering, dict) or not isinstance(rendering.get("delta_target"), (int, float)):
        raise DataError("the recorded rendering has no target δ ('delta_target')")
    again = secured(mech, float(rendering["delta_target"]))
    if again.describe()["rendering"] != rendering:
        raise DataError("the recorded rendering is not the one its mechanism and target δ give")
    return again
