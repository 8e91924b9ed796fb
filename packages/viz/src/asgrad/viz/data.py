"""What the viewer page shows, as JSON-ready data: the graph before and after the
passes, each node's scope, role, types and source line, the GPU fusion groups and a
profile's time per node."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from asgrad.tensor import Graph, Node, Program, Tensor, optimize, topological_order
from asgrad.tensor.io.graph_file import LoadedGraph, load_graph
from asgrad.tensor.ir.schedule import Schedule

__all__ = ["Subject", "page_data", "subject_of"]

DATA_VERSION = 2
# Attribute values are shown as text of at most this many characters.
ATTR_CHARS = 160


@dataclass
class Subject:
    """What to draw: a graph, the nodes it computes before and after the passes, and
    the values wanted (roots)."""

    graph: Graph
    roots: list[Node]
    after: list[Node]
    schedule: Schedule | None = None
    program: Program | None = None


def subject_of(item: Any) -> Subject:
    """A `Subject` for a graph, a tensor, tensors, a compiled program, a loaded
    graph file or a path to one."""
    if isinstance(item, str | os.PathLike):
        item = load_graph(item)
    if isinstance(item, LoadedGraph):
        roots = [t.node for t in item.outputs] + [t.node for t in item.graph.updates.values()]
        return _with_passes(item.graph, roots or _sinks(item.graph))
    if isinstance(item, Program):
        schedule = item.schedule
        graph = schedule.nodes[0].graph if schedule.nodes else Graph()
        roots = list(schedule.outputs) + [n for _, n in schedule.updates]
        return Subject(graph, roots, list(schedule.nodes), schedule, item)
    if isinstance(item, Graph):
        roots = [t.node for t in item.updates.values()]
        return _with_passes(item, _sinks(item) + roots)
    tensors = (
        [item] if isinstance(item, Tensor) else list(item) if isinstance(item, list | tuple) else []
    )
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        from asgrad.viz.errors import VizError

        raise VizError(
            "show() takes a Graph, a Tensor, a list of Tensors, a compiled Program, a loaded"
            f" graph file or a path to one; got {type(item).__name__}"
        )
    graph = tensors[0].graph
    roots = [t.node for t in tensors] + [t.node for t in graph.updates.values()]
    return _with_passes(graph, roots)


def _sinks(graph: Graph) -> list[Node]:
    used = {i.id for n in graph.nodes for i in n.inputs}
    return [n for n in graph.nodes if n.id not in used and n.op not in ("input", "parameter")]


def _with_passes(graph: Graph, roots: list[Node]) -> Subject:
    after, _ = optimize(roots) if roots else ([], [])
    return Subject(graph, roots, after)


def _is_body(value: Any) -> bool:
    from asgrad.tensor.loops.body import Body

    return isinstance(value, Body)


def _text(value: Any) -> str:
    if _is_body(value):
        return f"loop body {value.name} ({len(value.graph.nodes)} nodes, defined at {value.where})"
    if isinstance(value, np.ndarray):
        head = np.array2string(value.reshape(-1)[:6], precision=4, separator=", ")
        more = ", ..." if value.size > 6 else ""
        return f"{value.dtype}{list(value.shape)} {head[:-1]}{more}]"
    if hasattr(value, "name") and hasattr(value, "shape") and hasattr(value, "trainable"):
        return f"variable {value.name!r} {value.dtype}{list(value.shape)}"
    text = repr(value)
    return text if len(text) <= ATTR_CHARS else text[: ATTR_CHARS - 3] + "..."


class _Bodies:
    """The loop bodies a page shows, each once, as views of their own (nested bodies too)."""

    def __init__(self) -> None:
        self.index: dict[int, str] = {}
        self.views: dict[str, dict[str, Any]] = {}

    def key(self, body: Any) -> str:
        found = self.index.get(id(body))
        if found is not None:
            return found
        key = self.index[id(body)] = str(len(self.index))
        nodes = list(body.graph.nodes)
        view = _view(nodes, f"loop body {body.name}", self)
        entries = {n.id: e for n, e in zip(nodes, view["nodes"], strict=True)}
        nc, nx = body.n_carry, body.n_x
        for inner, outer in zip(body.inputs[nc + nx :], body.outer, strict=True):
            entries[inner.id]["io"] = f"captured {outer.name}"
        for k, inner in enumerate(body.inputs[:nc]):
            entries[inner.id]["io"] = f"carry {k} in"
        for k, inner in enumerate(body.inputs[nc : nc + nx]):
            entries[inner.id]["io"] = f"xs {k}, one step"
        for k, out in enumerate(body.outputs):
            what = f"carry {k} out" if k < nc else f"ys {k - nc}, one step"
            entry = entries[out.id]
            entry["outputs"] = [*entry.get("outputs", []), what]
        view.update(
            {
                "body": body.name,
                "where": body.where,
                "carries": nc,
                "xs": nx,
                "ys": body.n_y,
                "captures": [n.name for n in body.outer],
            }
        )
        self.views[key] = view
        return key


def _node_entry(node: Node, index: Mapping[int, int], bodies: _Bodies) -> dict[str, Any]:
    meta = node.meta
    entry: dict[str, Any] = {
        "name": node.name,
        "op": node.op,
        "shape": list(node.shape),
        "dtype": node.dtype,
        "inputs": [index[i.id] for i in node.inputs],
        "attrs": {k: _text(v) for k, v in node.attrs.items()},
        "loc": node.location,
        "scope": str(meta.get("scope", "")),
        "role": str(meta.get("role", "forward")),
    }
    if "grad_of" in meta:
        entry["grad_of"] = str(meta["grad_of"])
    if "grad_wrt" in meta:
        entry["grad_wrt"] = [str(w) for w in meta["grad_wrt"]]
    if node.op == "parameter":
        variable = node.attrs["variable"]
        entry["trainable"] = bool(variable.trainable)
        # asgrad.nn's Parameter records the line that made it (its layer's construction)
        defined = getattr(variable, "defined_at", None)
        if isinstance(defined, str):
            entry["defined"] = defined
    loop = node.attrs.get("loop")
    if _is_body(loop):
        entry["body"] = bodies.key(loop)
    return entry


# A scope with more nodes of its own than this is cut into parts of PART_SIZE nodes
# (in order), boxes that fold like modules: a flat graph of 10,000 ops stays legible.
PART_ABOVE = 300
PART_SIZE = 200


def _view(nodes: Sequence[Node], label: str, bodies: _Bodies) -> dict[str, Any]:
    index = {n.id: i for i, n in enumerate(nodes)}
    entries = [_node_entry(n, index, bodies) for n in nodes]
    by_scope: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        by_scope.setdefault(entry["scope"], []).append(entry)
    for scope, members in by_scope.items():
        if len(members) > PART_ABOVE:
            for k, entry in enumerate(members):
                part = f"part{k // PART_SIZE + 1}"
                entry["module"] = scope
                entry["scope"] = f"{scope}.{part}" if scope else part
    return {"label": label, "nodes": entries}


def page_data(
    subject: Subject,
    *,
    title: str | None = None,
    profile: Any = None,
    fusion: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The page's data: ``views`` "before" (every node of the graph) and "after" (what
    is computed after the passes), with each before-node's fate (kept, dead, replaced),
    ``bodies``: the view of each loop body (a loop node's ``body`` names it; a body's
    inputs say which carry, xs or captured value they are, and its outputs which carry
    or ys), and ``profile`` (an `NodeProfile`) as time and
    bytes per after-node."""
    graph = subject.graph
    before = topological_order(graph.nodes)
    needed = {n.id for n in topological_order(subject.roots)}
    kept_names = {n.name for n in subject.after}
    bodies = _Bodies()
    before_view = _view(before, "before the passes", bodies)
    for node, entry in zip(before, before_view["nodes"], strict=True):
        if profile is not None and node.name in profile.seconds:  # the same node, kept
            entry["time"] = profile.seconds[node.name]
            entry["bytes"] = profile.nbytes[node.name]
        if node.name in kept_names:
            entry["status"] = "kept"
        elif node.id in needed:
            entry["status"] = "replaced"  # merged (CSE), folded or an identity
        else:
            entry["status"] = "dead"
    after_view = _view(subject.after, "after the passes", bodies)
    before_names = {n.name for n in before}
    for entry in after_view["nodes"]:
        entry["status"] = "kept" if entry["name"] in before_names else "new"
        if fusion and entry["name"] in fusion:
            entry["fusion"] = fusion[entry["name"]]
        if profile is not None and entry["name"] in profile.seconds:
            entry["time"] = profile.seconds[entry["name"]]
            entry["bytes"] = profile.nbytes[entry["name"]]
    data: dict[str, Any] = {
        "version": DATA_VERSION,
        "title": title or graph.name,
        "views": {"before": before_view, "after": after_view},
        "bodies": bodies.views,
        "fusion": bool(fusion),
    }
    if profile is not None:
        data["profile"] = {"total": profile.total, "backend": "cpu"}
    return data
