"""Locally private learning from a dataset: the library call behind ``ldp train``.

Each row (features x, label y) is one person. In the one-pass protocol (Duchi, Jordan, Wainwright
2014, Sec. 3; Bhowmick et al. 2018, Sec. 3.2 and 4.4) every training row is used exactly once per
epoch: at its step the row's gradient ∇ℓ(θ_k; x, y) at the server's current model is clipped to the
public bound L and privatized by a registered vector mechanism, and the server moves with the
average of the step's releases (:mod:`ldpcli.learn.sgd`). Each use costs the row ε; ``epochs``
uses cost it epochs·ε by basic composition, which the result, the sidecar and the budget ledger
state. The model is the averaged iterate, post-processing of the releases.

Reading: the file is read batch by batch (:func:`ldpcli.io.open_vectors`, the label as a kept
column). A first pass checks every row and label, finds the classes when they are not given,
counts the rows, splits off the holdout and fingerprints the features for the ledger; when the
training rows fit in ``memory`` they are kept for the epochs (and the empirical minimiser θ̂ is
computed), otherwise each epoch reads the file again. Rows are visited in a random order within each
window of ``memory`` (the whole training set when it fits), so a file sorted by label does not
become a sequence of one-class steps.

Nothing here prints: :func:`train` returns a :class:`TrainResult`, writes the model and its sidecar
when given ``output``, and records the release in the ledger.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ldpcli._version import __version__
from ldpcli.errors import DataError, UsageError
from ldpcli.learn.losses import LOSSES, Loss, make_loss
from ldpcli.learn.sgd import (
    GEOMETRIES,
    ITERATES,
    Iterate,
    Minimizer,
    StepRule,
    default_step_rule,
    empirical_minimizer,
    gradient_moment_bounds,
    sgd_pass,
)
from ldpcli.mechanisms.base import Mechanism, MechanismSpec, check_count, get_mechanism
from ldpcli.release.ledger import InputFingerprint, Ledger, LedgerEntry
from ldpcli.release.safety import check_epsilon

PathLike = str | os.PathLike[str]

MODEL_FORMAT = "ldp-model"
MODEL_SIDECAR_FORMAT = "ldp-model-release"
MODEL_VERSION = 1
DEFAULT_MEMORY = 256 * 2**20
INTERCEPT = "(intercept)"


@dataclass(frozen=True)
class Metrics:
    """Mean loss and, for a classifier, accuracy of one model on the evaluation rows."""

    loss: float
    accuracy: float | None

    def to_dict(self) -> dict[str, float | None]:
        return {"loss": self.loss, "accuracy": self.accuracy}


@dataclass(frozen=True)
class TrainResult:
    """The private model (averaged iterate), how it was trained, and its evaluation.

    ``theta`` is flat: output c's weights are ``theta[c·d:(c+1)·d]`` with d = len(features) (the
    intercept last when ``intercept``). ``baseline`` and ``minimizer`` are non-private comparisons
    for the operator: they are never written to the model file or the sidecar.
    """

    loss: str
    label: str
    classes: tuple[Any, ...] | None
    classes_from_data: bool
    features: tuple[str, ...]
    intercept: bool
    theta: np.ndarray
    mechanism: Mechanism
    epochs: int
    batch: int
    steps: int
    rule: StepRule
    geometry: str
    radius: float
    rows: int
    train_rows: int
    holdout_rows: int
    clipped: int
    #: Wall-clock seconds of the training loop (reading, calibration and evaluation excluded).
    seconds: float
    reproducible: bool
    in_memory: bool
    evaluated_on: str | None = None
    evaluation_rows: int = 0
    metrics: dict[str, Metrics] = field(default_factory=dict)
    baseline: np.ndarray | None = None
    minimizer: Minimizer | None = None
    minimizer_note: str | None = None
    output: Path | None = None
    sidecar: Path | None = None
    input_tag: str | None = None
    notices: tuple[str, ...] = ()

    @property
    def outputs(self) -> int:
        return self.theta.size // len(self.features)

    @property
    def epsilon_per_row(self) -> float:
        """epochs·ε_exact: each row's privacy loss over its uses (basic composition)."""
        return self.epochs * self.mechanism.epsilon_exact

    @property
    def delta_per_row(self) -> float:
        return self.epochs * self.mechanism.delta_exact

    def _loss(self) -> Loss:
        return make_loss(self.loss, len(self.features), len(self.classes) if self.classes else 0)

    def distance(self, theta: np.ndarray, other: np.ndarray | None = None) -> float:
        """‖θ − θ̄‖ (or ‖θ − other‖) between canonical representatives (softmax: class means removed)."""
        loss = self._loss()
        gap = loss.canonical(self.theta if other is None else other) - loss.canonical(theta)
        return float(np.sqrt(gap @ gap))

    def privacy(self) -> dict[str, Any]:
        """The guarantee: ε per use, uses per row, ε per row, and the statement."""
        mech = self.mechanism
        statement = (
            f"Each training row's gradient was clipped to the public bound L = {mech.norm_bound:g} "
            f"({mech.domain}) and released through {mech.name} at ε = {mech.epsilon_exact:.6g} per use"
            + (f", δ = {mech.delta_exact:g}" if mech.delta_exact > 0 else "")
            + f"; each row was used {self.epochs} time(s), so by basic composition this model is "
            f"{self.epsilon_per_row:.6g}-LDP" + (f" (δ = {self.delta_per_row:g})" if mech.delta_exact > 0 else "")
            + " for each row (one row = one person). The model is post-processing of the released gradients"
            + (f"; {self.holdout_rows} holdout rows were not used" if self.holdout_rows else "")
            + "."
        )
        if self.classes_from_data:
            statement += (" The class list was read from the data without privatization and is not covered: "
                          "pass --classes to make it a public choice.")
        return {
            "model": "local", "epsilon_per_use": mech.epsilon_exact, "delta_per_use": mech.delta_exact,
            "uses_per_row": self.epochs, "epsilon_per_row": self.epsilon_per_row, "delta_per_row": self.delta_per_row,
            "composition": "basic: the ε of a row's uses add up", "statement": statement,
        }

    def rate(self) -> dict[str, Any]:
        """The convergence rate's form (Duchi et al. 2014, (14b) for l2, (14a) for l1), constants unstated."""
        m2, minf = gradient_moment_bounds(self.mechanism)
        if self.geometry == "l2":
            value = math.sqrt(m2) * self.radius / math.sqrt(self.steps)
            form = "M₂·R/√T"
            where = f"M₂² = {m2:.6g} bounds E‖ĝ‖₂² of one release"
        else:
            value = math.sqrt(minf) * self.radius * math.sqrt(math.log(self.theta.size)) / math.sqrt(self.steps)
            form = "M∞·R·√(log p)/√T"
            where = f"M∞² = {minf:.6g} bounds E‖ĝ‖∞² of one release"
        equation = "(14b)" if self.geometry == "l2" else "(14a)"
        return {
            "value": value, "form": form, "constant_stated": False,
            "statement": f"E[F(θ̄)] − min F = O({form}) with tuned steps (Duchi, Jordan, Wainwright 2014, "
                         f"{equation}; batch B divides the second moment by B); {where}, R = {self.radius:g}, "
                         f"T = {self.steps} steps: {form} = {value:.4g}, up to an unstated universal constant",
        }

    def model_dict(self) -> dict[str, Any]:
        """The model file's content: coefficients by output, intercepts, classes and features."""
        weights = self.theta.reshape(self.outputs, len(self.features))
        names = self.features[:-1] if self.intercept else self.features
        coefficients = weights[:, :-1] if self.intercept else weights
        intercepts = weights[:, -1] if self.intercept else None
        single = self.outputs == 1
        return {
            "format": MODEL_FORMAT, "version": MODEL_VERSION, "loss": self.loss, "label": self.label,
            "classes": None if self.classes is None else list(self.classes),
            "features": list(names),
            "coefficients": coefficients[0].tolist() if single else coefficients.tolist(),
            "intercept": None if intercepts is None else (float(intercepts[0]) if single else intercepts.tolist()),
            "geometry": self.geometry, "radius": self.radius,
            "predict": _PREDICT[self.loss],
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything for ``--json``: the model, its privacy, training and (for the operator) evaluation."""
        out: dict[str, Any] = {
            "model": self.model_dict(),
            "privacy": self.privacy(),
            "mechanism": self.mechanism.describe(),
            "training": self.training(),
            "rate": self.rate(),
            "clipped_gradients": self.clipped,
            "seconds": self.seconds,
            "steps_per_second": self.steps / self.seconds if self.seconds > 0 else None,
            "evaluation": None if self.evaluated_on is None else {
                "on": self.evaluated_on, "rows": self.evaluation_rows,
                **{name: metrics.to_dict() for name, metrics in self.metrics.items()},
            },
            "baseline_distance": None if self.baseline is None else self.distance(self.baseline),
            "minimizer": None if self.minimizer is None else {
                "distance": self.distance(self.minimizer.theta),
                "baseline_distance": None if self.baseline is None else self.distance(self.minimizer.theta,
                                                                                       self.baseline),
                "objective": self.minimizer.objective, "converged": self.minimizer.converged,
                "on_boundary": self.minimizer.on_boundary, "method": self.minimizer.method,
            },
            "minimizer_note": self.minimizer_note,
            "reproducible": self.reproducible,
            "output": None if self.output is None else str(self.output),
            "sidecar": None if self.sidecar is None else str(self.sidecar),
        }
        return out

    def training(self) -> dict[str, Any]:
        """The public choices and counts of the run (what the sidecar's ``training`` section holds)."""
        return {
            "loss": self.loss, "label": self.label, "features": len(self.features) - int(self.intercept),
            "intercept": self.intercept, "parameters": self.theta.size, "rows": self.train_rows,
            "holdout_rows": self.holdout_rows, "epochs": self.epochs, "batch": self.batch, "steps": self.steps,
            "geometry": self.geometry, "radius": self.radius, "norm_bound": self.mechanism.norm_bound,
            "step_rule": {"eta0": self.rule.eta0, "beta": self.rule.beta, "formula": self.rule.describe()},
            "averaging": "Polyak–Ruppert: the mean of the iterates after each step",
            "order": "each row once per epoch, in a random order within each memory window",
            "classes_from_data": self.classes_from_data,
        }


_PREDICT = {
    "logistic": "class[1] if ⟨coefficients, x⟩ + intercept ≥ 0 else class[0]",
    "hinge": "class[1] if ⟨coefficients, x⟩ + intercept ≥ 0 else class[0]",
    "softmax": "classes[argmax_c ⟨coefficients[c], x⟩ + intercept[c]]",
    "squared": "⟨coefficients, x⟩ + intercept",
}


# --- reading --------------------------------------------------------------------------------------


@dataclass
class _Labels:
    """Turns a batch's label column into the loss's targets (class codes or numbers), row-checked."""

    loss: type[Loss]
    label: str
    classes: tuple[Any, ...] | None = None
    _value_set: Any = None

    def set_classes(self, classes: Sequence[Any], arrow_type: Any, where: str = "") -> None:
        import pyarrow as pa

        self.classes = tuple(classes)
        value_type = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
        try:
            self._value_set = pa.array(list(classes), type=value_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            shown = ", ".join(repr(c) for c in classes[:10])
            raise DataError(f"{where}: label column {self.label!r} is {value_type}, which cannot hold the model's "
                            f"classes ({shown}); its labels must be of the training data's type") from None

    def codes(self, column: Any, first_row: int, where: str) -> np.ndarray:
        """Class indices (classification) or float values, a DataError naming the first bad row."""
        import pyarrow as pa
        import pyarrow.compute as pc

        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if pa.types.is_dictionary(column.type):  # a categorical column: its values
            column = column.cast(column.type.value_type)
        if column.null_count:
            row = int(np.flatnonzero(np.asarray(column.is_null()))[0])
            raise DataError(f"{where}: row {first_row + row + 1} (counting from 1), column {self.label!r}: the label "
                            "is missing; fill it in or drop the row")
        if not self.loss.classification:
            values = np.asarray(column.cast(pa.float64()), dtype=np.float64)
            bad = ~np.isfinite(values)
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise DataError(f"{where}: row {first_row + row + 1} (counting from 1), column {self.label!r}: the "
                                f"label is {values[row]!r}; a squared-loss label must be a finite number")
            return values
        codes = pc.index_in(column, value_set=self._value_set)
        if codes.null_count:
            row = int(np.flatnonzero(np.asarray(codes.is_null()))[0])
            shown = ", ".join(repr(c) for c in (self.classes or ())[:10])
            raise DataError(f"{where}: row {first_row + row + 1} (counting from 1), column {self.label!r}: the label "
                            f"is not one of the classes ({shown}); pass every class in --classes")
        return np.asarray(codes, dtype=np.int64)


def _check_label_type(arrow_type: Any, loss: type[Loss], label: str, where: str) -> None:
    import pyarrow as pa

    numeric = pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type)
    if not loss.classification and not numeric:
        raise DataError(f"{where}: label column {label!r} is {arrow_type}, not numbers; --loss squared needs a numeric "
                        "label (use logistic, hinge or softmax for classes)")
    if loss.classification and pa.types.is_floating(arrow_type):
        return  # float class labels (0.0/1.0) are allowed; the class list shows them
    if loss.classification and not (numeric or pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
                                    or pa.types.is_boolean(arrow_type) or pa.types.is_dictionary(arrow_type)):
        raise DataError(f"{where}: label column {label!r} is {arrow_type}; class labels must be numbers, text or "
                        "booleans")


def _parse_classes(classes: Sequence[Any], arrow_type: Any, label: str) -> tuple[Any, ...]:
    """The --classes values as values of the label column's type (UsageError naming the first bad one)."""
    import pyarrow as pa

    target = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
    try:
        values = pa.array([str(c) if not isinstance(c, (int, float, bool)) else c for c in classes]).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise UsageError(f"--classes: {list(classes)!r} are not all values of label column {label!r} ({target}): "
                         f"{exc}") from None
    out = tuple(values.to_pylist())
    if len(set(out)) != len(out):
        raise UsageError(f"--classes: {list(classes)!r} names a class twice")
    return out


@dataclass
class _Pass:
    """What the first reading pass learned about the training file."""

    rows: int = 0
    train_rows: int = 0
    holdout_rows: int = 0
    seen: set[Any] = field(default_factory=set)
    cache_x: list[np.ndarray] = field(default_factory=list)
    cache_labels: list[Any] = field(default_factory=list)
    cache_holdout: list[np.ndarray] = field(default_factory=list)
    cached_bytes: int = 0
    in_memory: bool = True


#: The run's two streams of randomness: the training (row order and the mechanism's noise) and the
#: holdout split, which is drawn again, identically, on every pass over the file.
_TRAINING, _HOLDOUT = 0, 1


def _generator(root: np.random.SeedSequence, stream: int) -> np.random.Generator:
    """A fresh generator for one of the run's streams (the same draws each time it is made)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, stream))))


def _augment(values: np.ndarray, intercept: bool) -> np.ndarray:
    """The rows with the intercept's constant 1 appended (a fresh array either way)."""
    if not intercept:
        return np.array(values, dtype=np.float64, copy=True)
    out = np.empty((values.shape[0], values.shape[1] + 1))
    out[:, :-1] = values
    out[:, -1] = 1.0
    return out


@dataclass
class _Source:
    """The training file: how to open it, the holdout fraction, and the cache of its rows."""

    path: Path
    label: str
    column: str | None
    columns: Sequence[str] | None
    holdout: float
    root: np.random.SeedSequence
    memory: int
    intercept: bool
    layout: Any = None

    def open(self) -> Any:
        from ldpcli.io import open_vectors

        if self.layout is not None:
            spec: dict[str, Any] = ({"column": self.layout.columns[0]} if self.layout.kind == "list"
                                    else {"columns": list(self.layout.columns)})
        else:
            spec = {"column": self.column, "columns": self.columns}
        try:
            reader = open_vectors(self.path, keep=[self.label], keep_unsafe=True,
                                  memory_bytes=max(2**20, self.memory // 8), **spec)
        except UsageError as exc:
            text = str(exc)
            if f"no column named {self.label!r} to keep" in text:
                raise UsageError(text.replace(f"no column named {self.label!r} to keep",
                                              f"no label column {self.label!r} (--label)")) from None
            if self.layout is None and self.column is None and self.columns is None and "--columns" in text:
                raise UsageError(f"{text} For ldp train the label is never a feature: name the features with "
                                 "--columns or --column.") from None
            raise
        if self.layout is not None and reader.layout.d != self.layout.d:
            reader.close()
            raise DataError(f"{self.path}: its vectors have {reader.layout.d} features, the model's training data "
                            f"{self.layout.d} ({', '.join(self.layout.columns)}); evaluate on a file with the same "
                            "feature columns")
        return reader

    def batches(self) -> Iterator[tuple[np.ndarray, Any, np.ndarray, int]]:
        """(features as read, label column, holdout mask, first row) per batch, in file order."""
        split = _generator(self.root, _HOLDOUT)
        with self.open() as reader:
            if self.layout is None:
                self.layout = reader.layout
            for batch in reader:
                rows = batch.values.shape[0]
                mask = split.random(rows) < self.holdout if self.holdout > 0 else np.zeros(rows, dtype=bool)
                yield batch.values, batch.keep.column(self.label), mask, batch.first_row


def _feature_names(layout: Any, intercept: bool) -> tuple[str, ...]:
    names = (tuple(f"{layout.columns[0]}[{j}]" for j in range(layout.d)) if layout.kind == "list"
             else tuple(layout.columns))
    return (*names, INTERCEPT) if intercept else names


def _label_type(path: Path, label: str, source: _Source) -> Any:
    with source.open() as reader:
        schema = reader.keep_schema
        if schema is None or label not in schema.names:
            raise UsageError(f"{path}: no label column {label!r}")
        return schema.field(label).type


# --- the call ---------------------------------------------------------------------------------------


def train(
    data: PathLike,
    *,
    label: str,
    epsilon: float,
    loss: str = "logistic",
    mechanism: str = "privunit2",
    calibration: str | None = None,
    norm_bound: float = 1.0,
    options: Mapping[str, Any] | None = None,
    geometry: str = "l2",
    radius: float = 10.0,
    eta0: float | None = None,
    beta: float | None = None,
    batch: int = 1,
    epochs: int = 1,
    intercept: bool = True,
    classes: Sequence[Any] | None = None,
    column: str | None = None,
    columns: Sequence[str] | None = None,
    baseline: bool = False,
    test: PathLike | None = None,
    holdout: float | None = None,
    seed: int | None = None,
    memory: int = DEFAULT_MEMORY,
    force: bool = False,
    output: PathLike | None = None,
    overwrite: bool = False,
    ledger: Ledger | None = None,
    max_budget: float | None = None,
    on_start: Callable[[int | None], None] | None = None,
    on_rows: Callable[[int], None] | None = None,
) -> TrainResult:
    """Train a model on ``data`` by locally private stochastic gradient (or mirror) descent.

    ``label``: the label column. ``loss``: logistic or hinge (two classes), softmax (two or more),
    squared (a numeric label). ``mechanism`` (+ ``calibration``, ``options``): any registered vector
    mechanism, calibrated at ε = ``epsilon`` per use for gradients of p parameters clipped to
    ``norm_bound`` (the ℓ2 ball, or the ℓ∞ box of the box mechanisms). ``geometry`` ``l2``:
    projected SGD on ‖θ‖₂ ≤ ``radius``; ``l1``: entropic mirror descent on ‖θ‖₁ ≤ ``radius``.
    ``eta0``/``beta``: the step rule η_k = η₀k^{−β} (defaults in :mod:`ldpcli.learn.sgd`). ``batch``
    rows per step; ``epochs`` uses of every row (ε per row = epochs·ε). ``classes``: the public class
    list (default: the label values found, with a note that they came from the data).
    ``baseline``: also run non-private SGD on the same pass. ``test`` (a file with the same columns)
    or ``holdout`` (a fraction of the rows, drawn at random and never trained on): evaluate there.
    ``output`` (.json or .npz): write the model and its sidecar ``OUTPUT.ldp.json`` atomically.
    ``ledger`` (+ ``max_budget``): check the input's budget before training and record the release
    (epochs·ε) once it is written (or, without ``output``, once trained). UsageError/DataError with
    one-line messages; on failure nothing is left behind.
    """
    loss_cls = LOSSES.get(loss)
    if loss_cls is None:
        raise UsageError(f"--loss: unknown loss {loss!r}; choose one of: {', '.join(LOSSES)}")
    if geometry not in GEOMETRIES:
        raise UsageError(f"--geometry: must be one of {', '.join(GEOMETRIES)}, got {geometry!r}")
    mech_cls = get_mechanism(mechanism)
    if not mech_cls.vector or not mech_cls.compared:
        raise UsageError(f"--mechanism {mechanism}: gradients need a vector mechanism calibrated from (p, ε, L) alone; "
                         "choose e.g. privunit2, separated, duchi-l2 or duchi-linf")
    spec = MechanismSpec(mechanism, epsilon, calibration, norm_bound, dict(options or {})).validated()
    forced = check_epsilon(spec.epsilon, force=force)
    batch = check_count(batch, "--batch")
    epochs = check_count(epochs, "--epochs")
    if not (isinstance(radius, (int, float)) and math.isfinite(radius) and radius > 0):
        raise UsageError(f"--radius must be a finite number > 0, got {radius!r}")
    if eta0 is not None and not (math.isfinite(eta0) and eta0 > 0):
        raise UsageError(f"--eta0 must be a finite number > 0, got {eta0!r}")
    if beta is not None and not (0.0 <= beta <= 1.0):
        raise UsageError(f"--beta must be in [0, 1] (the theory wants (1/2, 1)), got {beta!r}")
    if holdout is not None and not (0.0 < holdout < 1.0):
        raise UsageError(f"--holdout must be a fraction in (0, 1), got {holdout!r}")
    if holdout is not None and test is not None:
        raise UsageError("give either --test FILE or --holdout FRACTION, not both")
    if max_budget is not None and ledger is None:
        raise UsageError("--max-budget needs the privacy-budget ledger (it counts what each input has spent)")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise UsageError("--seed must be a non-negative integer")
    if isinstance(memory, bool) or not isinstance(memory, int) or memory < 2**20:
        raise UsageError(f"--memory must be at least 1 MB, got {memory!r} bytes")
    path = Path(data)
    target = Path(output) if output is not None else None
    if target is not None:
        _check_output(target, overwrite, path)

    root = np.random.SeedSequence(seed)
    source = _Source(path, label, column, columns, holdout or 0.0, root, memory, intercept)
    arrow_type = _label_type(path, label, source)
    _check_label_type(arrow_type, loss_cls, label, str(path))
    labels = _Labels(loss_cls, label)
    given = None if classes is None else _parse_classes(classes, arrow_type, label)
    if given is not None:
        labels.set_classes(given, arrow_type)

    state, fingerprint = _first_pass(source, labels, from_data=loss_cls.classification and given is None,
                                     fingerprinted=ledger is not None, memory=memory)
    if state.rows == 0:
        raise DataError(f"{path}: no rows to train on")
    if state.train_rows == 0:
        raise DataError(f"{path}: the holdout took every one of the {state.rows} rows; use a smaller --holdout")
    layout = source.layout
    features = _feature_names(layout, intercept)
    from_data = False
    if loss_cls.classification:
        if given is None:
            found = sorted(state.seen)
            labels.set_classes(found, arrow_type)
            from_data = True
        assert labels.classes is not None
        k = len(labels.classes)
        if loss_cls.classes_needed == 2 and k != 2:
            raise DataError(f"{path}: --loss {loss} takes exactly two classes, the label column {label!r} has {k} "
                            f"({', '.join(repr(c) for c in labels.classes[:10])}); use --loss softmax for more")
        if k < 2:
            raise DataError(f"{path}: the label column {label!r} has one class only ({labels.classes[0]!r}); "
                            "a classifier needs two or more")
    model_loss = make_loss(loss, len(features), len(labels.classes) if labels.classes else 0)
    test_rows = _test_rows(Path(test), source, labels, model_loss, intercept) if test is not None else None
    p = model_loss.n_params
    mech = spec.calibrate(p)
    mech.describe()  # UsageError now if a number would not be finite
    rule = default_step_rule(geometry, mech, radius, spec.epsilon, eta0, beta)
    notices: list[str] = [forced] if forced else []

    digest: str | None = None
    if ledger is not None and fingerprint is not None:
        digest = fingerprint.hexdigest()
        # refused early, before training, when the ledger already says so; the release's own check is
        # its reservation (ldpcli.release.commit), under the ledger's lock, which also gives it its tag
        ledger.check(digest, epochs * mech.epsilon_exact, max_budget=max_budget, input_label=str(path))

    # Training.
    rng = _generator(root, _TRAINING)
    private = ITERATES[geometry](p, radius)
    twin: Iterate | None = ITERATES[geometry](p, radius) if baseline else None
    window_rows = max(batch, memory // (2 * 8 * (len(features) + 1)))
    if on_start is not None:
        on_start(state.train_rows * epochs)
    clipped = 0
    cached = _cached_training(state, labels, model_loss, intercept, str(path)) if state.in_memory else None
    started = time.perf_counter()
    for _ in range(epochs):
        windows = [cached] if cached is not None else _windows(source, labels, model_loss, intercept, window_rows)
        for X, t in windows:
            clipped += sgd_pass(model_loss, mech, private, twin, X, t, batch, rule, rng, on_rows)
    train_seconds = time.perf_counter() - started

    # The non-private comparisons (for the operator only).
    minimizer: Minimizer | None = None
    minimizer_note: str | None = None
    if not model_loss.smooth:
        minimizer_note = f"θ̂ not computed: the {loss} loss is not differentiable"
    elif cached is None:
        minimizer_note = "θ̂ not computed: the training rows do not fit in --memory"
    else:
        minimizer = empirical_minimizer(model_loss, cached[0], cached[1], geometry, radius)
    models = {"private": private.average}
    if twin is not None:
        models["baseline"] = twin.average
    if minimizer is not None:
        models["minimizer"] = minimizer.theta
    evaluated_on: str | None = None
    evaluation_rows = 0
    metrics: dict[str, Metrics] = {}
    if holdout:
        evaluated_on = f"holdout ({holdout:g} of the rows)"
        if state.holdout_rows:
            rows_iter = (_cached_holdout(state, labels, model_loss, intercept, str(path)) if state.in_memory
                         else _holdout_batches(source, labels, model_loss, intercept))
            evaluation_rows, metrics = _evaluate(model_loss, models, rows_iter)
    elif test_rows is not None:
        evaluated_on = f"test file {test}"
        evaluation_rows, metrics = _evaluate(model_loss, models, test_rows())

    result = TrainResult(
        loss=loss, label=label, classes=labels.classes, classes_from_data=from_data, features=features,
        intercept=intercept, theta=private.average.copy(), mechanism=mech, epochs=epochs, batch=batch,
        steps=private.steps, rule=rule, geometry=geometry, radius=float(radius), rows=state.rows,
        train_rows=state.train_rows, holdout_rows=state.holdout_rows, clipped=clipped, seconds=train_seconds,
        reproducible=seed is not None, in_memory=state.in_memory, evaluated_on=evaluated_on,
        evaluation_rows=evaluation_rows, metrics=metrics, baseline=None if twin is None else twin.average.copy(),
        minimizer=minimizer, minimizer_note=minimizer_note, output=target,
        sidecar=None, notices=tuple(notices),
    )
    return _publish(result, path, target, overwrite, ledger, digest, fingerprint, layout, max_budget)


def _first_pass(source: _Source, labels: _Labels, *, from_data: bool, fingerprinted: bool,
                memory: int) -> tuple[_Pass, InputFingerprint | None]:
    """Read the file once: check every row and label, collect the label values (``from_data``),
    count the training and holdout rows, fingerprint the features for the ledger, and keep the
    batches while they fit in half of ``memory``."""
    where = str(source.path)
    state = _Pass()
    fingerprint: InputFingerprint | None = None
    for values, column_values, mask, first_row in source.batches():
        if fingerprint is None and fingerprinted:
            fingerprint = InputFingerprint(values.shape[1])
        if fingerprint is not None:
            fingerprint.update(values)
        if from_data:
            state.seen.update(v for v in column_values.unique().to_pylist() if v is not None)
            if column_values.null_count:
                labels.codes(column_values, first_row, where)  # names the missing label's row
        else:
            labels.codes(column_values, first_row, where)
        state.rows += values.shape[0]
        state.holdout_rows += int(mask.sum())
        state.train_rows += int((~mask).sum())
        state.cached_bytes += values.nbytes
        if state.in_memory and state.cached_bytes <= memory // 2:
            state.cache_x.append(values)
            state.cache_labels.append(column_values)
            state.cache_holdout.append(mask)
        else:
            state.in_memory = False
            state.cache_x, state.cache_labels, state.cache_holdout = [], [], []
    return state, fingerprint


def _test_rows(test: Path, train_source: _Source, labels: _Labels, loss: Loss,
               intercept: bool) -> Callable[[], Iterator[tuple[np.ndarray, np.ndarray]]]:
    """The test file's rows, checked now (same feature layout, a label of the training data's type) and
    read when the returned function is called."""
    source = _Source(test, labels.label, None, None, 0.0, train_source.root, train_source.memory, intercept,
                     layout=train_source.layout)
    arrow_type = _label_type(test, labels.label, source)
    _check_label_type(arrow_type, labels.loss, labels.label, str(test))
    test_labels = _Labels(labels.loss, labels.label)
    if labels.classes is not None:
        test_labels.set_classes(labels.classes, arrow_type, str(test))

    def rows() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for values, column, _, first in source.batches():
            yield _augment(values, intercept), loss.targets(test_labels.codes(column, first, str(test)))

    return rows


def _check_output(target: Path, overwrite: bool, source: Path) -> None:
    from ldpcli.release.sidecar import sidecar_path

    if target.suffix.lower() not in (".json", ".npz"):
        raise UsageError(f"{target}: save the model as .json or .npz")
    if source.exists() and target.exists() and source.resolve() == target.resolve():
        raise UsageError(f"{target}: the model would overwrite the data; choose another -o")
    for path in (target, sidecar_path(target)):
        if path.exists() and not overwrite:
            raise UsageError(f"{path} already exists; pass --overwrite to replace it")


def _cached_training(state: _Pass, labels: _Labels, loss: Loss, intercept: bool, where: str) -> tuple[np.ndarray, np.ndarray]:
    """The kept training rows as one (n, d) array and their targets."""
    X = np.concatenate([values[~mask] for values, mask in zip(state.cache_x, state.cache_holdout)])
    codes = [labels.codes(column, 0, where)[~mask] for column, mask in zip(state.cache_labels, state.cache_holdout)]
    return _augment(X, intercept), loss.targets(np.concatenate(codes))


def _cached_holdout(state: _Pass, labels: _Labels, loss: Loss, intercept: bool,
                    where: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    for values, column, mask in zip(state.cache_x, state.cache_labels, state.cache_holdout):
        if mask.any():
            yield _augment(values[mask], intercept), loss.targets(labels.codes(column, 0, where)[mask])


def _windows(source: _Source, labels: _Labels, loss: Loss, intercept: bool,
             window_rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The training rows in file order, in windows of about ``window_rows`` rows (a file too large to keep)."""
    held_x: list[np.ndarray] = []
    held_t: list[np.ndarray] = []
    count = 0
    for values, column, mask, first in source.batches():
        keep = ~mask
        held_x.append(values[keep])
        held_t.append(loss.targets(labels.codes(column, first, str(source.path)))[keep])
        count += int(keep.sum())
        if count >= window_rows:
            yield _augment(np.concatenate(held_x), intercept), np.concatenate(held_t)
            held_x, held_t, count = [], [], 0
    if count:
        yield _augment(np.concatenate(held_x), intercept), np.concatenate(held_t)


def _holdout_batches(source: _Source, labels: _Labels, loss: Loss,
                     intercept: bool) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    for values, column, mask, first in source.batches():
        if mask.any():
            targets = loss.targets(labels.codes(column, first, str(source.path)))
            yield _augment(values[mask], intercept), targets[mask]


def _evaluate(loss: Loss, models: Mapping[str, np.ndarray],
              batches: Iterator[tuple[np.ndarray, np.ndarray]]) -> tuple[int, dict[str, Metrics]]:
    """Mean loss (and accuracy) of each model over the rows of ``batches``, read once."""
    sums = {name: [0.0, 0] for name in models}
    rows = 0
    for X, t in batches:
        rows += len(t)
        for name, theta in models.items():
            sums[name][0] += float(loss.losses(theta, X, t).sum())
            if loss.classification:
                sums[name][1] += int((loss.predict(theta, X) == loss.classes_of(t)).sum())
    if rows == 0:
        return 0, {}
    return rows, {name: Metrics(total / rows, correct / rows if loss.classification else None)
                  for name, (total, correct) in sums.items()}


# --- writing ----------------------------------------------------------------------------------------


def model_bytes(result: TrainResult, target: Path) -> bytes:
    """The model file: JSON (``model_dict``) or NumPy ``.npz`` (the same, arrays as arrays)."""
    model = result.model_dict()
    if target.suffix.lower() == ".json":
        return (json.dumps(model, indent=2, allow_nan=False) + "\n").encode()
    buffer = io.BytesIO()
    arrays: dict[str, Any] = {
        "coefficients": np.asarray(model["coefficients"], dtype=np.float64),
        "features": np.asarray(model["features"], dtype=str),
        "meta": np.asarray(json.dumps({key: model[key] for key in ("format", "version", "loss", "label", "geometry",
                                                                     "radius", "predict")})),
    }
    if model["intercept"] is not None:
        arrays["intercept"] = np.asarray(model["intercept"], dtype=np.float64)
    if model["classes"] is not None:
        arrays["classes"] = np.asarray(model["classes"])
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def model_sidecar(result: TrainResult, target: Path, sha256: str, *, created: str | None = None) -> dict[str, Any]:
    """The model's sidecar: public parameters and counts only (never the data's statistics)."""

    from ldpcli.release.sidecar import REPRODUCIBLE_NOTE, utc_now

    release: dict[str, Any] = {
        "created": created if created is not None else utc_now(), "reproducible": result.reproducible,
    }
    if result.reproducible:
        release["note"] = REPRODUCIBLE_NOTE
    if result.input_tag is not None:
        release["input_tag"] = result.input_tag
    return {
        "format": MODEL_SIDECAR_FORMAT, "version": MODEL_VERSION, "tool": {"name": "ldp", "version": __version__},
        "privacy": result.privacy(),
        "mechanism": result.mechanism.describe(),
        "training": result.training(),
        "rate": result.rate(),
        "model": {"file": target.name, "sha256": sha256, "format": target.suffix.lower().lstrip(".")},
        "references": [
            "Duchi, Jordan, Wainwright 2014, Privacy Aware Learning, Sec. 3 and App. C (private SGD and mirror descent)",
            "Bhowmick et al. 2018, Sec. 3.2, 4.4 and 5.1 (one-pass private SGD, averaging, step sizes)",
        ],
        "release": release,
    }


def _publish(result: TrainResult, source: Path, target: Path | None, overwrite: bool, ledger: Ledger | None,
             digest: str | None, fingerprint: InputFingerprint | None, layout: Any,
             max_budget: float | None) -> TrainResult:
    """Commit the release (:func:`ldpcli.release.commit.commit_release`): reserve it in the ledger, publish
    the model and its sidecar together (when ``target``), confirm. Returns the result with its
    input tag and sidecar."""
    from dataclasses import replace

    from ldpcli.io.atomic import finished_bytes
    from ldpcli.io.publication import Publication
    from ldpcli.release.commit import Charge, commit_release
    from ldpcli.release.sidecar import sidecar_path, sidecar_text

    side = sidecar_path(target) if target is not None else None
    charges = []
    if ledger is not None and digest is not None and fingerprint is not None:
        mech = result.mechanism
        charges.append(Charge(LedgerEntry(
            fingerprint=digest, input=str(source.resolve()), rows=fingerprint.rows, d=fingerprint.d,
            columns=list(layout.columns), output=str(target.resolve()) if target is not None else "(printed)",
            mechanism=mech.name, epsilon=result.epochs * mech.epsilon, epsilon_exact=result.epsilon_per_row,
            delta=result.delta_per_row if mech.delta_exact > 0 else None, created="", tag="",
            reproducible=result.reproducible,
        ), str(source)))
    published = [replace(result, sidecar=side)]
    publication = Publication(overwrite=overwrite)
    with contextlib.ExitStack() as files:

        def finish(tags: Sequence[str | None], created: str) -> None:
            published[0] = tagged = replace(published[0], input_tag=next(iter(tags), None))
            if target is not None and side is not None:
                payload = model_bytes(tagged, target)
                content = model_sidecar(tagged, target, hashlib.sha256(payload).hexdigest(), created=created)
                publication.add_file(files.enter_context(finished_bytes(target, payload)))
                publication.add_file(files.enter_context(finished_bytes(side, sidecar_text(content).encode())))

        reservations = commit_release(publication, finish, ledger=ledger, charges=charges, max_budget=max_budget)
    notices = tuple(r.notice for r in reservations if r.notice is not None)
    return replace(published[0], notices=(*published[0].notices, *notices))
