"""The losses ``ldp train`` minimises: logistic, softmax, squared and hinge, with their gradients.

Each loss is a function ℓ(θ; x, t) of the parameters θ (a flat vector of ``n_params`` numbers),
one feature row x (with the intercept's constant already appended, see :mod:`ldpcli.learn._train`) and
the row's *target* t: ±1 for the binary losses, a class index for softmax, a number for squared.
Every method takes a batch: ``X`` is (n, d), ``t`` is (n,), and ``gradients`` returns the (n, p)
per-row gradients that the mechanism privatizes as one array (Duchi, Jordan, Wainwright 2014,
Sec. 3.1; Bhowmick et al. 2018, Sec. 3.2: the user releases ∇ℓ(θ; x, y), not x).

Gradient norms (what the public bound L has to cover before clipping):

- logistic, ℓ = log(1 + e^{−t⟨θ,x⟩}): ∇ = −t·σ(−t⟨θ,x⟩)·x, so ‖∇‖ ≤ ‖x‖ (Bhowmick et al. Sec. 5.1);
- hinge, ℓ = max(0, 1 − t⟨θ,x⟩): the subgradient −t·x where t⟨θ,x⟩ < 1 (0 elsewhere), ‖∇‖ ≤ ‖x‖;
- softmax over k classes, θ = (θ_1, …, θ_k) row by row, ℓ = log Σ_c e^{⟨θ_c,x⟩} − ⟨θ_t,x⟩:
  ∇_c = (π_c − 1[c = t])·x with π the softmax, so ‖∇‖ = ‖π − e_t‖·‖x‖ ≤ √2‖x‖;
- squared, ℓ = ½(⟨θ,x⟩ − t)²: ∇ = (⟨θ,x⟩ − t)·x, unbounded: clipping to L decides.

At the start θ = 0 the norms are fixed by ‖x‖ alone: ½‖x‖ (logistic), ‖x‖ (hinge) and
√((k − 1)/k)·‖x‖ for softmax (π is uniform, ‖π − e_t‖² = (1 − 1/k)² + (k − 1)/k² = (k − 1)/k).
So for rows of a public norm bound r, the public L = factor·√(r² + 1) (the intercept's 1
included) clips no gradient: :meth:`Loss.gradient_bound`; with unit rows and an intercept every
softmax gradient at θ = 0 has norm √(2(k − 1)/k) > 1, so L = 1 clips them all.

No module here reads files: the losses are plain numpy, so the tests compare them with finite
differences and the benchmarks call them directly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """σ(z) = 1/(1 + e^{−z}) without overflow: ½(1 + tanh(z/2))."""
    return 0.5 * (1.0 + np.tanh(0.5 * z))


class Loss(ABC):
    """A loss on rows of ``d`` features (intercept included) with ``outputs`` parameter rows.

    ``n_params`` = outputs·d; θ is flat, output c's weights are ``θ[c·d:(c+1)·d]``.
    """

    name: ClassVar[str]
    #: Targets are class indices (classification) rather than numbers.
    classification: ClassVar[bool] = True
    #: The number of classes the loss takes (None: any number ≥ 2; 0: none, a regression).
    classes_needed: ClassVar[int | None] = 2
    #: Differentiable everywhere (the empirical minimiser is computed only for these).
    smooth: ClassVar[bool] = True
    #: The bound on ‖∇ℓ‖ in units of ‖x‖, for the help and the notes (None: unbounded).
    gradient_factor: ClassVar[float | None] = 1.0

    def __init__(self, d: int, outputs: int = 1) -> None:
        self.d = int(d)
        self.outputs = int(outputs)

    def start_factor(self) -> float | None:
        """‖∇ℓ(0; x, t)‖/‖x‖, the same for every row (module docstring); None where it depends on the target."""
        return None

    def gradient_bound(self, row_norm: float, intercept: bool) -> float | None:
        """sup ‖∇ℓ(θ; x, t)‖ over θ and every row of norm ≤ ``row_norm`` (before the intercept's 1 is
        appended when ``intercept``): :attr:`gradient_factor`·√(r² + 1), or ·r; None when unbounded."""
        if self.gradient_factor is None:
            return None
        return self.gradient_factor * float(np.hypot(row_norm, 1.0) if intercept else row_norm)

    @property
    def n_params(self) -> int:
        """p: the number of parameters, the dimension the mechanism privatizes."""
        return self.outputs * self.d

    def targets(self, codes: np.ndarray) -> np.ndarray:
        """The loss's targets from class indices 0…k−1 (binary losses: class 0 → −1, class 1 → +1)."""
        return np.where(codes == 1, 1.0, -1.0)

    @abstractmethod
    def losses(self, theta: np.ndarray, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        """ℓ(θ; x_i, t_i) for every row: shape (n,)."""

    @abstractmethod
    def gradients(self, theta: np.ndarray, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        """∇_θ ℓ(θ; x_i, t_i) for every row: shape (n, p), a fresh array."""

    def mean_gradient(self, theta: np.ndarray, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        """(1/n)Σ∇ℓ: one (p,) vector (the losses below avoid forming the (n, p) array)."""
        return self.gradients(theta, X, t).mean(axis=0)

    def classes_of(self, t: np.ndarray) -> np.ndarray:
        """The class index of each target, what :meth:`predict` is compared with (binary: +1 → 1)."""
        return (t > 0).astype(np.int64)

    def predict(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        """The prediction for each row: a class index (classification) or a number."""
        scores = X @ theta
        return (scores >= 0).astype(np.int64)

    def project_gradient(self, g: np.ndarray) -> np.ndarray:
        """The orthogonal projection of a gradient estimate onto the subspace every true gradient
        lies in (identity here; softmax removes the component shared by all classes)."""
        return g

    def canonical(self, theta: np.ndarray) -> np.ndarray:
        """A representative of θ's class of parameters with the same loss everywhere (θ itself, except
        for softmax, where adding one vector to every class changes nothing)."""
        return theta


class _Linear(Loss):
    """A one-output loss ℓ = φ(⟨θ, x⟩, t): ∇ = φ'(⟨θ, x⟩, t)·x."""

    @abstractmethod
    def coefficients(self, theta: np.ndarray, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        """c_i = φ'(⟨θ, x_i⟩, t_i), so that ∇ℓ(θ; x_i, t_i) = c_i·x_i."""

    def gradients(self, theta: np.ndarray, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return self.coefficients(theta, X, t)[:, None] * X

    def mean_gradient(self, theta: np.ndarray, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return X.T @ self.coefficients(theta, X, t) / len(t)


class Logistic(_Linear):
    """Logistic regression, ℓ = log(1 + e^{−t⟨θ,x⟩}), t ∈ {−1, +1} (Bhowmick et al. 2018, Sec. 5.1)."""

    name = "logistic"

    def start_factor(self) -> float:
        return 0.5  # σ(0)

    def losses(self, theta: np.ndarray, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.logaddexp(0.0, -t * (X @ theta))

    def coefficients(self, theta: np.ndarray, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return -t * _sigmoid(-t * (X @ theta))


class Hinge(_Linear):
    """The support-vector hinge loss max(0, 1 − t⟨θ,x⟩), t ∈ {−1, +1}; subgradient 0 at the kink."""

    name = "hinge"
    smooth = False

    def start_factor(self) -> float:
        return 1.0  # every margin is 0 < 1

    def losses(self, theta: np.ndarray, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.maximum(0.0, 1.0 - t * (X @ theta))

    def coefficients(self, theta: np.ndarray, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.where(t * (X @ theta) < 1.0, -t, 0.0)


class Squared(_Linear):
    """Least squares, ℓ = ½(⟨θ,x⟩ − t)², t a number; its gradient is unbounded, so L clips it."""

    name = "squared"
    classification = False
    classes_needed = 0
    gradient_factor = None

    def targets(self, codes: np.ndarray) -> np.ndarray:
        return np.asarray(codes, dtype=np.float64)

    def losses(self, theta: np.ndarray, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return 0.5 * (X @ theta - t) ** 2

    def coefficients(self, theta: np.ndarray, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        return X @ theta - t

    def predict(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        return X @ theta


class Softmax(Loss):
    """Multinomial logistic regression over k classes, ℓ = log Σ_c e^{⟨θ_c,x⟩} − ⟨θ_t,x⟩."""

    name = "softmax"
    classes_needed = None
    gradient_factor = float(np.sqrt(2.0))

    def targets(self, codes: np.ndarray) -> np.ndarray:
        return np.asarray(codes, dtype=np.int64)

    def start_factor(self) -> float:
        return float(np.sqrt((self.outputs - 1) / self.outputs))

    def classes_of(self, t: np.ndarray) -> np.ndarray:
        return t

    def _scores(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        return X @ theta.reshape(self.outputs, self.d).T

    def _probabilities(self, scores: np.ndarray) -> np.ndarray:
        shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
        shifted /= shifted.sum(axis=1, keepdims=True)
        return shifted

    def losses(self, theta: np.ndarray, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        scores = self._scores(theta, X)
        top = scores.max(axis=1)
        log_sum = top + np.log(np.exp(scores - top[:, None]).sum(axis=1))
        return log_sum - scores[np.arange(len(t)), t]

    def gradients(self, theta: np.ndarray, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        residual = self._probabilities(self._scores(theta, X))
        residual[np.arange(len(t)), t] -= 1.0
        return (residual[:, :, None] * X[:, None, :]).reshape(len(t), self.n_params)

    def mean_gradient(self, theta: np.ndarray, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        residual = self._probabilities(self._scores(theta, X))
        residual[np.arange(len(t)), t] -= 1.0
        return (residual.T @ X).reshape(-1) / len(t)

    def predict(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        return np.argmax(self._scores(theta, X), axis=1)

    def project_gradient(self, g: np.ndarray) -> np.ndarray:
        """Σ_c ∇_c = (Σ_c π_c − 1)·x = 0 for every true gradient: removing the class mean of an
        unbiased estimate keeps it unbiased and only lowers its variance (post-processing)."""
        rows = g.reshape(self.outputs, self.d)
        return (rows - rows.mean(axis=0)).reshape(-1)

    def canonical(self, theta: np.ndarray) -> np.ndarray:
        return self.project_gradient(theta)


LOSSES: dict[str, type[Loss]] = {cls.name: cls for cls in (Logistic, Softmax, Squared, Hinge)}


def make_loss(name: str, d: int, classes: int) -> Loss:
    """The loss ``name`` for rows of d features (intercept included) and ``classes`` classes."""
    cls = LOSSES[name]
    return cls(d, classes if cls is Softmax else 1)
