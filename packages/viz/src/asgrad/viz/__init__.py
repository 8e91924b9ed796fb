"""asgrad.viz: an interactive graph viewer in one self-contained HTML file.

[`show`][asgrad.viz.show] draws a graph, tensors, a compiled program (its graph before and after
the passes) or a saved graph file: a layered layout (elkjs, or a faster one for
large views), module scopes that fold, loop bodies that open as graphs of their
own, a node inspector, search, input tracing, forward/gradient/optimizer colours,
GPU fusion groups and, given feeds, a CPU profile's time and memory per node.
``python -m asgrad.viz FILE`` does the same for a graph file, and a
[`Graph`][asgrad.tensor.Graph] shows itself in Jupyter.

>>> from asgrad.tensor import Graph
>>> g = Graph("demo")
>>> y = (g.input("x", (2, 3)) * 2.0).sum()
>>> html = to_html(y)
>>> html.startswith("<!DOCTYPE html>") and "elk" in html.lower()
True
"""

from __future__ import annotations

import os
import tempfile
import webbrowser
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from asgrad.tensor import Graph, compile
from asgrad.tensor.cpu.profile import NodeProfile, profile_program
from asgrad.tensor.io.graph_file import HTML_RENDERERS
from asgrad.viz.data import page_data, subject_of
from asgrad.viz.errors import VizError
from asgrad.viz.fusion import fusion_groups
from asgrad.viz.page import render_page

__all__ = ["VizError", "notebook_html", "profile", "show", "to_html"]
__version__ = "0.1.0"


def profile(item: Any, feeds: Mapping[str, Any], repeat: int = 5) -> NodeProfile:
    """Time and memory per node of ``item`` (a program, or what [`show`][asgrad.viz.show] takes)
    run on the CPU with ``feeds`` (see `asgrad.tensor.cpu.profile`).

    >>> from asgrad.tensor import Graph
    >>> from asgrad.viz import profile
    >>> x = Graph().input("x", (2,))
    >>> result = profile(x.exp(), {"x": [1.0, 2.0]}, repeat=1)
    >>> type(result).__name__
    'NodeProfile'
    """
    subject = subject_of(item)
    program = subject.program
    if program is None or program.backend != "cpu":
        outputs = [subject.graph._wrap(n) for n in subject.roots]
        program = compile(outputs, backend="cpu")
    return profile_program(program, feeds, repeat)


def to_html(
    item: Any,
    *,
    feeds: Mapping[str, Any] | None = None,
    title: str | None = None,
    fusion: bool = True,
) -> str:
    """The viewer page for ``item`` as one HTML string.

    ``item``: a [`Graph`][asgrad.tensor.Graph], a tensor or list of tensors, a
    compiled [`Program`][asgrad.tensor.Program], a loaded graph file or a path to one.
    ``feeds``: when given, the CPU profile of one run colours the nodes.
    ``fusion``: show the GPU backend's fusion groups (when ``asgrad-gpu`` is installed).

    >>> from asgrad.tensor import Graph
    >>> from asgrad.viz import to_html
    >>> x = Graph().input("x", (2,))
    >>> page = to_html(x.exp() + 1.0, title="exp plus one")
    >>> "exp plus one" in page
    True
    """
    subject = subject_of(item)
    prof = profile(item, feeds) if feeds is not None else None
    groups = fusion_groups(subject.schedule, subject.roots) if fusion else {}
    return render_page(page_data(subject, title=title, profile=prof, fusion=groups))


def show(
    item: Any,
    path: str | os.PathLike[str] | None = None,
    *,
    feeds: Mapping[str, Any] | None = None,
    title: str | None = None,
    open_browser: bool = True,
) -> Path:
    """Write the viewer page for ``item`` (see [`to_html`][asgrad.viz.to_html]) to ``path``
    (default: a new file in the temporary folder) and open it in the web browser; returns
    the path.

    >>> from pathlib import Path
    >>> from tempfile import TemporaryDirectory
    >>> from asgrad.tensor import Graph
    >>> from asgrad.viz import show
    >>> x = Graph().input("x", (2,))
    >>> with TemporaryDirectory() as folder:
    ...     page = show(x.exp(), Path(folder) / "graph.html", open_browser=False)
    ...     page.name, page.read_text(encoding="utf-8").startswith("<!")
    ('graph.html', True)
    """
    html = to_html(item, feeds=feeds, title=title)
    if path is None:
        fd, name = tempfile.mkstemp(prefix="asgrad-graph-", suffix=".html")
        os.close(fd)
        target = Path(name)
    else:
        target = Path(path)
    try:
        target.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise VizError(f"cannot write the graph page to {target}: {exc}") from None
    if open_browser:
        webbrowser.open(target.resolve().as_uri())
    return target


def notebook_html(graph: Graph) -> str:
    """The page for ``graph`` in an iframe, as Jupyter shows it (``Graph._repr_html_``).

    >>> from asgrad.tensor import Graph
    >>> from asgrad.viz import notebook_html
    >>> g = Graph()
    >>> _ = g.input("x", (2,)).exp()
    >>> notebook_html(g).startswith("<iframe")
    True
    """
    page = to_html(graph).replace("&", "&amp;").replace('"', "&quot;")
    return (
        f'<iframe srcdoc="{page}" style="width:100%;height:640px;border:1px solid #ccc"></iframe>'
    )


HTML_RENDERERS.append(notebook_html)
