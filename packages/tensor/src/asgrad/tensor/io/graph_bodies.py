"""Loop bodies in the graph file: a `Body` as an entry of the
file's table of bodies (``bodies``), and an entry read back as a body nested in a graph.

An entry is ``{"name", "where", "counts": [carries, xs, ys], "nodes", "inputs",
"outputs"}``: the body's nodes, written like a graph's (`asgrad.tensor.io.graph_file`
writes and reads them, and keeps the table), its inputs (carries, per-step xs, then the
values it captures from the enclosing graph) and its outputs (new carries, then
per-step ys), as indices of its nodes. The captured values themselves are not written:
they are the last inputs of the node that uses the body (``scan``, ``scan_part``,
``scan_unpart``), which is where a loaded body finds them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from asgrad.tensor.io.graph_values import _fail, _field
from asgrad.tensor.ir.graph import Graph, Node
from asgrad.tensor.loops.body import Body, BodyGraph, body_from_graph

__all__ = ["body_entry", "read_body"]

# Reads a list of node entries into nodes of a graph (graph_file's reader).
ReadNodes = Callable[[Graph, list[Any], str], list[Node]]


def body_entry(body: Body, nodes: list[dict[str, Any]], index: dict[int, int]) -> dict[str, Any]:
    """The entry's fields for ``body`` but its name and line: its counts, its ``nodes``
    (already written, ``index`` their positions by node id), inputs and outputs."""
    return {
        "counts": [body.n_carry, body.n_x, body.n_y],
        "nodes": nodes,
        "inputs": [index[n.id] for n in body.inputs],
        "outputs": [index[n.id] for n in body.outputs],
    }


def _at(k: Any, nodes: Sequence[Node], where: str) -> Node:
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(nodes):
        raise _fail(where, f"index {k!r} is out of range (0..{len(nodes) - 1})")
    return nodes[k]


def read_body(
    entry: Any, parent: Graph, users_inputs: Sequence[Node], read_nodes: ReadNodes, where: str
) -> Body:
    """The body ``entry`` describes, nested in ``parent``; ``users_inputs`` are the
    inputs of the first node that uses it (its last ones: the captured values)."""
    name = _field(entry, "name", str, where)
    counts = _field(entry, "counts", list, where)
    if len(counts) != 3 or not all(
        isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts
    ):
        raise _fail(where, f"counts are [carries, xs, ys], got {counts!r}")
    n_carry, n_x, n_y = counts
    graph = BodyGraph(parent, f"{name} body")
    nodes = read_nodes(graph, _field(entry, "nodes", list, where), where)
    graph.nodes = nodes
    inputs = [_at(i, nodes, where) for i in _field(entry, "inputs", list, where)]
    outputs = [_at(i, nodes, where) for i in _field(entry, "outputs", list, where)]
    n_capture = len(inputs) - n_carry - n_x
    if n_capture < 0 or any(n.op != "input" for n in inputs) or len(set(inputs)) != len(inputs):
        raise _fail(where, "its inputs are input nodes: carries, xs, then captured values")
    if len(outputs) != n_carry + n_y:
        raise _fail(where, f"it has {n_carry} carries and {n_y} ys, but {len(outputs)} outputs")
    if any(n.op == "parameter" for n in nodes):
        raise _fail(where, "a loop body holds no parameter (it captures its graph's)")
    for i, (c, out) in enumerate(zip(inputs, outputs[:n_carry], strict=False)):
        if c.type != out.type:
            raise _fail(where, f"carry {i} is {c.type}, but the body returns {out.type}")
    if len(users_inputs) < n_capture:
        raise _fail(where, f"it captures {n_capture} values; its node has fewer inputs")
    graph.outer = list(users_inputs[len(users_inputs) - n_capture :])
    for outer, inner in zip(graph.outer, inputs[n_carry + n_x :], strict=True):
        if outer.type != inner.type:
            raise _fail(where, f"captured {inner.name} is {inner.type}, given {outer.type}")
        graph.captured[outer.id] = inner
    graph.closed = True
    made_at = _field(entry, "where", str, where)
    return body_from_graph(name, made_at, graph, inputs, outputs, (n_carry, n_x, n_y))
