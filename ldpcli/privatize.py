"""Privatize a whole file, batch by batch: read → clip to the public norm bound → mechanism → write.

``privatize_file`` is the library call behind ``ldp privatize``. Rows are streamed in batches
(memory stays flat as files grow), each batch gets its own ``numpy.random.Generator`` spawned
from one ``SeedSequence`` in batch order, the output and the sidecar are written to temporary
files in the target directory and renamed only when everything succeeded, and the input is only
ever read.

Randomness comes from OS entropy unless a seed is given; a seeded run is marked
``"reproducible": true`` in the sidecar (and so not for release). The seed itself is never
written anywhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ldpcli.errors import UsageError
from ldpcli.io import AtomicVectorWriter, file_format, open_vectors
from ldpcli.mechanisms import Mechanism, get_mechanism
from ldpcli.mechanisms.base import check_common
from ldpcli.sidecar import build_sidecar, sidecar_path, write_sidecar


@dataclass(frozen=True)
class PrivatizeResult:
    """What ``privatize_file`` did: where the outputs are and the public counts."""

    output: Path
    sidecar: Path
    n: int
    d: int
    mechanism: Mechanism
    reproducible: bool
    #: Rows whose norm exceeded the bound and were scaled onto it. A statistic of the raw data:
    #: shown to the person running the command, never written to the sidecar.
    n_clipped: int


def default_output_path(input_path: str | os.PathLike[str]) -> Path:
    """``<stem>.privatized.<ext>`` beside the input."""
    path = Path(input_path)
    return path.with_name(f"{path.stem}.privatized{path.suffix}")


def privatize_file(
    input_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str] | None = None,
    *,
    epsilon: float,
    mechanism: str = "privunit2",
    calibration: str | None = None,
    norm_bound: float = 1.0,
    options: Mapping[str, Any] | None = None,
    column: str | None = None,
    columns: Sequence[str] | None = None,
    keep: Sequence[str] = (),
    seed: int | None = None,
    overwrite: bool = False,
    batch_rows: int | None = None,
    on_rows: Callable[[int], None] | None = None,
    on_start: Callable[[int | None], None] | None = None,
) -> PrivatizeResult:
    """Privatize every row of ``input_path`` into ``output_path`` and write its sidecar.

    ``options`` are the mechanism's own calibration options (``Mechanism.options``, e.g. ``k``,
    ``delta``). ``on_start`` receives the number of rows when known (progress bars); ``on_rows``
    the size of each finished batch. Raises ``UsageError`` / ``DataError`` with one-line messages; on any
    failure no output or sidecar is left behind.
    """
    mechanism_cls = get_mechanism(mechanism)
    options = dict(options or {})
    mechanism_cls.check_options(options)
    check_common(1, epsilon, norm_bound)
    mechanism_cls.check_calibration(calibration)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise UsageError(f"seed must be a non-negative integer, got {seed!r}")
    source = Path(input_path)
    target = Path(output_path) if output_path is not None else default_output_path(source)
    file_format(source)
    out_format = file_format(target)
    if source.exists() and target.exists() and source.resolve() == target.resolve():
        raise UsageError(f"{target}: the output would overwrite the input; choose another -o")
    side = sidecar_path(target)
    if target.exists() and not overwrite:
        raise UsageError(f"{target} already exists; pass --overwrite to replace it")
    if side.exists() and not overwrite:
        raise UsageError(
            f"{side} already exists (the sidecar of {target.name}, or of another output with the same stem); "
            "pass --overwrite to replace it, or choose another -o"
        )

    seeds = np.random.SeedSequence(seed)  # seed None: fresh OS entropy
    with open_vectors(source, column=column, columns=columns, keep=keep, batch_rows=batch_rows) as reader:
        mech = mechanism_cls.calibrate(
            reader.layout.d, epsilon, norm_bound=norm_bound, calibration=calibration, **options
        )
        if on_start is not None:
            on_start(reader.num_rows)
        n = n_clipped = 0
        with AtomicVectorWriter(
            target, reader.layout, format=out_format, keep_schema=reader.keep_schema, overwrite=overwrite
        ) as writer:
            for batch in reader:
                rng = np.random.Generator(np.random.PCG64(seeds.spawn(1)[0]))
                values, clipped = mech.clip(batch.values)
                writer.write(mech.privatize(values, rng), batch.keep)
                n += values.shape[0]
                n_clipped += clipped
                if on_rows is not None:
                    on_rows(values.shape[0])
            content = build_sidecar(mech, n=n, layout=reader.layout, data_path=target, reproducible=seed is not None)
            writer.commit()
    try:
        write_sidecar(side, content, overwrite=overwrite)
    except BaseException:
        target.unlink(missing_ok=True)  # never leave data without its sidecar
        raise
    return PrivatizeResult(
        output=target, sidecar=side, n=n, d=mech.d, mechanism=mech, reproducible=seed is not None, n_clipped=n_clipped
    )
