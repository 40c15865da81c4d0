"""Exact projections (ldpcli.estimators._projection) against brute force and the projection's characterisation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.spatial import ConvexHull

from ldpcli.estimators._projection import Ball, Box, Hull, Nonneg, SetRequest, Simplex, parse_set

SETS = [Ball(1.5), Box(-1.0, 2.0), Simplex(), Simplex(3.0), Nonneg()]


def _sample_in(convex, d: int, rng: np.random.Generator) -> np.ndarray:  # type: ignore[no-untyped-def]
    """A random point of the set (by projecting a random point: it lands in the set)."""
    return convex.project(rng.normal(0, 2, d))


# A Hull's repr names its address: its id is spelled out, the same in every process (pytest-xdist compares them).
@pytest.mark.parametrize("convex", SETS + [Hull(np.random.default_rng(4).normal(size=(12, 4)))],
                         ids=[*map(repr, SETS), "Hull(12 points in 4-d)"])
def test_in_the_set_idempotent_and_obtuse(convex) -> None:  # type: ignore[no-untyped-def]
    """P(y) ∈ K, P(P(y)) = P(y), and ⟨y − P(y), z − P(y)⟩ ≤ 0 for z ∈ K (which characterises the
    projection and gives ‖P(y) − z‖ ≤ ‖y − z‖: Lemma 5.3's pointwise form)."""
    rng = np.random.default_rng(1)
    d = 4
    for _ in range(200):
        y = rng.normal(0, 3, d)
        p = convex.project(y)
        assert convex.contains(p, 1e-9)
        assert np.allclose(convex.project(p), p, atol=1e-10)
        for _ in range(5):
            z = _sample_in(convex, d, rng)
            assert float((y - p) @ (z - p)) <= 1e-9 * max(1.0, float(y @ y))
            assert np.linalg.norm(p - z) <= np.linalg.norm(y - z) + 1e-9


@pytest.mark.slow
def test_ball_and_box_against_a_grid_in_the_plane() -> None:
    rng = np.random.default_rng(2)
    grid = np.stack(np.meshgrid(np.linspace(-3, 3, 601), np.linspace(-3, 3, 601)), -1).reshape(-1, 2)
    for convex in (Ball(1.3), Box(-0.5, 1.2)):
        inside = grid[[convex.contains(g, 0.0) for g in grid]]
        for _ in range(10):
            y = rng.normal(0, 2, 2)
            best = np.min(np.linalg.norm(inside - y, axis=1))
            assert np.linalg.norm(convex.project(y) - y) <= best + 1e-12
            assert np.linalg.norm(convex.project(y) - y) >= best - 0.01 * np.sqrt(2)


def test_simplex_against_bisection_and_slsqp() -> None:
    rng = np.random.default_rng(3)
    for total in (1.0, 2.5):
        for d in (1, 2, 5, 20):
            for _ in range(20):
                y = rng.normal(0, 1, d) * rng.choice([0.1, 1, 10])
                p = Simplex(total).project(y)
                lo, hi = float(np.min(y)) - total, float(np.max(y))
                for _ in range(200):  # Σ max(y − θ, 0) = total, decreasing in θ
                    mid = 0.5 * (lo + hi)
                    lo, hi = (mid, hi) if np.maximum(y - mid, 0).sum() > total else (lo, mid)
                assert np.allclose(p, np.maximum(y - lo, 0), atol=1e-9)
                if d <= 5:
                    ref = minimize(lambda x, y=y: np.sum((x - y) ** 2), np.full(d, total / d), method="SLSQP",
                                   bounds=[(0, None)] * d,
                                   constraints=[{"type": "eq", "fun": lambda x, total=total: x.sum() - total}],
                                   options={"ftol": 1e-14})
                    assert np.linalg.norm(p - y) <= np.linalg.norm(ref.x - y) + 1e-7
    assert np.array_equal(Simplex().project(np.array([0.2, 0.3, 0.5])), np.array([0.2, 0.3, 0.5]))
    assert np.allclose(Simplex().project(np.array([-5.0, -5.0, -5.0])), 1 / 3)  # ties, all negative


@pytest.mark.slow
def test_hull_against_slsqp_and_the_polygon() -> None:
    rng = np.random.default_rng(5)
    for _ in range(150):
        d, n = int(rng.choice([2, 3, 5, 10])), int(rng.integers(3, 41))
        points = rng.normal(size=(n, d)) * rng.choice([1e-3, 1.0, 1e3])
        y = rng.normal(size=d) * np.abs(points).max() * 2
        hull = Hull(points)
        sol = hull.solve(y)
        v = hull.points
        scale = float(np.abs(v).max())
        vs, ys = v / scale, y / scale  # SLSQP works at unit scale
        ref = minimize(lambda w, vs=vs, ys=ys: np.sum((w @ vs - ys) ** 2), np.full(len(v), 1 / len(v)),
                       method="SLSQP", jac=lambda w, vs=vs, ys=ys: 2 * (w @ vs - ys) @ vs.T, bounds=[(0, None)] * len(v),
                       constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1}], options={"ftol": 1e-15, "maxiter": 1000})
        if ref.success:  # SLSQP sometimes stops early; the certificate below is the proof either way
            assert np.linalg.norm(sol.point - y) <= scale * np.linalg.norm(ref.x @ vs - ys) + 1e-7 * scale
        # p ∈ K and ⟨y − p, v_j − p⟩ ≤ 0 for every point: the projection's optimality condition
        assert float(np.max((v - sol.point) @ (y - sol.point))) <= 1e-8 * scale**2
        assert sol.gap <= 1e-8 * scale**2
        assert np.all(sol.weights >= 0) and sol.weights.sum() == pytest.approx(1.0)
        assert np.allclose(sol.weights @ v[sol.indices], sol.point)
        if d == 2:
            poly = ConvexHull(v)
            corners = v[poly.vertices]
            if np.all(poly.equations[:, :2] @ y + poly.equations[:, 2] <= 0):
                best = 0.0
            else:
                best = np.inf
                for a, b in zip(corners, np.roll(corners, -1, axis=0)):
                    t = np.clip((y - a) @ (b - a) / ((b - a) @ (b - a)), 0, 1)
                    best = min(best, float(np.linalg.norm(a + t * (b - a) - y)))
            assert np.linalg.norm(sol.point - y) == pytest.approx(best, rel=1e-9, abs=1e-9 * scale)


def test_hull_edge_cases() -> None:
    one = Hull(np.array([[1.0, 2.0]]))
    assert np.array_equal(one.project(np.array([5.0, 5.0])), [1.0, 2.0])
    dup = Hull(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [1.0, 0.0]]))
    assert dup.points.shape == (2, 2)
    assert np.allclose(dup.project(np.array([0.5, 3.0])), [0.5, 0.0])
    square = Hull(np.array([[0, 0], [1, 0], [0, 1], [1, 1], [0.5, 0.5]], dtype=float))
    inside = np.array([0.3, 0.6])
    assert np.allclose(square.project(inside), inside, atol=1e-12) and square.solve(inside).gap <= 1e-12
    line = Hull(np.outer(np.arange(4.0), [1.0, 2.0, 2.0]))  # collinear points in R^3
    p = line.project(np.array([10.0, 0.0, 0.0]))
    assert np.allclose(p, np.array([1.0, 2.0, 2.0]) * (10.0 / 9.0))
    flat = Hull(np.column_stack([np.random.default_rng(0).normal(size=(20, 2)), np.ones(20)]))  # a plane z = 1
    q = flat.project(np.array([0.0, 0.0, 5.0]))
    assert q[2] == pytest.approx(1.0) and flat.contains(q)
    assert Hull(np.array([[0.0], [2.0]])).project(np.array([-3.0]))[0] == 0.0  # d = 1
    big = Hull(np.array([[0.0, 0.0], [1e6, 0.0], [0.0, 1e6]]))
    assert np.allclose(big.project(np.array([1e6, 1e6])), [5e5, 5e5])
    tiny = Hull(np.array([[0.0, 0.0], [1e-6, 0.0], [0.0, 1e-6]]))
    assert np.allclose(tiny.project(np.array([1e-6, 1e-6])), [5e-7, 5e-7], rtol=1e-9, atol=0)
    with pytest.raises(ValueError, match="dimension"):
        square.project(np.zeros(3))


def test_parse_set_and_invalid_arguments() -> None:
    assert parse_set("ball") == SetRequest("ball") and parse_set("ball:2") == Ball(2.0)
    assert parse_set("box") == SetRequest("box") and parse_set("box:2") == Box(-2.0, 2.0)
    assert parse_set("box:0,1") == Box(0.0, 1.0) and parse_set(" simplex ") == Simplex()
    assert parse_set("simplex:4") == Simplex(4.0) and parse_set("nonneg") == Nonneg()
    assert parse_set("domain") == SetRequest("domain") and parse_set("hull:w.csv") == SetRequest("hull", "w.csv")
    for bad in ("sphere", "ball:-1", "ball:x", "box:2,1", "box:1,2,3", "simplex:0", "hull:", "nonneg:1", "domain:1"):
        with pytest.raises(ValueError, match=r"ball\[:R\]"):
            parse_set(bad)
    for make in (lambda: Ball(0.0), lambda: Box(1.0, 1.0), lambda: Simplex(-1.0), lambda: Hull(np.empty((0, 2))),
                 lambda: Hull(np.array([[np.nan, 0.0]]))):
        with pytest.raises(ValueError):
            make()
    with pytest.raises(ValueError):
        Ball(1.0).project(np.array([np.inf, 0.0]))
