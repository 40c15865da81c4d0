"""A model update as a framework holds it, flattened into one vector and put back.

The structures: a dict or ``OrderedDict`` of arrays (a PyTorch ``state_dict``), a list or tuple of
arrays (Flower's ``NDArrays``, a list of tensors), or a JAX pytree (``jax.tree_util``: nested dicts,
lists and the containers JAX registers, Flax's parameters among them). The arrays are numpy arrays,
or arrays of one other library on one device (PyTorch, CuPy, JAX: the Array API namespace of
:func:`ldpcli.math._devices.device_namespace`), where the flat vector stays.

:func:`flatten_update` checks every array (floating point, finite) and concatenates them, in the
structure's order, into one float64 vector (the precision of ldp's array path; JAX without
``jax_enable_x64`` has no float64 and works in float32); :meth:`UpdateLayout.unflatten` splits a
vector of the same length back into the same structure, each array with its shape, dtype and device.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.math._devices import device_namespace, device_of, without_autograd


@dataclass(frozen=True)
class UpdateLayout:
    """Where each array of an update sits in its flat vector, and how to rebuild the structure.

    ``kind`` is ``"mapping"``, ``"sequence"`` or ``"pytree"``; ``container`` the mapping's or
    sequence's type, or the pytree's treedef; ``names`` each array's name in errors
    (``update['fc.weight']``, ``update[2]``, a pytree's key path); ``shapes`` and ``dtypes`` the
    arrays'; ``xp`` the Array API namespace (None for numpy) and ``device`` their device.
    """

    kind: str
    container: Any
    keys: tuple[Any, ...]
    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[Any, ...]
    xp: Any
    device: Any

    @property
    def sizes(self) -> tuple[int, ...]:
        """The number of values of each array."""
        return tuple(int(np.prod(shape, dtype=np.int64)) for shape in self.shapes)

    @property
    def d(self) -> int:
        """The length of the flat vector."""
        return sum(self.sizes)

    def matches(self, other: UpdateLayout) -> bool:
        """Whether ``other`` has the same arrays: names, shapes and dtypes, in the same order."""
        return (self.names, self.shapes, tuple(map(str, self.dtypes))) == (
            other.names, other.shapes, tuple(map(str, other.dtypes)))

    def unflatten(self, vector: Any) -> Any:
        """The structure of the update with the values of ``vector`` (its length :attr:`d`), each array
        cast back to its dtype, on its device."""
        arrays, start = [], 0
        for shape, dtype, size in zip(self.shapes, self.dtypes, self.sizes, strict=True):
            part = vector[start:start + size]
            start += size
            if self.xp is None:
                arrays.append(np.asarray(part).reshape(shape).astype(dtype, copy=True))
            else:
                arrays.append(self.xp.astype(self.xp.reshape(part, shape), dtype, copy=True))
        if self.kind == "mapping":
            return self.container(zip(self.keys, arrays, strict=True))
        if self.kind == "sequence":
            return self.container(arrays)
        import jax

        return jax.tree_util.tree_unflatten(self.container, arrays)


def _leaves(update: Any, label: str) -> tuple[str, Any, tuple[Any, ...], tuple[str, ...], list[Any]]:
    """(kind, container, keys, names, arrays) of ``update``."""
    if isinstance(update, Mapping) and all(_is_array(v) for v in update.values()):
        keys = tuple(update.keys())
        return "mapping", type(update), keys, tuple(f"{label}[{k!r}]" for k in keys), list(update.values())
    if isinstance(update, (list, tuple)) and all(_is_array(v) for v in update):
        return ("sequence", type(update), tuple(range(len(update))), tuple(f"{label}[{i}]" for i in range(len(update))),
                list(update))
    if "jax" in sys.modules:
        import jax

        paths, treedef = jax.tree_util.tree_flatten_with_path(update)
        return ("pytree", treedef, tuple(range(len(paths))),
                tuple(label + jax.tree_util.keystr(path) for path, _ in paths), [leaf for _, leaf in paths])
    raise TypeError(f"{label} must be a list, tuple or dict of arrays (numpy, PyTorch, CuPy, JAX) or a JAX pytree, "
                    f"got {type(update).__name__}")


def _is_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) or device_namespace(value) is not None


def flatten_update(update: Any, label: str = "update") -> tuple[Any, UpdateLayout]:
    """The arrays of ``update`` as one flat float64 vector (numpy, or on the arrays' device) and its layout.

    TypeError for an array that is not floating point (an integer buffer, a complex array), for a value
    that is not an array, or for arrays of several libraries or devices; ValueError for an update with
    no values or a value that is NaN or infinite. Each message names the array (``label[key]``).
    """
    kind, container, keys, names, arrays = _leaves(update, label)
    if not arrays:
        raise ValueError(f"{label} holds no arrays: pass the model's parameters (or their change) as arrays")
    spaces = [device_namespace(a) if not isinstance(a, np.ndarray) else None for a in arrays]
    for name, array, xp in zip(names, arrays, spaces, strict=True):
        if not isinstance(array, np.ndarray) and xp is None:
            raise TypeError(f"{name} is a {type(array).__name__}, not an array: pass numpy arrays or tensors")
    xp = spaces[0]
    device = None if xp is None else device_of(arrays[0])
    for name, array, other in zip(names, arrays, spaces, strict=True):
        if other is not xp or (xp is not None and device_of(array) != device):
            raise TypeError(f"{name} is not on the device of {names[0]}: put every array of {label} on one device "
                            "of one library")
        _check_floating(name, array, xp)
    layout = UpdateLayout(kind, container, keys, names, tuple(tuple(int(s) for s in a.shape) for a in arrays),
                          tuple(a.dtype for a in arrays), xp, device)
    if layout.d == 0:
        raise ValueError(f"{label} has no values (every array is empty): there is nothing to privatize")
    if xp is None:
        vector = np.concatenate([np.asarray(a, dtype=np.float64).reshape(-1) for a in arrays])
    else:
        with without_autograd(xp), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # JAX without x64: float32, said in the module docstring
            vector = xp.concat([xp.reshape(xp.astype(a, xp.float64), (-1,)) for a in arrays])
    _check_finite(vector, layout)
    return vector, layout


def _check_floating(name: str, array: Any, xp: Any) -> None:
    """TypeError unless ``array`` holds real floating-point numbers."""
    if xp is None:
        floating, complex_ = np.issubdtype(array.dtype, np.floating), np.issubdtype(array.dtype, np.complexfloating)
    else:
        floating, complex_ = xp.isdtype(array.dtype, "real floating"), xp.isdtype(array.dtype, "complex floating")
    if complex_:
        raise TypeError(f"{name} is complex ({array.dtype}): a model update holds real numbers")
    if not floating:
        raise TypeError(f"{name} has dtype {array.dtype}: a model update holds floating-point arrays; leave integer "
                        "buffers (a batch-norm counter) out of it")


def _check_finite(vector: Any, layout: UpdateLayout) -> None:
    """ValueError naming the first array holding a NaN or an infinite value, and where in it."""
    xp = layout.xp
    finite = np.isfinite(vector) if xp is None else xp.isfinite(vector)
    if bool(finite.all() if xp is None else xp.all(finite)):
        return
    first = int(np.argmin(finite)) if xp is None else int(xp.argmin(xp.astype(finite, xp.int8)))
    start = 0
    for name, size in zip(layout.names, layout.sizes, strict=True):
        if first < start + size:
            value = float(vector[first])
            raise ValueError(f"{name} holds {value} at flat index {first - start}: a model update must be finite; "
                             "check the training step (a diverged loss) before privatizing")
        start += size
