"""Gradient rules of the control ops: ``scan`` and its parts.

The gradient of a scan is another scan, running the steps in the opposite order. Its
carries are the gradients flowing into the forward carries and the sums of the
captured values' gradients; its per-step inputs are the carries each forward step
started from (saved by the forward scan, or recomputed by running it again when it
was built with ``save_carries=False``), the forward xs and the gradients of the ys.
Each backward step copies one forward step (`replay_values`) and differentiates it
with `grad`, so the backward body is a graph like any other: differentiating it again
gives higher orders (the backward scan saves no carries: a gradient of it runs it
again). Where the forward scan saves its carries, a probe of the backward step finds
the forward values the gradient reads (by value, not for a shape alone) that change
from step to step; a scan of the body extended with them as more ys
(`Body.with_outputs`) saves them, and the backward step reads them instead of its
copy of the forward step, which then computes nothing (`_substituted`). The extended
scan has the same inputs as the forward one: the graph passes merge the two.
``scan_part`` and ``scan_unpart`` are adjoint.

A captured value's gradient is a sum over the steps. Where a step's share is a product
``p_t.T @ q_t`` of 2-d per-step values (the weight of ``h @ w``) or ``q_t`` summed to
the capture's shape (a bias broadcast over the batch), the sum is taken after the
loop, over all steps at once: the backward scan returns ``p_t`` and ``q_t`` as per-step
outputs (or reuses the loop's own: the carries the forward saved, the xs' gradients)
and one product ``P.T @ Q`` of the steps stacked (``(T * B, m)`` by ``(T * B, n)``)
replaces a small product and a weight-sized sum per step (`hoisted_sums`). Only what
has another form stays a carry of the backward scan.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from asgrad.autograd.rules.common import Attrs, Grads, Ins, Needs, Rule, registrar
from asgrad.tensor import Tensor
from asgrad.tensor.ir.dtypes import is_float
from asgrad.tensor.ir.free_sizes import free_axes_of
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.passes import topological_order
from asgrad.tensor.ir.registry import TensorType, get_op
from asgrad.tensor.loops import scan
from asgrad.tensor.loops.body import Body, replay_values, trace, tracing

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


class _Saving(threading.local):
    def __init__(self) -> None:
        self.on = True


_SAVING = _Saving()


@contextlib.contextmanager
def recompute_loop_steps() -> Iterator[None]:
    """Within it, the gradients of scans save no forward values of their steps (an
    LSTM's gates): each backward step computes its forward step again from the saved
    carries. Less memory (one carry per step) for more work; what
    [`Optimizer.compile`][asgrad.nn.Optimizer.compile] falls back to when a
    ``memory_budget`` is not met otherwise.

    >>> from asgrad.tensor import Graph, make_schedule, scan
    >>> from asgrad.autograd import grad
    >>> g = Graph()
    >>> w, xs = g.input("w", (2, 2)), g.input("xs", (3, 1, 2))
    >>> _, hs = scan(lambda h, x: ((h @ w + x).tanh(),) * 2, xs[0], xs)
    >>> with recompute_loop_steps():
    ...     (dw,) = grad(hs.sum(), [w])
    >>> sum(n.op == "scan" for n in make_schedule([dw]).nodes)  # the loop and its gradient
    2
    """
    before = _SAVING.on
    _SAVING.on = False
    try:
        yield
    finally:
        _SAVING.on = before


def _part(src: Tensor, ins: Ins, attrs: Attrs, part: int) -> Tensor:
    return src.graph.apply("scan_part", (src, *ins), {**attrs, "part": part})


def _zeros_like(x: Tensor) -> Tensor:
    return x.graph.apply("broadcast_like", (x.graph.constant(0, x.dtype), x), {})


def _present(g: Tensor, out: Tensor) -> set[int] | None:
    """The parts of the scan ``out`` that ``g`` holds gradient for, when ``g`` is a sum of
    ``scan_unpart`` nodes of that scan (the usual case); None when unknown."""
    found: set[int] = set()
    stack = [g.node]
    scan_inputs = [n.id for n in out.node.inputs]
    while stack:
        node = stack.pop()
        if node.op == "add":
            stack.extend(node.inputs)
        elif (
            node.op == "scan_unpart"
            and node.attrs["loop"] is out.node.attrs["loop"]
            and node.attrs["save"] == out.node.attrs["save"]
            and [n.id for n in node.inputs[1:]] == scan_inputs
        ):
            found.add(int(node.attrs["part"]))
        else:
            return None
    return found


# Where a hoisted sum finds a per-step operand after the loop: the backward scan's
# step input ``("x", i)`` (a saved carry, an xs, a ys' gradient) or its per-step output
# ``("y", j)`` (an xs' gradient, or a value returned for the sum).
Where = tuple[str, int]


@dataclass(frozen=True)
class HoistedSum:
    """A term of a capture's gradient summed over the steps after the loop:
    ``p.T @ q`` (``product``; ``operands`` are p, q) or q summed to the capture's shape."""

    product: bool
    operands: tuple[Where, ...]


class _Hoisting:
    """The capture gradients' terms of one trace of the backward step that are summed
    after the loop, and the per-step values they read (``extra``: new outputs)."""

    def __init__(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self.where: dict[int, Where] = {}
        for j, t in enumerate(outputs):
            self.where.setdefault(t.node.id, ("y", j))
        for i, t in enumerate(inputs):
            self.where[t.node.id] = ("x", i)
        self.n_out = len(outputs)
        self.extra: list[Tensor] = []

    def _at(self, node: Node) -> Where:
        found = self.where.get(node.id)
        if found is None:
            found = ("y", self.n_out + len(self.extra))
            self.extra.append(Tensor(node))
            self.where[node.id] = found
        return found

    def split(self, d: Tensor, cap: Tensor, fixed: bool) -> tuple[list[HoistedSum], Tensor | None]:
        """``d`` (a capture's gradient in one step) as the terms summed after the loop
        and the rest (None when nothing is left); ``fixed``: the capture's sizes
        follow no free input axis (a product's stacked operands are reshaped)."""
        sums: list[HoistedSum] = []
        rest: Tensor | None = None
        for term in _terms(d.node):
            found = self._hoisted(term, cap, fixed)
            if found is not None:
                sums.append(found)
            else:
                t = Tensor(term)
                rest = t if rest is None else rest + t
        return sums, rest

    def _hoisted(self, term: Node, cap: Tensor, fixed: bool) -> HoistedSum | None:
        if term.shape != cap.shape:
            return None
        if term.op == "matmul" and fixed:
            a, b = term.inputs
            if (
                a.op == "transpose"
                and len(a.shape) == 2
                and len(b.shape) == 2
                and tuple(a.attrs["axes"]) == (1, 0)
            ):
                return HoistedSum(True, (self._at(a.inputs[0]), self._at(b)))
        if term.op == "sum_to_like":
            return HoistedSum(False, (self._at(term.inputs[0]),))
        return None


def _terms(node: Node) -> list[Node]:
    """The terms of a sum (adds of one shape, unfolded)."""
    if node.op == "add" and all(n.shape == node.shape for n in node.inputs):
        return [t for n in node.inputs for t in _terms(n)]
    return [node]


def _fixed(t: Tensor) -> bool:
    return free_axes_of(t.node) == frozenset()


def _per_step(body: Body) -> set[int]:
    """The ids of the body's nodes computed from its carries or xs (not from its
    captures and constants alone): the values that change from step to step."""
    found = {n.id for n in body.inputs[: body.n_carry + body.n_x]}
    for node in topological_order(body.outputs):
        if any(i.id in found for i in node.inputs):
            found.add(node.id)
    return found


def _read(roots: Sequence[Tensor], replayed: set[int]) -> set[int]:
    """The ``replayed`` nodes whose values ``roots`` read: the walk follows the edges
    of values (an input read for its shape alone is not one) and stops at them."""
    found: set[int] = set()
    seen: set[int] = set()
    stack = [t.node for t in roots]
    while stack:
        node = stack.pop()
        if node.id in seen:
            continue
        seen.add(node.id)
        if node.id in replayed:
            found.add(node.id)
            continue
        shape_only = get_op(node.op).shape_only_inputs if node.inputs else ()
        stack.extend(i for k, i in enumerate(node.inputs) if k not in shape_only)
    return found


def _substituted(
    roots: Sequence[Tensor], given: dict[int, Node], stale: set[int], spare: Sequence[Tensor]
) -> list[Tensor]:
    """``roots`` computed with the nodes ``given`` (by id) replaced by other values: the
    saved values of a forward step instead of its replayed ones. An input read for its
    shape alone that would still need a ``stale`` node (a replayed value not saved) reads
    a ``spare`` value of its type instead, where there is one."""
    by_type: dict[TensorType, Node] = {}
    for t in spare:
        by_type.setdefault(t.node.type, t.node)
    new: dict[int, tuple[Node, bool]] = {}  # id -> (its value now, reads a stale node)
    for node in topological_order([t.node for t in roots]):
        if node.id in given:
            new[node.id] = (given[node.id], False)
            continue
        if node.id in stale:
            new[node.id] = (node, True)
            continue
        shape_only = get_op(node.op).shape_only_inputs if node.inputs else ()
        ins: list[Node] = []
        old = False
        for k, i in enumerate(node.inputs):
            value, uses_stale = new[i.id]
            if uses_stale and k in shape_only and i.type in by_type:
                value, uses_stale = by_type[i.type], False
            ins.append(value)
            old = old or uses_stale
        if all(a is b for a, b in zip(ins, node.inputs, strict=True)):
            new[node.id] = (node, old)
        else:
            copy = Node(
                node.graph, node.op, tuple(ins), node.attrs, node.type, node.name,
                node.location, node.meta,
            )  # fmt: skip
            node.graph.nodes.append(copy)  # a node of the body, as apply makes them
            new[node.id] = (copy, old)
    return [Tensor(new[t.node.id][0]) for t in roots]


@rule("scan")
def _scan(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    loop: Body = attrs["loop"]
    if not is_float(out.dtype):
        return [None] * len(ins)
    nc, nx, ny = loop.n_carry, loop.n_x, loop.n_y
    body = loop.at([t.dtype for t in ins[:nc]] + [t.dtype for t in ins[nc:]])
    packed, fwd = out, dict(attrs)
    if not attrs["save"]:  # run the loop again, keeping each step's carries
        fwd["save"] = True
        packed = out.graph.apply("scan", ins, fwd)
    xs, caps = ins[nc : nc + nx], ins[nc + nx :]
    present = _present(g, out)

    def has(part: int) -> bool:
        return present is None or part in present

    if not any(has(p) for p in range(nc + ny)) and not (attrs["save"] and present):
        return [None] * len(ins)
    d_final = [_part(g, ins, attrs, i) if has(i) else _zeros_like(ins[i]) for i in range(nc)]
    y_idx = [i for i in range(ny) if has(nc + i)]
    d_ys = [_part(g, ins, attrs, nc + i) for i in y_idx]
    saved = [_part(packed, ins, fwd, nc + ny + i) for i in range(nc)]
    # A saved carry is an output too (a gradient's scan reads it): its gradient joins
    # that of the carry the step started from.
    s_idx = [i for i in range(nc) if attrs["save"] and has(nc + ny + i)]
    d_saved = [_part(g, ins, attrs, nc + ny + i) for i in s_idx]
    want_x = [j for j in range(nx) if needs[nc + j] and is_float(xs[j].dtype)]
    want_cap = [k for k in range(len(caps)) if needs[nc + nx + k] and is_float(caps[k].dtype)]
    fixed = [_fixed(caps[k]) for k in want_cap]
    # The captures whose gradient keeps a carry (a term not summed after the loop):
    # all of them while probing, then those the probe found a rest for.
    carried = list(range(len(want_cap)))
    plan: list[list[HoistedSum]] = []
    rested: list[int] = []
    # The forward values a backward step reads, saved by the forward scan (as extra
    # ys of a scan extending it) where it saves its carries; found by the probe.
    per_step = _per_step(body) - {n.id for n in body.inputs}
    residual: list[Node] = []
    probing = [True]
    n_fixed = nc + nx + len(y_idx) + len(s_idx)

    def step(carry: list[Tensor], x: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        from asgrad.autograd.grad import grad

        d_carry, acc = carry[:nc], carry[nc:]
        c_t, x_t = x[:nc], x[nc : nc + nx]
        dy_t, ds_t = x[nc + nx : nc + nx + len(y_idx)], x[nc + nx + len(y_idx) : n_fixed]
        r_t = x[n_fixed:]
        graph = tracing()
        assert graph is not None
        cap_t = [graph.capture(c) for c in caps]
        values = replay_values(body, graph, [*c_t, *x_t, *cap_t])
        outs = [values[n.id] for n in body.outputs]
        used = [*outs[:nc], *(outs[nc + i] for i in y_idx)]
        terms = [(o * ct).sum() for o, ct in zip(used, [*d_carry, *dy_t], strict=True)]
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        wrt = [*c_t, *(x_t[j] for j in want_x), *(cap_t[k] for k in want_cap)]
        grads = grad(total, wrt)
        given_ins = {t.node.id for t in [*carry, *x]}
        replayed = {values[k].node.id for k in per_step if k in values} - given_ins
        if r_t:  # read the saved values instead of the replayed ones
            given = {values[n.id].node.id: r.node for n, r in zip(residual, r_t, strict=True)}
            grads = _substituted(grads, given, replayed - set(given), [*carry, *x])
        elif probing[0] and attrs["save"] and _SAVING.on:
            read = _read(grads, replayed)
            residual[:] = [
                n
                for n in topological_order(body.outputs)
                if n.id in per_step and values[n.id].node.id in read and n.dtype == out.dtype
            ]
        d_prev = list(grads[:nc])
        for i, ds in zip(s_idx, ds_t, strict=True):
            d_prev[i] = d_prev[i] + ds
        d_x = list(grads[nc : nc + len(want_x)])
        d_cap = grads[nc + len(want_x) :]
        hoisting = _Hoisting(x, d_x)
        rests: list[Tensor | None] = []
        plan.clear()
        for k, d, keep in zip(want_cap, d_cap, fixed, strict=True):
            sums, rest = hoisting.split(d, cap_t[k], keep)
            plan.append(sums)
            rests.append(rest)
        new_acc = []
        for a, i in zip(acc, carried, strict=True):
            rest = rests[i]
            new_acc.append(a if rest is None else a + rest)
        rested[:] = [i for i, r in enumerate(rests) if r is not None]
        assert set(rested) <= set(carried)
        return [*d_prev, *new_acc], [*d_x, *hoisting.extra]

    steps = [*saved, *xs, *d_ys, *d_saved]
    length = None if steps else int(attrs["length"])
    if want_cap or attrs["save"]:  # probe the step: which captures keep a carry, what it reads
        types = [t.node.type for t in [*d_final, *(caps[k] for k in want_cap)]]
        types += [TensorType(t.shape[1:], t.dtype) for t in steps]
        trace(step, "probe", loop.where, g.graph, types, (nc + len(want_cap), len(steps)))
        carried[:] = rested
    probing[0] = False
    if residual:  # one forward scan computes the loop and saves what the steps read
        fwd = {**attrs, "loop": body.with_outputs(residual), "save": True}
        packed = out.graph.apply("scan", ins, fwd)
        ny_ext = ny + len(residual)
        saved = [_part(packed, ins, fwd, nc + ny_ext + i) for i in range(nc)]
        kept = [_part(packed, ins, fwd, nc + ny + j) for j in range(len(residual))]
        steps = [*saved, *xs, *d_ys, *d_saved, *kept]
    init = [*d_final, *(_zeros_like(caps[want_cap[i]]) for i in carried)]
    # The backward loop keeps no carries of its own (its carries include the sums of
    # the weights' gradients, a weight's size per step): a gradient of it reruns it.
    final, per_step = scan(
        step, init, steps, length=length, reverse=not attrs["reverse"], save_carries=False
    )
    result: list[Tensor | None] = [None] * len(ins)
    for i in range(nc):
        result[i] = final[i]
    for j, d in zip(want_x, per_step[: len(want_x)], strict=True):
        result[nc + j] = d

    def stacked(where: Where) -> Tensor:
        kind, i = where
        return steps[i] if kind == "x" else per_step[i]

    for i, k in enumerate(want_cap):
        total: Tensor | None = final[nc + carried.index(i)] if i in carried else None
        for s in plan[i]:
            if s.product:
                p, q = (stacked(w) for w in s.operands)
                share = p.reshape(-1, p.shape[-1]).T @ q.reshape(-1, q.shape[-1])
            else:
                share = g.graph.apply("sum_to_like", (stacked(s.operands[0]), caps[k]), {})
            total = share if total is None else total + share
        result[nc + nx + k] = total if total is not None else _zeros_like(caps[k])
    return result


@rule("scan_part")
def _scan_part(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    unpart = g.graph.apply("scan_unpart", (g, *ins[1:]), attrs)
    return [unpart] + [None] * (len(ins) - 1)


@rule("scan_unpart")
def _scan_unpart(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    part = g.graph.apply("scan_part", (g, *ins[1:]), attrs)
    return [part] + [None] * (len(ins) - 1)
