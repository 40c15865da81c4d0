"""The module paths of ldp 0.1, kept working for one release with a :class:`DeprecationWarning`.

ldp 0.1 had every implementation module public (``ldpcli.release.file``, ``ldpcli.math.shuffling``,
…) and its README taught 31 of them. They are private now (``ldpcli.release._file``), and users import
from the curated namespaces (``ldpcli``, ``ldpcli.release``, ``ldpcli.mechanisms``, …). An import of
an old path still works: a finder at the end of :data:`sys.meta_path` answers it with a module that
forwards every attribute to the private module, warns once per path, and maps the names that were
renamed so that one name has one meaning across the package (:data:`RENAMED`). The next release
removes this module.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Sequence
from typing import Any

#: The public modules of ldp 0.1 that are private now, by subpackage (``ldpcli.P.M`` is ``ldpcli.P._M``).
MOVED: dict[str, tuple[str, ...]] = {
    "analysis": ("answer", "attack", "estimate", "regress", "scan"),
    "audit": ("bits", "claims", "lower_bound", "statistics"),
    "estimators": ("mean", "moments", "projection", "protocol", "queries", "regression"),
    "io": ("arrow_ipc", "atomic", "columns", "csv", "faults", "formats", "hashing", "interrupts", "jsonfile",
           "layout", "messages", "npy", "parquet", "publication", "read", "remote", "streams", "vectors", "write"),
    "learn": ("accounting", "central", "labels", "losses", "model", "sgd", "train"),
    "math": ("bitgen", "devices", "domains", "kernels", "lawtests", "lazy", "shuffling", "sphere"),
    "mechanisms": ("base", "baselines", "bcdp", "bcdp_budget", "composition", "feature_levels", "gaussian_sign",
                   "hemisphere", "hooks", "hypercube", "privunit", "privunitg", "rendering", "scalar", "scalar_rel",
                   "separated"),
    "planning": ("compare", "plot", "shuffle", "solvers", "sweep"),
    "release": ("accounting", "arrays", "commit", "dataset", "engines", "file", "inputs", "ledger", "ledger_file",
                "options", "randomness", "rowhash", "safety", "shuffle", "sidecar", "signing"),
    "risk": ("cosine", "diffuse", "section", "sparse"),
}

#: Names of ldp 0.1 that were renamed, by old module path: old name -> (new home, new name).
RENAMED: dict[str, dict[str, tuple[str, str]]] = {
    "ldpcli.release.file": {"privatize_file": ("ldpcli.release", "write_file_release"),
                            "privatize_files": ("ldpcli.release", "write_file_releases")},
    "ldpcli.release.dataset": {"privatize_dataset": ("ldpcli.release", "write_dataset_release")},
    "ldpcli.analysis.estimate": {"estimate_mean": ("ldpcli.analysis", "estimate_file_mean")},
    "ldpcli.math.bitgen": {"describe": ("ldpcli.math", "describe_generator")},
    "ldpcli.risk.diffuse": {"check_epsilon": ("ldpcli.risk._diffuse", "as_epsilon")},
    "ldpcli.audit.bits": {"describe": ("ldpcli.audit._bits", "describe_labels")},
    "ldpcli.release.engines": {"describe": ("ldpcli.release._engines", "describe_engine")},
    "ldpcli.mechanisms.separated": {"optimal_split": ("ldpcli.mechanisms._separated", "optimal_direction_share")},
    "ldpcli.math.devices": {"rounded_cap_directions": ("ldpcli.math._devices", "device_rounded_cap_directions")},
    "ldpcli.mechanisms.rendering": {"unit_rows": ("ldpcli.math._extended", "secure_unit_rows")},
}

#: Where an old module's names live now, when it is not simply ``ldpcli.P._M``.
NEW_HOME: dict[str, str] = {"ldpcli.analysis.release": "ldpcli.analysis._handle"}

#: Old modules split along their seams: the private modules that hold the names moved out of
#: ``ldpcli.P._M``, asked in this order after it.
SPLIT: dict[str, tuple[str, ...]] = {
    "ldpcli.math.sphere": ("ldpcli.math._logspace", "ldpcli.math._rows"),
    "ldpcli.mechanisms.hypercube": ("ldpcli.mechanisms._threshold_channel", "ldpcli.math._binomial",
                                    "ldpcli.math._subsets"),
    "ldpcli.mechanisms.rendering": ("ldpcli.math._extended", "ldpcli.math._roundoff"),
    "ldpcli.mechanisms.feature_levels": ("ldpcli.io._feature_eps",),
}


def _old_paths() -> dict[str, str]:
    """Each old dotted path and the private module that holds its code now."""
    paths = {f"ldpcli.{package}.{module}": f"ldpcli.{package}._{module}"
             for package, modules in MOVED.items() for module in modules}
    paths.update(NEW_HOME)
    return paths


_OLD = _old_paths()


class _MovedModule(types.ModuleType):
    """An old module path: every attribute read from the private module that holds it now."""

    def __getattr__(self, name: str) -> Any:
        """The attribute of the new module; a renamed one with its own warning."""
        renamed = RENAMED.get(self.__name__, {}).get(name)
        if renamed is not None:
            home, new = renamed
            warnings.warn(f"{self.__name__}.{name} is now {home}.{new}; the old name goes in the next release",
                          DeprecationWarning, stacklevel=2)
            return getattr(importlib.import_module(home), new)
        for home in _homes(self.__name__):
            module = importlib.import_module(home)
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")

    def __dir__(self) -> list[str]:
        """The new modules' names."""
        return sorted({name for home in _homes(self.__name__) for name in dir(importlib.import_module(home))})


def _homes(old: str) -> tuple[str, ...]:
    """The private modules that hold an old path's names: its own, then those split out of it."""
    return (_OLD[old], *SPLIT.get(old, ()))


class _Loader:
    """Creates the forwarding module of an old path, and warns."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        """A :class:`_MovedModule` named as the old path."""
        return _MovedModule(spec.name, f"Deprecated alias of {_OLD[spec.name]}.")

    def exec_module(self, module: types.ModuleType) -> None:
        """Warn once for this path: where its names are now."""
        package = module.__name__.rsplit(".", 1)[0]
        warnings.warn(f"{module.__name__} is private since ldp 0.2: import its public names from {package} "
                      f"(the module itself is {_OLD[module.__name__]}); the old path goes in the next release",
                      DeprecationWarning, stacklevel=2)  # warnings skips importlib's frames


class _Finder:
    """Finds the old paths (last on :data:`sys.meta_path`, so a real module always wins)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        """A spec for an old path, None for every other name."""
        if fullname not in _OLD:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader())  # type: ignore[arg-type]


def install() -> None:
    """Put the finder of the old paths on :data:`sys.meta_path` (once)."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())
