"""Loop bodies: a Python function traced into a sub-graph, the ``loop`` attribute of ``scan``.

`trace` calls the function on symbolic tensors of a `BodyGraph`, a graph
nested in the graph the loop is built in. A value of an enclosing graph that the
function uses (a weight it closes over, a layer's parameter) is *captured*: it becomes
an input of the body, and the ``scan`` node reads it from the enclosing graph, so that
the body is a closed sub-program with inputs ``carries + xs + captures`` and outputs
``new carries + ys``. The `Body` is what the ``scan`` node keeps: comparable by
identity (two scans of one body and the same inputs are merged), printed by its
function's name and line.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from asgrad.tensor.errors import AsgradError, BackendError, DTypeError, GraphError, ShapeError
from asgrad.tensor.ir.graph import Graph, Node, Variable
from asgrad.tensor.ir.registry import Shape, TensorType

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor
    from asgrad.tensor.ir.schedule import Schedule

# call(carries, xs) -> (new carries, ys): the user's function with its structure unpacked.
BodyCall = Callable[[list["Tensor"], list["Tensor"]], tuple[list["Tensor"], list["Tensor"]]]

# Compiles a body's schedule into a program the numpy ``scan`` kernel runs step by step.
BodyCompiler = Callable[["Schedule"], Any]
_COMPILER: list[BodyCompiler] = []


def set_compiler(compile_body: BodyCompiler) -> None:
    """How loop bodies are compiled for the numpy ``scan`` kernel.

    The CPU backend sets it when it is imported (`asgrad.tensor.cpu.backend`, which
    [`asgrad.tensor`][asgrad.tensor] imports), so that loops import no backend.
    """
    _COMPILER[:] = [compile_body]


class BodyGraph(Graph):
    """The graph of a loop body, nested in ``parent``; values of enclosing graphs are captured."""

    def __init__(self, parent: Graph, name: str) -> None:
        super().__init__(name)
        self.parent = parent
        self.captured: dict[int, Node] = {}  # outer node id -> the body's input for it
        self.outer: list[Node] = []  # the captured nodes of ``parent``, in order
        self.closed = False
        # The dtypes of the captures' inputs when traced again for other dtypes.
        self.capture_dtypes: list[str] = []

    def apply(
        self, op: str, inputs: Sequence[Tensor], attrs: Mapping[str, Any] | None = None
    ) -> Tensor:
        if self.closed:
            raise GraphError(
                f"{op}: a value of the loop body {self.name!r} is used outside the body; return"
                " it from the body (as a carry or a per-step output) to use it after the loop"
            )
        return super().apply(op, inputs, attrs)

    def _capture(self, node: Node, op: str) -> Node:
        if node.id in self.captured:
            return self.captured[node.id]
        if self.closed or not node.graph.encloses(self):
            return super()._capture(node, op)  # the error of values of unrelated graphs
        outer = node
        if node.graph is not self.parent:  # from further out: captured by the parent first
            assert self.parent is not None
            outer = self.parent._capture(node, op)
            if outer.id in self.captured:
                self.captured[node.id] = self.captured[outer.id]
                return self.captured[outer.id]
        k = len(self.outer)
        type_ = outer.type
        if k < len(self.capture_dtypes):
            type_ = TensorType(type_.shape, self.capture_dtypes[k])
        inner = self._add_leaf("input", f"capture{k}", type_, {"free": _all_axes(type_)})
        self.outer.append(outer)
        self.captured[node.id] = self.captured[outer.id] = inner
        return inner

    def capture(self, value: Tensor) -> Tensor:
        """``value`` (of this graph or an enclosing one) as a value of this graph."""
        if value.node.graph is self:
            return value
        return self._wrap(self._capture(value.node, "capture"))

    def input(self, name: str, shape: Sequence[int], dtype: str = "float32", **_: Any) -> Tensor:
        raise GraphError(
            f"input {name!r}: a loop body cannot declare inputs; declare it in the enclosing"
            " graph and use it in the body (it is captured)"
        )

    def bind(self, variable: Variable) -> Tensor:
        """The variable's parameter node of the enclosing graph, captured."""
        assert self.parent is not None
        return self.capture(self.parent.bind(variable))

    def parameter(self, name: str, shape: Sequence[int] | None = None, *a: Any, **k: Any) -> Tensor:
        assert self.parent is not None
        return self.capture(self.parent.parameter(name, shape, *a, **k))

    def add_update(self, variable: Variable, value: Tensor) -> None:
        raise GraphError(
            f"variable {variable.name!r}: a loop body cannot update variables (batch norm's"
            " running statistics); carry the value through the loop instead"
        )

    def new_input(self, name: str, type_: TensorType) -> Tensor:
        """An input of the body (a carry or a step of xs): any shape may be fed."""
        return self._wrap(self._add_leaf("input", name, type_, {"free": _all_axes(type_)}))


def _all_axes(t: TensorType) -> tuple[int, ...]:
    return tuple(range(len(t.shape)))


class Body:
    """A traced loop body: inputs ``carries + xs + captures``, outputs ``carries + ys``.

    Attributes:
        name: The function's name; ``where``: its ``file:line``.
        inputs: The body's input nodes, carries then per-step xs then captures.
        outputs: The new carries then the per-step outputs (ys).
        n_carry, n_x, n_y: How many carries, xs and ys.
        outer: The captured nodes of the enclosing graph (the scan node's last inputs).
        extends: The body this one extends (`Body.with_outputs`): the same carries
            and ys, then more ys; None for a body traced from a function.
    """

    def __init__(
        self,
        call: BodyCall,
        name: str,
        where: str,
        graph: BodyGraph,
        inputs: list[Node],
        outputs: list[Node],
        counts: tuple[int, int, int],
    ) -> None:
        self.call, self.name, self.where, self.graph = call, name, where, graph
        self.inputs, self.outputs = inputs, outputs
        self.n_carry, self.n_x, self.n_y = counts
        self.outer = list(graph.outer)
        self.n_capture = len(self.outer)
        self._variants: dict[tuple[str, ...], Body] = {self.dtypes: self}
        self._types: dict[tuple[Shape, ...], list[TensorType]] = {}
        self._schedule: Schedule | None = None
        self._executable: Any = None
        self.extends: Body | None = None
        self._extended: dict[tuple[int, ...], Body] = {}

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(n.dtype for n in self.inputs)

    def __repr__(self) -> str:
        return f"<body {self.name} at {self.where}: {len(self.graph.nodes)} nodes>"

    def describe(self) -> str:
        """How error messages name the body."""
        return f"the loop body {self.name} (defined at {self.where})"

    def at(self, dtypes: Sequence[str]) -> Body:
        """The body for inputs of ``dtypes``: itself, or the function traced again for
        other float dtypes (the registry's float32 tests of a float64 case)."""
        key = tuple(dtypes)
        found = self._variants.get(key)
        if found is not None:
            return found
        for have, want, node in zip(self.dtypes, key, self.inputs, strict=True):
            if have != want and not (have.startswith("float") and want.startswith("float")):
                raise DTypeError(
                    f"{node.name} of {self.describe()} is {have}; the loop was given {want}."
                    f" Cast it with .cast({have!r})"
                )
        types = [TensorType(n.shape, d) for n, d in zip(self.inputs, key, strict=True)]
        assert self.graph.parent is not None
        counts = (self.n_carry, self.n_x)
        caps = [t.dtype for t in types[len(types) - self.n_capture :]]
        variant = trace(self.call, self.name, self.where, self.graph.parent, types, counts, caps)
        if [n.id for n in variant.outer] != [n.id for n in self.outer]:
            raise GraphError(f"{self.describe()} captures other values when traced again")
        self._variants[key] = variant
        return variant

    def with_outputs(self, extra: Sequence[Node]) -> Body:
        """This body with the values of ``extra`` (nodes of its graph) returned as more
        per-step outputs, after its own ys: what a gradient's steps read, saved by the
        forward loop instead of recomputed (see ``asgrad.autograd.rules.control``).

        The same ``extra`` give the same body (two gradients of one scan share its
        forward loop); its ``extends`` is this body.
        """
        key = tuple(n.id for n in extra)
        found = self._extended.get(key)
        if found is not None:
            return found
        base, nc, nx = self, self.n_carry, self.n_x

        def call(carries: list[Tensor], xs: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
            inner = tracing()
            assert inner is not None
            assert inner.parent is not None
            caps = [inner.capture(inner.parent._wrap(n)) for n in base.outer]
            values = replay_values(base, inner, [*carries, *xs, *caps], extra)
            outs = [values[n.id] for n in base.outputs]
            return outs[:nc], [*outs[nc:], *(values[n.id] for n in extra)]

        types = [n.type for n in self.inputs]
        caps = [t.dtype for t in types[nc + nx :]]
        assert self.graph.parent is not None
        body = trace(call, self.name, self.where, self.graph.parent, types, (nc, nx), caps)
        if [n.id for n in body.outer] != [n.id for n in self.outer]:
            raise GraphError(f"{self.describe()} captures other values when traced again")
        body.extends = self
        self._extended[key] = body
        return body

    def schedule(self) -> Schedule:
        """The body's outputs planned as a program (graph passes applied)."""
        if self._schedule is None:
            from asgrad.tensor.ir.schedule import make_schedule

            self._schedule = make_schedule([self.graph._wrap(n) for n in self.outputs])
        return self._schedule

    def output_types(self, types: Sequence[TensorType]) -> list[TensorType]:
        """The outputs' types when the inputs have ``types`` (their shapes matter)."""
        key = tuple(t.shape for t in types)
        found = self._types.get(key)
        if found is not None:
            return found
        if all(t.shape == n.shape for t, n in zip(types, self.inputs, strict=True)):
            result = [n.type for n in self.outputs]
        else:
            schedule = self.schedule()
            feeds = {n.name: t.shape for n, t in zip(self.inputs, types, strict=True)}
            try:
                inferred = schedule.infer_types(feeds)
            except AsgradError as exc:
                raise ShapeError(f"in {self.describe()}: {exc}") from None
            result = [inferred[n.id] for n in schedule.outputs]
        self._types[key] = result
        return result

    def executable(self) -> Any:
        """The body compiled by the CPU backend (one generated function per shapes)."""
        if self._executable is None:
            if not _COMPILER:
                raise BackendError(
                    f"{self.describe()} runs on the CPU backend, which is not imported;"
                    " import asgrad.tensor (it imports asgrad.tensor.cpu)"
                )
            self._executable = _COMPILER[0](self.schedule())
        return self._executable

    def input_names(self) -> list[str]:
        return [n.name for n in self.inputs]


class _Tracing(threading.local):
    def __init__(self) -> None:
        self.stack: list[BodyGraph] = []  # the bodies this thread traces, innermost last


_TRACING = _Tracing()


def tracing() -> BodyGraph | None:
    """The loop body being traced in this thread (the innermost), or None."""
    stack = _TRACING.stack
    return stack[-1] if stack else None


def trace(
    call: BodyCall,
    name: str,
    where: str,
    parent: Graph,
    types: Sequence[TensorType],
    counts: tuple[int, int],
    capture_dtypes: Sequence[str] = (),
) -> Body:
    """Call ``call`` on new inputs of ``types`` (carries, then xs) in a body nested in
    ``parent``; the result's carries must keep the carries' types."""
    n_carry, n_x = counts
    graph = BodyGraph(parent, f"{name} body")
    graph.capture_dtypes = list(capture_dtypes)
    _TRACING.stack.append(graph)
    carries = [graph.new_input(f"carry{i}", t) for i, t in enumerate(types[:n_carry])]
    xs = [graph.new_input(f"x{i}", t) for i, t in enumerate(types[n_carry : n_carry + n_x])]
    try:
        new, ys = call(carries, xs)
        outs = [_own(graph, v) for v in (*new, *ys)]
    finally:
        graph.closed = True
        _TRACING.stack.pop()
    inputs = [t.node for t in (*carries, *xs)] + [graph.captured[o.id] for o in graph.outer]
    counts3 = (n_carry, n_x, len(ys))
    body = Body(call, name, where, graph, inputs, [t.node for t in outs], counts3)
    for i, (c, t) in enumerate(zip(body.outputs[:n_carry], types[:n_carry], strict=True)):
        if c.type != t:
            raise ShapeError(
                f"{body.describe()} returns carry {i} as {c.type} (made at {c.location}), but"
                f" the carry is {t}; a loop's carry keeps its shape and dtype from step to step"
            )
    return body


def _own(graph: BodyGraph, value: Any) -> Tensor:
    """A body output as a value of the body graph (an outer value is captured)."""
    from asgrad.tensor.api.tensor import Tensor

    if isinstance(value, Tensor):
        return graph.capture(value)
    if isinstance(value, int | float | bool):
        return graph.constant(value)
    raise GraphError(f"a loop body must return tensors (or numbers), got {type(value).__name__}")


def body_from_graph(
    name: str,
    where: str,
    graph: BodyGraph,
    inputs: list[Node],
    outputs: list[Node],
    counts: tuple[int, int, int],
) -> Body:
    """A body made from its graph alone (one read from a graph file, which holds no
    Python function): traced again for other dtypes, it replays its own nodes."""

    def call(carries: list[Tensor], xs: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        inner = tracing()
        assert inner is not None
        assert inner.parent is not None
        caps = [inner.capture(inner.parent._wrap(n)) for n in body.outer]
        outs = replay(body, inner, [*carries, *xs, *caps])
        return outs[: body.n_carry], outs[body.n_carry :]

    body = Body(call, name, where, graph, inputs, outputs, counts)
    return body


def replay(body: Body, graph: Graph, inputs: Sequence[Tensor]) -> list[Tensor]:
    """The body's outputs computed in ``graph`` from ``inputs`` (one per body input):
    the body's nodes copied, as a gradient rule recomputes a step."""
    values = replay_values(body, graph, inputs)
    return [values[n.id] for n in body.outputs]


def replay_values(
    body: Body, graph: Graph, inputs: Sequence[Tensor], extra: Sequence[Node] = ()
) -> dict[int, Tensor]:
    """`replay`, returning every copied value by the id of its body node (the body's
    outputs and ``extra``, nodes of the body, and what they are computed from)."""
    values: dict[int, Tensor] = {n.id: t for n, t in zip(body.inputs, inputs, strict=True)}
    from asgrad.tensor.ir.passes import topological_order

    for node in topological_order([*body.outputs, *extra]):
        if node.id in values:
            continue
        if node.op == "constant":
            values[node.id] = graph.constant(node.attrs["value"], node.dtype)
        elif node.op in ("input", "parameter"):
            raise GraphError(f"{body.describe()}: input {node.name} has no value to replay")
        else:
            ins = [values[n.id] for n in node.inputs]
            values[node.id] = graph.apply(node.op, ins, node.attrs)
    return values
