"""The graph file: a graph, its variables and chosen outputs as one versioned JSON file.

``Graph.save(path)`` writes it and ``Graph.load(path)`` reads it back
(:func:`save_graph`, :func:`load_graph`). Loading executes no code: the file is
parsed as JSON, every op is looked up in the registry, every type is inferred again
and compared with the one written, and anything else (an unknown version, a
missing field, an input that points forward, an attribute of an unknown kind) is a
:class:`GraphFileError` naming what is wrong.

The format, version 1 (``docs/viewer.md`` describes it field by field)::

    {"format": "asgrad-graph", "version": 1, "name": "graph",
     "nodes": [{"op": "input", "name": "x", "inputs": [], "attrs": {...},
                "shape": [2, 3], "dtype": "float32", "location": "train.py:12",
                "meta": {"scope": "encoder"}}, ...],
     "variables": [{"name": "w", "trainable": true, "value": ARRAY}, ...],
     "updates": [[variable index, node index], ...],
     "outputs": [node index, ...]}

A node's inputs are indices of earlier nodes. An attribute value is JSON where JSON
can say it exactly (a string, a bool, an int, a finite float, a list, a dict with
string keys whose keys do not start with ``$``), and otherwise one object of one
key: ``{"$tuple": [...]}``, ``{"$float": "nan"}``, ``{"$slice": [start, stop,
step]}``, ``{"$array": {"dtype", "shape", "data"}}`` (data: the little-endian bytes
in base64), ``{"$scalar": ARRAY}`` (a numpy scalar), ``{"$dict": [[key, value],
...]}``, ``{"$variable": index}`` (a parameter's variable).

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

import base64
import html
import importlib.metadata
import json
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

import asgrad.tensor.graph as _g  # graph.py imports this module: use its names late
from asgrad.tensor.dtypes import DTYPES
from asgrad.tensor.errors import AsgradError, GraphFileError
from asgrad.tensor.registry import TensorType, get_op

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from asgrad.tensor.executor import Program
    from asgrad.tensor.graph import Graph, Node, Variable
    from asgrad.tensor.tensor import Tensor

__all__ = ["FORMAT", "VERSION", "LoadedGraph", "graph_to_dict", "load_graph", "save_graph"]

FORMAT = "asgrad-graph"
VERSION = 1


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
def _array(value: np.ndarray) -> dict[str, Any]:
    if value.dtype.name not in DTYPES:
        raise GraphFileError(f"cannot save an array of dtype {value.dtype}")
    data = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).tobytes()
    return {
        "dtype": value.dtype.name,
        "shape": list(value.shape),
        "data": base64.b64encode(data).decode("ascii"),
    }


def encode_value(value: Any, variables: dict[int, int] | None = None) -> Any:
    """``value`` (an attribute) as JSON data, exactly (see the module docstring)."""
    if isinstance(value, np.ndarray):
        return {"$array": _array(value)}
    if isinstance(value, np.generic):
        return {"$scalar": _array(np.asarray(value))}
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, tuple):
        return {"$tuple": [encode_value(v, variables) for v in value]}
    if isinstance(value, list):
        return [encode_value(v, variables) for v in value]
    if isinstance(value, slice):
        return {"$slice": [encode_value(v) for v in (value.start, value.stop, value.step)]}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: encode_value(v, variables) for k, v in value.items()}
        return {"$dict": [[encode_value(k), encode_value(v, variables)] for k, v in value.items()]}
    if isinstance(value, _g.Variable) and variables is not None and id(value) in variables:
        return {"$variable": variables[id(value)]}
    raise GraphFileError(
        f"cannot save an attribute of type {type(value).__module__}.{type(value).__qualname__}"
        f" ({value!r}); a graph file holds numbers, strings, tuples, lists, dicts, slices and"
        " numpy arrays"
    )


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
    index = {node.id: i for i, node in enumerate(nodes)}
    variables: dict[int, int] = {}
    var_list: list[Variable] = []
    leaves = [n.attrs["variable"] for n in nodes if n.op == "parameter"]
    for var in [*leaves, *(v for v, _ in updates)]:
        if id(var) not in variables:
            variables[id(var)] = len(var_list)
            var_list.append(var)
    entries: list[dict[str, Any]] = []
    for node in nodes:
        for inp in node.inputs:
            if index.get(inp.id, len(entries)) >= len(entries):
                raise GraphFileError(f"node {node.name}: input {inp.name} is not an earlier node")
        entries.append(
            {
                "op": node.op,
                "name": node.name,
                "inputs": [index[inp.id] for inp in node.inputs],
                "attrs": encode_value(node.attrs, variables),
                "shape": list(node.shape),
                "dtype": node.dtype,
                "location": node.location,
                "meta": encode_value(node.meta),
            }
        )
    for n in [*outputs, *(n for _, n in updates)]:
        if n.id not in index:
            raise GraphFileError(f"output or update {n.name} is not one of the nodes saved")
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": name,
        "nodes": entries,
        "variables": [
            {"name": v.name, "trainable": v.trainable, "value": {"$array": _array(v.value)}}
            for v in var_list
        ],
        "updates": [[variables[id(v)], index[n.id]] for v, n in updates],
        "outputs": [index[n.id] for n in outputs],
    }


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
def _fail(where: str, what: str) -> GraphFileError:
    return GraphFileError(f"{where}: {what}")


def _field(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise _fail(where, f"missing field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _fail(where, f"field {key!r} is {type(value).__name__}, expected {kind}")
    return value


def _read_array(obj: Any, where: str) -> np.ndarray:
    dtype = _field(obj, "dtype", str, where)
    if dtype not in DTYPES:
        raise _fail(where, f"unknown dtype {dtype!r}")
    shape = tuple(_shape(_field(obj, "shape", list, where), where))
    try:
        data = base64.b64decode(_field(obj, "data", str, where), validate=True)
    except ValueError:
        raise _fail(where, "array data is not base64") from None
    item = np.dtype(dtype).newbyteorder("<")
    if len(data) != math.prod(shape) * item.itemsize:
        raise _fail(where, f"array data has {len(data)} bytes; {dtype}{list(shape)} needs more")
    return np.frombuffer(data, dtype=item).astype(dtype).reshape(shape)


def _shape(value: list[Any], where: str) -> list[int]:
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value):
        raise _fail(where, f"a shape must be a list of integers >= 0, got {value!r}")
    return value


def decode_value(data: Any, where: str, variables: Sequence[Variable] = ()) -> Any:
    """The attribute value that :func:`encode_value` wrote as ``data``."""
    if data is None or isinstance(data, str | bool | int | float):
        return data
    if isinstance(data, list):
        return [decode_value(v, where, variables) for v in data]
    if not isinstance(data, dict):
        raise _fail(where, f"unexpected JSON value {data!r}")
    tagged = [k for k in data if k.startswith("$")]
    if not tagged:
        return {k: decode_value(v, where, variables) for k, v in data.items()}
    if len(data) != 1:
        raise _fail(where, f"a tagged value has one key, got {sorted(data)}")
    tag, body = tagged[0], data[tagged[0]]
    if tag == "$tuple" and isinstance(body, list):
        return tuple(decode_value(v, where, variables) for v in body)
    if tag == "$float" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "$slice" and isinstance(body, list) and len(body) == 3:
        return slice(*(decode_value(v, where) for v in body))
    if tag == "$array":
        array = _read_array(body, where)
        array.setflags(write=False)
        return array
    if tag == "$scalar":
        return _read_array(body, where)[()]
    if tag == "$dict" and isinstance(body, list) and all(len(p) == 2 for p in body):
        return {decode_value(k, where): decode_value(v, where, variables) for k, v in body}
    if tag == "$variable" and isinstance(body, int) and 0 <= body < len(variables):
        return variables[body]
    raise _fail(where, f"unknown or malformed tagged value {tag!r}")


def graph_from_dict(data: Any, source: str = "graph file") -> LoadedGraph:
    """The graph that :func:`graph_to_dict` described as ``data``."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise _fail(source, f'not an asgrad graph file (no "format": {FORMAT!r})')
    version = data.get("version")
    if version != VERSION:
        raise _fail(
            source,
            f"graph file version {version!r} is not supported; this asgrad reads version"
            f" {VERSION}. Save the graph again with this version of asgrad",
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
    nodes: list[Node] = []
    for i, entry in enumerate(_field(data, "nodes", list, source)):
        nodes.append(_read_node(graph, entry, nodes, variables, f"{source}: node {i}"))
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


def _read_node(
    graph: Graph, entry: Any, nodes: list[Node], variables: list[Variable], where: str
) -> Node:
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
    attrs = decode_value(_field(entry, "attrs", dict, where), where, variables)
    meta = decode_value(_field(entry, "meta", dict, where), where)
    dtype = _field(entry, "dtype", str, where)
    if dtype not in DTYPES:
        raise _fail(where, f"unknown dtype {dtype!r}")
    type_ = TensorType(tuple(_shape(_field(entry, "shape", list, where), where)), dtype)
    location = _field(entry, "location", str, where)
    inputs = tuple(nodes[k] for k in refs)
    _check_type(op, attrs, inputs, type_, where)
    node = _g.Node(graph, op, inputs, attrs, type_, name, location, meta)
    if op in ("input", "parameter"):
        if name in graph._names:
            raise _fail(where, f"a second leaf called {name!r}")
        graph._names[name] = node
        if op == "parameter":
            graph._variables[id(attrs["variable"])] = node
    return node


def _check_type(
    op: str, attrs: dict[str, Any], inputs: tuple[Node, ...], type_: TensorType, where: str
) -> None:
    """The type written must be the one the op infers (the leaves: their attributes')."""
    if op == "input":
        free = attrs.get("free")
        if set(attrs) != {"free"} or not isinstance(free, tuple):
            raise _fail(where, "an input's attributes are {'free': (axes...)}")
        return
    if op == "parameter":
        var = attrs.get("variable")
        if set(attrs) != {"variable"} or not isinstance(var, _g.Variable):
            raise _fail(where, "a parameter's attributes are {'variable': {'$variable': index}}")
        found = TensorType(var.shape, var.dtype)
    elif op == "constant":
        value = attrs.get("value")
        if set(attrs) != {"value"} or not isinstance(value, np.ndarray):
            raise _fail(where, "a constant's attributes are {'value': {'$array': ...}}")
        found = TensorType(tuple(value.shape), value.dtype.name)
    else:
        try:
            found = get_op(op).infer([n.type for n in inputs], attrs)
        except (AsgradError, TypeError, ValueError, KeyError, IndexError) as exc:
            raise _fail(where, f"its attributes or inputs do not fit the op: {exc}") from None
    if found != type_:
        raise _fail(where, f"the file says {type_}, but the op makes {found}")


def load_graph(path: str | os.PathLike[str]) -> LoadedGraph:
    """Read a graph file written by :func:`save_graph` (no code is executed)."""
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise GraphFileError(f"{source}: no such graph file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GraphFileError(f"{source}: not a graph file, the JSON is malformed ({exc})") from None
    return graph_from_dict(data, source)


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
