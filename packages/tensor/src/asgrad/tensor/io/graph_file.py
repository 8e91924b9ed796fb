"""The graph file: a graph, its loop bodies, variables and chosen outputs as one
versioned JSON file.

``Graph.save(path)`` writes it and ``Graph.load(path)`` reads it back
(`save_graph`, `load_graph`). Loading executes no code: the file is
parsed as JSON, every op is looked up in the registry, every type (a loop body's
too) is inferred again and compared with the one written, and anything else (an
unknown version, a missing field, an input that points forward, an attribute of an
unknown kind, values nested too deeply) is a [`GraphFileError`][asgrad.tensor.GraphFileError] naming
what is wrong.

The format, version 2 (``docs/viewer.md`` describes it field by field; version 1,
the same without ``bodies``, still loads)::

    {"format": "asgrad-graph", "version": 2, "name": "graph",
     "nodes": [{"op": "input", "name": "x", "inputs": [], "attrs": {...},
                "shape": [2, 3], "dtype": "float32", "location": "train.py:12",
                "meta": {"scope": "encoder"}}, ...],
     "bodies": [{"name": "step", "where": "model.py:30", "counts": [carries, xs, ys],
                 "nodes": [...], "inputs": [node index, ...],
                 "outputs": [node index, ...]}, ...],
     "variables": [{"name": "w", "trainable": true, "value": ARRAY}, ...],
     "updates": [[variable index, node index], ...],
     "outputs": [node index, ...]}

A node's inputs are indices of earlier nodes; a location names its file without the
absolute path of the machine that wrote it; an attribute value is JSON where JSON
says it exactly and a tagged object otherwise (`asgrad.tensor.io.graph_values`).
A loop body is written once in ``bodies`` however many nodes use it, and loaded as a
graph nested in the graph of the first node that uses it
(`asgrad.tensor.io.graph_bodies`).

>>> import tempfile, os
>>> from asgrad.tensor import Graph, evaluate
>>> g = Graph("demo")
>>> x = g.input("x", (3,))
>>> y = (x * 2.0).sum()
>>> path = os.path.join(tempfile.mkdtemp(), "demo.asgrad.json")
>>> g.save(path, outputs=[y])
>>> loaded = load_graph(path)
>>> evaluate(loaded.outputs, {"x": np.ones(3, np.float32)})[0].item()
6.0
"""

from __future__ import annotations

import html
import importlib.metadata
import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

import asgrad.tensor.ir.graph as _g  # graph.py imports this module: use its names late
from asgrad.tensor.errors import AsgradError, GraphFileError
from asgrad.tensor.io.graph_values import (
    _array,
    _fail,
    _field,
    _shape,
    decode_value,
    encode_value,
    portable_location,
)
from asgrad.tensor.ir.dtypes import DTYPES
from asgrad.tensor.ir.registry import TensorType, get_op

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from asgrad.tensor.api.tensor import Tensor
    from asgrad.tensor.ir.graph import Graph, Node, Variable
    from asgrad.tensor.runtime.executor import Program

__all__ = [
    "FORMAT",
    "VERSION",
    "LoadedGraph",
    "graph_to_dict",
    "load_graph",
    "portable_location",
    "save_graph",
]

FORMAT = "asgrad-graph"
VERSION = 2
# Versions this asgrad reads: version 1 files (before loop bodies) still load.
READABLE = (1, 2)


@dataclass
class LoadedGraph:
    """What a graph file holds: the graph (its ``updates`` include those saved), the
    outputs saved with it, and its nodes by name.

    ``compile(loaded.outputs, loaded.graph.updates)`` runs a saved training step.
    """

    graph: Graph
    outputs: list[Tensor]
    nodes: dict[str, Node]

    def __getitem__(self, name: str) -> Tensor:
        """The node called ``name``, as a tensor."""
        try:
            return self.graph._wrap(self.nodes[name])
        except KeyError:
            raise GraphFileError(f"the loaded graph has no node called {name!r}") from None


# -- writing ----------------------------------------------------------------------------
def graph_to_dict(
    graph: Graph,
    outputs: Sequence[Tensor] = (),
    updates: Mapping[Variable, Tensor] | None = None,
) -> dict[str, Any]:
    """The graph file's content for ``graph``: its nodes, ``outputs`` and variable
    updates (the graph's own and ``updates``, an optimizer's), as JSON-ready data."""
    pairs = [(v, t.node) for v, t in {**graph.updates, **(updates or {})}.items()]
    return nodes_to_dict(graph.name, graph.nodes, [t.node for t in outputs], pairs)


def program_to_dict(program: Program) -> dict[str, Any]:
    """The graph file's content for what a compiled program computes (after the passes)."""
    schedule = program.schedule
    graph = schedule.nodes[0].graph if schedule.nodes else _g.Graph()
    return nodes_to_dict(graph.name, schedule.nodes, schedule.outputs, schedule.updates)


def nodes_to_dict(
    name: str,
    nodes: Sequence[Node],
    outputs: Sequence[Node],
    updates: Sequence[tuple[Variable, Node]],
) -> dict[str, Any]:
    """The graph file's content for ``nodes`` (inputs before users)."""
    variables: dict[int, int] = {}
    var_list: list[Variable] = []
    leaves = [n.attrs["variable"] for n in nodes if n.op == "parameter"]
    for var in [*leaves, *(v for v, _ in updates)]:
        if id(var) not in variables:
            variables[id(var)] = len(var_list)
            var_list.append(var)
    writer = _Writer(variables)
    entries, index = writer.nodes(nodes)
    for n in [*outputs, *(n for _, n in updates)]:
        if n.id not in index:
            raise GraphFileError(f"output or update {n.name} is not one of the nodes saved")
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": name,
        "nodes": entries,
        "bodies": writer.bodies,
        "variables": [
            {"name": v.name, "trainable": v.trainable, "value": {"$array": _array(v.value)}}
            for v in var_list
        ],
        "updates": [[variables[id(v)], index[n.id]] for v, n in updates],
        "outputs": [index[n.id] for n in outputs],
    }


class _Writer:
    """Node entries of a file, and its table of loop bodies (each body once)."""

    def __init__(self, variables: dict[int, int]) -> None:
        self.variables = variables
        self.bodies: list[dict[str, Any]] = []
        self.body_index: dict[int, int] = {}

    def nodes(self, nodes: Sequence[Node]) -> tuple[list[dict[str, Any]], dict[int, int]]:
        index = {node.id: i for i, node in enumerate(nodes)}
        entries: list[dict[str, Any]] = []
        for node in nodes:
            for inp in node.inputs:
                if index.get(inp.id, len(entries)) >= len(entries):
                    raise GraphFileError(
                        f"node {node.name}: input {inp.name} is not an earlier node"
                    )
            entries.append(
                {
                    "op": node.op,
                    "name": node.name,
                    "inputs": [index[inp.id] for inp in node.inputs],
                    "attrs": encode_value(node.attrs, self.variables, self.body),
                    "shape": list(node.shape),
                    "dtype": node.dtype,
                    "location": portable_location(node.location),
                    "meta": encode_value(node.meta),
                }
            )
        return entries, index

    def body(self, value: Any) -> int | None:
        """The index of the loop body ``value`` in the table (added when new), or None."""
        from asgrad.tensor.io.graph_bodies import body_entry
        from asgrad.tensor.loops.body import Body

        if not isinstance(value, Body):
            return None
        if id(value) in self.body_index:
            return self.body_index[id(value)]
        k = self.body_index[id(value)] = len(self.bodies)
        entry: dict[str, Any] = {"name": value.name, "where": portable_location(value.where)}
        self.bodies.append(entry)  # its place is taken before the bodies nested in it
        entries, index = self.nodes(value.graph.nodes)
        entry.update(body_entry(value, entries, index))
        return k


def save_graph(
    graph: Graph | Program,
    path: str | os.PathLike[str],
    outputs: Sequence[Tensor] = (),
    updates: Mapping[Variable, Tensor] | None = None,
) -> None:
    """Write ``graph`` (which nodes are its ``outputs``, and extra variable ``updates``)
    to the JSON file ``path``; a compiled program: what it computes, after the passes."""
    if isinstance(graph, _g.Graph):
        data = graph_to_dict(graph, outputs, updates)
    else:
        data = program_to_dict(graph)
    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, separators=(",", ":"), allow_nan=False)
    os.replace(tmp, path)


# -- reading ----------------------------------------------------------------------------
def graph_from_dict(data: Any, source: str = "graph file") -> LoadedGraph:
    """The graph that `graph_to_dict` described as ``data``."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise _fail(source, f'not an asgrad graph file (no "format": {FORMAT!r})')
    version = data.get("version")
    if version not in READABLE or isinstance(version, bool):
        raise _fail(
            source,
            f"graph file version {version!r} is not supported; this asgrad reads versions"
            f" {', '.join(map(str, READABLE))}. Save the graph again with this version of asgrad",
        )
    graph = _g.Graph(str(_field(data, "name", str, source)))
    variables = []
    for i, v in enumerate(_field(data, "variables", list, source)):
        where = f"{source}: variable {i}"
        value = decode_value(_field(v, "value", dict, where), where)
        if not isinstance(value, np.ndarray):
            raise _fail(where, "its value is not an array")
        name, trainable = _field(v, "name", str, where), _field(v, "trainable", bool, where)
        variables.append(_g.Variable(name, np.array(value), trainable=trainable))
    bodies = [] if version == 1 else _field(data, "bodies", list, source)
    reader = _Reader(bodies, variables, source)
    nodes = reader.nodes(graph, _field(data, "nodes", list, source), source)
    graph.nodes = nodes
    updates = _field(data, "updates", list, source)
    outputs = _field(data, "outputs", list, source)
    for pair in updates:
        if not (
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(k, int) for k in pair)
        ):
            raise _fail(source, f"an update is [variable index, node index], got {pair!r}")
        var, node = _index(pair[0], variables, source), _index(pair[1], nodes, source)
        graph.updates[var] = graph._wrap(node)
    return LoadedGraph(
        graph,
        [graph._wrap(_index(k, nodes, source)) for k in outputs],
        {n.name: n for n in nodes},
    )


def _index(k: Any, items: Sequence[Any], where: str) -> Any:
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(items):
        raise _fail(where, f"index {k!r} is out of range (0..{len(items) - 1})")
    return items[k]


class _Reader:
    """Reads node lists, and each loop body of the file's table when a node first names
    it: the body's graph is nested in that node's graph, and its captured values are
    that node's last inputs (as for ``scan``, ``scan_part`` and ``scan_unpart``)."""

    def __init__(self, bodies: list[Any], variables: list[Variable], source: str) -> None:
        self.entries, self.variables, self.source = bodies, variables, source
        self.built: dict[int, Any] = {}
        self.reading: set[int] = set()

    def nodes(self, graph: Graph, entries: list[Any], where: str) -> list[Node]:
        nodes: list[Node] = []
        for i, entry in enumerate(entries):
            nodes.append(self.node(graph, entry, nodes, f"{where}: node {i}"))
        return nodes

    def node(self, graph: Graph, entry: Any, nodes: list[Node], where: str) -> Node:
        op = _field(entry, "op", str, where)
        name = _field(entry, "name", str, where)
        where = f"{where} ({name}, {op})"
        try:
            opdef = get_op(op)
        except AsgradError:
            raise _fail(
                where, f"unknown op {op!r}; is the package that registers it imported?"
            ) from None
        refs = _field(entry, "inputs", list, where)
        if not all(
            isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(nodes) for k in refs
        ):
            raise _fail(where, f"inputs must be indices of earlier nodes, got {refs!r}")
        if opdef.arity is not None and len(refs) != opdef.arity:
            raise _fail(where, f"{op} takes {opdef.arity} inputs, the file gives {len(refs)}")
        inputs = tuple(nodes[k] for k in refs)

        def body(k: Any) -> Any:
            return self.body(k, graph, inputs, where)

        attrs = decode_value(
            _field(entry, "attrs", dict, where), where, self.variables, bodies=body
        )
        meta = decode_value(_field(entry, "meta", dict, where), where)
        dtype = _field(entry, "dtype", str, where)
        if dtype not in DTYPES:
            raise _fail(where, f"unknown dtype {dtype!r}")
        type_ = TensorType(tuple(_shape(_field(entry, "shape", list, where), where)), dtype)
        location = _field(entry, "location", str, where)
        try:  # a file written before an attribute existed holds no value for it
            attrs = opdef.normalize_attrs(attrs)
        except AsgradError as exc:
            raise _fail(where, f"its attributes do not fit the op: {exc}") from None
        _check_type(op, attrs, inputs, type_, where)
        node = _g.Node(graph, op, inputs, attrs, type_, name, location, meta)
        if op in ("input", "parameter"):
            if name in graph._names:
                raise _fail(where, f"a second leaf called {name!r}")
            graph._names[name] = node
            if op == "parameter":
                graph._variables[id(attrs["variable"])] = node
        return node

    def body(self, k: Any, parent: Graph, users_inputs: tuple[Node, ...], where: str) -> Any:
        """Body ``k`` of the table, read (once) as nested in ``parent``."""
        from asgrad.tensor.io.graph_bodies import read_body

        entry = _index(k, self.entries, f"{where}: body")
        if k in self.built:
            return self.built[k]
        if k in self.reading:
            raise _fail(where, f"body {k} holds a loop over itself")
        self.reading.add(k)
        where = f"{self.source}: body {k}"
        self.built[k] = read_body(entry, parent, users_inputs, self.nodes, where)
        self.reading.discard(k)
        return self.built[k]


def _check_type(
    op: str, attrs: dict[str, Any], inputs: tuple[Node, ...], type_: TensorType, where: str
) -> None:
    """The type written must be the one the op infers (the leaves: their attributes',
    which the schema has checked)."""
    if op == "input":
        return
    if op == "parameter":
        found = TensorType(attrs["variable"].shape, attrs["variable"].dtype)
    elif op == "constant":
        found = TensorType(tuple(attrs["value"].shape), attrs["value"].dtype.name)
    else:
        try:
            found = get_op(op).infer([n.type for n in inputs], attrs)
        except (AsgradError, TypeError, ValueError, KeyError, IndexError) as exc:
            raise _fail(where, f"its attributes or inputs do not fit the op: {exc}") from None
    if found != type_:
        raise _fail(where, f"the file says {type_}, but the op makes {found}")


def load_graph(path: str | os.PathLike[str]) -> LoadedGraph:
    """Read a graph file written by `save_graph` (no code is executed)."""
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as f:
            data = json.load(f)
        return graph_from_dict(data, source)
    except FileNotFoundError:
        raise GraphFileError(f"{source}: no such graph file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GraphFileError(f"{source}: not a graph file, the JSON is malformed ({exc})") from None
    except RecursionError:
        raise GraphFileError(
            f"{source}: its values or loop bodies are nested too deeply to read"
        ) from None


# Renderers of a graph as HTML for Jupyter: ``asgrad.viz`` registers one when imported,
# and the entry point group ``asgrad.viewers`` names it without an import.
HTML_RENDERERS: list[Callable[[Graph], str]] = []
VIEWER_ENTRY_POINT_GROUP = "asgrad.viewers"


def notebook_html(graph: Graph) -> str:
    """The graph viewer's page for ``graph``, for Jupyter (``Graph._repr_html_``)."""
    if not HTML_RENDERERS:
        for entry in importlib.metadata.entry_points(group=VIEWER_ENTRY_POINT_GROUP):
            HTML_RENDERERS.append(entry.load())
            break
    if HTML_RENDERERS:
        return HTML_RENDERERS[-1](graph)
    text = html.escape(f"{graph!r}: install asgrad-viz to see it drawn")
    return f"<pre>{text}</pre>"
