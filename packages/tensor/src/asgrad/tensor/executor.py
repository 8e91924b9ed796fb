"""Compile outputs into a schedule and run it.

``compile`` turns the values a user wants (and the variable updates of a training
step) into a :class:`Schedule`: the minimal nodes in order, after the graph passes,
with the step at which each value is used for the last time. A backend turns the
schedule into something it runs. The CPU backend generates one Python function per
schedule, a line per node, freeing each intermediate after its last use, so that
running a compiled graph costs little more than the numpy calls themselves.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from asgrad.tensor.backends import Executable, get_backend, register_backend, resolve_backend_name
from asgrad.tensor.dtypes import as_dtype
from asgrad.tensor.errors import AsgradError, FeedError, GraphError
from asgrad.tensor.graph import Node, Variable
from asgrad.tensor.passes import optimize
from asgrad.tensor.registry import TensorType, get_op
from asgrad.tensor.tensor import Tensor

Updates = Mapping[Variable, Tensor] | Sequence[tuple[Variable, Tensor]]


@dataclass
class Schedule:
    """A backend-independent plan: what to compute, in which order, until when.

    Attributes:
        nodes: Every node to compute, inputs before users.
        outputs: The nodes whose values are returned.
        updates: ``(variable, node)`` pairs: after a run, the variable holds the node.
        inputs: The input nodes that must be fed.
        last_use: For each node id, the index in ``nodes`` of its last user (outputs
            and update values live to the end).
    """

    nodes: list[Node]
    outputs: list[Node]
    updates: list[tuple[Variable, Node]]
    inputs: list[Node]
    last_use: dict[int, int] = field(default_factory=dict)

    def variables(self) -> list[Variable]:
        return [n.attrs["variable"] for n in self.nodes if n.op == "parameter"]

    def infer_types(self, feed_shapes: Mapping[str, tuple[int, ...]]) -> dict[int, TensorType]:
        """Every node's type when the inputs have ``feed_shapes`` (any batch size).

        Raises the op's shape error, naming the node's source line, when the fed
        shapes do not fit the graph.
        """
        types: dict[int, TensorType] = {}
        for node in self.nodes:
            if node.op == "input":
                shape = feed_shapes.get(node.name, node.shape)
                types[node.id] = TensorType(tuple(shape), node.dtype)
            elif not node.inputs:
                types[node.id] = node.type
            else:
                try:
                    types[node.id] = get_op(node.op).infer(
                        [types[n.id] for n in node.inputs], node.attrs
                    )
                except AsgradError as exc:
                    raise FeedError(
                        f"with inputs shaped {dict(feed_shapes)}, {node.op} (made at"
                        f" {node.location}) fails: {exc}"
                    ) from None
        return types


def make_schedule(
    outputs: Sequence[Tensor], updates: Updates | None = None, *, optimize_graph: bool = True
) -> Schedule:
    """Plan the computation of ``outputs`` and ``updates`` (see :class:`Schedule`)."""
    pairs = list(updates.items()) if isinstance(updates, Mapping) else list(updates or [])
    roots = [t.node for t in outputs] + [t.node for _, t in pairs]
    graphs = {n.graph for n in roots}
    if len(graphs) > 1:
        raise GraphError("outputs come from different graphs; compile each graph on its own")
    for var, value in pairs:
        if not isinstance(var, Variable):
            raise GraphError(f"updates are keyed by Variable, got {type(var).__name__}")
        if value.shape != var.shape or value.dtype != var.dtype:
            raise GraphError(
                f"update of {var.name!r}: value is {value.node.type}, the variable holds"
                f" {var.dtype}{list(var.shape)}"
            )
    if optimize_graph:
        nodes, new_roots = optimize(roots)
    else:
        from asgrad.tensor.passes import topological_order

        nodes, new_roots = topological_order(roots), roots
    outs = new_roots[: len(outputs)]
    ups = [(var, n) for (var, _), n in zip(pairs, new_roots[len(outputs) :], strict=True)]
    end = len(nodes)
    last_use: dict[int, int] = {}
    for i, node in enumerate(nodes):
        for inp in node.inputs:
            last_use[inp.id] = i
    for n in outs:
        last_use[n.id] = end
    for _, n in ups:
        last_use[n.id] = end
    inputs = [n for n in nodes if n.op == "input"]
    return Schedule(nodes, outs, ups, inputs, last_use)


class CPUExecutable:
    """The numpy backend: one generated Python function per schedule."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self._fn = self._generate(schedule)

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        outputs, new_values = self._fn(feeds)
        for (var, _), value in zip(self.schedule.updates, new_values, strict=True):
            var.set_host_value(value)
        return [v if isinstance(v, np.ndarray) else np.asarray(v) for v in outputs]

    @staticmethod
    def _generate(schedule: Schedule) -> Any:
        env: dict[str, Any] = {}
        lines = ["def run(feeds):"]
        names: dict[int, str] = {}
        freed_after: dict[int, list[int]] = {}
        for node_id, step in schedule.last_use.items():
            freed_after.setdefault(step, []).append(node_id)
        for i, node in enumerate(schedule.nodes):
            v = f"v{i}"
            names[node.id] = v
            if node.op == "input":
                lines.append(f"    {v} = feeds[{node.name!r}]")
            elif node.op == "parameter":
                env[f"var{i}"] = node.attrs["variable"]
                lines.append(f"    {v} = var{i}.value")
            elif node.op == "constant":
                env[f"c{i}"] = node.attrs["value"]
                lines.append(f"    {v} = c{i}")
            else:
                kernel = get_op(node.op).kernel
                env[f"k{i}"] = functools.partial(kernel, **node.attrs) if node.attrs else kernel
                args = ", ".join(names[n.id] for n in node.inputs)
                lines.append(f"    {v} = k{i}({args})")
            dead = [names[d] for d in freed_after.get(i, []) if d in names]
            if dead:
                lines.append(f"    del {', '.join(dead)}")
        outs = "".join(f"{names[n.id]}, " for n in schedule.outputs)
        ups = "".join(f"{names[n.id]}, " for _, n in schedule.updates)
        lines.append(f"    return ({outs}), ({ups})")
        # The source is generated from the schedule alone; no user strings reach it.
        code = builtins.compile("\n".join(lines), f"<asgrad schedule {id(schedule):x}>", "exec")
        exec(code, env)
        return env["run"]


class CPUBackend:
    """The numpy reference backend."""

    name = "cpu"

    def available(self) -> bool:
        return True

    def compile(self, schedule: Schedule) -> Executable:
        return CPUExecutable(schedule)


register_backend("cpu", CPUBackend)


class Program:
    """A compiled computation: call it with feeds, get numpy outputs.

    >>> from asgrad.tensor import Graph
    >>> g = Graph()
    >>> x = g.input("x", (2, 2))
    >>> prog = compile([(x * 2.0).sum()])
    >>> float(prog({"x": np.ones((2, 2), np.float32)})[0])
    8.0
    """

    def __init__(
        self,
        outputs: Sequence[Tensor],
        updates: Updates | None = None,
        *,
        backend: str | None = None,
        optimize_graph: bool = True,
    ) -> None:
        self.schedule = make_schedule(outputs, updates, optimize_graph=optimize_graph)
        self.backend = resolve_backend_name(backend)
        self.executable = get_backend(self.backend).compile(self.schedule)
        self._inputs = {n.name: n for n in self.schedule.inputs}
        self._known_names = {n.name for n in outputs[0].graph.inputs} if outputs else set()
        self._checked: set[tuple[tuple[str, tuple[int, ...]], ...]] = set()

    def __call__(self, feeds: Mapping[str, Any] | None = None, **kwargs: Any) -> list[np.ndarray]:
        return self.run({**(feeds or {}), **kwargs})

    def run(self, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        """Run once: returns the outputs' values, and applies the updates."""
        prepared = self._prepare(feeds)
        return self.executable.run(prepared)

    def _prepare(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for name, node in self._inputs.items():
            if name not in feeds:
                needed = ", ".join(f"{n.name}: {n.type}" for n in self._inputs.values())
                raise FeedError(f"input {name!r} was not fed; this program needs {needed}")
            value = feeds[name]
            if not isinstance(value, np.ndarray) or value.dtype.name != node.dtype:
                value = _convert_feed(name, value, node.dtype)
            out[name] = value
        for name in feeds:
            if name not in self._inputs and name not in self._known_names:
                raise FeedError(f"{name!r} is not an input of this graph")
        signature = tuple((name, v.shape) for name, v in out.items())
        if signature not in self._checked:
            for name, v in out.items():
                if v.ndim != len(self._inputs[name].shape):
                    raise FeedError(
                        f"input {name!r} was declared {self._inputs[name].type},"
                        f" fed rank {v.ndim} array of shape {list(v.shape)}"
                    )
            self.schedule.infer_types({name: v.shape for name, v in out.items()})
            self._checked.add(signature)
        return out


def _convert_feed(name: str, value: Any, dtype: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind != np.dtype(dtype).kind and not (
        array.dtype.kind in "iub" and np.dtype(dtype).kind == "f"
    ):
        raise FeedError(
            f"input {name!r} is {dtype}; got a {array.dtype} array. Convert it with"
            f" .astype({dtype!r})"
        )
    return array.astype(as_dtype(dtype), copy=False)


def compile(  # the natural name; shadows the builtin only in this module
    outputs: Sequence[Tensor],
    updates: Updates | None = None,
    *,
    backend: str | None = None,
    optimize_graph: bool = True,
) -> Program:
    """Compile ``outputs`` (and variable ``updates``) into a :class:`Program`."""
    return Program(outputs, updates, backend=backend, optimize_graph=optimize_graph)


def evaluate(
    outputs: Sequence[Tensor] | Tensor,
    feeds: Mapping[str, Any] | None = None,
    *,
    backend: str | None = None,
) -> list[np.ndarray]:
    """Compute ``outputs`` on ``feeds`` once (compiled programs are cached per graph).

    >>> from asgrad.tensor import Graph
    >>> g = Graph()
    >>> x = g.input("x", (3,))
    >>> evaluate([x * x], {"x": np.array([1, 2, 3], np.float32)})[0].tolist()
    [1.0, 4.0, 9.0]
    """
    single = isinstance(outputs, Tensor)
    outs: list[Tensor] = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    if not outs:
        return []
    graph = outs[0].graph
    cache = graph.programs
    key = (tuple(t.node.id for t in outs), resolve_backend_name(backend))
    program: Program | None = cache.get(key)
    if program is None:
        program = cache[key] = Program(outs, backend=key[1])
    result = program.run(feeds or {})
    return result[:1] if single else result
