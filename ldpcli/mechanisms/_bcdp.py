"""Feature-specific privacy: Bayesian coordinate DP (BCDP) mean estimation on any ℓ2 base mechanism.

Aliakbarpour, Chaudhuri, Courtade, Fallah, Jordan 2024, Mechanism 1 with Theorem 2. A row in the
box [−L, L]^d gets an overall ε-LDP guarantee and, for each feature i, a level δ_i ≤ ε that bounds
what the output reveals about that feature under any prior whose features depend on each other at
most q (Assumption 1, Eq. (15): a public claim about the data that the user makes with ``--q``).

The features are sorted by level, most sensitive first (stable: ties keep the column order). Thm 2
(16) turns the levels δ̃ = min(δ, ε) and q into a non-decreasing budget vector c with c_d the total;
for each k with c_k > c_{k−1} the base mechanism releases the suffix x_{k:d} (an ℓ2 ball of radius
L·√(d − k + 1) holds it) at level c_k − c_{k−1}; zero increments are skipped (errata §14). The row's
output is the combined estimate ν̂_i = Σ_{k≤i} ω_{ik}·Y^k_i, ω_{ik} = w_k / Σ_{k'≤i} w_{k'}, put back
in the original column order, so the release has the usual shape and is unbiased.

Two improvements on the paper, both public choices that cost no privacy:

- The weights are the inverse of each sub-release's exact per-coordinate variance at a vertex of
  the box, v_k = E‖Y^k − x_{k:}‖²/(d − k + 1) of the calibrated base mechanism (the paper's
  w_k = (c_k − c_{k−1})²/(d − k + 1) is this, up to a constant, for its Duchi base at small ε). At a
  vertex every suffix is on its sphere with all |u_i| equal, so each coordinate's variance is
  exactly v_k for every rotation-equivariant base, and inverse-variance weights are optimal there.
- c_d is chosen to minimise the exact predicted error over every admissible value (calibration
  ``optimal``; :func:`~ldpcli.mechanisms._bcdp_budget.best_c_d`, certified to a relative 10⁻⁴ by a
  branch and bound) instead of the ζ rule (calibration ``zeta``), which can lose to plain
  min(δ)-LDP (errata §15).

When the levels and q keep c_d below ε, the release spends c_d, not ε: :meth:`BCDP.spending_note`
says so and why, and every release shows and records it (the summary, the array API's warning, the
ledger entry).

Exact privacy: the release is Σ(used increments) = c_d-LDP (basic composition), and feature i is
δ'_i-BCDP with δ'_i = min(c_i + log(1 + q·e^{c_d} − q), c_d) (Prop. 4 part 2 with Prop. 3, as in the
proof of Thm 2; errata §16), which is ≤ δ̃_i by construction; :meth:`BCDP.feature_levels` recomputes
it. Exact errors: ``expected_error`` at a vertex is Σ_i 1/Σ_{k≤i} w_k; ``expected_error_max``, the
supremum over the box, uses each base's second moments (:class:`~ldpcli.mechanisms._hooks.SecondMoments`).

``split`` (``ReleaseOptions.copies``): the release is one of ``split`` independent copies of the row
(Alg. 3 privatizes each row twice with c/2): every increment is divided by ``split`` and the
levels reported are those of all copies together.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ldpcli.errors import UsageError, counted
from ldpcli.io import _feature_eps as feps
from ldpcli.math._domains import LINF_BOX
from ldpcli.math._lawtests import LawTest
from ldpcli.mechanisms import _bcdp_budget as bb
from ldpcli.mechanisms import _composition as composition
from ldpcli.mechanisms import _feature_levels as fl
from ldpcli.mechanisms import _hooks as hooks
from ldpcli.mechanisms._base import (
    Mechanism,
    MechanismSpec,
    OptionSpec,
    declare,
    get_mechanism,
    register,
)
from ldpcli.mechanisms._composition import release_cost

#: The base mechanisms (ℓ2 ball, rotation-equivariant, with exact second moments), best first.
BASES = ("privunit2", "privunitg", "duchi-l2")


@register(
    name="bcdp",
    title="BCDP: per-feature levels (Aliakbarpour et al. 2024, Mechanism 1, Thm 2)",
    calibrations=("optimal", "zeta"),
    compared=False,  # needs the user's q and levels: `ldp params -m bcdp` compares it with its own alternatives
    example_d=8,
)
@dataclass(frozen=True)
class BCDP(Mechanism):
    """BCDP mean estimation (Mechanism 1, Thm 2) on a base ℓ2 mechanism, with exact errors."""

    q: float
    feature_eps: str
    base: str
    zeta: float
    split: int
    #: The total budget c_d (public: a function of ε, the levels, q and the calibration).
    c_total: float
    #: The first sorted coordinate of each release and its calibrated base mechanism.
    starts: tuple[int, ...]
    parts: tuple[Mechanism, ...]

    domain = LINF_BOX
    options: ClassVar[dict[str, OptionSpec]] = declare(
        OptionSpec(
            "q", float, "how much the features may depend on each other, in [0, 1] (Assumption 1: "
            "TV distance between the other features' laws given two values of one): YOUR claim about the "
            "data, not checked by ldp; 0 = independent features, 1 = copies of one value",
            example=0.1, low=0.0, high=1.0, required=True,
        ),
        OptionSpec(
            "feature_eps", str, "per-feature levels δ, e.g. 'age=0.5,income=0.5', '0:3=0.2' "
            "(0-based coordinates, inclusive ranges), or a .json/.csv file; unnamed features get ε, levels "
            "above ε are clipped to it",
            example="0=0.5", default="", normalize=feps.canonical_coordinates,
        ),
        OptionSpec(
            "base", str, "the ℓ2 mechanism each sub-release uses (privunit2: the least error; duchi-l2: "
            "the paper's)", example="duchi-l2", default="privunit2", choices=BASES,
        ),
        OptionSpec(
            "zeta", float, "Thm 2's ζ ∈ (0, 1] of the zeta calibration (Cor. 1 uses 1/2)",
            example=0.5, low=0.0, high=1.0, low_open=True, default=0.5,
        ),
        OptionSpec(
            "split", int, "this release is one of SPLIT independent copies of each row (set by "
            "privatize --copies): each increment is divided by SPLIT", example=1, low=1, high=16, default=1,
        ),
    )

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> BCDP:
        q, base, zeta, split = float(options["q"]), str(options["base"]), float(options["zeta"]), int(options["split"])
        text = str(options["feature_eps"])
        tilde = _tilde(text, d, epsilon)
        ordered = np.sort(tilde, kind="stable")
        if calibration == "zeta":
            c_total = fl.c_d_for_zeta(ordered, q, zeta)
        else:  # at L = 1: errors scale as L², so c_d does not depend on L
            base_cls = get_mechanism(base)
            c_total = bb.best_c_d(ordered, q, lambda m, budget: _log_weight(_release(base_cls, m, budget, split, 1.0)))
        return cls._build(d, epsilon, norm_bound, calibration, q, text, base, zeta, split, c_total, ordered)

    @classmethod
    def _build(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, q: float, text: str, base: str,
        zeta: float, split: int, c_total: float, ordered: np.ndarray,
    ) -> BCDP:
        """The mechanism for a given total budget c_d (Thm 2 (16) builds the rest)."""
        c = fl.budget_vector(ordered, q, c_total)
        base_cls = get_mechanism(base)
        starts, parts = [], []
        for start, _, budget in fl.increments(c):
            if budget <= bb.MIN_INCREMENT * c_total:  # spends less than planned: every level still holds
                continue
            starts.append(start)
            parts.append(_release(base_cls, d - start, budget, split, norm_bound))
        if not starts or starts[0] != 0:
            raise UsageError(
                f"bcdp: c_d = {c_total:.6g} leaves the most sensitive feature (almost) no budget (errata §14: it could "
                "not be estimated); use a smaller c_d (calibration optimal, or `zeta` below 1)"
            )
        return cls(d, epsilon, norm_bound, calibration, q, text, base, zeta, split, float(c_total),
                   tuple(starts), tuple(parts))

    @classmethod
    def bind_options(
        cls, options: dict[str, Any], names: Sequence[str] | None, d: int, epsilon: float
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """``feature_eps`` by column names, ranges, globs or a file, as 0-based coordinates; notes
        name the levels above ε (clipped to ε)."""
        text = options.get("feature_eps")
        if not text:
            return options, ()
        parsed = feps.parse_feature_levels(str(text), d=d, epsilon=epsilon, names=names)
        notes = () if not parsed.clipped else (
            f"`feature_eps`: the level of {', '.join(parsed.clipped)} is above ε = {epsilon:g} and was clipped to ε "
            "(no feature can be more exposed than the whole row)",
        )
        return {**options, "feature_eps": parsed.canonical}, notes

    @classmethod
    def copy_spec(cls, spec: MechanismSpec, copies: int) -> MechanismSpec:
        """Each copy keeps ε and the levels and divides the budget vector: ``split`` times ``copies``."""
        options = dict(spec.options)
        options["split"] = int(options.get("split") or 1) * copies
        return MechanismSpec(spec.name, spec.epsilon, spec.calibration, spec.norm_bound, options)

    # ----------------------------------------------------------------------------- the levels

    @functools.cached_property
    def levels(self) -> np.ndarray:
        """δ̃_i = min(δ_i, ε) for each feature, in the original column order."""
        return _tilde(self.feature_eps, self.d, self.epsilon)

    @functools.cached_property
    def order(self) -> np.ndarray:
        """The features sorted by level, most sensitive first (stable)."""
        return fl.sort_order(self.levels)

    @functools.cached_property
    def _in_order(self) -> bool:
        """The columns are already sorted by level (no gather and scatter of each batch)."""
        return bool(np.all(self.order == np.arange(self.d)))

    @functools.cached_property
    def budget(self) -> np.ndarray:
        """The budget vector the releases spend over the sorted features, for all copies together.

        Thm 2 (16)'s c, except that increments below :data:`~ldpcli.mechanisms._bcdp_budget.MIN_INCREMENT`·c_d are not spent (so
        c_i is at most Thm 2's, and every level it grants is at most the planned one).
        """
        steps = np.zeros(self.d)
        for start, part in zip(self.starts, self.parts):
            steps[start] = self.split * part.epsilon
        return np.cumsum(steps)

    def feature_levels(self) -> np.ndarray:
        """Each feature's BCDP level for the whole release (all copies), in the original order.

        Prop. 4 part 2 with the release c_d-LDP: δ'_i = min(c_i + log(1 + q·e^{c_d} − q), c_d),
        the second route to the guarantee: ≤ δ̃_i for every feature.
        """
        out = np.empty(self.d)
        out[self.order] = fl.bcdp_levels(self.budget, self.q)
        return out

    # ----------------------------------------------------------------------------- the weights

    @functools.cached_property
    def _log_weights(self) -> np.ndarray:
        """log w_k = log(1/v_k), v_k the exact per-coordinate variance of release k at a vertex."""
        return np.array([_log_weight(part) for part in self.parts])

    @functools.cached_property
    def _segments(self) -> tuple[np.ndarray, np.ndarray]:
        """(lengths, log W) of the runs of sorted coordinates covered by the same releases."""
        bounds = np.array([*self.starts, self.d])
        lengths = np.diff(bounds)
        log_total = np.logaddexp.accumulate(self._log_weights)
        return lengths, log_total

    def coordinate_variances(self) -> np.ndarray:
        """Each feature's exact variance at a vertex of the box, 1/Σ_{k≤i} w_k, in the original order."""
        lengths, log_total = self._segments
        sorted_var = np.repeat(np.exp(-log_total), lengths)
        out = np.empty(self.d)
        out[self.order] = sorted_var
        return out

    # ----------------------------------------------------------------------------- the interface

    @property
    def epsilon_exact(self) -> float:
        """Σ of the used increments of one copy: c_d/split (basic composition)."""
        return float(sum(part.epsilon_exact for part in self.parts))

    @property
    def epsilon_asked(self) -> float:
        """ε/split: the ``split`` copies of one release each keep the asked ε (and the levels) and
        together spend it once (:meth:`copy_spec`), so ``split`` uses count the asked ε once."""
        return self.epsilon / self.split

    @property
    def expected_error(self) -> float:
        """E‖ν̂ − x‖² at a vertex of the box: Σ_i 1/Σ_{k≤i} w_k (exact, inverse-variance weights)."""
        lengths, log_total = self._segments
        return float(np.sum(lengths * np.exp(-log_total)))

    @property
    def expected_error_max(self) -> float:
        """sup over the box of E‖ν̂ − x‖².

        Each release k has E[Y Yᵀ] = a_k·uuᵀ + b_k(I − uuᵀ) for its suffix's direction u
        (:func:`~ldpcli.mechanisms._hooks.second_moments`), so the error is Σ_k Σ_{i≥k} ω_{ik}²·(b_k + (a_k − b_k)u_i²)
        − Σ_i x_i²·Σ_k ω_{ik}². The supremum is approached as x → 0 with each suffix pointing where
        its term is largest: ω_{ik} decreases in i, so along coordinate k when a_k ≥ b_k and along the
        last when a_k < b_k; x_k = t^k (t → 0) points every suffix at its first coordinate and x = t·e_d
        all at the last, so the sum of the per-release suprema is attained when the signs of a_k − b_k
        agree (always for one release), and bounds the supremum otherwise.
        """
        lengths, log_total = self._segments
        total = 0.0
        for k, (part, log_w) in enumerate(zip(self.parts, self._log_weights)):
            along, across = hooks.second_moments(part)
            omega_sq = np.exp(2.0 * (log_w - log_total[k:]))  # ω_{ik}² on the runs i ≥ start_k
            total += across * float(np.sum(lengths[k:] * omega_sq))
            total += max((along - across) * omega_sq[0], (along - across) * omega_sq[-1])
        return float(total)

    def spending_note(self) -> str | None:
        """Why the release spends less than the ε asked, with the error it costs; None when it spends ε.

        The release is c_d-LDP (all copies together), and c_d < ε whenever the levels and q bind:
        Thm 2 (16) caps c_d at c_max = min{log((e^{δ̃_1} + q − 1)/q), δ̃_d}, and the least-error c_d
        (:mod:`~ldpcli.mechanisms._bcdp_budget`) can lie below c_max. The error is compared with one
        release of the base mechanism at the asked ε on the ball that holds the box (plain ε-LDP,
        which meets no level below ε), both at a vertex of the box (``expected_error``).
        """
        cost = release_cost(self, copies=self.split)
        if not cost.spends_less:
            return None
        spent, asked = cost.epsilon_exact, cost.epsilon
        ordered = np.sort(self.levels)
        below = [float(level) for level in np.unique(ordered) if level < asked]
        shown = "/".join(f"{level:.3g}" for level in below[:4]) + ("/…" if len(below) > 4 else "")
        top, highest = fl.c_max(ordered, self.q), float(ordered[-1])
        sensitive = "the most sensitive features"
        if highest < asked and top >= highest * (1.0 - composition.SPENT_RTOL):
            cap = f"every feature has a level below ε, and c_d cannot exceed the highest, {highest:.3g}"
            advice = "Higher levels for the features"
        else:
            cap = f"Thm 2 (16) caps the total budget c_d at {top:.3g}" if top < asked * (1.0 - composition.SPENT_RTOL) else ""
            advice = (f"Higher levels for {sensitive}, or a smaller q if the features truly depend on each other "
                      "less,")
        if self.calibration == "zeta":
            rule = f"Thm 2's rule with ζ = {self.zeta:g} gives c_d = {self.c_total:.3g}"
        elif self.c_total < top * (1.0 - composition.SPENT_RTOL):
            rule = (f"the least error is at c_d = {self.c_total:.3g}: a larger total takes more from {sensitive} "
                    "than it gives the others")
        else:
            rule = ""
        why = " and ".join(part for part in (cap, rule) if part)
        plain = get_mechanism(self.base).calibrate(self.d, asked / self.split,
                                                   norm_bound=self.norm_bound * math.sqrt(self.d))
        ratio = self.expected_error / plain.expected_error
        copies = f" (its {self.split} copies together)" if self.split > 1 else ""
        return (
            f"bcdp spends ε = {spent:.3g} of the {asked:g} asked{copies}, so the release is {spent:.3g}-LDP: the feature "
            f"levels {shown} with q = {self.q:g} bind ({why}); its error is {ratio:.3g}× that of a {asked:g}-LDP "
            f"release by plain {self.base}. {advice} let it use more of ε"
        )

    def parameters(self) -> dict[str, Any]:
        """The total budget, the number of releases and the levels' summary (flat)."""
        levels = self.feature_levels()
        return {
            "c_total": self.c_total,
            "releases": len(self.parts),
            "min_feature_level": float(levels.min()),
            "order": "features sorted by level, most sensitive first (stable: ties keep the column order)",
        }

    def feature_section(self) -> dict[str, Any]:
        """The per-feature table for ``ldp params`` and the sidecar's ``features`` section."""
        granted, variances = self.feature_levels(), self.coordinate_variances()
        budget = np.empty(self.d)
        budget[self.order] = self.budget
        groups = []
        for group in feps.group_summary(self.levels, self.epsilon):
            members = self.levels == group["delta"]
            groups.append({
                **group,
                "c": float(budget[members].max()),
                "bcdp_level": float(granted[members].max()),
                "expected_error": float(variances[members].sum()),
            })
        return {
            "q": self.q,
            "base": self.base,
            "split": self.split,
            "c_total": self.c_total,
            "epsilon_exact_all_copies": self.split * self.epsilon_exact,
            "groups": groups,
            "releases": [
                {"first_sorted_feature": start, "dimension": part.d, "epsilon": part.epsilon_exact,
                 "norm_bound": part.norm_bound, "weight_log": float(log_w)}
                for start, part, log_w in zip(self.starts, self.parts, self._log_weights)
            ],
        }

    def alternatives(self) -> list[dict[str, Any]]:
        """This calibration beside the others a user could choose, at the same (d, ε, levels, q, L).

        The optimised c_d (calibration ``optimal``), Thm 2's ζ = 1/2 (Cor. 1) and the paper's
        experiment's ζ = (1 + q)/2, plain min(δ)-LDP (one release of the base at the smallest level:
        meets every level) and plain ε-LDP (one release at ε: meets no level below ε). Errors at a
        vertex of the box (``expected_error``) and over the box (``expected_error_max``).
        """
        spec = self.spec
        rows: list[dict[str, Any]] = []

        def add(label: str, mech: Mechanism, meets: bool) -> None:
            rows.append({"choice": label, "c_total": getattr(mech, "c_total", mech.epsilon_exact * self.split),
                         "expected_error": mech.expected_error, "expected_error_max": mech.expected_error_max,
                         "meets_levels": meets})

        for calibration, zeta, label in (("optimal", self.zeta, "optimised c_d"), ("zeta", 0.5, "ζ = 1/2"),
                                         ("zeta", (1.0 + self.q) / 2.0, "ζ = (1 + q)/2")):
            options = {**spec.options, "zeta": zeta}
            try:
                mech = MechanismSpec(self.name, self.epsilon, calibration, self.norm_bound, options).calibrate(self.d)
            except UsageError as exc:  # c_1 = 0 at ζ = 1 (errata §14)
                rows.append({"choice": label, "error": str(exc)})
                continue
            add(label, mech, True)
        base = get_mechanism(self.base)
        radius = self.norm_bound * math.sqrt(self.d)
        add("min(δ)-LDP", base.calibrate(self.d, float(self.levels.min()) / self.split, norm_bound=radius), True)
        add("ε-LDP", base.calibrate(self.d, self.epsilon / self.split, norm_bound=radius),
            bool(np.all(self.levels >= self.epsilon)))
        return rows

    def law_tests(self, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
        """With one release (every level at least c_d) the output is the base mechanism's on the ball
        of radius L√d, and its law tests apply; a weighted sum of several releases has no closed-form law."""
        if len(self.parts) == 1:
            return hooks.law_tests(self.parts[0], x, z)
        raise NotImplementedError(
            f"bcdp with {len(self.parts)} releases: the output is a weighted sum of independent releases of "
            "overlapping suffixes, whose law has no closed form to test against"
        )

    def _single_release(self) -> Mechanism:
        """The one release whose output is the whole output (every level at least c_d: its weights are 1, and
        the base is rotation-equivariant, so the column order does not matter); NotImplementedError with several.

        With several releases the output ν̂ = Σ_k ω_k·Y^k has d coordinates for Σ_k (d − start_k) > d released
        ones: the map is not one-to-one, so which branch each Y^k took (PrivUnit2's cap, PrivUnitG's cap event)
        cannot be read from the output, and the branches of ν̂ are not known exactly.
        """
        if len(self.parts) == 1:
            return self.parts[0]
        raise NotImplementedError(
            f"bcdp with {len(self.parts)} releases: the output sums them over overlapping suffixes, so the branch "
            "each release took cannot be read from it"
        )

    def output_branches(self, x: np.ndarray) -> list[hooks.OutputBranch]:
        """With one release, the base mechanism's branches on the ball of radius L√d (``hooks.output_branches``);
        NotImplementedError otherwise (``_single_release``), or where the base has none for this input."""
        branches = hooks.output_branches(self._single_release(), x)
        if branches is None:
            raise NotImplementedError(f"bcdp's {self.base} release has no branches for this input")
        return branches

    def branch_labels(self, x: np.ndarray, z: np.ndarray) -> np.ndarray:
        """The base release's branch of each row (one release: ``output_branches``)."""
        return hooks.branch_labels(self._single_release(), x, z)

    def audit_epsilon(self) -> tuple[float, str]:
        """Σ over the releases of each base mechanism's own second route to its level."""
        total = 0.0
        for part in self.parts:
            total += hooks.audit_epsilon(part)[0]
        return total, f"sum over the {len(self.parts)} releases of each {self.base} release's own second route"

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """ν̂ for each row of ``x`` (rows in [−L, L]^d): the weighted sub-releases, in column order."""
        n = x.shape[0]
        order = self.order
        xs = x if self._in_order else x[:, order]
        lengths, log_total = self._segments
        combined = np.zeros((n, self.d))
        for k, (start, part, log_w) in enumerate(zip(self.starts, self.parts, self._log_weights)):
            weights = np.repeat(np.exp(log_w - log_total[k:]), lengths[k:])
            combined[:, start:] += part.privatize(np.ascontiguousarray(xs[:, start:]), rng) * weights
        if self._in_order:
            return combined
        out = np.empty_like(combined)
        out[:, order] = combined
        return out


def _release(base: type[Mechanism], m: int, budget: float, split: int, norm_bound: float) -> Mechanism:
    """The base mechanism releasing the last ``m`` sorted features at level ``budget``/``split`` (the
    suffix lies in the ℓ2 ball of radius L·√m); UsageError if the base cannot calibrate there."""
    try:
        return base.calibrate(m, budget / split, norm_bound=norm_bound * math.sqrt(m))
    except (ArithmeticError, ValueError) as exc:
        raise UsageError(f"bcdp: {base.name} cannot release {counted(m, 'feature')} at ε = {budget / split:.3g}") from exc


def _log_weight(part: Mechanism) -> float:
    """log w = log(1/v) for a release, v = E‖Y − x‖²/m its exact per-coordinate variance at a vertex
    of the box (the error floored at the least positive double, so that w stays finite in log space)."""
    return math.log(part.d) - math.log(max(part.expected_error, 5e-324))


def _tilde(text: str, d: int, epsilon: float) -> np.ndarray:
    """δ̃ = min(δ, ε) for each of the d features from the canonical ``feature_eps`` text."""
    if not text:
        return np.full(d, float(epsilon))
    return feps.parse_feature_levels(text, d=d, epsilon=epsilon, names=None).levels
