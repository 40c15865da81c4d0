"""The separated mechanism: direction by PrivUnit2 at ε₁, magnitude by ScalarDP at ε₂.

Bhowmick et al. (2018), Eq. (22) (theory) and Eq. (23) (experiments): for w with ‖w‖ ≤ r_max
(the public bound ``norm_bound``), release

    Z = R̂ · Û,   Û = PrivUnit2(w/‖w‖) at ε₁ (unit ball, ‖Û‖ = 1/m),   R̂ = ScalarDP(‖w‖) at ε₂,

with ε₁ + ε₂ = ε (ε₂ = ε − ε₁ rounded down, so that the sum never exceeds ε in floating point).
A zero row gets a uniformly random direction (E[Û] = 0 = E[Z]). The two parts use independent
randomness and are each unbiased, so E[Z] = E[R̂]·E[Û] = ‖w‖·w/‖w‖ = w, and

    E‖Z − w‖² = E[R̂²]·E‖Û‖² − ‖w‖² = (r² + V(r))/m² − r² = V(r)/m² + r²(1/m² − 1),   r = ‖w‖,

with V(r) = E(R̂ − r)² ScalarDP's exact error (``scalar`` module) and 1/m² − 1 PrivUnit2's exact
error for unit vectors. ``expected_error`` is its value at ‖w‖ = r_max; ``expected_error_max`` its
sup over the ball. On each cell of the magnitude grid it is a concave quadratic in r (the r²
coefficient is −1/m² + (1/m² − 1) = −1 in units of the grid step); V is symmetric about r_max/2
and largest in the end cells, and r²(1/m² − 1) grows with r, so the sup lies in the top cell
[r_max − g, r_max], at s* = (M(1 − A(k − 1)) − 2k(M − 1))/2 grid steps below r_max (clipped to
[0, 1]), M = 1/m², A = (k + 1)/(e^{ε₂} − 1).

Privacy: Z is a function of (R̂, Û), so ε_exact ≤ ε₁_exact + ε₂_exact by composition; and the map
(R̂, Û) ↦ Z loses nothing at the top magnitude output (no other R̂ value is its negative), so both
worst cases combine: ε_exact = ε₁_exact + ε₂_exact (a supremum when k = 1, approached by ‖w‖ → 0).

Calibrations (docs/errata.md §9: the choice is explicit, never mixed):
- ``optimal`` (default): PrivUnit2 optimal (Asi et al. 2022) at ε₁, ScalarDP at ε₂ with
  k = ⌈e^{ε₂/3}⌉ (or the ``k`` option), and the split ε₁/ε chosen to minimise
  ``expected_error_max``: a public 1-D minimisation (a grid over logit(ε₁/ε) ∈ [−10, 10], then a
  bounded Brent refinement around the best grid point, then, with the default k, a search over the
  ends of the saw-tooth's teeth, where k is fixed). ``eps_split`` overrides it.
- ``bhowmick``: Eq. (23), the paper's experiments: PrivUnit2 with γ(0.99ε₁) from Thm 1 (16) and
  p = p(0.01ε₁), ScalarDP with k = ⌈e^{ε₂/3}⌉ (docs/errata.md §7). The split is the user's: ``eps_split``
  is required. (Eq. (22)'s p = 1/2 is a proof device and is not offered.)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any, Callable

import numpy as np

from ldpcli.errors import UsageError, counted
from ldpcli.math import _logspace as logspace
from ldpcli.math import _rows as rowmath
from ldpcli.math._lawtests import LawTest
from ldpcli.mechanisms._base import Mechanism, OptionSpec, declare, register
from ldpcli.mechanisms._hooks import OutputBranch, RiskEpsilon
from ldpcli.mechanisms._privunit import PrivUnit2
from ldpcli.mechanisms._scalar import K_MAX, K_REL_MAX, ScalarDP, default_k

#: The audit splits Z into its magnitude's branches up to this grid size: ‖Z‖·m then places R̂ on the
#: grid to within 1e−4 of a grid step (rounding ≈ u·k/B grid steps).
MAX_SPLIT_K = 2**40

#: The optimal split is searched over logit(ε₁/ε) ∈ [−R, R] (ε₁/ε between 4.5e−5 and 1 − 4.5e−5).
_SPLIT_LOGIT_RANGE = 10.0
_SPLIT_GRID_POINTS = 81


def _parts(
    d: int, epsilon: float, norm_bound: float, calibration: str, eps_split: float, k: int | None
) -> tuple[PrivUnit2, ScalarDP]:
    """PrivUnit2 at ε₁ = eps_split·ε on the unit ball and ScalarDP at ε₂ = ε − ε₁ on [0, r_max].

    ε₂ is ε − ε₁ rounded down, so that ε₁ + ε₂ ≤ ε holds exactly (in real numbers, not only after
    rounding): then any ε₁_exact ≤ ε₁ gives ε₁_exact + ε₂ ≤ ε once rounded, too, and the reported
    ε_exact = ε₁_exact + ε₂_exact is never above ε. fl(ε − ε₁) can round up when ε₁ < ε/2; one ulp
    of ε₂ less changes the error by a relative ~1e−16.
    """
    eps1 = eps_split * epsilon
    eps2 = epsilon - eps1
    while Fraction(eps1) + Fraction(eps2) > Fraction(epsilon):
        eps2 = math.nextafter(eps2, 0.0)
    if not (eps1 > 0.0 and eps2 > 0.0):
        raise UsageError(f"`eps_split` {eps_split!r} leaves no budget for one part at ε = {epsilon!r}")
    direction = PrivUnit2.calibrate(d, eps1, norm_bound=1.0, calibration=calibration)
    magnitude = ScalarDP.calibrate(1, eps2, norm_bound=norm_bound, k=k)
    return direction, magnitude


def _error_at(direction: PrivUnit2, magnitude: ScalarDP, r: np.ndarray | float) -> np.ndarray:
    """E‖Z − w‖² = V(r)/m² + r²(1/m² − 1) for ‖w‖ = r (vectorized, exact)."""
    r = np.clip(np.asarray(r, dtype=float), 0.0, magnitude.norm_bound)
    return magnitude.error_at(r) * direction.expected_error_max + r * r * direction.expected_error


def _worst_norm(direction: PrivUnit2, magnitude: ScalarDP) -> tuple[float, float]:
    """(r*, sup error): the concave maximum of the top magnitude cell (module docstring).

    The error at s* is evaluated in grid units, E(s) = g²·[M·(A(k/2 − s)² + B·s(1 − s) + ABk(k + 2)/12)
    + (k − s)²·(M − 1)] (``ScalarDP.error_at`` with t = k − s, f = 1 − s), not at the rounded norm
    r_max − s*·g: for k ≳ 10¹² that norm keeps only ~k·2⁻⁵³ of a grid step, and the sup, read
    through r/g, jittered by a relative (k·2⁻⁵³)² (1e−5 at k = 3·10¹³), enough for the optimal
    split's search to land on a worse split at a larger ε (regression test at ε = 157.98…).
    """
    a, b = magnitude.coefficients
    k = float(magnitude.k)
    big_m, e_dir = direction.expected_error_max, direction.expected_error
    s_star = min(1.0, max(0.0, 0.5 * (big_m * (1.0 - a * (k - 1.0)) - 2.0 * k * e_dir)))
    r_max, g = magnitude.norm_bound, magnitude.grid_step
    at_top = float(_error_at(direction, magnitude, r_max))  # s = 0: ``expected_error`` itself
    cell = big_m * (a * (0.5 * k - s_star) ** 2 + b * s_star * (1.0 - s_star) + a * b * k * (k + 2.0) / 12.0)
    inside = g * g * (cell + (k - s_star) ** 2 * e_dir)
    if inside > at_top:
        return max(0.0, r_max - s_star * g), inside
    return r_max, at_top


def optimal_direction_share(d: int, epsilon: float, norm_bound: float = 1.0, k: int | None = None) -> float:
    """The split ε₁/ε minimising the worst-case E‖Z − w‖² of the ``optimal`` calibration.

    A public computation (it uses d, ε, r_max and k only): ``expected_error_max`` on a grid of
    logit(ε₁/ε), then a bounded Brent refinement between the neighbours of the best grid point;
    the best value seen is returned. The objective jumps where k = ⌈e^{ε₂/3}⌉ changes, which is why
    a grid comes first, and why, with the default k, the ends of the teeth near the result are
    searched last (:func:`_best_tooth_end`: the least end found does not rise with ε).
    """
    from scipy import optimize  # imported here: starting the CLI should not pay for it

    seen: dict[float, float] = {}

    def worst(u: float) -> float:
        u = float(u)
        if u not in seen:
            s = math.exp(logspace.log_expit(u))
            try:
                direction, magnitude = _parts(d, epsilon, norm_bound, "optimal", s, k)
                seen[u] = _worst_norm(direction, magnitude)[1]
            except UsageError:
                seen[u] = math.inf
            if not math.isfinite(seen[u]):
                seen[u] = math.inf
        return seen[u]

    grid = np.linspace(-_SPLIT_LOGIT_RANGE, _SPLIT_LOGIT_RANGE, _SPLIT_GRID_POINTS)
    values = [worst(u) for u in grid]
    i = int(np.argmin(values))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    optimize.minimize_scalar(worst, bounds=(lo, hi), method="bounded", options={"xatol": 1e-9})
    u_best = min(seen, key=lambda u: (seen[u], abs(u - grid[i])))
    if k is None:
        _best_tooth_end(epsilon, u_best, worst)
        u_best = min(seen, key=lambda u: (seen[u], abs(u - grid[i])))
    return math.exp(logspace.log_expit(u_best))


def _best_tooth_end(epsilon: float, u_best: float, worst: Callable[[float], float]) -> None:
    """Evaluate ``worst`` at the ends of the teeth of k = ⌈e^{ε₂/3}⌉ near ``u_best``, down to the least
    one (the caller keeps the best point ``worst`` has seen).

    With k fixed (a tooth: ε₂ ∈ (3 log(k − 1), 3 log k]) the objective is smooth in the split and it
    jumps where k does, so it is a saw-tooth that Brent's method, started anywhere, ends on one of many
    nearly equal teeth (+9e−9 from ε = 1698.512403575758 to 1698.512403577971 at d = 186, k ≈ 42 700,
    where the least point of a tooth is its left end). The ends ε₂ = 3 log(k − 1) and 3 log k, moved
    1e−13·ε inwards (so that the split's rounding keeps this k), give a smooth function of the integer k,
    h(k) = the better end, searched here for its least value: downhill from the k of ``u_best`` by
    doubling steps, then by integer ternary sections. At a larger ε each end keeps its k and ε₂ and
    gets more ε₁, so its error falls: the least end falls with ε.
    """
    def end(eps2: float) -> float:
        share = 1.0 - eps2 / epsilon
        if not (0.0 < eps2 and 0.0 < share < 1.0):
            return math.inf
        return worst(math.log(share) - math.log1p(-share))

    def at(tooth: int) -> float:
        margin = 1e-13 * epsilon
        return min(end(3.0 * math.log(tooth - 1) + margin), end(3.0 * math.log(tooth) - margin))

    s_best = math.exp(logspace.log_expit(u_best))
    k0 = max(3, default_k(epsilon - s_best * epsilon))  # k = 2's left end is ε₂ = 0
    if k0 >= K_MAX:
        return  # k capped: no teeth left (the objective is smooth in the split there)
    step = 1 if at(k0 + 1) < at(k0) else -1
    lo, mid, span = k0, k0, 1  # the least value seen so far is at(mid); lo is one side of it
    while True:
        nxt = min(max(3, mid + step * span), K_MAX - 1)
        if nxt == mid or at(nxt) >= at(mid):
            hi = nxt
            break
        lo, mid, span = mid, nxt, 2 * span
    left, right = min(lo, hi), max(lo, hi)  # the least end lies in [left, right] (unimodal)
    while right - left > 2:
        a = left + (right - left) // 3
        b = right - (right - left) // 3
        if at(a) <= at(b):
            right = b
        else:
            left = a
    for tooth in range(left, right + 1):
        at(tooth)


@register(
    name="separated",
    title="Separated direction × magnitude (Bhowmick et al. 2018, Eq. 22/23): PrivUnit2 · ScalarDP",
    calibrations=("optimal", "bhowmick"),
)
@dataclass(frozen=True)
class Separated(Mechanism):
    """Direction × magnitude (Bhowmick et al. 2018, Eq. 22/23): PrivUnit2 at ε₁ times ScalarDP at ε₂.

    ``eps_split`` = ε₁/ε and ``k`` (the magnitude grid) are options and hold the resolved values;
    ``direction`` and ``magnitude`` are the two calibrated parts (PrivUnit2 on the unit ball,
    ScalarDP on [0, r_max]). See the module docstring for the exact error and privacy.
    """

    eps_split: float
    k: int
    direction: PrivUnit2
    magnitude: ScalarDP

    options = declare(
        OptionSpec("eps_split", float, "share ε1/ε of the budget for the direction, in (0, 1) (default: "
                   "error-minimising; required with --calibration bhowmick)", 0.9,
                   low=0.0, high=1.0, low_open=True, high_open=True, required_by=("bhowmick",)),
        OptionSpec("k", int, f"magnitude grid size (default ⌈e^{{ε2/3}}⌉, at most {K_MAX})", 2, low=1, high=K_MAX),
    )

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> Separated:
        """The separated mechanism at total level ε; options ``eps_split`` and ``k``."""
        eps_split, k = options["eps_split"], options["k"]
        if eps_split is None:  # given with calibration="bhowmick" (Eq. 23 takes the split from the user)
            eps_split = optimal_direction_share(d, epsilon, 1.0, k)  # the split is scale-free: decide it at r_max = 1
        direction, magnitude = _parts(d, epsilon, norm_bound, calibration, eps_split, k)
        return cls(d, epsilon, norm_bound, calibration, eps_split, magnitude.k, direction, magnitude)

    @property
    def epsilon1(self) -> float:
        """ε₁ = eps_split·ε, the direction's budget."""
        return self.direction.epsilon

    @property
    def epsilon2(self) -> float:
        """ε₂ = ε − ε₁ (rounded down: ε₁ + ε₂ ≤ ε exactly), the magnitude's budget."""
        return self.magnitude.epsilon

    @property
    def epsilon_exact(self) -> float:
        """ε₁_exact + ε₂_exact (see the module docstring for why the sum is attained)."""
        return self.direction.epsilon_exact + self.magnitude.epsilon_exact

    def risk_epsilons(self) -> list[RiskEpsilon]:
        """ε₁ + ε₂ for any target (the default), and ε₁ for the direction under an assumption.

        The direction release Z₁ = M₁(x/‖x‖) is ε₁-LDP and the magnitude release Z₂ sees only ‖x‖
        (Bhowmick et al. 2018, Def. 4.1 and the Markov structure of Fig. 1). When ‖x‖ and x/‖x‖ are
        independent under the prior, (x/‖x‖, Z₁) is independent of Z₂, so the posterior of any
        target that depends on the direction only (f_A(x) = Ax/‖Ax‖ of Sec. 2.3.1) is its posterior
        given Z₁ alone, and Lemma 2.2 applies with ε₁. Without that assumption only ε₁ + ε₂ holds.
        """
        total, direction = self.epsilon_exact, self.direction.epsilon_exact
        return [
            RiskEpsilon("release", total, f"any target and any prior (the release is {total:.6g}-LDP: "
                        "ε₁ + ε₂ by basic composition)", True),
            RiskEpsilon("direction", direction, "the direction x/‖x‖ only, and only when the prior makes the "
                        "magnitude ‖x‖ independent of the direction (separated DP, Bhowmick et al. 2018 Def. 4.1, "
                        f"Fig. 1: the direction's release is {direction:.6g}-LDP)", False),
        ]

    def audit_epsilon(self) -> tuple[float, str]:
        """The sum of the two parts' own second routes (PrivUnit2's cap probability by quadrature,
        ScalarDP's pmf enumerated): the parts draw independent randomness, so the output law is the
        product of their laws and the log ratios add; the sum is attained (module docstring)."""
        eps1, route1 = self.direction.audit_epsilon()
        eps2, route2 = self.magnitude.audit_epsilon()
        return (
            eps1 + eps2,
            f"sum over two independent parts: direction [{route1}] + magnitude [{route2}]",
        )

    @cached_property
    def _unit_magnitude(self) -> ScalarDP:
        """The magnitude mechanism at r_max = 1: errors are computed there and scaled by r_max²,
        so they scale exactly (no rounding of r_max − s*·g, no underflow at huge k)."""
        return dataclasses.replace(self.magnitude, norm_bound=1.0)

    def error_at(self, r: np.ndarray | float) -> np.ndarray:
        """Exact E‖Z − w‖² for ‖w‖ = r (vectorized): V(r)/m² + r²(1/m² − 1)."""
        scale = self.norm_bound
        return scale**2 * _error_at(self.direction, self._unit_magnitude, np.asarray(r, dtype=float) / scale)

    @property
    def expected_error(self) -> float:
        """E‖Z − w‖² for ‖w‖ = r_max (exact)."""
        return float(self.error_at(self.norm_bound))

    @property
    def expected_error_max(self) -> float:
        """sup over ‖w‖ ≤ r_max of E‖Z − w‖² (exact: the maximum of the top magnitude cell)."""
        return self.norm_bound**2 * _worst_norm(self.direction, self._unit_magnitude)[1]

    def parameters(self) -> dict[str, Any]:
        """ε₁, ε₂, the split, the direction's γ and p, the magnitude's k and grid, the worst norm."""
        direction = self.direction.parameters()
        magnitude = self.magnitude.parameters()
        return {
            "epsilon1": self.epsilon1,
            "epsilon2": self.epsilon2,
            "eps_split": self.eps_split,
            "epsilon1_exact": self.direction.epsilon_exact,
            "epsilon2_exact": self.magnitude.epsilon_exact,
            "gamma": direction["gamma"],
            "p": direction["p"],
            "p_logit": direction["p_logit"],
            "cap_probability": direction["cap_probability"],
            "log_cap_probability": direction["log_cap_probability"],
            "m": direction["m"],
            "direction_scale": self.direction.scale,
            "k": magnitude["k"],
            "magnitude_grid_step": magnitude["grid_step"],
            "magnitude_p_truth": magnitude["p_truth"],
            "magnitude_p_truth_logit": magnitude["p_truth_logit"],
            "magnitude_a": magnitude["a"],
            "magnitude_b": magnitude["b"],
            "worst_norm": self.norm_bound * _worst_norm(self.direction, self._unit_magnitude)[0],
        }

    def law_tests(self, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
        """The two parts apart: Z = R̂·Û with ‖Û‖ = 1/m, so |R̂| = ‖Z‖·m.

        Each |R̂| is matched to the magnitude's grid values Z = B·j·g − A·r_max/2 (R̂ can be
        negative: j = (±|R̂| + A·r_max/2)/(B·g) must be an integer in [0, k] for one sign; a row
        matching neither is off the support, one matching both cannot be split and is left out of
        the direction's tests). Then the magnitude's own tests on R̂ at r = ‖w‖ (ScalarDP's exact
        pmf) and the direction's own on Û = sign(R̂)·Z·(1/m)/‖Z‖ at w/‖w‖ (PrivUnit2's cosine
        mixture and uniform orthogonal direction), each name prefixed by its part.
        """
        from ldpcli.math import _lawtests as lawtests

        n = z.shape[0]
        if self.magnitude.k > K_REL_MAX:
            why = f"magnitude grid k = {self.magnitude.k} > {K_REL_MAX}: too fine to split Z into its parts"
            return [lawtests.skipped("magnitude", why), lawtests.skipped("direction", why)]
        norms = np.sqrt(np.einsum("ij,ij->i", z, z))
        m = math.exp(self.direction.log_m)
        size = norms * m  # |R̂|
        a, b = self.magnitude.coefficients
        step = b * self.magnitude.grid_step
        shift = a * 0.5 * self.norm_bound
        signs = []
        for sign in (1.0, -1.0):
            j = (sign * size + shift) / step
            near = np.rint(j)
            signs.append((np.abs(j - near) <= 1e-6) & (near >= 0) & (near <= self.magnitude.k))
        pos, neg = signs
        off = int(np.count_nonzero(~(pos | neg)))
        tests = [lawtests.deterministic("‖Z‖·m on the magnitude grid (±)", off, n, "off the grid")]
        both = pos & neg
        if np.any(both):
            tests.append(lawtests.skipped("rows whose sign cannot be told",
                                          f"{counted(int(both.sum()), 'row')}: |R̂| matches ±"))
        keep = (pos | neg) & ~both
        index = np.rint((np.where(pos, size, -size) + shift) / step)[keep]
        r_hat = step * index - shift  # the grid value itself, as ``privatize_values`` computes it
        norm = float(np.sqrt(np.dot(x, x)))
        r = np.array([min(norm, self.norm_bound)])
        for test in self.magnitude.law_tests(r, r_hat[:, None]):
            tests.append(test._replace(name="magnitude: " + test.name))
        nonzero = keep & (norms > 0.0)
        u_hat = z[nonzero] * (np.where(pos, 1.0, -1.0)[nonzero] / (m * norms[nonzero]))[:, None]
        unit_x = x / norm if norm > 0.0 else np.zeros_like(x)
        for test in self.direction.law_tests(unit_x, u_hat)[1:]:  # [0]: ‖Û‖ = 1/m, true by construction here
            tests.append(test._replace(name="direction: " + test.name))
        return tests

    def output_branches(self, x: np.ndarray) -> list[OutputBranch]:
        """Magnitude branch × direction region: Z = R̂·Û with R̂ and Û independent (Eq. 22).

        The magnitude: R̂ at each of the rounding's grid points or elsewhere (``ScalarDP.rounding_split``); the
        direction: PrivUnit2's regions for u = w/‖w‖ (``PrivUnit2.output_branches``; w = 0: one). Given
        both, E[Z] = E[R̂]·E[Û], and with Z − w = (R̂ − r)Û + r(Û − u), ‖Û‖² = 1/m² and
        ⟨Û, Û − u⟩ = (‖Û − u‖² + 1/m² − 1)/2,

            E‖Z − w‖² = E(R̂ − r)²/m² + 2r·E[R̂ − r]·(E‖Û − u‖² + 1/m² − 1)/2 + r²·E‖Û − u‖²,

        a form without the cancellation of E[R̂²]/m² − 2⟨E Z, w⟩ + r² when Z ≈ w. NotImplementedError
        for a magnitude grid finer than ``MAX_SPLIT_K`` (its values are then not told apart from ‖Z‖).
        """
        if self.magnitude.k > MAX_SPLIT_K:
            raise NotImplementedError(f"magnitude grid k = {self.magnitude.k} too fine to split Z into its parts")
        r, unit = self._polar(x)
        inv_m2, gap = self.direction.expected_error_max, self.direction.expected_error  # 1/m², 1/m² − 1
        out = []
        for mag in self.magnitude.rounding_split(r):
            mean_r = float(mag.mean[0])
            for way in self.direction.output_branches(unit):
                error = mag.error * inv_m2 + r * (mean_r - r) * (way.error + gap) + r * r * way.error
                out.append(OutputBranch(f"{mag.name}, {way.name}", mag.probability * way.probability,
                                        mean_r * way.mean, error))
        return out

    def branch_labels(self, x: np.ndarray, z: np.ndarray) -> np.ndarray:
        """R̂ = ±‖Z‖·m, the sign whose value lies nearer the magnitude grid; its branch (which of the
        rounding's grid points, or elsewhere); then the direction's region of Û = Z/R̂."""
        r, unit = self._polar(x)
        size = np.sqrt(np.einsum("ij,ij->i", z, z)) * math.exp(self.direction.log_m)  # |R̂|
        a, b = self.magnitude.coefficients
        step, shift = b * self.magnitude.grid_step, a * 0.5 * self.norm_bound
        distances, grids = [], []
        for sign in (1.0, -1.0):
            j = (sign * size + shift) / step
            near = np.rint(j)
            ok = (near >= 0) & (near <= self.magnitude.k)
            distances.append(np.where(ok, np.abs(j - near), np.inf))
            grids.append(near)
        positive = distances[0] <= distances[1]
        grid = np.where(positive, grids[0], grids[1])
        js, _ = self.magnitude.rounding_points(r)
        mag = np.full(z.shape[0], len(js), dtype=np.int64)  # elsewhere on the grid
        for i, j in enumerate(js):
            mag[grid == j] = i
        r_hat = np.where(positive, size, -size)
        u_hat = z / np.where(r_hat != 0.0, r_hat, 1.0)[:, None]
        ways = len(self.direction.output_branches(unit))
        return mag * ways + self.direction.branch_labels(unit, u_hat)

    def _polar(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """(‖w‖, w/‖w‖ or 0) by the expressions of ``privatize``."""
        r = float(np.sqrt(np.dot(x, x)))
        return min(r, self.norm_bound), (x * (1.0 / r) if r > 0.0 else np.zeros_like(x))

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Z = ScalarDP(‖w‖)·PrivUnit2(w/‖w‖) for each row w of ``x`` (‖w‖ ≤ r_max); returns (n, d)."""
        return self.privatize_parts(x, rng, self.direction.privatize)

    def privatize_parts(self, x: np.ndarray, rng: np.random.Generator,
                        direction: Callable[[np.ndarray, np.random.Generator], np.ndarray]) -> np.ndarray:
        """``privatize`` with the direction's sampler given (the secure rendering gives its own): the
        output is the product of the two parts' outputs, a post-processing of the pair."""
        norms = np.sqrt(np.vecdot(x, x))
        # Zero rows stay zero here; PrivUnit2's rounding to the sphere gives them a uniform direction.
        with rowmath.row_buffers(x.shape[1]):
            u = x * (1.0 / np.where(norms > 0.0, norms, 1.0))[:, None]
        out = direction(u, rng)
        r_hat = self.magnitude.privatize_values(norms, rng)  # a norm within the slack is r_max
        with rowmath.row_buffers(x.shape[1]):
            out *= r_hat[:, None]
        return out
