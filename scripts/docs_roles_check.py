"""MkDocs hook (mkdocs.yml, `hooks:`): no page shows a Sphinx role as literal text.

mkdocstrings links with ``[`name`][asgrad.full.path]``; a Sphinx role such as
``:class:`Graph``` in a docstring renders as the text ":class:" before inline code.
This hook fails the build when a rendered page holds one (tests/test_api_reference.py
checks the docstrings themselves).
"""

from __future__ import annotations

import re
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.pages import Page

LITERAL_ROLE = re.compile(r":(?:py:)?[a-z]+:<code>[^<]*</code>")


def literal_roles(html: str) -> list[str]:
    """Each role that the page shows as text (``:kind:`` then inline code)."""
    return LITERAL_ROLE.findall(html)


def on_post_page(output: str, *, page: Page, **kwargs: Any) -> str:
    found = literal_roles(output)
    if found:
        raise PluginError(
            f"{page.file.src_uri}: {len(found)} Sphinx role(s) rendered as text, e.g."
            f" {found[0]!r}; write a cross-reference as [`name`][asgrad.full.path]"
        )
    return output
