"""Where independent pieces of work run: in this process (the default) or on Dask.

An engine maps a function over a list of picklable work items and returns the results in order.
``ldp privatize --engine dask`` maps the privatization of one part of an input (a key-block-aligned
range of rows, about one Parquet row group) and ``ldp estimate-mean --engine dask`` the partial
moments of one privatized file, so that only work descriptions, file names and sums cross the
network; the reading, mechanism and writing code is the local engine's. Dask is an optional extra
(``pip install 'ldp[dask]'``): ``dask.delayed`` tasks, never ``dask.dataframe`` (which turns
fixed-size lists into Python objects and re-partitions rows).

The scheduler is ``threads`` (default), ``synchronous`` or ``processes`` on this machine, or the
address of a running Dask scheduler (``tcp://host:8786``), whose workers must see the same paths
(a shared or mounted file system) and have ldp installed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ldpcli.errors import UsageError

T = TypeVar("T")
R = TypeVar("R")

#: The engines ``--engine`` accepts.
ENGINES = ("local", "dask")
#: Dask's schedulers on this machine; anything else is a scheduler address.
LOCAL_SCHEDULERS = ("threads", "synchronous", "processes")


@dataclass(frozen=True)
class DaskEngine:
    """Runs each work item as one ``dask.delayed`` task on ``scheduler`` (see the module's docstring)."""

    scheduler: str = "threads"

    @property
    def name(self) -> str:
        return "dask"

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(item) for item in items]``, computed by Dask; the first failure is raised here."""
        import dask

        tasks = [dask.delayed(fn, pure=False)(item, dask_key_name=f"ldp-{index}") for index, item in enumerate(items)]
        if self.scheduler in LOCAL_SCHEDULERS:
            return list(dask.compute(*tasks, scheduler=self.scheduler))
        from distributed import Client

        try:
            client = Client(self.scheduler, timeout="20s")
        except OSError as exc:
            raise UsageError(f"--scheduler {self.scheduler}: cannot reach a Dask scheduler there ({exc})") from exc
        with client:
            return list(dask.compute(*tasks, scheduler=client))


def make_engine(name: str, scheduler: str | None = None) -> DaskEngine | None:
    """The engine called ``name``: None for ``local`` (the caller runs the work itself), a
    :class:`DaskEngine` for ``dask``. UsageError for an unknown name, a ``scheduler`` without Dask,
    and Dask not installed."""
    if name not in ENGINES:
        raise UsageError(f"--engine {name!r}: use one of {', '.join(ENGINES)}")
    if name == "local":
        if scheduler is not None:
            raise UsageError("--scheduler chooses where Dask runs; it needs --engine dask")
        return None
    if importlib.util.find_spec("dask") is None:
        raise UsageError("--engine dask needs Dask: pip install 'ldp[dask]'")
    if scheduler is not None and scheduler not in LOCAL_SCHEDULERS and importlib.util.find_spec("distributed") is None:
        raise UsageError(f"--scheduler {scheduler}: a scheduler address needs dask.distributed: pip install 'ldp[dask]'")
    return DaskEngine(scheduler or "threads")


def run_all(engine: DaskEngine | None, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``fn`` over ``items`` in order: in this thread without an engine, else on the engine."""
    if engine is None:
        return [fn(item) for item in items]
    return engine.map(fn, items)


def describe(engine: DaskEngine | None) -> dict[str, Any]:
    """What the manifest records about the engine (no address: it may name a private host)."""
    if engine is None:
        return {"name": "local"}
    return {"name": "dask", "scheduler": engine.scheduler if engine.scheduler in LOCAL_SCHEDULERS else "distributed"}
