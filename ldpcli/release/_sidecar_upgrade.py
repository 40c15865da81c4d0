"""Older sidecar layouts read as the current one: :func:`upgrade`, the one adapter that
:func:`ldpcli.release._sidecar.load_sidecar` reads every sidecar through.

Schema version 1 (written by ldp 0.1) kept every field flat at the top level (``n``, ``d``,
``mechanism``, ``epsilon``, …, the mechanism's options and parameters beside them); version 2 keeps them in
sections (``data.n``, ``mechanism.spec.name``, ``mechanism.parameters``, …). The adapter gives the reader a
version-2 view of a version-1 document, and the name each field has in the file, so that an error names the
field the user can find (``'n'``, not ``'data.n'``). The document itself is never changed: the sidecar
keeps the content as read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ldpcli.errors import LdpError
from ldpcli.mechanisms import get_mechanism

#: Where version 1 kept what version 2 keeps at each dotted path: its flat name.
V1_NAMES = {
    "data.n": "n",
    "mechanism.d": "d",
    "data.d": "d",
    "mechanism.spec.name": "mechanism",
    "mechanism.spec.epsilon": "epsilon",
    "mechanism.spec.norm_bound": "norm_bound",
    "mechanism.spec.calibration": "calibration",
    "data.sha256": "sha256",
    "data.layout": "layout",
    "data.file": "data_file",
}
#: The numbers the reader recomputes and checks (version 2 keeps each in ``mechanism.parameters`` or in
#: ``mechanism``, by the mechanism; version 1 at the top level).
CHECKED_FIELDS = ("epsilon_exact", "gamma", "p", "scale", "expected_error_max")


def upgrade(content: dict[str, Any], version: int) -> tuple[dict[str, Any], Callable[[str], str]]:
    """``content``, a sidecar of schema ``version``, in the current layout, and the name that a dotted field of
    that layout has in the file (for errors). The current version is returned as it is; a version-1 document
    as a new dict with its flat fields moved to their sections (absent ones left absent, so the reader
    refuses them as before), its mechanism's options gathered into ``mechanism.spec.options`` (each option
    the mechanism takes, None where not recorded) and each checked number under both places version 2 may
    keep it. Nothing that only version 2 records (the release section, ``data.dtype``) appears in the view."""
    if version != 1:
        return content, _same
    view: dict[str, Any] = {"mechanism": {"spec": {}, "parameters": {}}, "data": {}}
    names = dict(V1_NAMES)
    for checked in CHECKED_FIELDS:
        names[f"mechanism.parameters.{checked}"] = names[f"mechanism.{checked}"] = checked
    for dotted, flat in names.items():
        if flat in content:
            *sections, last = dotted.split(".")
            node = view
            for section in sections:
                node = node[section]
            node[last] = content[flat]
    name = content.get("mechanism")
    try:
        options = get_mechanism(name).options if isinstance(name, str) else ()
    except LdpError:  # no registered mechanism: the reader refuses the name itself
        options = ()
    view["mechanism"]["spec"]["options"] = {option: content.get(option) for option in options}
    return view, lambda dotted: names.get(dotted, dotted)


def _same(dotted: str) -> str:
    """A field of the current layout is named by its dotted path."""
    return dotted
