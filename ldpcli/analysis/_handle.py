"""The object a Python user holds, :class:`Release`, and the calls that make or open one.

One concept, in two layers. A privatization's public description, what a sidecar records for a
file, is :class:`ldpcli.release._arrays.ReleaseRecord`: it lives in the release layer because making
a release needs nothing above it. :class:`Release` is that record plus where the privatized rows
are: files checked against their sidecars (:func:`open_release`, :func:`privatize_file`,
:func:`privatize_dataset`), or the caller's memory (:func:`privatize`, whose rows come back beside
it). Its methods are the jobs on a release (the mean, means per group, regression, query answers,
the reconstruction demonstration) and live here, in the analysis layer, above the release layer
they read; each is one call of the job function that the CLI command runs, with the release's
files, sidecar, verification and trusted key.

Imports of the jobs are inside the methods, so that ``import ldpcli`` and privatizing an array load
neither pyarrow nor scipy.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ldpcli.errors import DataError, UsageError
from ldpcli.io import file_sha256
from ldpcli.mechanisms._composition import release_cost
from ldpcli.release._arrays import ReleaseRecord, privatize_rows
from ldpcli.release._options import ReleaseOptions
from ldpcli.release._shuffle_claim import ShuffleClaim
from ldpcli.release._sidecar import Sidecar
from ldpcli.release._signing import PublicKey

if TYPE_CHECKING:
    from ldpcli.analysis._answer import QueryAnswers
    from ldpcli.analysis._attack import AttackReport
    from ldpcli.analysis._estimate import GroupMeans
    from ldpcli.analysis._regress import RegressionResult
    from ldpcli.estimators._mean import MeanEstimate
    from ldpcli.mechanisms import MechanismSpec
    from ldpcli.release._dataset import DatasetResult
    from ldpcli.release._engines import DaskEngine
    from ldpcli.release._file import PrivatizeResult

PathLike = str | os.PathLike[str]
Paths = PathLike | Sequence[PathLike]


@dataclass(frozen=True)
class Release(ReleaseRecord):
    """A privatization's public description and where its rows are: files, or the caller's memory.

    Made by :func:`open_release` (files, verified), :func:`privatize_file` and
    :func:`privatize_dataset` (the files they wrote) or :func:`privatize` (rows in memory). The
    methods read a file release's rows through the verified scan; a release in memory has no
    files, and its rows go to ``ldpcli.estimate_mean(z, release)``.

    Parameters
    ----------
    mechanism, n, columns, keep, dtype, reproducible, warnings, n_clipped
        The public description (:class:`~ldpcli.release._arrays.ReleaseRecord`); for files, from
        their sidecars (``n`` summed over the files; ``n_clipped`` only from a privatization run here).
    paths : tuple of Path
        The privatized files (the parts of a dataset directory, the shards of one job); empty in memory.
    sidecars : tuple of Sidecar
        Each file's validated sidecar (:class:`~ldpcli.release._sidecar.Sidecar`), in order.
    result : PrivatizeResult or DatasetResult or None
        What :func:`privatize_file` or :func:`privatize_dataset` did, with its counts for the
        operator (``n_skipped``, the ledger's notices); None otherwise.
    verified : bool
        Whether the files' bytes are checked against their sidecars (on opening and by every job).
    trust : PublicKey or None
        The data owner's key every file must be signed by (checked on opening and by the jobs).

    References
    ----------
    The sidecar format: ``schemas/sidecar-v2.schema.json`` and :mod:`ldpcli.release._sidecar`.
    """

    paths: tuple[Path, ...] = ()
    sidecars: tuple[Sidecar, ...] = field(default=(), repr=False, compare=False)
    result: PrivatizeResult | DatasetResult | None = field(default=None, repr=False, compare=False)
    verified: bool = True
    trust: PublicKey | None = field(default=None, repr=False, compare=False)

    @property
    def spec(self) -> MechanismSpec:
        """The public choices that re-create the mechanism: ``spec.calibrate(d) == mechanism``."""
        return self.mechanism.spec

    @property
    def sidecar(self) -> Sidecar | None:
        """The first file's sidecar (every file of a release shares its mechanism and layout: checked
        on opening); None in memory."""
        return self.sidecars[0] if self.sidecars else None

    @property
    def copies(self) -> int:
        """Independent privatized copies of each row (``copies`` of :func:`privatize_file`; 1 in memory)."""
        return self.sidecars[0].layout.copies if self.sidecars else 1

    @property
    def shuffled(self) -> ShuffleClaim | None:
        """The central claim of a release of one file written in a uniformly random order (``privatize_file``
        with ``shuffle``): ``epsilon_central_upper`` at ``delta`` for its n reports, under its ``assumptions``
        (:class:`~ldpcli.release._shuffle_claim.ShuffleClaim`, checked on opening). None in memory, for an unshuffled
        release, and for several files (each was shuffled apart: each file's is ``sidecars[i].shuffled``)."""
        return self.sidecars[0].shuffled if len(self.sidecars) == 1 else None

    @property
    def epsilon_total(self) -> float:
        """The ε each person's row spends in this release: the exact ε of the mechanism that
        privatized each copy, composed over the copies (:func:`~ldpcli.mechanisms._composition.release_cost`)."""
        return release_cost(self.mechanism, copies=self.copies).epsilon_exact

    @property
    def expected_error_mean(self) -> float:
        """Worst-case E‖estimated mean − mean of the raw (clipped) rows‖², the mean of each row's
        copies being the estimate's row (each copy's error divided by the copies)."""
        return self.mechanism.expected_error_mean(self.n) / self.copies

    def to_dict(self) -> dict[str, Any]:
        """The public description as a JSON-able dict, with the files and their verification.

        Returns
        -------
        dict
            :meth:`ReleaseRecord.to_dict`'s keys, then ``copies``, ``epsilon_total``, ``files``
            (empty in memory) and ``verified``. :meth:`from_dict` of it gives a description in
            memory; files are opened again with :func:`open_release`.
        """
        return {**super().to_dict(), "copies": self.copies, "epsilon_total": self.epsilon_total,
                "files": [str(path) for path in self.paths], "verified": self.verified}

    def _scan(self) -> dict[str, Any]:
        """The keywords that make a job read exactly what was opened: the files, their sidecar
        (for a single file), the verification and the trusted key."""
        if not self.paths:
            raise UsageError(
                "this release is in memory (from ldpcli.privatize): it has no files to read; estimate from its rows "
                "with ldpcli.estimate_mean(z, release)"
            )
        single = self.sidecars[0].path if len(self.paths) == 1 else None
        return {"sidecar": single, "verify": self.verified, "trust": self.trust}

    def mean(self, *, confidence: float = 0.95, where: Sequence[str] = (), project: str | None = None,
             **options: Any) -> MeanEstimate:
        """The mean of the raw rows with its error bars: ``ldp estimate-mean``.

        Parameters
        ----------
        confidence : float
            The level of the per-coordinate Student-t intervals.
        where : sequence of str
            Conditions on kept columns (``"label == 3"``); the rows that satisfy all are used.
        project : str or None
            A public convex set to project the mean onto (``"ball"``, ``"simplex"``, ``"hull:FILE"``…).
        **options
            ``engine``, ``batch_rows``, ``on_rows``: as for :func:`ldpcli.analysis._estimate.estimate_file_mean`.

        Returns
        -------
        MeanEstimate
            The mean, its guaranteed expected squared error, standard errors and intervals.

        References
        ----------
        Projection: Błasiok, Bun, Nikolov, Steinke (2019), Lemma 5.3.
        """
        from ldpcli.analysis._estimate import estimate_file_mean

        return estimate_file_mean(self.paths, confidence=confidence, where=where, project=project, **self._scan(), **options)

    def group_means(self, column: str, *, confidence: float = 0.95, where: Sequence[str] = (),
                    project: str | None = None, **options: Any) -> GroupMeans:
        """The mean with error bars for each value of a kept column (``ldp estimate-mean``'s groups).

        Parameters
        ----------
        column : str
            A column kept unprivatized in the release (a label, a split).
        confidence, where, project, **options
            As for :meth:`mean`.

        Returns
        -------
        GroupMeans
            One :class:`~ldpcli.estimators._mean.MeanEstimate` per value, and the rows with no value.
        """
        from ldpcli.analysis._estimate import estimate_group_means

        return estimate_group_means(self.paths, column, confidence=confidence, where=where, project=project,
                                    **self._scan(), **options)

    def regress(self, label: str, *, radius: float | None = None, where: Sequence[str] = (),
                **options: Any) -> RegressionResult:
        """Least squares over the ball ‖θ‖ ≤ ``radius`` from a release of two copies of each row: ``ldp regress``.

        Parameters
        ----------
        label : str
            The coordinate that is the label: a vector column's name or a 0-based index.
        radius : float or None
            The radius of the ball of coefficients (default √p for p features).
        where : sequence of str
            Conditions on kept columns, as for :meth:`mean`.
        **options
            ``batch_rows``, ``on_rows``: as for :func:`ldpcli.analysis._regress.regress`.

        Returns
        -------
        RegressionResult
            θ̂ by feature, the fit's diagnostics and Theorem 3's rate.

        References
        ----------
        Aliakbarpour, Bairaktari, Burghardt, Ravi, Ullman (2024), Algorithm 3 and Theorem 3.
        """
        from ldpcli.analysis._regress import regress

        return regress(self.paths, label=label, radius=radius, where=where, **self._scan(), **options)

    def answer(self, workload: PathLike, *, confidence: float = 0.95, **options: Any) -> QueryAnswers:
        """Every query of a public workload answered from a release of encoded answer vectors: ``ldp queries answer``.

        Parameters
        ----------
        workload : path
            The workload file the data was encoded with (``ldp queries encode``).
        confidence : float
            The level of the raw answers' intervals.
        **options
            ``on_rows``: as for :func:`ldpcli.analysis._answer.answer_queries`.

        Returns
        -------
        QueryAnswers
            Each query's raw (unbiased) answer with its interval and its answer projected onto the
            workload's hull, with the guaranteed error.

        References
        ----------
        Błasiok, Bun, Nikolov, Steinke (2019), Sec. 1.2 and Theorem 5.1.
        """
        from ldpcli.analysis._answer import answer_queries

        return answer_queries(self.paths, workload, confidence=confidence, **self._scan(), **options)

    def attack(self, raw: PathLike, **options: Any) -> AttackReport:
        """The reconstruction demonstration against the raw file (the ``ldp risk`` command's attack). For the data
        owner only: the report holds statistics of the raw data.

        Parameters
        ----------
        raw : path
            The file that was privatized (row i of it is row i of the release).
        **options
            ``k``, ``basis``, ``basis_seed``, ``a``, ``batch_rows``, ``on_rows``: as for
            :func:`ldpcli.analysis._attack.attack`.

        Returns
        -------
        AttackReport
            The cosines of the reconstruction and of the best guess without the release.

        References
        ----------
        Bhowmick, Duchi, Freudiger, Kapoor, Rogers (2018), Sec. 2.3.1, Lemma 2.2 and Proposition 1.
        """
        from ldpcli.analysis._attack import attack

        scan_options = self._scan()
        if len(self.paths) != 1:
            raise UsageError(f"the attack reads one privatized file beside its raw file; this release has "
                             f"{len(self.paths)} files: open the one that {os.fspath(raw)} was privatized into")
        return attack(self.paths[0], raw, sidecar=scan_options["sidecar"], **options)


def open_release(paths: Paths, *, sidecar: PathLike | None = None, verify: bool = True,
                 trust: PublicKey | PathLike | None = None) -> Release:
    """Open privatized files as one verified :class:`Release`: what ``ldp estimate-mean`` checks, on opening.

    Parameters
    ----------
    paths : path or sequence of paths
        A privatized file, a dataset directory, a glob pattern, or several of them (the shards of one job).
    sidecar : path or None
        The sidecar of a single file, when it is not the ``.ldp.json`` beside it.
    verify : bool
        Check each file's bytes against the SHA-256 its sidecar records (now, and its rows again
        whenever a job reads them). ``False`` accepts files filtered or re-encoded after
        privatization; the jobs then say that their result is unverified.
    trust : PublicKey, str, path or None
        The data owner's public key (its ``ldpkey1-…`` text or a file holding it): every file
        must be signed by it. Without, an unsigned release opens, and a signature that does not
        match its sidecar is refused all the same.

    Returns
    -------
    Release
        Its description from the sidecars, its files and sidecars.

    Raises
    ------
    DataError
        Naming the file: a sidecar that is missing, malformed or edited (its recorded parameters
        disagree with its spec, its signature does not match), shards of different releases or a
        dataset with parts missing, and, with ``verify``, a file whose bytes are not the ones its
        sidecar records.
    """
    from ldpcli.analysis._scan import scan

    source = scan(paths, sidecar=sidecar, verify=verify, trust=trust)
    if verify:
        for path, meta in zip(source.files, source.sidecars):
            if file_sha256(path) != meta.sha256:
                raise DataError(
                    f"{path}: its bytes are not the ones its sidecar {meta.path} was written for (their SHA-256 "
                    "differs): the file or its sidecar was changed after privatization; restore both from the "
                    "privatize run, or open with verify=False a file you filtered or re-encoded yourself"
                )
    first = source.sidecars[0]
    return Release(
        mechanism=source.mechanism, n=sum(meta.n for meta in source.sidecars), columns=first.layout.columns,
        keep=first.layout.keep, dtype=first.dtype, reproducible=any(map(_seeded, source.sidecars)),
        warnings=first.warnings, paths=source.files, sidecars=source.sidecars, verified=verify, trust=source.trusted,
    )


def _seeded(meta: Sidecar) -> bool:
    """Whether the sidecar records a seeded run (``release.reproducible``; at the top in version 1)."""
    section = meta.content.get("release") if meta.version >= 2 else meta.content
    return isinstance(section, dict) and section.get("reproducible") is True


def privatize(
    x: Any,
    *,
    epsilon: float | None = None,
    mechanism: str = "privunit2",
    norm_bound: float = 1.0,
    rng: np.random.Generator | int | None = None,
    eps: float | None = None,
    **options: Any,
) -> tuple[Any, Release]:
    """Privatize every row of ``x`` in memory under ε-LDP; return ``(privatized, release)``.

    The same mechanisms and safety checks as ``ldp privatize``; every output row is an unbiased
    estimate of its (clipped) input row. Estimate from the rows with ``ldpcli.estimate_mean(z, release)``.

    Parameters
    ----------
    x : numpy.ndarray, Array API array, pyarrow.Table or pandas.DataFrame
        An (n, d) array of real numbers, or a table: one list column of vectors, or one numeric
        column per coordinate (``column``/``columns`` choose, with the rules and refusals of
        ``ldp privatize``; ``keep`` columns pass through unprivatized). A PyTorch, CuPy or JAX
        array (any that ``array-api-compat`` knows) is privatized on its device and comes back as
        the same type there (PrivUnit2 and duchi-l2; :mod:`ldpcli.math._devices`), the
        ``Release``'s ``generator`` naming the device generator that drew the normals.
    epsilon : float
        The privacy level ε, a real number (another type is a TypeError); outside [0.01, 10⁴] it
        needs ``force=True``.
    mechanism : str
        A registered mechanism (:func:`ldpcli.mechanisms.mechanism_names`).
    norm_bound : float
        The public bound L: rows outside the domain are moved onto it (an :class:`LdpWarning` when
        more than 1% are). ``fail_on_clip=fraction``: a ValueError when more than that fraction of
        the rows would be clipped; by default 0.5, so more than half is refused unless
        ``fail_on_clip=1`` accepts it.
    rng : numpy.random.Generator, ldpcli.math.CounterGenerator, int or None
        A generator, an int seed (numpy's PCG64 of it: reproducible, not for release) or None (the default: ldp's
        ChaCha20 stream keyed by 256 bits from the OS, cryptographic). The seed
        comes only by ``rng``: ``seed=`` or ``random_state=`` is a TypeError that points here.
    eps : float
        An alias of ``epsilon`` (give one of them: both is a TypeError).
    **options
        ``calibration``, ``column``, ``columns``, ``keep``, ``keep_unsafe``, ``force``,
        ``fail_on_clip``, ``dtype`` (of the output; default the input's float32 or float64),
        ``secure=True`` (the secure rendering, docs/floating-point.md: ε with δ = 0 for the finite-valued
        mechanisms, (ε, δ) with a computed δ ≤ ``secure_delta``, default 1e-10, for privunit2,
        duchi-l2, separated and gaussian-sign; recorded in the release's ``mechanism.describe()["rendering"]``), and the
        mechanism's own options (``delta=1e-6``, ``k=8``…; bcdp's ``feature_eps`` names a table's
        columns as ``ldp privatize`` does, and a level above ε is clipped to ε with an :class:`LdpWarning`).

    Returns
    -------
    tuple
        The privatized rows, of the kind of ``x`` (a table keeps its kept columns), and the
        :class:`Release` in memory (its ``n_clipped`` is for the caller only).

    References
    ----------
    Bhowmick, Duchi, Freudiger, Kapoor, Rogers (2018), "Protection against reconstruction and its
    applications in private federated learning" (PrivUnit2, the default mechanism).
    """
    rows, record = privatize_rows(x, epsilon=epsilon, mechanism=mechanism, norm_bound=norm_bound, rng=rng, eps=eps,
                                  **options)
    return rows, Release(**{item.name: getattr(record, item.name) for item in dataclasses.fields(record)})


def privatize_file(src: PathLike, dst: PathLike | None = None, *, mechanism: MechanismSpec | str = "privunit2",
                   epsilon: float | None = None, norm_bound: float | None = None,
                   options: ReleaseOptions = ReleaseOptions(), sidecar: PathLike | None = None) -> Release:
    """Privatize every row of a file and write the output with its sidecar: ``ldp privatize``.

    Parameters
    ----------
    src : path
        The raw file (Parquet, CSV, Arrow IPC, ``.npy``; a URL is fetched).
    dst : path or None
        The output (default ``SRC.private.parquet`` beside the input); its sidecar goes beside it.
    mechanism : MechanismSpec or str
        A mechanism's name (then give ``epsilon``, and ``norm_bound`` if it is not 1), or its whole
        public choice as a :class:`~ldpcli.mechanisms.MechanismSpec` (calibration and options too).
    epsilon : float or None
        The privacy level ε of each row (with a name).
    norm_bound : float or None
        The public bound L on a row's norm (with a name; default 1).
    options : ReleaseOptions
        Everything else the release is asked: kept columns, seed, copies, dtype, clipping policy,
        risk section, ledger and budget (:class:`~ldpcli.release._options.ReleaseOptions`).
    sidecar : path or None
        Where to write the sidecar (default ``DST.ldp.json``).

    Returns
    -------
    Release
        The written release, as :func:`open_release` would open it (built from the sidecar written and
        the SHA-256 the writer computed, without reading the file again); ``result`` holds
        what the run did (:class:`~ldpcli.release._file.PrivatizeResult`), ``n_clipped`` its count
        of rows moved onto the bound (for the operator: never publish it).
    """
    from ldpcli.release._file import write_file_release as privatize_one

    result = privatize_one(src, dst, mechanism=mechanism, epsilon=epsilon, norm_bound=norm_bound, options=options,
                           sidecar=sidecar)
    meta = result.written  # the sidecar as it was written, hashed by the writer: nothing is read back
    assert meta is not None
    return Release(
        mechanism=meta.mechanism, n=meta.n, columns=meta.layout.columns, keep=meta.layout.keep, dtype=meta.dtype,
        reproducible=result.reproducible, warnings=meta.warnings, n_clipped=result.n_clipped, paths=(result.output,),
        sidecars=(meta,), result=result,
    )


def privatize_dataset(inputs: Paths, output_dir: PathLike, *, mechanism: MechanismSpec | str = "privunit2",
                      epsilon: float | None = None, norm_bound: float | None = None,
                      options: ReleaseOptions = ReleaseOptions(), engine: DaskEngine | None = None,
                      part_rows: int | None = None) -> Release:
    """Privatize files into a dataset directory of parts, one task per part.

    Parameters
    ----------
    inputs : path or sequence of paths
        The raw files (or directories, patterns) of one release; they share their vector columns.
    output_dir : path
        The dataset directory to write (its parts, their sidecars and the manifest).
    mechanism, epsilon, norm_bound, options
        As for :func:`privatize_file` (a dataset refuses ``copies``, ``resources`` and the labels).
    engine : DaskEngine or None
        The Dask cluster that runs one task per part (:class:`~ldpcli.release._engines.DaskEngine`);
        None runs the tasks one after the other in this process.
    part_rows : int or None
        Rows per part (default: one part per input file).

    Returns
    -------
    Release
        The dataset opened (and verified) as :func:`open_release` would; ``result`` holds what
        the run did (:class:`~ldpcli.release._dataset.DatasetResult`).
    """
    from ldpcli.release._dataset import write_dataset_release as privatize_parts

    result = privatize_parts(inputs, output_dir, engine=engine, mechanism=mechanism, epsilon=epsilon,
                             norm_bound=norm_bound, options=options, part_rows=part_rows)
    release = open_release(result.output)
    return dataclasses.replace(release, n_clipped=result.n_clipped, result=result)


__all__ = ["Release", "open_release", "privatize", "privatize_dataset", "privatize_file"]
