"""The graph IR: nodes, variables and the [`Graph`][asgrad.tensor.Graph] that owns them."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.errors import (
    ArgumentError,
    AsgradError,
    DTypeError,
    GraphError,
    NameConflictError,
    ShapeError,
)
from asgrad.tensor.ir.cache import LRUCache
from asgrad.tensor.ir.common import check_size
from asgrad.tensor.ir.dtypes import as_dtype
from asgrad.tensor.ir.leaf_shapes import check_shape, free_axes
from asgrad.tensor.ir.registry import OpDef, Shape, TensorType, expand_op, get_op
from asgrad.tensor.ir.retrace import Call, traced
from asgrad.tensor.ir.scopes import current_meta
from asgrad.tensor.ir.variables import Variable as Variable
from asgrad.tensor.ir.variables import VariableStore as VariableStore

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor

Initializer = Callable[[Shape, str], np.ndarray]
PathLike = str | os.PathLike[str]


@dataclass
class Installed:
    """What the layers above the IR lend every [`Graph`][asgrad.tensor.Graph].

    The IR imports no API, file format or printer: [`asgrad.tensor`][asgrad.tensor] hands them over
    through `install` when it is imported (before any graph can be built).
    """

    wrap: Callable[[Node], Tensor]
    dump: Callable[[Graph, Iterable[Tensor] | None], str]
    to_dot: Callable[[Graph, Iterable[Tensor] | None], str]
    save: Callable[[Graph, PathLike, list[Tensor]], None]
    load: Callable[[PathLike], Graph]
    notebook_html: Callable[[Graph], str]


_INSTALLED: list[Installed] = []


def install(layers: Installed) -> None:
    """Lend graphs the ``Tensor`` wrapper, the graph file and the printer (see
    `Installed`); [`asgrad.tensor`][asgrad.tensor] calls this once, at its import."""
    _INSTALLED[:] = [layers]


def installed() -> Installed:
    """The layers `install` lent, or an error if ``asgrad.tensor`` is still importing."""
    if not _INSTALLED:
        raise GraphError(
            "asgrad.tensor.ir.graph is used before asgrad.tensor finished importing;"
            " import asgrad.tensor first"
        )
    return _INSTALLED[0]


_NODE_IDS = itertools.count()
_GRAPH_SERIALS = itertools.count(1)
INTERNAL_DIRS = tuple(
    os.path.join("asgrad", name) + os.sep for name in ("tensor", "autograd", "nn", "gpu")
)


def user_location() -> str:
    """``file:line`` of the innermost stack frame outside asgrad's own packages."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not any(d in filename for d in INTERNAL_DIRS):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


class Node:
    """One value of the graph: an op applied to input nodes, with a static type and
    ``meta``, its scope and role (`asgrad.tensor.ir.scopes`).

    >>> from asgrad.tensor import Graph
    >>> x = Graph().input("x", (2,))
    >>> node = (x + 1.0).node
    >>> node.op, [i.op for i in node.inputs]
    ('add', ['input', 'constant'])
    """

    __slots__ = ("attrs", "graph", "id", "inputs", "location", "meta", "name", "op", "type")

    def __init__(
        self,
        graph: Graph,
        op: str,
        inputs: tuple[Node, ...],
        attrs: dict[str, Any],
        type_: TensorType,
        name: str | None,
        location: str,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.id = next(_NODE_IDS)
        self.graph = graph
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.type = type_
        self.name = name or f"{op}_{self.id}"
        self.location = location
        self.meta = current_meta() if meta is None else meta

    @property
    def shape(self) -> Shape:
        return self.type.shape

    @property
    def dtype(self) -> str:
        return self.type.dtype

    def __repr__(self) -> str:
        return f"<Node {self.name}: {self.op} -> {self.type}>"

    def with_inputs(self, inputs: Sequence[Node]) -> Node:
        """This node reading ``inputs`` instead: itself where they are its own inputs,
        else a new node of the same op, attributes, type, name, location and meta."""
        if len(inputs) == len(self.inputs) and all(
            a is b for a, b in zip(inputs, self.inputs, strict=True)
        ):
            return self
        return Node(
            self.graph,
            self.op,
            tuple(inputs),
            self.attrs,
            self.type,
            self.name,
            self.location,
            self.meta,
        )


class Graph:
    """A graph of tensor operations, built through symbolic [`Tensor`][asgrad.tensor.Tensor]
    handles.

    >>> g = Graph()
    >>> x = g.input("x", (3, 4))
    >>> y = (x * 2.0).sum(axis=1)
    >>> y.shape
    (3,)
    """

    # Programs that ``evaluate`` compiled for this graph, the most recently used.
    MAX_PROGRAMS = 32

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self.serial = next(_GRAPH_SERIALS)  # tells apart graphs of one name in messages
        self.nodes: list[Node] = []
        self._names: dict[str, Node] = {}
        self._variables: dict[int, Node] = {}
        # Variable updates that layers ask for (batch norm's running statistics, a
        # dropout seed): a training step built from this graph applies them.
        self.updates: dict[Variable, Tensor] = {}
        # Programs compiled by ``evaluate`` for this graph, keyed by outputs and backend.
        self.programs: LRUCache[tuple[Any, ...], Any] = LRUCache(self.MAX_PROGRAMS)
        # The graph this one is nested in: a loop body's (see asgrad.tensor.loops.body).
        self.parent: Graph | None = None
        # The expansions and grads built here, by the node ids they made, to build
        # them again at other sizes of the free axes (asgrad.tensor.ir.retrace).
        self.calls: dict[int, tuple[Call, int]] = {}

    @property
    def label(self) -> str:
        """How messages name this graph: ``graph 'name' (#serial)``."""
        return f"graph {self.name!r} (#{self.serial})"

    # -- leaves ---------------------------------------------------------------------
    def input(
        self,
        name: str,
        shape: Sequence[int],
        dtype: str = "float32",
        *,
        free: Sequence[int] | None = None,
    ) -> Tensor:
        """A value fed when the graph runs.

        ``shape`` is the declared shape, used to infer every shape of the graph.
        ``free`` lists the axes whose size may change from run to run (the default:
        the leading axis, the batch; ``()`` for none); a feed must match the declared
        size on every other axis.

        >>> g = Graph()
        >>> tokens = g.input("tokens", (8, 16), "int32", free=(0, 1))
        >>> tokens.node.attrs["free"]
        (0, 1)
        """
        shape = check_shape(shape, f"input {name!r}", free_hint=True)
        axes = free_axes(free, len(shape), f"input {name!r}")
        node = self._add_leaf("input", name, TensorType(shape, as_dtype(dtype)), {"free": axes})
        return self._wrap(node)

    def parameter(
        self,
        name: str,
        shape: Sequence[int] | None = None,
        dtype: str = "float32",
        *,
        init: Initializer | np.ndarray | None = None,
        trainable: bool = True,
        variable: Variable | None = None,
    ) -> Tensor:
        """A named value that persists between runs (see [`Variable`][asgrad.tensor.Variable]).

        Pass ``variable`` to refer to an existing one (the usual case for a model's
        parameters), or ``shape`` and ``init`` (an array or ``init(shape, dtype)``)
        to create one.
        """
        if variable is None:
            if shape is None:
                raise GraphError(f"parameter {name!r}: give a shape or a variable")
            shape = check_shape(shape, f"parameter {name!r}")
            dt = as_dtype(dtype)
            check_size(shape, f"parameter {name!r}", np.dtype(dt).itemsize)
            if init is None:
                value = np.zeros(shape, dtype=dt)
            elif callable(init):
                value = np.asarray(init(shape, dt), dtype=dt)
            else:
                value = np.asarray(init, dtype=dt)
            if value.shape != shape:
                raise ShapeError(
                    f"parameter {name!r}: initial value has shape {list(value.shape)},"
                    f" expected {list(shape)}"
                )
            variable = Variable(name, value, trainable=trainable)
        if id(variable) in self._variables:
            return self._wrap(self._variables[id(variable)])
        node = self._add_leaf(
            "parameter",
            name,
            TensorType(variable.shape, variable.dtype),
            {"variable": variable},
        )
        self._variables[id(variable)] = node
        return self._wrap(node)

    def add_update(self, variable: Variable, value: Tensor) -> None:
        """Ask that ``variable`` take ``value`` after each run of a training step."""
        if variable in self.updates:
            raise NameConflictError(
                f"variable {variable.name!r} already has an update in this graph"
            )
        self.updates[variable] = value

    def bind(self, variable: Variable) -> Tensor:
        """The parameter node of ``variable`` in this graph (made on first use).

        The node takes the variable's name, or ``name_2``, ``name_3``, ... when another
        node of this graph has it (two optimizers' step counters, two models' layers).
        """
        if id(variable) in self._variables:
            return self._wrap(self._variables[id(variable)])
        name = variable.name
        for k in itertools.count(2):
            if name not in self._names:
                break
            name = f"{variable.name}_{k}"
        return self.parameter(name, variable=variable)

    def constant(self, value: object, dtype: str | None = None) -> Tensor:
        """A constant value, folded into the graph."""
        dt = None if dtype is None else as_dtype(dtype)
        try:  # a ragged list, a string where a number belongs
            array = _constant_array(value, dt)
        except DTypeError as exc:  # a value the dtype cannot hold
            raise DTypeError(f"{exc}\n  (at {user_location()})") from None
        except (TypeError, ValueError) as exc:
            msg = f"constant: cannot make an array ({exc}); give numbers, one length per axis"
            raise ArgumentError(msg) from None
        type_ = TensorType(tuple(array.shape), as_dtype(array.dtype))
        array.setflags(write=False)
        node = Node(self, "constant", (), {"value": array}, type_, None, user_location())
        self.nodes.append(node)
        return self._wrap(node)

    # -- ops --------------------------------------------------------------------------
    def apply(
        self, op: str, inputs: Sequence[Tensor], attrs: Mapping[str, Any] | None = None
    ) -> Tensor:
        """Append ``op(*inputs, **attrs)``, inferring its type (errors name the line)."""
        opdef = get_op(op)
        nodes = tuple(t.node for t in inputs)
        for n in nodes:  # a value of a loop body nested in this graph: the node goes there
            if n.graph is not self and self.encloses(n.graph):
                return n.graph.apply(op, inputs, attrs)
        nodes = tuple(n if n.graph is self else self._capture(n, op) for n in nodes)
        try:  # the schema's errors name the op already
            attrs = opdef.normalize_attrs(attrs or {})
        except AsgradError as exc:
            raise type(exc)(f"{exc}\n  (at {user_location()})") from None
        try:
            type_ = opdef.infer([n.type for n in nodes], attrs)
            check_size(type_.shape, "the result", np.dtype(type_.dtype).itemsize)
        except AsgradError as exc:
            where = user_location()
            raise type(exc)(f"{op}: {exc}\n  (at {where})") from None
        if opdef.expand is not None:  # built from other ops: no node of its own
            return self._expand(opdef, inputs, attrs, type_)
        if opdef.ties_free_axes:
            from asgrad.tensor.ir.free_sizes import refuse_tied_free_axes  # reads passes

            refuse_tied_free_axes(opdef, nodes, attrs, user_location())
        node = Node(self, op, nodes, attrs, type_, None, user_location())
        self.nodes.append(node)
        return self._wrap(node)

    def _expand(
        self, opdef: OpDef, inputs: Sequence[Tensor], attrs: dict[str, Any], type_: TensorType
    ) -> Tensor:
        """``opdef`` built from the ops it expands into, recorded so that a program fed
        other sizes of a free axis can build it again (`asgrad.tensor.ir.retrace`)."""
        name = opdef.name

        def build(graph: Graph, ins: list[Tensor]) -> list[Tensor]:
            if graph is self:  # the first time: the type is known already
                return [expand_op(opdef, ins, attrs, type_)]
            return [graph.apply(name, ins, attrs)]

        def rule(types: list[TensorType]) -> TensorType:
            return opdef.infer(types, attrs)

        (result,) = traced(self, name, inputs, build, user_location(), rule)
        return result

    # -- lookup -----------------------------------------------------------------------
    def __getitem__(self, name: str) -> Tensor:
        try:
            return self._wrap(self._names[name])
        except KeyError:
            known = ", ".join(sorted(self._names)) or "none"
            raise GraphError(f"no input or parameter {name!r}; known: {known}") from None

    @property
    def inputs(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "input"]

    @property
    def parameters(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "parameter"]

    def uses(self, variable: Variable) -> bool:
        """Whether ``variable`` has a parameter node in this graph."""
        return id(variable) in self._variables

    def variables(self) -> list[Variable]:
        """Every variable a parameter node of this graph refers to."""
        return [n.attrs["variable"] for n in self.parameters]

    def dump(self, outputs: Iterable[Tensor] | None = None) -> str:
        """A readable text listing of the graph (see [`asgrad.tensor.dump`][asgrad.tensor.dump])."""
        return installed().dump(self, outputs)

    def to_dot(self, outputs: Iterable[Tensor] | None = None) -> str:
        """The graph in Graphviz DOT (see [`asgrad.tensor.to_dot`][asgrad.tensor.to_dot])."""
        return installed().to_dot(self, outputs)

    def save(self, path: str | os.PathLike[str], outputs: Iterable[Tensor] = ()) -> None:
        """Write this graph (and its ``outputs``) to a file.

        The format is `graph_file`'s.
        """
        installed().save(self, path, list(outputs))

    @staticmethod
    def load(path: str | os.PathLike[str]) -> Graph:
        """Read a graph file; no code is executed (`graph_file`)."""
        return installed().load(path)

    def _repr_html_(self) -> str:  # Jupyter shows the graph viewer (needs asgrad-viz)
        return installed().notebook_html(self)

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        return f"<Graph {self.name!r}: {len(self.nodes)} nodes>"

    def encloses(self, other: Graph) -> bool:
        """Whether ``other`` is a loop body nested (at any depth) in this graph."""
        g = other.parent
        while g is not None:
            if g is self:
                return True
            g = g.parent
        return False

    # -- internals ----------------------------------------------------------------------
    def _capture(self, node: Node, op: str) -> Node:
        """A node of another graph used by ``op`` here: an error, except in a loop body."""
        raise GraphError(
            f"{op}: input {node.name} belongs to {node.graph.label}, not {self.label};"
            " build every value of one computation in one graph"
        )

    def _add_leaf(self, op: str, name: str, type_: TensorType, attrs: dict[str, Any]) -> Node:
        if not name or not isinstance(name, str):
            raise GraphError(f"a {op} needs a non-empty string name, got {name!r}")
        if name in self._names:
            other = self._names[name]
            raise NameConflictError(
                f"name {name!r} is already used by a {other.op} of this graph"
                f" (defined at {other.location}); inputs and parameters are fed and"
                f" looked up by name, so each needs its own: pass another name, e.g."
                f" g.{op}({name + '_2'!r}, ...), or reuse the first one (g[{name!r}])."
                " A model's parameters need no name: calling a module binds them,"
                " renaming the second of a name to name_2"
            )
        node = Node(self, op, (), attrs, type_, name, user_location())
        self._names[name] = node
        self.nodes.append(node)
        return node

    def _wrap(self, node: Node) -> Tensor:
        return installed().wrap(node)


def _constant_array(value: object, dtype: str | None) -> np.ndarray:
    """``value`` as the array of a constant of ``dtype`` (float32 or int64 by default).

    The feed rule: conversion may not change a value. An integer out of the dtype's
    range, or a finite float that would become infinite, is a
    [`DTypeError`][asgrad.tensor.DTypeError].
    """
    try:
        source = np.array(value)
    except OverflowError:  # an int beyond every numpy dtype
        source = np.array(value, dtype=object)
    if dtype is None:
        if source.dtype == np.float64:
            dtype = "float32"
        elif source.dtype.kind == "i":
            dtype = "int64"
        else:
            return np.array(value)
    target = np.dtype(dtype)
    if source.dtype.kind in "iuO" and target.kind in "iu" and source.size:
        info = np.iinfo(target)
        low, high = int(source.min()), int(source.max())
        if low < info.min or high > info.max:
            raise DTypeError(
                f"constant: {dtype} holds {info.min}..{info.max}; the values given span"
                f" {low}..{high}. Give values in range or use a wider dtype"
            )
    if source.dtype.kind == "O":
        return np.array(value, dtype=target)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is checked below
        array = source.astype(target)
    if source.dtype.kind == "f" and target.kind == "f" and target.itemsize < source.itemsize:
        overflow = np.isinf(array) & np.isfinite(source)
        if overflow.any():
            raise DTypeError(
                f"constant: {dtype} cannot hold {source[overflow].flat[0]:g}, which would"
                " become infinite. Scale the values or use float64"
            )
    return array
