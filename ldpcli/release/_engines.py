"""Where independent pieces of work run: on threads of this process (the default) or on Dask.

An engine maps a function over a list of picklable work items and returns the results in order.
The Dask engine maps the privatization of one part of an input (a key-block-aligned range of
rows, about one Parquet row group, :func:`ldpcli.privatize_dataset`) and a mean estimate's partial
moments of one privatized file, so that only work descriptions, file names and sums cross the
network; the reading, mechanism and writing code is the local engine's. Dask is an optional extra
(``pip install 'ldp[dask]'``): ``dask.delayed`` tasks, never ``dask.dataframe`` (which turns
fixed-size lists into Python objects and re-partitions rows).

The scheduler is ``threads`` (default), ``synchronous`` or ``processes`` on this machine, or the
address of a running Dask scheduler (``tcp://host:8786``), whose workers must see the same paths
(a shared or mounted file system) and have ldp installed.

ldp starts worker processes itself only for ``processes``, and those end with ldp, however ldp
ends (even ``kill -9``): they write no part of a run that is over (:func:`_end_with_driver`). The
workers of a scheduler given by address are not ldp's: they outlive ldp, and a task running when
ldp is killed runs to its end (its part lands in the staging directory of a run that never
publishes).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from ldpcli.errors import MissingDependency, UsageError, install_hint, quoted

T = TypeVar("T")
R = TypeVar("R")

#: The engines an ``engine`` argument accepts.
ENGINES = ("local", "dask")
#: Dask's schedulers on this machine; anything else is a scheduler address.
LOCAL_SCHEDULERS = ("threads", "synchronous", "processes")
#: prctl(2)'s option that asks for a signal when the parent process ends (linux/prctl.h).
_PR_SET_PDEATHSIG = 1


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
        if self.scheduler == "processes":
            return _on_processes(tasks)
        if self.scheduler in LOCAL_SCHEDULERS:
            return list(dask.compute(*tasks, scheduler=self.scheduler))
        from distributed import Client

        try:
            client = Client(self.scheduler, timeout="20s")
        except OSError as exc:
            raise UsageError(f"`scheduler` {self.scheduler}: cannot reach a Dask scheduler there ({quoted(str(exc))})") from exc
        with client:
            return list(dask.compute(*tasks, scheduler=client))


def _on_processes(tasks: Sequence[Any]) -> list[Any]:
    """Compute ``tasks`` on Dask's ``processes`` scheduler, with a pool of worker processes of ldp's own.

    Dask's own pool waits for the running tasks when the computation is interrupted (seconds, for
    parts that are being written); this one ends its workers at once on any exception (a signal, a
    failed part): the parts they would still write belong to a run that never publishes. The
    workers are dead before the exception goes on, so none writes into the staging directory that
    the caller removes then.
    """
    import dask
    from dask.multiprocessing import get_context, initialize_worker_process
    from dask.system import CPU_COUNT

    workers = dask.config.get("num_workers", None) or CPU_COUNT
    pool = ProcessPoolExecutor(workers, mp_context=get_context(),
                               initializer=partial(initialize_worker_process, user_initializer=_end_with_driver))
    try:
        return list(dask.compute(*tasks, scheduler="processes", pool=pool))
    except BaseException:
        _kill_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """End every worker process of ``pool`` now (SIGKILL) and wait until each has ended."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # CPython's executor keeps them there
    for process in processes:
        with contextlib.suppress(OSError, ValueError):
            process.kill()
    for process in processes:
        with contextlib.suppress(OSError, ValueError, AssertionError):
            process.join()


def _end_with_driver() -> None:
    """Run in each worker of the ``processes`` scheduler before its first task: end the worker when
    the process that started it (ldp, the driver) ends, however the driver ends.

    On Linux the kernel kills the worker when its parent ends (``prctl(PR_SET_PDEATHSIG, SIGKILL)``),
    at once, whatever the worker is doing. The signal comes when the *thread* that started the
    worker ends, so the workers must be started by a thread that outlives them: Dask starts them
    from the thread that calls :meth:`DaskEngine.map` and shuts them down before it returns. On
    every platform, and for a driver that ended before that took effect, a thread of the worker
    waits on multiprocessing's sentinel of the driver (a pipe only the driver holds open) and ends
    the worker when it closes.
    """
    driver = multiprocessing.parent_process()
    if driver is None:  # not started by multiprocessing: nothing to tie to
        return
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    threading.Thread(target=_exit_when_ended, args=(driver.sentinel,), name="ldp-driver-watch", daemon=True).start()


def _exit_when_ended(sentinel: int) -> None:
    """Wait until ``sentinel`` (multiprocessing's handle on the driver) says the driver ended, then
    end this worker at once (no clean-up: the run it worked for is over)."""
    multiprocessing.connection.wait([sentinel])
    os._exit(1)


def make_engine(name: str, scheduler: str | None = None) -> DaskEngine | None:
    """The engine called ``name``: None for ``local`` (the caller runs the work itself), a
    :class:`DaskEngine` for ``dask``. UsageError for an unknown name and a ``scheduler`` without
    ``engine`` dask; MissingDependency (exit 1, as for every missing extra) when Dask is not installed."""
    if name not in ENGINES:
        raise UsageError(f"`engine` {name!r}: use one of {', '.join(ENGINES)}")
    if name == "local":
        if scheduler is not None:
            raise UsageError("`scheduler` chooses where Dask runs; it needs `engine` dask")
        return None
    if importlib.util.find_spec("dask") is None:
        raise MissingDependency(f"`engine` dask needs Dask: {install_hint('dask')}")
    if scheduler is not None and scheduler not in LOCAL_SCHEDULERS and importlib.util.find_spec("distributed") is None:
        raise MissingDependency(f"`scheduler` {scheduler}: a scheduler address needs dask.distributed: "
                                f"{install_hint('dask')}")
    return DaskEngine(scheduler or "threads")


@dataclass(frozen=True)
class LocalEngine:
    """Runs the work items on ``threads`` threads of this process (one: in the calling thread).

    The threads run the items concurrently (pyarrow and numpy release the GIL while they read,
    privatize, encode and write), at most ``threads`` at a time. On the first failure the items not
    started are cancelled, the running ones are waited for, and that failure is raised.
    """

    threads: int = 1

    @property
    def name(self) -> str:
        return "local"

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(item) for item in items]``, in order, computed on the threads."""
        if self.threads == 1 or len(items) <= 1:
            return [fn(item) for item in items]
        pool = ThreadPoolExecutor(max_workers=min(self.threads, len(items)), thread_name_prefix="ldp-part")
        try:
            futures = [pool.submit(fn, item) for item in items]
            return [future.result() for future in futures]
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def run_all(engine: DaskEngine | LocalEngine | None, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``fn`` over ``items`` in order: in this thread without an engine, else on the engine."""
    if engine is None:
        return [fn(item) for item in items]
    return engine.map(fn, items)


@dataclass(frozen=True, slots=True)
class EngineDescription:
    """What a dataset release records about the engine that wrote it (the manifest's ``engine``,
    ``DatasetResult.engine``: :meth:`to_dict`): its name, ``local`` or ``dask``, and a Dask engine's
    scheduler, one of :data:`LOCAL_SCHEDULERS` or ``distributed`` (never an address: it may name a private host)."""

    name: str
    scheduler: str | None = None

    def to_dict(self) -> dict[str, str]:
        """The JSON record, ``{"name": ...}`` and a Dask engine's ``"scheduler"`` after it."""
        return {"name": self.name} if self.scheduler is None else {"name": self.name, "scheduler": self.scheduler}


def describe_engine(engine: DaskEngine | None) -> EngineDescription:
    """What the manifest records about the engine (no address: it may name a private host)."""
    if engine is None:
        return EngineDescription("local")
    return EngineDescription("dask", engine.scheduler if engine.scheduler in LOCAL_SCHEDULERS else "distributed")
