"""The viewer's page: one self-contained HTML file (styles, scripts, data inlined).

The page loads nothing: its Content-Security-Policy allows no network request, and
the layout library (elkjs, vendored from npm with its licence, see
``scripts/vendor_js.py``) is inlined with the viewer's own scripts (``static/``:
``viewer.js``, ``layout.js``, ``ui.js``, wrapped in one function).
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib.resources import files
from typing import Any

__all__ = ["VENDORED", "render_page", "script_json"]

# The vendored files: (npm package@version, file in the package, file here).
VENDORED = (
    ("elkjs@0.12.1", "lib/elk.bundled.js", "elk.bundled.js"),
    ("elkjs@0.12.1", "LICENSE.md", "elkjs-LICENSE.md"),
)


@cache
def _asset(folder: str, name: str) -> str:
    return (files("asgrad.viz") / folder / name).read_text(encoding="utf-8")


def _script(text: str) -> str:
    """``text`` safe inside a <script> element (no closing tag can end it early)."""
    return text.replace("</", "<\\/")


# JSON inside a <script> element: the characters the HTML parser could read as
# markup (a closing tag, "<!--" that changes how the script ends) written as escapes.
_JSON_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


def script_json(data: Any) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element (and still JSON).

    >>> script_json({"name": "</script><!--"})
    '{"name":"\\\\u003c/script\\\\u003e\\\\u003c!--"}'
    """
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.translate(_JSON_ESCAPES)


def render_page(data: dict[str, Any]) -> str:
    """The HTML page showing ``data`` (`asgrad.viz.data.page_data`)."""
    viewer = (
        '"use strict";\n(function () {\n'
        + _asset("static", "viewer.js")
        + _asset("static", "layout.js")
        + _asset("static", "ui.js")
        + "})();\n"
    )
    parts = {
        "TITLE": _html(str(data.get("title", "graph"))),
        "CSS": _asset("static", "viewer.css"),
        "ELK": _script(_asset("vendor", "elk.bundled.js")),
        "DATA": script_json(data),
        "VIEWER": _script(viewer),
    }
    template = _asset("static", "template.html")
    # One pass over the template: a placeholder inside inserted text stays as it is.
    return re.sub(r"__(TITLE|CSS|ELK|DATA|VIEWER)__", lambda m: parts[m.group(1)], template)


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
