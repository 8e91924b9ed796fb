"""MkDocs hook (mkdocs.yml, `hooks:`): every `>>>` example on a page is highlighted code.

A doctest that reaches Markdown unfenced renders as nested block quotes with its
lines run together (`scripts/griffe_doctest_blocks.py` fences the docstrings' ones).
This hook fails the build when a rendered page holds a `>>>` prompt anywhere but in
a highlighted code block, where Pygments marks it as a prompt (`<span class="gp">`).
"""

from __future__ import annotations

import re
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.pages import Page

PROMPT = "&gt;&gt;&gt;"
HIGHLIGHTED = re.compile(r'<span class="gp">(?:&gt;&gt;&gt;|\.\.\.)[^<]*</span>')
INLINE_CODE = re.compile(r"<code>[^<]*</code>")


def stray_prompts(html: str) -> list[str]:
    """Up to 60 characters around each `>>>` that is not a highlighted prompt."""
    cleaned = INLINE_CODE.sub("", HIGHLIGHTED.sub("", html))
    out = []
    for match in re.finditer(re.escape(PROMPT), cleaned):
        start = max(match.start() - 30, 0)
        out.append(cleaned[start : match.end() + 30])
    return out


def on_post_page(output: str, *, page: Page, **kwargs: Any) -> str:
    stray = stray_prompts(output)
    if stray:
        raise PluginError(
            f"{page.file.src_uri}: {len(stray)} '>>>' example line(s) are not highlighted code"
            f" (a doctest rendered as text or quotes), e.g. {stray[0]!r}; fence it"
        )
    return output
