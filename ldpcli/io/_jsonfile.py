"""Reading the small JSON files ldp reads: sidecars, dataset manifests, option and sweep tables; and
writing the indented JSON of sidecars and ledgers (:func:`indented_json`).

Such a path, given on the command line or found beside a data file, may be anything: a FIFO
(reading it waits for a writer forever), a character device such as ``/dev/zero`` (never ends),
a regular file far larger than any ldp writes, or JSON nested deeper than Python's parser
recurses. :func:`read_json` opens without blocking, reads only a regular file of at most
``limit`` bytes and reports every one of these as an ``OSError`` or a ``ValueError``, the errors
a caller already turns into its one-line message for an unreadable or malformed file.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from typing import Any

#: The largest JSON file ldp reads. A sidecar names every vector column, so one of a table with
#: 10⁶ long column names takes tens of MB; nothing ldp writes comes near this.
MAX_JSON_BYTES = 256 * 2**20

#: Lists of at least this many strings are encoded apart by :func:`indented_json`.
_LONG_LIST = 1_000

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def read_json(path: str | os.PathLike[str], *, limit: int = MAX_JSON_BYTES, **loads: Any) -> Any:
    """The JSON value in the regular file ``path`` (UTF-8, at most ``limit`` bytes).

    ``loads`` goes to :func:`json.loads` (e.g. ``object_pairs_hook``). ``OSError`` if the file
    cannot be opened, is not a regular file (a link is followed: a link to a regular file is
    read) or is larger than ``limit``; ``ValueError`` for text that is not UTF-8 or not JSON,
    nesting too deep to parse included.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    with open(os.open(path, flags), "rb", closefd=True) as handle:  # O_NONBLOCK: opening a FIFO does not wait
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "a special file")
            raise OSError(f"it is {kind}, not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(f"it is larger than {limit // 2**20} MiB, far more than any file ldp writes")
    try:
        return json.loads(data.decode("utf-8"), **loads)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def indented_json(document: Any, *, ensure_ascii: bool = True) -> str:
    """``json.dumps(document, indent=2, allow_nan=False, ensure_ascii=ensure_ascii)``, the same text, in
    memory that does not grow by the item for long lists of strings (a wide file's column names).

    json's indenting encoder is pure Python and holds one string per piece of the text until it joins
    them (10⁶ column names: ~170 MB). Each list of at least :data:`_LONG_LIST` strings is left out as a
    placeholder (a string of a random token), encoded by json's C encoder as one string, and put in at
    the placeholder's indentation: in a JSON string every inner ``"`` is escaped, so ``", "`` occurs
    there only between two items, where the indenting encoder puts a line break instead of the space.
    """
    lists: list[Any] = []
    token = f"\x00{secrets.token_hex(8)}-"

    def swap(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: swap(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            if len(value) >= _LONG_LIST and all(type(item) is str for item in value):
                lists.append(value)
                return f"{token}{len(lists) - 1}"
            return [swap(item) for item in value]
        return value

    text = json.dumps(swap(document), indent=2, allow_nan=False, ensure_ascii=ensure_ascii)
    pieces, start = [], 0
    for k, items in enumerate(lists):
        placeholder = json.dumps(f"{token}{k}", ensure_ascii=ensure_ascii)
        at = text.index(placeholder, start)
        line = text[text.rfind("\n", 0, at) + 1: at]
        pad = line[: len(line) - len(line.lstrip(" "))]
        inner = json.dumps(items, ensure_ascii=ensure_ascii)[1:-1].replace('", "', f'",\n{pad}  "')
        pieces += [text[start:at], "[\n", pad, "  ", inner, "\n", pad, "]"]
        start = at + len(placeholder)
    pieces.append(text[start:])
    return "".join(pieces)
