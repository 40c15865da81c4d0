"""The model a private training run made (:class:`TrainResult`): its privacy, its file and sidecar,
and publishing them.

The model is the averaged iterate of locally private SGD (:mod:`ldpcli.learn._sgd`), post-processing
of the privatized gradients, so what it costs each row is the cost of the releases: ``epochs`` uses
of one mechanism, by basic composition (:func:`ldpcli.mechanisms._composition.release_cost`). A run
with the central layer (:mod:`ldpcli.learn._central`) also carries its central (ε, δ), in the
sidecar's ``central`` section beside the local ``privacy``, and in its ledger entry (the same section, as
``central``: ``ldp budget`` composes it with the input's other central guarantees).
:func:`publish_model` commits it like every release (:class:`ldpcli.release._commit.Commit`):
reserved in the ledger, model and sidecar published together, confirmed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ldpcli._version import __version__
from ldpcli.errors import counted
from ldpcli.io._atomic import finished_bytes
from ldpcli.io._publication import Publication
from ldpcli.learn._central import CentralLayer
from ldpcli.learn._losses import Loss, make_loss
from ldpcli.learn._reference import Minimizer
from ldpcli.learn._sgd import DEFAULT_MECHANISM, StepRule, gradient_moment_bounds
from ldpcli.mechanisms._base import Mechanism
from ldpcli.mechanisms._composition import ReleaseCost, release_cost
from ldpcli.release._central_claim import CentralTrainingClaim
from ldpcli.release._commit import Commit
from ldpcli.release._ledger import InputFingerprint, Ledger
from ldpcli.release._ledger_file import LedgerEntry
from ldpcli.release._randomness import DEFAULT_RNG, randomness_record
from ldpcli.release._rowindex import Charge
from ldpcli.release._sidecar import REPRODUCIBLE_NOTE, check_replaceable, sidecar_path, sidecar_text, utc_now

MODEL_FORMAT = "ldp-model"
MODEL_SIDECAR_FORMAT = "ldp-model-release"
MODEL_VERSION = 1
#: What :meth:`to_dict` says of its entries computed from the raw rows (:data:`OWNER_ONLY`).
OWNER_ONLY_STATEMENT = ("computed from the raw training (and evaluation) rows without privacy: for the data owner "
                        "only, never written to the model file, its sidecar or the ledger")
#: The entries of :meth:`TrainResult.to_dict` that are statistics of the raw rows, not releases.
OWNER_ONLY = ("clipped_gradients", "evaluation", "baseline_distance", "minimizer", "minimizer_note")


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
    #: The most uses of any row: ``epochs``, or with the central layer's Poisson sampling the largest
    #: number of steps any row was sampled in.
    uses_per_row: int
    batch: int
    steps: int
    rule: StepRule
    geometry: str
    radius: float
    rows: int
    train_rows: int
    holdout_rows: int
    clipped: int
    #: The gradients computed (and privatized): rows × epochs, or the Poisson samples' sizes summed.
    gradients: int
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
    #: The generator of the run's noise, row order and samples (:data:`ldpcli.release._randomness.RNG_NAMES`).
    rng: str = DEFAULT_RNG
    #: The central layer, when the run had one.
    central: CentralLayer | None = None

    @property
    def outputs(self) -> int:
        return self.theta.size // len(self.features)

    @property
    def uses(self) -> int | None:
        """The most uses of any row under the central layer's Poisson sampling (:attr:`uses_per_row`); None
        without the layer, where every row is used exactly ``epochs`` times."""
        return None if self.central is None else self.uses_per_row

    @property
    def cost(self) -> ReleaseCost:
        """Each row's privacy loss over its uses, at most :attr:`uses_per_row` (basic composition,
        :func:`ldpcli.mechanisms._composition.release_cost`)."""
        return release_cost(self.mechanism, epochs=self.uses_per_row)

    @property
    def epsilon_per_row(self) -> float:
        """uses·ε_exact: each row's privacy loss over its uses (:attr:`cost`)."""
        return self.cost.epsilon_exact

    @property
    def delta_per_row(self) -> float:
        """uses·δ: each row's δ over its uses (:attr:`cost`)."""
        return self.cost.delta

    def _loss(self) -> Loss:
        return make_loss(self.loss, len(self.features), len(self.classes) if self.classes else 0)

    def distance(self, theta: np.ndarray, other: np.ndarray | None = None) -> float:
        """‖θ − θ̄‖ (or ‖θ − other‖) between canonical representatives (softmax: class means removed)."""
        loss = self._loss()
        gap = loss.canonical(self.theta if other is None else other) - loss.canonical(theta)
        return float(np.sqrt(gap @ gap))

    def clipping(self) -> tuple[str, bool] | None:
        """(the sentence about clipped gradients, whether it is loud), None when none was clipped.

        Loud above :data:`CLIP_ADVICE_FRACTION` of the gradients, with the public L that clips none for
        rows of a norm the owner knows (:meth:`ldpcli.learn._losses.Loss.gradient_bound`), never one
        computed from the data. The count itself is for the owner's terminal only.
        """
        if self.clipped == 0:
            return None
        total = max(self.gradients, self.clipped)
        share = self.clipped / total
        text = (f"{self.clipped} of {counted(total, 'gradient')} ({share:.1%}) {'was' if self.clipped == 1 else 'were'} "
                f"clipped to L = {self.mechanism.norm_bound:g}: the model follows the clipped gradients")
        private = "; this count is shown here only, never stored"
        if share <= CLIP_ADVICE_FRACTION:
            return text + " (a larger public L clips less but adds noise)" + private, False
        return text + ". " + _public_bound_advice(self._loss(), self.intercept) + private, True

    def privacy(self) -> dict[str, Any]:
        """The guarantee: ε per use, uses per row, ε per row, and the statement."""
        mech = self.mechanism
        statement = (
            f"Each training row's gradient was clipped to the public bound L = {mech.norm_bound:g} "
            f"({mech.domain}) and released through {mech.name} at ε = {mech.epsilon_exact:.6g} per use"
            + (f", δ = {mech.delta_exact:g}" if mech.delta_exact > 0 else "")
            + (f"; each row was used {counted(self.epochs, 'time')}" if self.uses is None else
               f"; each row was used at most {counted(self.uses, 'time')} (Poisson sampling: a row's uses are random, "
               "and this is the largest over all rows)")
            + ", so by basic composition this model is "
            f"{self.epsilon_per_row:.6g}-LDP" + (f" (δ = {self.delta_per_row:g})" if mech.delta_exact > 0 else "")
            + " for each row (one row = one person), against the server and anyone who sees a release. The model is "
            "post-processing of the released gradients"
            + (f"; {self.holdout_rows} holdout rows were not used" if self.holdout_rows else "")
            + "."
        )
        if self.classes_from_data:
            statement += (" The class list was read from the data without privatization and is not covered: "
                          "pass `classes` to make it a public choice.")
        return {
            "model": "local", "epsilon_per_use": mech.epsilon_exact, "delta_per_use": mech.delta_exact,
            "uses_per_row": self.uses_per_row, "epsilon_per_row": self.epsilon_per_row, "delta_per_row": self.delta_per_row,
            "composition": "basic: the ε of a row's uses add up", "statement": statement,
        }

    def central_section(self) -> CentralTrainingClaim | None:
        """The central layer's claim (:meth:`ldpcli.learn._central.CentralLayer.section`), None without one; its
        ``to_dict()`` is the ``central`` section of the sidecar, the JSON output and the ledger entry."""
        if self.central is None:
            return None
        section = self.central.section(self.train_rows, seeded=self.reproducible, rng=self.rng)
        if self.classes_from_data:
            section = replace(section, statement=section.statement + (
                " The class list was read from the data without noise and is not covered: pass `classes` to make it "
                "a public choice."))
        return section

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
                         f"T = {counted(self.steps, 'step')}: {form} = {value:.4g}, up to an unstated universal constant",
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
        """Everything for the JSON output: the model, its privacy, training and (for the operator) evaluation."""
        out: dict[str, Any] = {
            "model": self.model_dict(),
            "privacy": self.privacy(),
            "central": None if (central := self.central_section()) is None else central.to_dict(),
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
                "gap": self.minimizer.gap, "distance_bound": self.minimizer.distance_bound,
                "iterations": self.minimizer.iterations, "stopped": self.minimizer.stopped,
            },
            "minimizer_note": self.minimizer_note,
            "reproducible": self.reproducible,
            "output": None if self.output is None else str(self.output),
            "sidecar": None if self.sidecar is None else str(self.sidecar),
            "owner_only": {"entries": list(OWNER_ONLY), "statement": OWNER_ONLY_STATEMENT},
        }
        return out

    def training(self) -> dict[str, Any]:
        """The public choices and counts of the run (what the sidecar's ``training`` section holds)."""
        return {
            "loss": self.loss, "label": self.label, "features": len(self.features) - int(self.intercept),
            "intercept": self.intercept, "parameters": self.theta.size, "rows": self.train_rows,
            "holdout_rows": self.holdout_rows, "epochs": self.epochs, "batch": self.batch, "steps": self.steps,
            "geometry": self.geometry, "radius": self.radius, "norm_bound": self.mechanism.norm_bound,
            "mechanism": self.mechanism.name, "default_mechanism": DEFAULT_MECHANISM,
            "step_rule": {"eta0": self.rule.eta0, "beta": self.rule.beta, "formula": self.rule.describe(),
                          "basis": self.rule.basis},
            "averaging": "Polyak–Ruppert: the mean of the iterates after each step",
            "order": ("each row once per epoch, in a random order within each memory window" if self.central is None
                      else f"Poisson sampling: each row in each step with probability q = {self.central.sampling_rate:g}"),
            "classes_from_data": self.classes_from_data,
        }


#: Above this share of clipped gradients :meth:`TrainResult.clipping` is loud and says which public L fits.
CLIP_ADVICE_FRACTION = 0.5


def _public_bound_advice(loss: Loss, intercept: bool) -> str:
    """Which public L clips no gradient of ``loss`` for rows of norm ≤ r (:mod:`ldpcli.learn._losses`): a
    formula in r and the number of classes, instantiated for unit rows only; nothing from the data."""
    with_one = " (x with the intercept's 1)" if intercept else ""
    if loss.gradient_factor is None:
        return (f"{loss.name}-loss gradients (⟨θ, x⟩ − y)·x{with_one} are unbounded, so L decides how much is clipped: "
                "choose it from what you know of the label's and the features' range (`norm_bound`), not from the data")
    root2 = math.isclose(loss.gradient_factor, math.sqrt(2.0))
    factor = "√2·" if root2 else ("" if loss.gradient_factor == 1.0 else f"{loss.gradient_factor:g}·")
    start = loss.start_factor()
    at_zero = "" if start is None else f", {start:.3g}·‖x‖ for every row at the start θ = 0"
    if loss.name == "softmax":
        at_zero = f", √((k − 1)/k)·‖x‖ = {start:.3g}·‖x‖ for every row at the start θ = 0 (k = {loss.outputs} classes)"
    norm = "√(r² + 1)" if intercept else "r"
    unit = loss.gradient_bound(1.0, intercept)
    assert unit is not None
    shown = math.ceil(unit * 1000 - 1e-9) / 1000  # rounded up: the L shown must still clip none
    return (f"A {loss.name} gradient has norm at most {factor}‖x‖{with_one}{at_zero}; for rows of norm at most r "
            f"the public bound L = {factor}{norm} clips none (L = {shown:g} for unit rows, r = 1). Choose r from what "
            "you know of the features, not from the data, and pass L as `norm_bound` (a larger L also adds noise)")


_PREDICT = {
    "logistic": "class[1] if ⟨coefficients, x⟩ + intercept ≥ 0 else class[0]",
    "hinge": "class[1] if ⟨coefficients, x⟩ + intercept ≥ 0 else class[0]",
    "softmax": "classes[argmax_c ⟨coefficients[c], x⟩ + intercept[c]]",
    "squared": "⟨coefficients, x⟩ + intercept",
}


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
    release: dict[str, Any] = {
        "created": created if created is not None else utc_now(), "reproducible": result.reproducible,
    }
    if result.reproducible:
        release["note"] = REPRODUCIBLE_NOTE
    if result.input_tag is not None:
        release["input_tag"] = result.input_tag
    release["randomness"] = randomness_record(result.rng, seeded=result.reproducible).to_dict()
    central: dict[str, Any] = {}
    references = [
        "Duchi, Jordan, Wainwright 2014, Privacy Aware Learning, Sec. 3 and App. C (private SGD and mirror descent)",
        "Bhowmick et al. 2018, Sec. 3.2, 4.4 and 5.1 (one-pass private SGD, averaging, step sizes)",
    ]
    if (claim := result.central_section()) is not None:
        central["central"] = claim.to_dict()
        references += [
            "Bhowmick et al. 2018, Sec. 3.1, eq. (13) (central layer: projection onto the ρ-ball and Gaussian noise)",
            "Abadi et al. 2016, Deep Learning with Differential Privacy (the Poisson-subsampled Gaussian)",
            "Google dp-accounting: PLD and RDP accountants",
        ]
    return {
        "format": MODEL_SIDECAR_FORMAT, "version": MODEL_VERSION, "tool": {"name": "ldp", "version": __version__},
        "privacy": result.privacy(),
        **central,
        "mechanism": result.mechanism.describe(),
        "training": result.training(),
        "rate": result.rate(),
        "model": {"file": target.name, "sha256": sha256, "format": target.suffix.lower().lstrip(".")},
        "references": references,
        "release": release,
    }


def publish_model(result: TrainResult, source: Path, target: Path | None, overwrite: bool, ledger: Ledger | None,
             digest: str | None, fingerprint: InputFingerprint | None, layout: Any,
             max_budget: float | None) -> TrainResult:
    """Commit the release (:class:`ldpcli.release._commit.Commit`): reserve it in the ledger, publish
    the model and its sidecar together (when ``target``), confirm. Returns the result with its
    input tag and sidecar."""
    side = sidecar_path(target) if target is not None else None
    charges = []
    if ledger is not None and digest is not None and fingerprint is not None:
        mech = result.mechanism
        charges.append(Charge(LedgerEntry(
            fingerprint=digest, input=str(source.resolve()), rows=fingerprint.rows, d=fingerprint.d,
            columns=list(layout.columns), output=str(target.resolve()) if target is not None else "(printed)",
            mechanism=mech.name, epsilon=result.cost.epsilon, epsilon_exact=result.cost.epsilon_exact,
            delta=result.cost.delta if mech.delta_exact > 0 else None, created="", tag="",
            reproducible=result.reproducible, central=result.central_section(),
        ), str(source)))
    publication = Publication(overwrite=overwrite, replaceable=None if target is None or side is None else partial(
        check_replaceable, target, side, ledger_path=ledger.path if ledger is not None else None))
    with contextlib.ExitStack() as files, Commit(publication, ledger=ledger, charges=charges,
                                                 max_budget=max_budget) as commit:
        tagged = replace(result, sidecar=side, input_tag=next(iter(commit.reserve()), None))
        if target is not None and side is not None:
            payload = model_bytes(tagged, target)
            content = model_sidecar(tagged, target, hashlib.sha256(payload).hexdigest(), created=commit.created)
            publication.add_file(files.enter_context(finished_bytes(target, payload)))
            publication.add_file(files.enter_context(finished_bytes(side, sidecar_text(content).encode())))
        reservations = commit.publish()
    notices = tuple(r.notice for r in reservations if r.notice is not None)
    return replace(tagged, notices=(*tagged.notices, *notices))
