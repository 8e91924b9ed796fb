"""Tracing a graph again at the sizes fed: one plan per set of free sizes.

Most expansions build a form that follows any fed size of a free axis (slices
counted from the ends, positions counted when the graph runs; see
`asgrad.tensor.ir.free_sizes`). Some cannot: ``roll`` along the batch wraps it at
its size, ``glu`` halves it, a diagonal of two free axes or constant padding of a
free axis take positions of its size. Such an expansion marks itself *specialised*
(`mark_specialised`) and is built for the declared sizes.

Every expansion, and every ``grad``, is recorded when it is built: what made it,
from which input nodes, and how to build it again (`traced`). A program whose
outputs depend on a specialised expansion, fed sizes of the free axes other than the
declared ones, traces its outputs again at the fed sizes (`retrace`): inputs at the
fed shapes, each recorded expansion and ``grad`` run again on the new values (so
their tables are built for the sizes fed), every other node applied again with its
attributes. The new graph is scheduled and compiled, and the plan kept for the next
run at the same sizes, as ``jax.jit`` keeps one per shape: the cost is one trace and
one compile per distinct set of fed sizes, paid only by graphs holding a specialised
expansion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from asgrad.tensor.errors import AsgradError, FeedError
from asgrad.tensor.ir.registry import Shape, TensorType, get_op

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor
    from asgrad.tensor.ir.graph import Graph, Node

__all__ = ["Call", "mark_specialised", "needs_retrace", "pinned_by", "retrace", "traced"]

# The ``node.meta`` key a specialised call's results carry (kept by graph files): what
# made them, for the error of a graph that cannot be traced again.
SPECIALISED = "specialised"

Build = Callable[["Graph", list["Tensor"]], Sequence["Tensor"]]


@dataclass(frozen=True)
class Call:
    """One recorded expansion or ``grad``: ``build(graph, inputs)`` makes its results
    again from new ``inputs`` (Tensors standing for the recorded input nodes)."""

    what: str
    build: Build
    inputs: tuple[Node, ...]
    results: tuple[int | None, ...]  # node ids it made (None: a node it was given)
    specialised: bool
    location: str


# One flag per call being built, innermost last: whether it is specialised.
_BUILDING: list[bool] = []


def mark_specialised() -> bool:
    """Mark the expansion being built as built for the declared sizes of a free axis
    (a program traces it again at the sizes fed). False when no recorded call is being
    built: the caller must refuse the free axis instead."""
    if not _BUILDING:
        return False
    _BUILDING[-1] = True
    return True


def traced(
    graph: Graph,
    what: str,
    inputs: Sequence[Tensor],
    build: Build,
    location: str,
    rule: Callable[[list[TensorType]], TensorType] | None = None,
) -> list[Tensor]:
    """``build(graph, inputs)``, recorded so that `retrace` can run it again.

    The call is specialised when it marks itself so (`mark_specialised`), or when what
    it built does not follow its inputs' free axes as its shape ``rule`` (an op's) says
    it should: a form built for the declared sizes, which a fed size would break or
    (a size of 1, broadcast) silently ignore."""
    start = len(graph.nodes)
    _BUILDING.append(False)
    try:
        results = list(build(graph, list(inputs)))
    finally:
        specialised = _BUILDING.pop()
    if not specialised and results:
        specialised = _off_its_rule(list(inputs), results, rule)
    if specialised and _BUILDING:  # an expansion inside a specialised one is specialised
        _BUILDING[-1] = True
    made = {n.id for n in graph.nodes[start:]}
    if specialised:  # a result it was given (a roll by the declared size) needs a node
        results = [
            r if r.node.id in made else graph.apply("reshape", (r,), {"shape": r.shape})
            for r in results
        ]
        made = {n.id for n in graph.nodes[start:]}
    ids = tuple(r.node.id if r.node.id in made else None for r in results)
    if specialised and rule is not None:  # an op's expansion (a grad's are recorded too)
        for r in results:
            r.node.meta = {**r.node.meta, SPECIALISED: what}
    call = Call(what, build, tuple(t.node for t in inputs), ids, specialised, location)
    table = graph.calls  # the node ids it made, each with the call and its position
    for k, node_id in enumerate(ids):
        if node_id is not None:
            table[node_id] = (call, k)
    return results


def needs_retrace(roots: Sequence[Node]) -> bool:
    """Whether ``roots`` depend on a specialised expansion recorded in their graph. With a
    loop (``scan``, applied again as it is: its body is traced at the sizes it is fed),
    a ``grad`` counts only through a specialised op's expansion (`pinned_by`): a loop's
    gradient leaves the probes of the shape rules without being built for one size."""
    from asgrad.tensor.ir.passes import topological_order  # passes import the graph

    if not roots:
        return False
    table = roots[0].graph.calls
    found = loops = False
    for node in topological_order(list(roots)):
        if node.graph is not roots[0].graph:
            return False
        loops = loops or get_op(node.op).family == "control"
        entry = table.get(node.id)
        found = found or (entry is not None and entry[0].specialised)
    return found and (not loops or pinned_by(roots) is not None)


def pinned_by(roots: Sequence[Node]) -> str | None:
    """The op and line of an expansion built for the declared sizes of a free axis that
    ``roots`` depend on through their own graph (marked in ``node.meta``, which graph
    files keep), or None. A program that cannot trace ``roots`` again (a graph loaded
    from a file keeps no records) runs them at the declared sizes only."""
    from asgrad.tensor.ir.passes import topological_order  # passes import the graph

    if not roots:
        return None
    graph = roots[0].graph
    for node in topological_order(list(roots)):
        if node.graph is graph and SPECIALISED in node.meta:
            return f"{node.meta[SPECIALISED]} (made at {node.location})"
    return None


def retrace(roots: Sequence[Node], shapes: Mapping[str, Shape]) -> list[Node]:
    """``roots`` built again in a new graph whose inputs have ``shapes`` (by name; the
    declared shape for the others); recorded calls are run again, other nodes applied
    again with their attributes. Errors are [`FeedError`][asgrad.tensor.FeedError]s
    naming the line that made the op that fails at those sizes."""
    graph = roots[0].graph
    table = graph.calls
    from asgrad.tensor.ir.graph import Graph  # the graph records calls through this module

    new = Graph(graph.name)
    done: dict[int, Node] = {}
    stack: list[tuple[Node, bool]] = [(r, False) for r in reversed(roots)]
    while stack:
        node, ready = stack.pop()
        if node.id in done:
            continue
        entry = table.get(node.id)
        needs = entry[0].inputs if entry is not None else node.inputs
        if not ready:
            stack.append((node, True))
            stack.extend((n, False) for n in reversed(needs) if n.id not in done)
            continue
        try:
            if entry is not None:
                _run_call(new, entry[0], done)
            else:
                done[node.id] = _apply_again(new, node, done, shapes)
        except AsgradError as exc:
            what, where = (entry[0].what, entry[0].location) if entry else (node.op, node.location)
            raise FeedError(
                f"with inputs shaped {dict(shapes)}, {what} (made at {where}) fails: {exc}"
            ) from None
    return [done[r.id] for r in roots]


def _run_call(new: Graph, call: Call, done: dict[int, Node]) -> None:
    inputs = [new._wrap(done[n.id]) for n in call.inputs]
    results = traced(new, call.what, inputs, call.build, call.location)
    for node_id, result in zip(call.results, results, strict=True):
        if node_id is not None:
            done[node_id] = result.node


def _apply_again(
    new: Graph, node: Node, done: dict[int, Node], shapes: Mapping[str, Shape]
) -> Node:
    if node.op == "input":
        shape = shapes.get(node.name, node.shape)
        return new.input(node.name, shape, node.dtype, free=node.attrs["free"]).node
    if node.op == "parameter":
        return new.bind(node.attrs["variable"]).node
    if node.op == "constant":
        return new.constant(node.attrs["value"], node.dtype).node
    made = new.apply(node.op, [new._wrap(done[n.id]) for n in node.inputs], node.attrs).node
    made.location, made.meta = node.location, node.meta
    return made


def _off_its_rule(
    inputs: list[Tensor],
    results: list[Tensor],
    rule: Callable[[list[TensorType]], TensorType] | None,
) -> bool:
    """Whether what a call built, at its inputs' probe sizes (every free axis one
    larger, of size 1, or twice as large: `asgrad.tensor.ir.free_sizes`), differs from
    what its shape ``rule`` says, or (no rule: a ``grad``) has shapes its rules refuse
    there."""
    from asgrad.tensor.ir.free_sizes import probe_type  # it marks calls built here

    # a size of 1 would broadcast into a declared size; twice it keeps every divisor
    for probe in ("grown", "one", "double"):
        types = [probe_type(t.node, probe) for t in inputs]
        if any(t is None for t in types):
            continue
        got = [probe_type(r.node, probe) for r in results]
        if rule is None:
            if any(t is None for t in got):
                return True
            continue
        try:
            want = rule(types)  # type: ignore[arg-type]  # none is None (checked above)
        except (AsgradError, ValueError):
            continue  # the op does not take these sizes: its rule says so when run
        if got != [want]:
            return True
    return False
