"""MkDocs hook (a local file, not a plugin): the docstrings' Sphinx roles rendered as plain code.

ldp's docstrings are numpydoc with Sphinx cross-reference roles (``:func:`open_release```, ``:class:`Release```);
mkdocstrings renders a docstring as Markdown, where a role shows as ``:func:`` before the code. This hook drops the
role and a leading ``~`` (Sphinx's "last component only"), leaving the code span.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|data|attr|exc|obj|const|ref):<code>~?")


def on_page_content(html: str, **_: Any) -> str:
    """The page's HTML with each ``:role:<code>`` reduced to ``<code>``."""
    return _ROLE.sub("<code>", html)
