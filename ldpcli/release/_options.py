"""What a release is asked to do beyond its mechanism and its paths: :class:`ReleaseOptions`.

``privatize_file``, ``privatize_files``, ``privatize_dataset`` and ``train`` take the mechanism
(a :class:`ldpcli.mechanisms.MechanismSpec`, or a name with ``epsilon`` and ``norm_bound``), the
paths, progress callbacks, and one ``options`` value for everything else. The value is frozen, so
one can be built once and reused for many releases.

The options come in small groups where they are decided together: :class:`Columns` (which columns
hold the vectors and which are carried along unprivatized: one choice, read by one reader),
:class:`RiskSection` (the parameters of one section of the sidecar), :class:`Budget` (a cap
only means something against the ledger that counts the spend) and :class:`Resources` (threads,
memory and batch size: how the work is run, never what it writes, thanks to keyed randomness).
The rest are single choices of the release itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from ldpcli.errors import UsageError
from ldpcli.mechanisms import MechanismSpec
from ldpcli.release._ledger import Ledger
from ldpcli.release._randomness import DEFAULT_RNG
from ldpcli.release._safety import CLIP_REFUSE_FRACTION
from ldpcli.risk._diffuse import DEFAULT_THRESHOLD

#: Default memory budget (bytes) for the batches in flight, shared by all threads.
DEFAULT_MEMORY = 256 * 2**20


@dataclass(frozen=True)
class Columns:
    """Which columns of the input are read.

    Parameters
    ----------
    column : str or None
        The list column holding the vectors.
    columns : sequence of str or None
        The numeric columns, one per coordinate, in order (names, globs and ranges as
        :func:`ldpcli.io.open_vectors` reads them). Neither: detected.
    keep : sequence of str
        Columns copied to the output **unprivatized** (an id, a label); listed in the sidecar.
    keep_unsafe : bool
        Allow ``keep`` of free-text columns (names, emails), released as they are.
    no_header : bool
        A CSV input has no header row: every line is data, its columns named ``f0``, ``f1``, … (the
        names ``columns``, ``keep``, the output and its sidecar use).
    """

    column: str | None = None
    columns: Sequence[str] | None = None
    keep: Sequence[str] = ()
    keep_unsafe: bool = False
    no_header: bool = False


@dataclass(frozen=True)
class RiskSection:
    """The sidecar's reconstruction section (:func:`ldpcli.risk._section.reconstruction`).

    Parameters
    ----------
    k : int or None
        Dimension of the projection whose direction the bounds are about (default: d, the whole row).
    rho0 : float
        The prior's density is at most e^ρ0 times uniform (Bhowmick et al. 2018, Prop. 1).
    a : sequence of float or None
        The accuracies at which the bounds are stated (default: a standard few).
    threshold : float
        The largest bound whose verdict reads "protected" (default 10⁻³); above it "at risk", and
        "no guarantee" where the bound reaches 1.
    """

    k: int | None = None
    rho0: float = 0.0
    a: Sequence[float] | None = None
    threshold: float = DEFAULT_THRESHOLD


@dataclass(frozen=True)
class Budget:
    """The data owner's account of the privacy spent on each input.

    Parameters
    ----------
    ledger : Ledger or None
        The privacy-budget ledger (:class:`ldpcli.release._ledger.Ledger`): it fingerprints the input,
        tags the sidecar and records the release (reserve, publish, confirm). None: nothing is recorded.
    max_budget : float or None
        Refuse the release, before anything is published, when the input's spent ε plus this
        release's would exceed it (basic composition). Needs a ``ledger``.
    """

    ledger: Ledger | None = None
    max_budget: float | None = None


@dataclass(frozen=True)
class Resources:
    """How the work is run; with a ``seed`` the output is the same whatever these are.

    Parameters
    ----------
    threads : int or None
        Threads privatizing batches of one output file, or parts of a dataset directory (which
        are also written at once); default: the available cores.
    memory : int
        Bytes for the batches in flight (sets the batch size).
    batch_rows : int or None
        Rows per batch, overriding ``memory``'s choice.
    """

    threads: int | None = None
    memory: int = DEFAULT_MEMORY
    batch_rows: int | None = None


@dataclass(frozen=True)
class ReleaseOptions:
    """Everything a release is asked beyond its mechanism, its paths and its progress callbacks.

    Parameters
    ----------
    columns : Columns
        Which columns hold the vectors, and which are copied unprivatized.
    seed : int or None
        Seed for a reproducible run (marked in the sidecar as not for release). None: OS entropy.
    rng : str
        The generator of the noise, for each key block of rows (:mod:`ldpcli.release._randomness`):
        ``"chacha20"`` (the default: ldp's own counter-based ChaCha20 stream keyed by 256 bits from the OS,
        cryptographic, no extra package), ``"pcg64"`` (the opt-out for simulations: numpy's PCG64, fast, not
        cryptographic: whoever sees enough of its output can in principle predict the rest of a block) or
        ``"secure"`` (randomgen's ChaCha20, :func:`ldpcli.math._bitgen.secure_generator`; needs randomgen).
        Each way a ``seed`` gives the same output whatever the threads, batch size or engine. :func:`ldpcli.learn.train`
        draws its gradients' noise, row order and central samples from it too.
    copies : int
        Independent privatized copies of each row, side by side, that together spend the
        requested privacy (:func:`ldpcli.mechanisms._composition.release_cost`).
    dtype : str or None
        ``"float32"`` or ``"float64"``: the type the vectors are written as (default: the input's).
    compression : str or None
        The codec a Parquet or Arrow output applies to the privatized values inside the file
        (:data:`ldpcli.io._parquet.PARQUET_CODECS`, :data:`ldpcli.io._arrow_ipc.ARROW_CODECS`); None: the
        format's default, chosen by measurement (``benchmarks/writer_settings.py``). A CSV output is
        compressed as a whole by its suffix (``.csv.gz``) instead.
    fail_on_clip : float or None
        A fraction of the rows: when more than that lie outside the bound, a DataError and
        nothing is written. Default 0.5 (:data:`~ldpcli.release._safety.CLIP_REFUSE_FRACTION`):
        a release that would clip more than half the rows is refused; 1 (or None) accepts any
        clipping, 0 none.
    skip_invalid : bool
        Leave out rows with a missing, NaN/inf or wrong-length vector instead of failing.
    force : bool
        Allow an ε outside [0.01, 10⁴] (:func:`ldpcli.release._safety.check_epsilon`).
    overwrite : bool
        Replace an existing output (only ldp's own, with its sidecar) and its sidecar.
    risk : RiskSection
        The parameters of the sidecar's reconstruction section.
    budget : Budget
        The ledger that records the release, and the cap on an input's spent ε.
    resources : Resources
        Threads, memory and batch size.
    warnings : sequence of str
        Sentences recorded in the sidecar's ``release.warnings``.
    shuffle : bool
        Write the rows in a uniformly random order drawn from a cryptographically secure generator,
        and record the central (ε, δ) that n shuffled ε0-LDP reports have
        (:mod:`ldpcli.release._shuffle`; one file, one report per person, no kept column, a pure
        ε0-LDP mechanism).
    shuffle_delta : float or None
        With ``shuffle``: the δ of the central claim; default 1/n², and it must stay below 1/n.
    secure : bool
        Release through the secure rendering (:func:`ldpcli.mechanisms._rendering.secured`; the proof is
        docs/floating-point.md): finite-valued mechanisms keep ε with δ = 0, PrivUnit2, duchi-l2,
        separated and gaussian-sign become (ε, δ)-LDP with the computed δ, which the ledger counts; other mechanisms are refused.
    secure_delta : float or None
        The δ the secure rendering aims at (default :data:`ldpcli.mechanisms._rendering.SECURE_DELTA`, 1e-10).
    report_bits : int or None
        64 or 128: release each row as one seed of that many bits, the seed-compressed report of a privunit2
        or privunitg row (:class:`ldpcli.mechanisms.SeedReports`, Feldman & Talwar 2021, Alg. 1), in a
        Parquet column (:mod:`ldpcli.release._reports`); the readers decode it. None: d numbers per row.
    input_label, output_label : str or None
        The ledger's names for an input or output that is no file of its own (``"<stdin>"``,
        ``"<stdout>"``); default the resolved paths.
    """

    columns: Columns = field(default_factory=Columns)
    seed: int | None = None
    rng: str = DEFAULT_RNG
    copies: int = 1
    dtype: str | None = None
    compression: str | None = None
    fail_on_clip: float | None = CLIP_REFUSE_FRACTION
    skip_invalid: bool = False
    force: bool = False
    overwrite: bool = False
    risk: RiskSection = field(default_factory=RiskSection)
    budget: Budget = field(default_factory=Budget)
    resources: Resources = field(default_factory=Resources)
    warnings: Sequence[str] = ()
    shuffle: bool = False
    shuffle_delta: float | None = None
    input_label: str | None = None
    output_label: str | None = None
    secure: bool = False
    secure_delta: float | None = None
    report_bits: int | None = None

    def given(self) -> list[str]:
        """The options set to something other than their default, by name (``"budget.ledger"``)."""
        names: list[str] = []
        for outer in fields(self):
            value = getattr(self, outer.name)
            if isinstance(value, (Columns, RiskSection, Budget, Resources)):
                default = type(value)()
                names.extend(f"{outer.name}.{inner.name}" for inner in fields(value)
                             if not _same(getattr(value, inner.name), getattr(default, inner.name)))
            elif not _same(value, getattr(ReleaseOptions(), outer.name)):
                names.append(outer.name)
        return names

    def refuse(self, names: Sequence[str], call: str) -> None:
        """UsageError naming the first of ``names`` that is set: an option ``call`` cannot honour."""
        extra = [name for name in self.given() if name in names]
        if extra:
            raise UsageError(f"{call} does not take options.{extra[0]}; leave it at its default")


def _same(value: object, default: object) -> bool:
    """Whether an option is at its default (a list equals the tuple with the same items)."""
    if isinstance(value, (list, tuple)) and isinstance(default, tuple):
        return tuple(value) == default
    return value == default


def mechanism_spec(mechanism: MechanismSpec | str, epsilon: float | None, norm_bound: float | None) -> MechanismSpec:
    """The release's mechanism: ``mechanism`` itself when it is a spec, else the named one at ``epsilon``
    (required) and ``norm_bound`` (default 1). Not validated yet (:meth:`MechanismSpec.validated`).

    UsageError for a spec given together with ``epsilon`` or ``norm_bound`` (the spec holds them),
    and for a name without ``epsilon``.
    """
    if isinstance(mechanism, MechanismSpec):
        if epsilon is not None or norm_bound is not None:
            raise UsageError("mechanism is a MechanismSpec, which holds epsilon and norm_bound; do not give them again")
        return mechanism
    if epsilon is None:
        raise UsageError(f"epsilon is required with the mechanism name {mechanism!r}")
    return MechanismSpec(mechanism, epsilon, None, 1.0 if norm_bound is None else norm_bound)
