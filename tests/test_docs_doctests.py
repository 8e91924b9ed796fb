"""Docstring examples render as highlighted code in the API reference.

`scripts/griffe_doctest_blocks.py` fences each doctest of a docstring for
mkdocstrings; the hook `scripts/docs_doctest_check.py` fails every docs build
(`hatch run docs`) whose pages hold a `>>>` outside highlighted code.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mkdocs.exceptions import PluginError
from mkdocs.utils.yaml import yaml_load

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import docs_doctest_check  # noqa: E402  # a script, importable once scripts/ is on the path
import griffe_doctest_blocks  # noqa: E402


def test_a_doctest_run_is_fenced_up_to_the_blank_line() -> None:
    text = "Summary.\n\n>>> x = 1\n>>> x + 1\n2\n\nAfter."
    assert griffe_doctest_blocks.fence_doctests(text) == (
        "Summary.\n\n```pycon\n>>> x = 1\n>>> x + 1\n2\n```\n\nAfter."
    )


def test_a_doctest_at_the_end_and_an_indented_one_are_fenced() -> None:
    assert griffe_doctest_blocks.fence_doctests("A.\n    >>> f()\n    1") == (
        "A.\n    ```pycon\n    >>> f()\n    1\n```"
    )


def test_fenced_code_is_left_alone() -> None:
    text = "```python\n>>> already\n```\n"
    assert griffe_doctest_blocks.fence_doctests(text) == text.rstrip("\n")


QUOTED = "<blockquote><blockquote><blockquote><p>&gt;&gt;&gt; g = Graph()</p></blockquote>"
HIGHLIGHTED = (
    '<div class="language-pycon highlight"><pre><code><span class="gp">&gt;&gt;&gt; </span>'
    '<span class="n">g</span></code></pre></div>'
)


def test_the_hook_finds_a_quoted_doctest_and_passes_highlighted_ones() -> None:
    assert docs_doctest_check.stray_prompts(HIGHLIGHTED) == []
    assert docs_doctest_check.stray_prompts("<p>use <code>&gt;&gt;&gt;</code> here</p>") == []
    assert len(docs_doctest_check.stray_prompts(QUOTED + HIGHLIGHTED)) == 1


def test_the_hook_fails_the_page() -> None:
    class _File:
        src_uri = "api/tensor.md"

    class _Page:
        file = _File()

    with pytest.raises(PluginError, match=r"api/tensor\.md: 1 '>>>' example line"):
        docs_doctest_check.on_post_page(QUOTED, page=_Page())  # type: ignore[arg-type]


def test_the_site_enables_the_extension_and_the_hook() -> None:
    config = yaml_load((ROOT / "mkdocs.yml").read_text())
    assert "scripts/docs_doctest_check.py" in config["hooks"]
    handlers = [
        p["mkdocstrings"] for p in config["plugins"] if isinstance(p, dict) and "mkdocstrings" in p
    ]
    options = handlers[0]["handlers"]["python"]["options"]
    assert "scripts/griffe_doctest_blocks.py:DoctestBlocks" in options["extensions"]
