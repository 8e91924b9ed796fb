"""Griffe extension: docstring examples (``>>>`` runs) render as highlighted code.

Markdown reads a line starting with ``>`` as a block quote, so a bare doctest in a
docstring comes out as nested quotes with its lines run together. This extension
wraps each doctest run (the ``>>>``/``...`` lines and the output lines after them,
up to a blank line) in a fenced ``pycon`` block before mkdocstrings renders it.
Enabled in mkdocs.yml (``plugins.mkdocstrings...options.extensions``).
"""

from __future__ import annotations

from typing import Any

import griffe

__all__ = ["DoctestBlocks", "fence_doctests"]


def fence_doctests(text: str) -> str:
    """``text`` with every doctest run outside a code fence wrapped in a pycon fence."""
    out: list[str] = []
    in_fence = False
    in_doctest = False
    for line in text.splitlines():
        stripped = line.lstrip()
        if in_doctest and not stripped:
            out.append("```")
            in_doctest = False
        if not in_doctest and stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
        elif not in_fence and not in_doctest and stripped.startswith(">>>"):
            out.append(line[: len(line) - len(stripped)] + "```pycon")
            in_doctest = True
        out.append(line)
    if in_doctest:
        out.append("```")
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    """Fences the doctests of every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
