"""Readable text dumps of a graph and export to Graphviz DOT."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.ir.leaf_shapes import free_axes
from asgrad.tensor.ir.passes import topological_order

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor
    from asgrad.tensor.ir.graph import Graph, Node


def _nodes(graph: Graph, outputs: Iterable[Tensor] | None) -> list[Node]:
    if outputs is None:
        return list(graph.nodes)
    return topological_order([t.node for t in outputs])


def _format_attr(value: Any) -> str:
    if isinstance(value, np.ndarray):
        if value.size <= 4:
            return np.array2string(value, precision=4, separator=",")
        return f"array{list(value.shape)}"
    if isinstance(value, slice):
        parts = ["" if p is None else str(p) for p in (value.start, value.stop, value.step)]
        return ":".join(parts[:2]) + (f":{parts[2]}" if value.step is not None else "")
    if isinstance(value, tuple):
        items = [_format_attr(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if hasattr(value, "name") and hasattr(value, "shape"):
        return str(value.name)
    return repr(value)


def _implied(node: Node, key: str, value: Any) -> bool:
    """Attributes a listing leaves out: a parameter's variable, an input's default free axes."""
    if key == "variable":
        return True
    return node.op == "input" and key == "free" and value == free_axes(None, len(node.shape), "")


def _describe(node: Node) -> str:
    attrs = ", ".join(
        f"{k}={_format_attr(v)}" for k, v in node.attrs.items() if not _implied(node, k, v)
    )
    return f"{node.op}({attrs})" if attrs else node.op


def dump(graph: Graph, outputs: Iterable[Tensor] | None = None) -> str:
    """One line per node: ``%name: dtype[shape] = op(inputs) attrs``.

    >>> from asgrad.tensor import Graph
    >>> g = Graph()
    >>> x = g.input("x", (2,))
    >>> print(dump(g, [x * 2.0]))  # doctest: +ELLIPSIS
    graph 'graph'
      %x: float32[2] = input
      %constant_...: float32[] = constant(value=2.)
      %mul_...: float32[2] = mul(%x, %constant_...)
    """
    lines = [f"graph {graph.name!r}"]
    _dump_nodes(_nodes(graph, outputs), lines, "  ", set())
    return "\n".join(lines)


def _body(node: Node) -> Any:
    """The loop body of a ``scan`` node (printed as a nested graph), or None."""
    body = node.attrs["loop"] if node.op == "scan" else None
    return body if hasattr(body, "outputs") and hasattr(body, "graph") else None


def _dump_nodes(nodes: list[Node], lines: list[str], indent: str, seen: set[int]) -> None:
    for node in nodes:
        args = ", ".join(f"%{n.name}" for n in node.inputs)
        desc = _describe(node)
        if node.inputs:
            op, _, rest = desc.partition("(")
            desc = f"{op}({args}{', ' + rest[:-1] if rest else ''})"
        lines.append(f"{indent}%{node.name}: {node.type} = {desc}")
        body = _body(node)
        if body is not None and id(body) not in seen:  # each body listed once, nested
            seen.add(id(body))
            outs = ", ".join(f"%{n.name}" for n in body.outputs)
            lines.append(f"{indent}  body {body.name} -> ({outs}):")
            _dump_nodes(topological_order(body.outputs), lines, indent + "    ", seen)


def to_dot(graph: Graph, outputs: Iterable[Tensor] | None = None) -> str:
    """The graph in Graphviz DOT: inputs as ellipses, parameters as boxes; a loop's
    body is a cluster, its outputs linked to the scan node by dashed edges.

    >>> from asgrad.tensor import Graph, to_dot
    >>> x = Graph().input("x", (2,))
    >>> y = x.exp()
    >>> to_dot(x.graph, [y]).startswith("digraph")
    True
    """
    lines = [f'digraph "{graph.name}" {{', "  rankdir=TB;", '  node [fontname="monospace"];']
    _dot_nodes(_nodes(graph, outputs), lines, "  ", set())
    lines.append("}")
    return "\n".join(lines)


def _dot_nodes(nodes: list[Node], lines: list[str], indent: str, seen: set[int]) -> None:
    shapes = {"input": "ellipse", "parameter": "box", "constant": "note"}
    for node in nodes:
        label = f"{node.name}\\n{_describe(node)}\\n{node.type}".replace('"', "'")
        shape = shapes.get(node.op, "box")
        style = ', style="rounded"' if node.op not in shapes else ""
        lines.append(f'{indent}n{node.id} [label="{label}", shape={shape}{style}];')
        for inp in node.inputs:
            lines.append(f"{indent}n{inp.id} -> n{node.id};")
        body = _body(node)
        if body is not None and id(body) not in seen:
            seen.add(id(body))
            name = str(body.name).replace('"', "'")
            lines.append(f'{indent}subgraph cluster_{node.id} {{ label="body {name}";')
            _dot_nodes(topological_order(body.outputs), lines, indent + "  ", seen)
            lines.append(f"{indent}}}")
            for out in body.outputs:
                lines.append(f"{indent}n{out.id} -> n{node.id} [style=dashed];")
