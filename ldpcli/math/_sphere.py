"""Log-space geometry of spherical caps and exact samplers for the laws PrivUnit draws from.

For W uniform on the unit sphere S^{d-1} and a fixed unit vector u, the cosine T = ⟨W, u⟩ has
density proportional to (1 − t²)^{(d−3)/2} on [−1, 1]; equivalently S = (1 − T)/2 ~ Beta(α, α)
with α = (d − 1)/2 (Bhowmick et al. 2018, App. D; Asi et al. 2022, Sec. 3).

A cap threshold γ ∈ [0, 1) is carried here as its *cap logit*

    y = 2·artanh(γ) = log((1 + γ)/(1 − γ)) = logit(1 − s_γ),   s_γ = (1 − γ)/2 = expit(−y),

so that γ = tanh(y/2) keeps full relative precision for γ → 0 and s_γ = expit(−y) keeps it for
γ → 1 (needed at d ≤ 10 with ε in the hundreds, where 1 − γ underflows). Every probability that
can be tiny is carried as a logarithm (docs/errata.md "Numerics"): 2^{d−2}, B(α, α) and (1 − γ²)^α
overflow or underflow for d ≳ 350, and cap probabilities fall below 1e−300 at large ε.

d = 1 (the sphere is {−1, +1}) has no Beta law and is handled by the mechanisms as randomized
response; d = 2 (arcsine law) and d = 3 (uniform law, Archimedes) use closed forms here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ldpcli.math._kernels import compiled, normal_chunks
from ldpcli.math._lazy import special
from ldpcli.math._logspace import LOG2, log_cosh, log_expit
from ldpcli.math._rows import rounded_chunks, rounded_units_into, row_buffers, row_norms

# Below this, scipy's betainc/betaincinv results lose their meaning (subnormals, underflow): the
# continued fraction (log space) and the tangent-exponential rejection sampler take over.
_TINY_PROBABILITY = 1e-280
# The cap side uses the tangent-exponential rejection sampler when it accepts at least this often.
_LOG_TANGENT_MIN_ACCEPTANCE = math.log(0.5)


# ---------------------------------------------------------------------------------------------
# The cap logit in log space (the scalar helpers are ldpcli.math._logspace)
# ---------------------------------------------------------------------------------------------


def log_tanh_half(y: float) -> float:
    """log tanh(y/2) = log γ for a cap logit y > 0."""
    # tanh(y/2) = (1 − e^{−y}) / (1 + e^{−y})
    return math.log(-math.expm1(-y)) - math.log1p(math.exp(-y))


# ---------------------------------------------------------------------------------------------
# The cosine law and cap probabilities
# ---------------------------------------------------------------------------------------------


def sphere_alpha(d: int) -> float:
    """α = (d − 1)/2, the Beta parameter of (1 − ⟨W, u⟩)/2."""
    return (d - 1) / 2.0


def gamma_from_cap_logit(y: float) -> float:
    """γ = tanh(y/2)."""
    return math.tanh(y / 2.0)


def cap_logit_from_gamma(gamma: float) -> float:
    """y = 2·artanh(γ) = log((1 + γ)/(1 − γ)) for 0 ≤ γ < 1."""
    return 2.0 * math.atanh(gamma)


def log_beta(a: float, b: float) -> float:
    """log B(a, b), exact for the cap laws' (a, a) and (a + 1, a) at any size.

    scipy's betaln loses ~1e−11 relative at a ~ 10⁶, i.e. 1e−4 absolute — too much for ε in the
    thousands. Legendre's duplication formula gives B(a, a) = 2^{1−2a}·√π·Γ(a)/Γ(a + ½) and
    B(a + 1, a) = B(a, a)/2.
    """
    if a == b:
        return (1.0 - 2.0 * a) * LOG2 + 0.5 * math.log(math.pi) - log_gamma_half_ratio(2.0 * a)
    if a == b + 1.0:
        return log_beta(b, b) - LOG2
    return float(special.betaln(a, b))


def log_beta_cdf_small(x: float, log_x: float, log_1mx: float, a: float, b: float) -> float:
    """log I_x(a, b) for x < (a + 1)/(a + b + 2), accurate when the result underflows doubles.

    Uses the continued fraction of Numerical Recipes (6.4.5) with the modified Lentz method, which
    converges quickly in that range (docs/errata.md "Numerics"):
    I_x(a, b) = x^a (1 − x)^b / (a·B(a, b)) · CF(x). ``log_x`` and ``log_1mx`` are passed so that
    x may underflow to 0 (d small, ε in the thousands).
    """
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    dd = 1.0 - qab * x / qap
    dd = 1.0 / (dd if abs(dd) > tiny else tiny)
    h = dd
    for m in range(1, 100_000):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            dd = 1.0 + aa * dd
            dd = 1.0 / (dd if abs(dd) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            delta = dd * c
            h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return a * log_x + b * log_1mx - math.log(a) - log_beta(a, b) + math.log(h)


def _log_beta_cdf_at_cap(y: float, a: float, b: float) -> float:
    """log I_{s_γ}(a, b) with s_γ = expit(−y): scipy where it is representable, else the CF."""
    log_s = log_expit(-y)
    s = math.exp(log_s)
    direct = float(special.betainc(a, b, s))
    if direct >= _TINY_PROBABILITY:
        return math.log(direct)
    return log_beta_cdf_small(s, log_s, log_expit(y), a, b)


def log_cap_probability(y: float, d: int) -> float:
    """log P(⟨W, u⟩ ≥ γ) for W uniform on S^{d−1}, γ = tanh(y/2), y ≥ 0, d ≥ 2.

    P = I_{s_γ}(α, α) with s_γ = (1 − γ)/2 (Bhowmick et al. Eq. 15 with τ = (1 + γ)/2, read as
    1 − I_τ; docs/errata.md §5). Closed forms: d = 2, P = (2/π)·arctan(e^{−y/2}) (the arc has angle
    arccos γ); d = 3, P = s_γ (Archimedes).
    """
    if d < 2:
        raise ValueError("cap probabilities need d >= 2 (d = 1 is randomized response)")
    if d == 2:
        half = math.exp(-y / 2.0)
        if half == 0.0:
            return math.log(2.0 / math.pi) - y / 2.0
        return math.log(2.0 / math.pi) + math.log(math.atan(half))
    if d == 3:
        return log_expit(-y)
    a = sphere_alpha(d)
    return _log_beta_cdf_at_cap(y, a, a)


def log_cap_probability_by_quadrature(y: float, d: int) -> float:
    """log P(⟨W, u⟩ ≥ γ), γ = tanh(y/2), by adaptive quadrature of the cosine density, d ≥ 2.

    A second route for audits, independent of the incomplete beta. With S = (1 − T)/2 the cap is
    S ≤ s_γ and the density is ∝ (s(1 − s))^k, k = α − 1. Substituting s = s_γ·v,

        I(s_γ) = ∫_0^{s_γ} (s(1 − s))^k ds = s_γ^{k+1} (1 − s_γ)^k ∫_0^1 g(v) dv,
        g(v) = v^k ((1 − s_γ v)/(1 − s_γ))^k ≤ 1 (largest at v = 1),

    so only log s_γ is needed (s_γ may underflow) and the integrand is scaled to at most 1; the
    break points form a geometric ladder below v = 1 at the integrand's local length scale.
    P = I(s_γ)/(2·I(1/2)). Agrees with the incomplete-beta route to ~1e−12 relative in ε (1e−9 at
    d = 10⁷, ε = 0.01, where quadpack reports roundoff; its warnings are silenced because audits
    compare with a tolerance).
    """
    import warnings

    from scipy import integrate  # only audits need it

    k = sphere_alpha(d) - 1.0

    def log_integral(log_hi: float) -> float:
        hi = math.exp(log_hi)
        # log g(v) = k·[log v + log1p(−hi·v) − log1p(−hi)]; its slope at v = 1 sets the scale
        slope = abs(k) * (1.0 - 2.0 * hi) / (1.0 - hi)
        scale = 1.0 / max(slope, 1.0)
        points = sorted({1.0 - scale * 2.0**j for j in range(64) if scale * 2.0**j < 1.0})

        def g(v: float) -> float:
            if v <= 0.0:
                return 0.0 if k > 0 else (1.0 if k == 0 else math.inf)
            return math.exp(k * (math.log(v) + math.log1p(-hi * v) - math.log1p(-hi)))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", integrate.IntegrationWarning)
            value = integrate.quad(g, 0.0, 1.0, points=points or None, limit=1000, epsabs=0.0, epsrel=1e-12)[0]
        return (k + 1.0) * log_hi + k * math.log1p(-hi) + math.log(value)

    return log_integral(log_expit(-y)) - LOG2 - log_integral(-LOG2)


def log_cap_gap_fraction(y: float, d: int) -> float:
    """log J, J = E[1 − T; T ≥ γ] / E[1 − T] = I_{s_γ}(α + 1, α), for T = ⟨W, u⟩, d ≥ 2.

    With S = (1 − T)/2 ~ Beta(α, α), E[S; S ≤ s] = B(s; α + 1, α)/B(α, α) = ½·I_s(α + 1, α) and
    E[S] = ½. It gives 1 − m as a sum of positive terms (see ``PrivUnit2``), so the expected error
    keeps full relative precision when m → 1 at large ε. d = 3: J = s_γ².
    """
    if d == 3:
        return 2.0 * log_expit(-y)
    a = sphere_alpha(d)
    return _log_beta_cdf_at_cap(y, a + 1.0, a)


# log Γ(x + 1/2) − log Γ(x) = ½ log x + Σ_n (−1)^n (B_n(½) − B_n)/(n(n − 1) x^{n−1}), n = 2, 4, …
_HALF_SHIFT_SERIES = (-1.0 / 8.0, 1.0 / 192.0, -1.0 / 640.0, 17.0 / 14336.0, -31.0 / 18432.0)


def log_gamma_half_ratio(d: float) -> float:
    """log(Γ((d + 1)/2)/Γ(d/2)), to full precision for every d ≥ 1.

    scipy's gammaln/betaln differences lose up to 1e−8 relative between d = 10³ and 10⁹; here
    d ≤ 100 uses math.gamma directly and larger d the asymptotic series of the half shift.
    """
    if d <= 100:
        return math.log(math.gamma((d + 1) / 2.0) / math.gamma(d / 2.0))
    x = d / 2.0
    inv2 = 1.0 / (x * x)
    power = 1.0 / x
    total = 0.0
    for coef in _HALF_SHIFT_SERIES:
        total += coef * power
        power *= inv2
    return 0.5 * math.log(x) + total


def log_cap_normaliser(y: float, d: int) -> float:
    """log c(γ), c(γ) = (1 − γ²)^α / (2^{d−2}(d − 1)·B(α, α)), d ≥ 2.

    c(γ) = E[⟨W, u⟩; ⟨W, u⟩ ≥ γ] = −E[⟨W, u⟩; ⟨W, u⟩ < γ], the common factor of Bhowmick et al.
    Eq. (15): the unscaled output V has E[V] = m·u with m = c·(p/P − (1 − p)/(1 − P)).
    By Legendre's duplication formula 2^{d−2}(d − 1)·B(α, α) = 2√π·Γ((d + 1)/2)/Γ(d/2), which
    avoids the cancellation between (d − 2)·log 2 and log B(α, α) at large d. 1 − γ² = 1/cosh²(y/2).
    """
    a = sphere_alpha(d)
    return -2.0 * a * log_cosh(y / 2.0) - LOG2 - 0.5 * math.log(math.pi) - log_gamma_half_ratio(d)


# ---------------------------------------------------------------------------------------------
# Samplers (vectorized over a batch)
# ---------------------------------------------------------------------------------------------


def _tangent_rejection_cap(
    n: int, a: float, s_gamma: float, log_s_gamma: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Exact draws of log S and log(1 − S) for S ~ Beta(a, a) truncated to [0, s_γ], a ≥ 1.

    Write S = s_γ(1 − v), v ∈ [0, 1]. The log-density h(v) = (a − 1)[log(1 − v) + log(1 − S)] is
    concave, so its tangent at v = 0 bounds it: propose v from the exponential law with rate
    λ = −h'(0) truncated to [0, 1] and accept with probability e^{h(v) − h(0) + λv}. Used only in
    the far tail (P < 1e−280), where the acceptance rate is close to 1; loops until all accepted.
    """
    lam = (a - 1.0) * (1.0 - 2.0 * s_gamma) / (1.0 - s_gamma)
    log_s = np.empty(n)
    log_1ms = np.empty(n)
    todo = np.arange(n)
    while todo.size:
        u = rng.random(todo.size)
        if lam > 0.0:
            # inverse CDF of Exp(λ) truncated to [0, 1]: v = −log(1 − u(1 − e^{−λ}))/λ
            v = -np.log1p(u * math.expm1(-lam)) / lam
        else:
            v = u
        v = np.minimum(v, 1.0 - 1e-16)
        one_minus_s = 1.0 - s_gamma * (1.0 - v)
        log_ratio = (a - 1.0) * (np.log1p(-v) + np.log(one_minus_s) - math.log1p(-s_gamma)) + lam * v
        accept = np.log(rng.random(todo.size)) < log_ratio
        idx = todo[accept]
        log_s[idx] = log_s_gamma + np.log1p(-v[accept])
        log_1ms[idx] = np.log(one_minus_s[accept])
        todo = todo[~accept]
    return log_s, log_1ms


def _log_tangent_acceptance(a: float, y: float, log_p_cap: float) -> float:
    """log of the acceptance rate of ``_tangent_rejection_cap`` (a ≥ 1).

    In the variable v (S = s_γ(1 − v)) the target is h(s_γ(1 − v)), h(s) = (s(1 − s))^{a−1}, with
    ∫_0^1 h dv = P·B(a, a)/s_γ, and the envelope h(s_γ)·e^{−λv} has mass h(s_γ)(1 − e^{−λ})/λ.
    """
    log_s = log_expit(-y)
    s_gamma = math.exp(log_s)
    lam = (a - 1.0) * (1.0 - 2.0 * s_gamma) / (1.0 - s_gamma)
    log_envelope = (a - 1.0) * (log_s + log_expit(y))
    log_envelope += math.log(-math.expm1(-lam) / lam) if lam > 0.0 else 0.0
    return log_p_cap + log_beta(a, a) - log_s - log_envelope


def sample_cap_cosines(
    in_cap: np.ndarray, y: float, log_p_cap: float, d: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Draw T = ⟨V, u⟩ for V uniform on the cap {⟨v,u⟩ ≥ γ} (where ``in_cap``) or on its complement.

    Returns (t, r) with r = √(1 − t²), both computed from S = (1 − T)/2 without cancellation.
    Exact inverse-CDF sampling of the truncated Beta(α, α) law (closed forms for d = 2, 3). On the
    cap side an exact tangent-exponential rejection sampler is used instead whenever it accepts at
    least half of its proposals (far from the bulk: most calibrations at ε ≳ 1, and always when
    the cap probability is below 1e−280, where the inverse CDF cannot work); it costs a few
    uniforms per row instead of an inverse incomplete beta. Never rejection from the whole sphere
    (docs/errata.md "Numerics").
    """
    n = in_cap.shape[0]
    t = np.empty(n)
    r = np.empty(n)
    cap_idx = np.flatnonzero(in_cap)
    out_idx = np.flatnonzero(~in_cap)
    u_cap = 1.0 - rng.random(cap_idx.size)  # in (0, 1]
    u_out = 1.0 - rng.random(out_idx.size)
    log_s_gamma = log_expit(-y)
    s_gamma = math.exp(log_s_gamma)
    if d == 2:
        # T = cos θ with θ uniform on [0, θ_γ] (cap) or [θ_γ, π] (complement).
        theta_gamma = 2.0 * math.atan(math.exp(-y / 2.0))
        theta = np.concatenate([u_cap * theta_gamma, theta_gamma + u_out * (math.pi - theta_gamma)])
        idx = np.concatenate([cap_idx, out_idx])
        t[idx] = np.cos(theta)
        r[idx] = np.sin(theta)
        return t, r
    a = sphere_alpha(d)
    p_cap = math.exp(log_p_cap)
    # Cap: S ∈ [0, s_γ] with I_S(α, α) = U·P.
    if d == 3:
        s = u_cap * s_gamma
        t[cap_idx] = 1.0 - 2.0 * s
        r[cap_idx] = 2.0 * np.sqrt(s * (1.0 - s))
    elif p_cap >= _TINY_PROBABILITY and _log_tangent_acceptance(a, y, log_p_cap) < _LOG_TANGENT_MIN_ACCEPTANCE:
        s = special.betaincinv(a, a, u_cap * p_cap)
        t[cap_idx] = 1.0 - 2.0 * s
        r[cap_idx] = 2.0 * np.sqrt(s * (1.0 - s))
    else:
        log_s, log_1ms = _tangent_rejection_cap(cap_idx.size, a, s_gamma, log_s_gamma, rng)
        t[cap_idx] = -np.expm1(LOG2 + log_s)
        r[cap_idx] = np.exp(LOG2 + 0.5 * (log_s + log_1ms))
    # Complement: by symmetry S' = 1 − S ∈ [0, 1 − s_γ] with I_{S'}(α, α) = U·(1 − P).
    if d == 3:
        s_prime = u_out * (1.0 - s_gamma)
    else:
        s_prime = special.betaincinv(a, a, u_out * -math.expm1(log_p_cap))
    t[out_idx] = 2.0 * s_prime - 1.0
    r[out_idx] = 2.0 * np.sqrt(s_prime * (1.0 - s_prime))
    return t, r


def random_unit_vectors(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """n independent uniform points on S^{d−1} (normalised Gaussians), shape (n, d)."""
    g = rng.standard_normal((n, d))
    norms = np.sqrt(np.vecdot(g, g))
    while np.any(norms == 0.0):  # probability 0 in exact arithmetic; kept for d = 1 robustness
        bad = norms == 0.0
        g[bad] = rng.standard_normal((int(bad.sum()), d))
        norms = np.sqrt(np.vecdot(g, g))
    g /= norms[:, None]
    return g


def round_to_sphere(x: np.ndarray, radius: float, rng: np.random.Generator) -> np.ndarray:
    """Unbiased rounding of rows in the ball of ``radius`` to the unit sphere.

    A row x ≠ 0 with ρ = ‖x‖/radius becomes ±x/‖x‖ with probabilities (1 ± ρ)/2, so
    E[radius·u] = x; a zero row becomes a uniformly random direction (E[u] = 0); ρ ≥ 1 is kept.
    Returns a new (n, d) array of unit rows (one pass over x).
    """
    n, d = x.shape
    u = np.empty((n, d))
    zero = rounded_units_into(x, rng.random((n,)), radius, u)
    if np.any(zero):
        u[zero] = random_unit_vectors(int(zero.sum()), d, rng)
    return u


def directions_with_cosines(
    u: np.ndarray, t: np.ndarray, r: np.ndarray, scale: float, rng: np.random.Generator
) -> np.ndarray:
    """scale·(t·u + r·w) with w uniform on the unit sphere of u's orthogonal complement.

    w is a Gaussian g with its u-component removed, normalised: the law of a uniform point of a
    cap given its cosine (rotational symmetry about u). Fused into Z = a·g + b·u with
    ‖w‖² = ‖g‖² − ⟨g, u⟩², a = scale·r/‖w‖ and b = scale·t − a⟨g, u⟩: one batch of n·d Gaussians
    and two reductions, done in place (:func:`_directions_in_place`). This is the reference that
    :func:`rounded_cap_directions` computes chunk by chunk.
    """
    g = rng.standard_normal(u.shape)
    _directions_in_place(g, u.copy(), t, r, scale, rng)
    return g


def _directions_in_place(
    g: np.ndarray, u: np.ndarray, t: np.ndarray, r: np.ndarray, scale: float, rng: np.random.Generator
) -> None:
    """Turn the normals ``g`` into scale·(t·u + r·w) in place (``u`` is overwritten too).

    Rows where most of g lies along u (‖w‖² < ‖g‖²/4, common only for small d) would lose accuracy
    to cancellation; they are projected explicitly, twice ("twice is enough", Giraud et al. 2005).
    """
    d = g.shape[1]
    gg = np.vecdot(g, g)
    gu = np.vecdot(g, u)
    ww = gg - gu * gu
    redo = np.flatnonzero(ww < 0.25 * gg)
    while redo.size:
        gb, ub = g[redo], u[redo]
        for _ in range(2):
            gb -= np.vecdot(gb, ub)[:, None] * ub
        g[redo] = gb
        gu[redo] = 0.0
        ww[redo] = np.vecdot(gb, gb)
        redo = redo[ww[redo] == 0.0]  # g exactly parallel to u: probability 0, draw again
        g[redo] = rng.standard_normal((redo.size, d))
    a = scale * r / np.sqrt(ww)
    g *= a[:, None]
    u *= (scale * t - a * gu)[:, None]
    g += u


def rounded_cap_directions(
    x: np.ndarray,
    radius: float,
    cosines: Callable[[int], tuple[np.ndarray, np.ndarray]],
    scale: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """scale·(t·u + r·w) for u the unbiased rounding of each row of x: :func:`round_to_sphere`
    then :func:`directions_with_cosines`, fused chunk by chunk of rows.

    The sampler of PrivUnit2 (Bhowmick et al. 2018, Alg. 1) and of the hemisphere mechanism. One
    read of x and one write of the output from and to memory: each chunk of rows (about
    :data:`FUSED_CHUNK_VALUES` values; one row when d is larger) gets its norms, its u, its normals and its
    scaling while it is in cache, instead of six passes over n·d arrays. Draw order: the n sign
    uniforms of the rounding, then ``cosines(n)`` (which draws the cap events and cosines and
    returns (t, r)), then the normals row after row. For rows x ≠ 0 that is the order and the
    arithmetic of ``directions_with_cosines(round_to_sphere(x, radius), t, r, scale)``, so both
    agree to rounding (bit for bit where the reductions sum alike), whatever the chunk size.
    A zero row has u uniform on the sphere and V | u rotationally symmetric about u, so V itself is
    uniform: it is released as scale·g/‖g‖ from its own normals (no u is drawn for it).

    With numba (:mod:`ldpcli.math._kernels`) the same draws run as one compiled loop per row.
    """
    n, d = x.shape
    flips: np.ndarray = rng.random((n,))
    t, r = cosines(n)
    out = np.empty((n, d))
    kernels = compiled(rng, given_draws=True)
    if kernels is not None:
        redo = np.zeros(n, dtype=bool)
        rows_in = np.ascontiguousarray(x, dtype=np.float64)
        for rows, source in normal_chunks(rng, out):
            kernels.rounded_cap_directions(
                rows_in[rows], flips[rows], radius, t[rows], r[rows], scale, source, out[rows], redo[rows])
        if redo.any():  # given normals exactly along u (probability 0): new ones, as the reference draws them
            again = np.flatnonzero(redo)
            u = np.empty((again.size, d))
            rounded_units_into(x[again], flips[again], radius, u)
            g = rng.standard_normal((again.size, d))
            _directions_in_place(g, u, t[again], r[again], scale, rng)
            out[again] = g
        return out
    with row_buffers(d):
        for rows, u, zero in rounded_chunks(x, flips, radius):
            g = out[rows]
            rng.standard_normal(out=g)
            uniform = g[zero]  # zero rows: their own normals, normalised below
            u[zero, 0] = 1.0  # any unit row, so that the chunk's arithmetic stays finite
            _directions_in_place(g, u, t[rows], r[rows], scale, rng)
            if uniform.size:
                g[zero] = uniform * (scale / row_norms(uniform))[:, None]
    return out
