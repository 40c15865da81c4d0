"""Locally private learning from a dataset: the library call behind ``ldp train``.

Each row (features x, label y) is one person. In the one-pass protocol (Duchi, Jordan, Wainwright
2014, Sec. 3; Bhowmick et al. 2018, Sec. 3.2 and 4.4) every training row is used exactly once per
epoch: at its step the row's gradient ∇ℓ(θ_k; x, y) at the server's current model is clipped to the
public bound L and privatized by a registered vector mechanism, and the server moves with the
average of the step's releases (:mod:`ldpcli.learn._sgd`). Each use costs the row ε; ``epochs``
uses cost it epochs·ε by basic composition, which the result, the sidecar and the budget ledger
state. The model is the averaged iterate, post-processing of the releases.

Reading: the file is read batch by batch (:func:`ldpcli.io.open_vectors`, the label as a kept
column). A first pass checks every row and label, finds the classes when they are not given,
counts the rows, splits off the holdout and fingerprints the features for the ledger; when the
training rows fit in ``memory`` they are kept for the epochs (and the empirical minimiser θ̂ is
computed), otherwise each epoch reads the file again. Rows are visited in a random order within each
window of ``memory`` (the whole training set when it fits), so a file sorted by label does not
become a sequence of one-class steps.

With ``training.central`` (:class:`~ldpcli.learn._central.CentralOptions`) the server side of
Bhowmick et al. (2018), eq. (13), runs on top (:mod:`ldpcli.learn._central`): Poisson-sampled steps,
each release projected onto a ball of radius ρ and Gaussian noise added to the step's sum, for a
central (ε, δ) accounted by dp-accounting. Without it nothing changes: the same seed gives the same
model, bit for bit.

Nothing here prints: :func:`train` returns a :class:`TrainResult`, writes the model and its sidecar
when given ``output``, and records the release in the ledger.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ldpcli.errors import DataError, UsageError, counted, require_extras
from ldpcli.learn._central import CentralLayer, CentralOptions, central_steps, most_uses, poisson_schedule
from ldpcli.learn._labels import Labels, check_label_type, parse_classes
from ldpcli.learn._losses import LOSSES, Loss, make_loss
from ldpcli.learn._model import Metrics, TrainResult, publish_model
from ldpcli.learn._reference import REFERENCE_SECONDS, Minimizer, empirical_minimizer
from ldpcli.learn._sgd import DEFAULT_MECHANISM, GEOMETRIES, ITERATES, Iterate, default_step_rule, sgd_pass
from ldpcli.mechanisms._base import MechanismSpec, check_count, get_mechanism
from ldpcli.mechanisms._composition import release_cost
from ldpcli.release._ledger import InputFingerprint, Ledger
from ldpcli.release._options import ReleaseOptions, mechanism_spec
from ldpcli.release._randomness import check_rng, keyed_generator, root_seed
from ldpcli.release._safety import check_epsilon

PathLike = str | os.PathLike[str]

INTERCEPT = "(intercept)"
#: The release options a training run has no use for: it releases gradients, not rows (no copies,
#: dtype, clipping policy, risk section or kept columns), reads its label as the one kept column,
#: and runs on one thread with no batch size but its own.
_NOT_FOR_TRAINING = (
    "copies", "dtype", "compression", "fail_on_clip", "skip_invalid", "columns.keep", "columns.keep_unsafe", "columns.no_header", "risk.k", "risk.rho0",
    "risk.a", "resources.threads", "resources.batch_rows", "warnings", "input_label", "output_label",
    "shuffle", "shuffle_delta", "report_bits",
)


@dataclass(frozen=True)
class TrainingOptions:
    """How the model is trained and evaluated: the choices of :func:`train` beyond the release's.

    Parameters
    ----------
    loss : str
        ``logistic`` or ``hinge`` (two classes), ``softmax`` (two or more), ``squared`` (a numeric label).
    geometry : str
        ``l2``: projected SGD on ‖θ‖₂ ≤ ``radius``; ``l1``: entropic mirror descent on ‖θ‖₁ ≤ ``radius``.
    radius : float
        The parameter ball's radius R.
    eta0, beta : float or None
        The step rule η_k = η₀k^{−β}. Defaults (:func:`ldpcli.learn._sgd.default_step_rule`): for
        ``l2``, β = 0.51 and η₀ = 1/(G·M), M² the mechanism's bound on the second moment of one
        step's mean release and G the gradient bound (Bhowmick et al. Sec. 5.1's √(ε/d) written for
        the mechanism's actual noise); for ``l1``, the entropic step.
    batch : int
        Rows per step.
    epochs : int
        Uses of every row; each row's ε is epochs·ε (:func:`ldpcli.mechanisms._composition.release_cost`).
    intercept : bool
        Fit an intercept (a constant feature 1).
    classes : sequence or None
        The public class list (default: the label values found, with a note that they came from the data).
    baseline : bool
        Also run non-private SGD on the same pass (for the operator; never written).
    test : path or None
        Evaluate on this file (the same columns).
    holdout : float or None
        Evaluate on this fraction of the rows, drawn at random and never trained on.
    central : CentralOptions or None
        The central layer (Bhowmick et al. 2018, eq. (13)): Poisson sampling at rate q for
        T = ⌈epochs/q⌉ steps (``batch`` stays 1), projection of each release onto the ball of radius
        ρ and Gaussian noise, with a central (ε, δ). None: the local protocol alone.
    reference : bool
        Also compute θ̂, the exact minimiser of the training loss over the same ball
        (:mod:`ldpcli.learn._reference`), for the distance ‖θ̄ − θ̂‖ and θ̂'s evaluation: a statistic
        of the raw rows without privacy, for the operator only, never written. False skips it.
    reference_seconds : float or None
        The most wall-clock seconds θ̂ may take (None: no limit); past them it stops with a note
        saying how far from the minimum it is.
    """

    loss: str = "logistic"
    geometry: str = "l2"
    radius: float = 10.0
    eta0: float | None = None
    beta: float | None = None
    batch: int = 1
    epochs: int = 1
    intercept: bool = True
    classes: Sequence[Any] | None = None
    baseline: bool = False
    test: PathLike | None = None
    holdout: float | None = None
    central: CentralOptions | None = None
    reference: bool = True
    reference_seconds: float | None = REFERENCE_SECONDS


# --- reading --------------------------------------------------------------------------------------


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


#: The run's streams of randomness: the training (row order and the mechanism's noise), the holdout
#: split (drawn again, identically, on every pass over the file), and the central layer's Poisson
#: samples and Gaussian noise. All but the holdout split (on which no claim rests: PCG64) come from the
#: run's ``rng``: ldp's ChaCha20 stream unless the caller opts out (:data:`ldpcli.release._randomness.DEFAULT_RNG`).
_TRAINING, _HOLDOUT, _SAMPLING, _CENTRAL_NOISE = 0, 1, 2, 3


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
            reader = open_vectors(self.path, keep=[self.label], keep_unsafe=True, offer_keep=False, offer_no_header=False,
                                  memory_bytes=max(2**20, self.memory // 8), **spec)
        except UsageError as exc:
            text = exc.template
            if f"no column named {self.label!r} to keep" in text:
                raise UsageError(text.replace(f"no column named {self.label!r} to keep",
                                              f"no label column {self.label!r} (`label`)")) from None
            if self.layout is None and self.column is None and self.columns is None and "`columns`" in text:
                raise UsageError(f"{text} For ldp train the label is never a feature: name the features with "
                                 "`columns` or `column`.") from None
            raise
        if self.layout is not None and reader.layout.d != self.layout.d:
            reader.close()
            raise DataError(f"{self.path}: its vectors have {counted(reader.layout.d, 'feature')}, the model's training data "
                            f"{self.layout.d} ({', '.join(self.layout.columns)}); evaluate on a file with the same "
                            "feature columns")
        return reader

    def batches(self) -> Iterator[tuple[np.ndarray, Any, np.ndarray, int]]:
        """(features as read, label column, holdout mask, first row) per batch, in file order."""
        split = keyed_generator(self.root, _HOLDOUT)
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
    output: PathLike | None = None,
    *,
    label: str,
    mechanism: MechanismSpec | str = DEFAULT_MECHANISM,
    epsilon: float | None = None,
    norm_bound: float | None = None,
    training: TrainingOptions = TrainingOptions(),
    options: ReleaseOptions = ReleaseOptions(),
    on_start: Callable[[int | None], None] | None = None,
    on_rows: Callable[[int], None] | None = None,
    on_reference: Callable[[str], None] | None = None,
) -> TrainResult:
    """Train a model on ``data`` by locally private stochastic gradient (or mirror) descent.

    Parameters
    ----------
    data : path
        The training file; each row (features, label) is one person.
    output : path or None
        Where the model goes (.json or .npz), with its sidecar ``OUTPUT.ldp.json``, atomically.
        None: nothing is written (the release is still recorded in the ledger once trained).
    label : str
        The label column.
    mechanism : MechanismSpec or str
        Any registered vector mechanism (a spec, or a name at ``epsilon`` and ``norm_bound``),
        calibrated at ε per use for gradients of p parameters clipped to the bound (the ℓ2 ball,
        or the ℓ∞ box of the box mechanisms). Default: :data:`ldpcli.learn._sgd.DEFAULT_MECHANISM` (``separated``).
    epsilon : float or None
        ε per use (with a mechanism name only).
    norm_bound : float or None
        The public bound L on each gradient (with a mechanism name only; default 1).
    training : TrainingOptions
        The loss, geometry, step rule, batch, epochs, classes and evaluation.
    options : ReleaseOptions
        ``columns.column``/``columns.columns`` (the features), ``seed``, ``force``, ``overwrite``,
        ``resources.memory`` and ``budget`` (the ledger checks the input's budget before training and
        records the release, epochs·ε, once it is written); the others are refused.
    on_start, on_rows : callable or None
        Progress: the number of row uses to come, and each step's rows.
    on_reference : callable or None
        Progress of θ̂ (``training.reference``): a short line at each of its iterations.

    Returns
    -------
    TrainResult
        The private model, its privacy, and (for the operator) the evaluation and comparisons.

    UsageError/DataError with one-line messages; on failure nothing is left behind.
    """
    options.refuse(_NOT_FOR_TRAINING, "train")
    rng_name = check_rng(options.rng)
    loss, geometry, radius, eta0, beta = training.loss, training.geometry, training.radius, training.eta0, training.beta
    batch, epochs, intercept, classes = training.batch, training.epochs, training.intercept, training.classes
    baseline, test, holdout = training.baseline, training.test, training.holdout
    column, columns, seed, memory = options.columns.column, options.columns.columns, options.seed, options.resources.memory
    ledger, max_budget, overwrite = options.budget.ledger, options.budget.max_budget, options.overwrite
    loss_cls = LOSSES.get(loss)
    if loss_cls is None:
        raise UsageError(f"`loss`: unknown loss {loss!r}; choose one of: {', '.join(LOSSES)}")
    if geometry not in GEOMETRIES:
        raise UsageError(f"`geometry`: must be one of {', '.join(GEOMETRIES)}, got {geometry!r}")
    chosen = mechanism_spec(mechanism, epsilon, norm_bound)
    mech_cls = get_mechanism(chosen.name)
    if not mech_cls.vector or not mech_cls.compared:
        raise UsageError(f"`mechanism` {chosen.name}: gradients need a vector mechanism calibrated from (p, ε, L) alone; "
                         "choose e.g. privunit2, separated, duchi-l2 or duchi-linf")
    spec = chosen.validated()
    forced = check_epsilon(spec.epsilon, force=options.force)
    batch = check_count(batch, "batch")
    epochs = check_count(epochs, "epochs")
    if not (isinstance(radius, (int, float)) and math.isfinite(radius) and radius > 0):
        raise UsageError(f"`radius` must be a finite number > 0, got {radius!r}")
    if eta0 is not None and not (math.isfinite(eta0) and eta0 > 0):
        raise UsageError(f"`eta0` must be a finite number > 0, got {eta0!r}")
    if beta is not None and not (0.0 <= beta <= 1.0):
        raise UsageError(f"`beta` must be in [0, 1] (the theory wants (1/2, 1)), got {beta!r}")
    seconds = training.reference_seconds
    if seconds is not None and not (isinstance(seconds, (int, float)) and seconds > 0):
        raise UsageError(f"`reference_seconds` must be a number of seconds > 0, got {seconds!r}")
    if holdout is not None and not (0.0 < holdout < 1.0):
        raise UsageError(f"`holdout` must be a fraction in (0, 1), got {holdout!r}")
    if holdout is not None and test is not None:
        raise UsageError("give either `test` FILE or `holdout` FRACTION, not both")
    if max_budget is not None and ledger is None:
        raise UsageError("`max_budget` needs the privacy-budget ledger (it counts what each input has spent)")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise UsageError("`seed` must be a non-negative integer")
    if isinstance(memory, bool) or not isinstance(memory, int) or memory < 2**20:
        raise UsageError(f"`memory` must be at least 1 MB, got {memory!r} bytes")
    layer = _central_layer(training.central, batch, epochs)
    path = Path(data)
    target = Path(output) if output is not None else None
    if target is not None:
        _check_output(target, overwrite, path, ledger)

    root = root_seed(seed)
    source = _Source(path, label, column, columns, holdout or 0.0, root, memory, intercept)
    arrow_type = _label_type(path, label, source)
    check_label_type(arrow_type, loss_cls, label, str(path))
    labels = Labels(loss_cls, label)
    given = None if classes is None else parse_classes(classes, arrow_type, label)
    if given is not None:
        labels.set_classes(given, arrow_type)

    state, fingerprint = _first_pass(source, labels, from_data=loss_cls.classification and given is None,
                                     fingerprinted=ledger is not None, memory=memory)
    if state.rows == 0:
        raise DataError(f"{path}: no rows to train on")
    if state.train_rows == 0:
        took = "the one row" if state.rows == 1 else f"every one of the {state.rows} rows"
        raise DataError(f"{path}: the holdout took {took}; use a smaller `holdout`")
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
            raise DataError(f"{path}: `loss` {loss} takes exactly two classes, the label column {label!r} has {k} "
                            f"({', '.join(repr(c) for c in labels.classes[:10])}); use `loss` softmax for more")
        if k < 2:
            raise DataError(f"{path}: the label column {label!r} has one class only ({labels.classes[0]!r}); "
                            "a classifier needs two or more")
    model_loss = make_loss(loss, len(features), len(labels.classes) if labels.classes else 0)
    test_rows = _test_rows(Path(test), source, labels, model_loss, intercept) if test is not None else None
    p = model_loss.n_params
    mech = spec.calibrate(p)
    mech.describe()  # UsageError now if a number would not be finite
    notices: list[str] = [forced] if forced else []
    schedule: list[np.ndarray] | None = None
    uses = epochs
    if layer is None:
        rule = default_step_rule(geometry, mech, radius, batch=batch, eta0=eta0, beta=beta)
    else:
        if not state.in_memory:
            raise UsageError(f"{path}: the central layer samples rows at random each step and needs the training rows "
                             "in memory; raise `memory`")
        expected = layer.sampling_rate * state.train_rows
        rule = default_step_rule(geometry, mech, radius, batch=max(1, round(expected)), eta0=eta0, beta=beta,
                                 noise_variance=p * layer.noise_std(state.train_rows) ** 2)
        # the schedule depends on no row's data: drawn first, it fixes each row's uses before any release
        schedule = poisson_schedule(state.train_rows, layer.sampling_rate, layer.steps,
                                     keyed_generator(root, _SAMPLING, rng=rng_name))
        uses = max(1, most_uses(schedule, state.train_rows))
        if layer.account.delta >= 1.0 / state.train_rows:
            notices.append(f"`central_delta` {layer.account.delta:g} is not below 1/N = 1/{state.train_rows}: "
                           "a mechanism that publishes one row outright can meet such a δ; choose δ well below 1/N")

    digest: str | None = None
    if ledger is not None and fingerprint is not None:
        digest = fingerprint.hexdigest()
        # refused early, before training, when the ledger already says so; the release's own check is
        # its reservation (ldpcli.release._commit), under the ledger's lock, which also gives it its tag
        ledger.check(digest, release_cost(mech, epochs=uses).epsilon_exact, max_budget=max_budget,
                     input_label=str(path))

    # Training.
    rng = keyed_generator(root, _TRAINING, rng=rng_name)
    private = ITERATES[geometry](p, radius)
    twin: Iterate | None = ITERATES[geometry](p, radius) if baseline else None
    window_rows = max(batch, memory // (2 * 8 * (len(features) + 1)))
    gradients = state.train_rows * epochs if schedule is None else sum(len(rows) for rows in schedule)
    if on_start is not None:
        on_start(gradients)
    clipped = 0
    cached = _cached_training(state, labels, model_loss, intercept, str(path)) if state.in_memory else None
    started = time.perf_counter()
    if layer is not None and schedule is not None and cached is not None:
        clipped = central_steps(model_loss, mech, layer, private, twin, cached[0], cached[1], schedule, rule, rng,
                                keyed_generator(root, _CENTRAL_NOISE, rng=rng_name), on_rows)
    else:
        for _ in range(epochs):
            windows = [cached] if cached is not None else _windows(source, labels, model_loss, intercept, window_rows)
            for X, t in windows:
                clipped += sgd_pass(model_loss, mech, private, twin, X, t, batch, rule, rng, on_rows)
    train_seconds = time.perf_counter() - started

    # The non-private comparisons (for the operator only).
    minimizer: Minimizer | None = None
    minimizer_note: str | None = None
    if not training.reference:
        minimizer_note = "θ̂ not computed (`reference=False`)"
    elif not model_loss.smooth:
        minimizer_note = f"θ̂ not computed: the {loss} loss is not differentiable"
    elif cached is None:
        minimizer_note = "θ̂ not computed: the training rows do not fit in `memory`"
    else:
        minimizer = empirical_minimizer(model_loss, cached[0], cached[1], geometry, radius, seconds=seconds,
                                        on_progress=on_reference)
        minimizer_note = minimizer.stop_note(seconds)
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
        intercept=intercept, theta=private.average.copy(), mechanism=mech, epochs=epochs, uses_per_row=uses, batch=batch,
        steps=private.steps, rule=rule, geometry=geometry, radius=float(radius), rows=state.rows,
        train_rows=state.train_rows, holdout_rows=state.holdout_rows, clipped=clipped, gradients=gradients,
        seconds=train_seconds,
        reproducible=seed is not None, in_memory=state.in_memory, evaluated_on=evaluated_on,
        evaluation_rows=evaluation_rows, metrics=metrics, baseline=None if twin is None else twin.average.copy(),
        minimizer=minimizer, minimizer_note=minimizer_note, output=target,
        sidecar=None, notices=tuple(notices), central=layer, rng=rng_name,
    )
    return publish_model(result, path, target, overwrite, ledger, digest, fingerprint, layout, max_budget)


def _central_layer(central: CentralOptions | None, batch: int, epochs: int) -> CentralLayer | None:
    """The central layer of a run of ``epochs`` (its T steps, z, and both accountants' ε), accounted
    before any data is read; None without ``central``."""
    if central is None:
        return None
    if batch != 1:
        raise UsageError("with `sampling_rate` each step's rows are a Poisson sample (q·N rows expected); leave `batch` "
                         "at 1")
    options = central.validated()
    # the accountant, named before reading the data (the samples and the noise are ldp's own ChaCha20 stream)
    require_extras("the central layer", [("dp-accounting", "dp_accounting", "central")])
    return options.layer(options.steps(epochs))


def _first_pass(source: _Source, labels: Labels, *, from_data: bool, fingerprinted: bool,
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


def _test_rows(test: Path, train_source: _Source, labels: Labels, loss: Loss,
               intercept: bool) -> Callable[[], Iterator[tuple[np.ndarray, np.ndarray]]]:
    """The test file's rows, checked now (same feature layout, a label of the training data's type) and
    read when the returned function is called."""
    source = _Source(test, labels.label, None, None, 0.0, train_source.root, train_source.memory, intercept,
                     layout=train_source.layout)
    arrow_type = _label_type(test, labels.label, source)
    check_label_type(arrow_type, labels.loss, labels.label, str(test))
    test_labels = Labels(labels.loss, labels.label)
    if labels.classes is not None:
        test_labels.set_classes(labels.classes, arrow_type, str(test))

    def rows() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for values, column, _, first in source.batches():
            yield _augment(values, intercept), loss.targets(test_labels.codes(column, first, str(test)))

    return rows


def _check_output(target: Path, overwrite: bool, source: Path, ledger: Ledger | None) -> None:
    """UsageError unless the model and its sidecar may be written at ``target`` (``overwrite``: only
    over a model ldp wrote, :func:`ldpcli.release._sidecar.check_replaceable`)."""
    from ldpcli.release._inputs import refuse_output_over_input
    from ldpcli.release._sidecar import check_replaceable, sidecar_path

    if target.suffix.lower() not in (".json", ".npz"):
        raise UsageError(f"{target}: save the model as .json or .npz")
    refuse_output_over_input(source, target, "model")
    for path in (target, sidecar_path(target)):
        if path.exists() and not overwrite:
            raise UsageError(f"{path} already exists; pass `overwrite=True` to replace it")
    if overwrite:
        check_replaceable(target, sidecar_path(target), ledger_path=ledger.path if ledger is not None else None)


def _cached_training(state: _Pass, labels: Labels, loss: Loss, intercept: bool, where: str) -> tuple[np.ndarray, np.ndarray]:
    """The kept training rows as one (n, d) array and their targets."""
    X = np.concatenate([values[~mask] for values, mask in zip(state.cache_x, state.cache_holdout)])
    codes = [labels.codes(column, 0, where)[~mask] for column, mask in zip(state.cache_labels, state.cache_holdout)]
    return _augment(X, intercept), loss.targets(np.concatenate(codes))


def _cached_holdout(state: _Pass, labels: Labels, loss: Loss, intercept: bool,
                    where: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    for values, column, mask in zip(state.cache_x, state.cache_labels, state.cache_holdout):
        if mask.any():
            yield _augment(values[mask], intercept), loss.targets(labels.codes(column, 0, where)[mask])


def _windows(source: _Source, labels: Labels, loss: Loss, intercept: bool,
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


def _holdout_batches(source: _Source, labels: Labels, loss: Loss,
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
