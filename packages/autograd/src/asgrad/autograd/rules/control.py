"""Gradient rules of the control ops: ``scan`` and its parts.

The gradient of a scan is another scan, running the steps in the opposite order. Its
carries are the gradients flowing into the forward carries and the sums of the
captured values' gradients; its per-step inputs are the carries each forward step
started from (saved by the forward scan, or recomputed by running it again when it
was built with ``save_carries=False``), the forward xs and the gradients of the ys.
Each backward step recomputes one forward step from its saved carries
(`replay`) and differentiates it with `grad`, so the
backward body is a graph like any other: differentiating it again gives higher
orders (the backward scan saves no carries: a gradient of it runs it again).
``scan_part`` and ``scan_unpart`` are adjoint.
"""

from __future__ import annotations

from asgrad.autograd.rules.common import Attrs, Grads, Ins, Needs, Rule, registrar
from asgrad.tensor import Tensor
from asgrad.tensor.ir.dtypes import is_float
from asgrad.tensor.loops import scan
from asgrad.tensor.loops.body import Body, replay, tracing

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


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

    def step(carry: list[Tensor], x: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        from asgrad.autograd.grad import grad

        d_carry, acc = carry[:nc], carry[nc:]
        c_t, x_t = x[:nc], x[nc : nc + nx]
        dy_t, ds_t = x[nc + nx : nc + nx + len(y_idx)], x[nc + nx + len(y_idx) :]
        graph = tracing()
        assert graph is not None
        cap_t = [graph.capture(c) for c in caps]
        outs = replay(body, graph, [*c_t, *x_t, *cap_t])
        used = [*outs[:nc], *(outs[nc + i] for i in y_idx)]
        terms = [(o * ct).sum() for o, ct in zip(used, [*d_carry, *dy_t], strict=True)]
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        wrt = [*c_t, *(x_t[j] for j in want_x), *(cap_t[k] for k in want_cap)]
        grads = grad(total, wrt)
        d_prev = list(grads[:nc])
        for i, ds in zip(s_idx, ds_t, strict=True):
            d_prev[i] = d_prev[i] + ds
        d_x = grads[nc : nc + len(want_x)]
        d_cap = grads[nc + len(want_x) :]
        return [*d_prev, *(a + d for a, d in zip(acc, d_cap, strict=True))], d_x

    init = [*d_final, *(_zeros_like(caps[k]) for k in want_cap)]
    steps = [*saved, *xs, *d_ys, *d_saved]
    length = None if steps else int(attrs["length"])
    # The backward loop keeps no carries of its own (its carries include the sums of
    # the weights' gradients, a weight's size per step): a gradient of it reruns it.
    final, d_xs = scan(
        step, init, steps, length=length, reverse=not attrs["reverse"], save_carries=False
    )
    result: list[Tensor | None] = [None] * len(ins)
    for i in range(nc):
        result[i] = final[i]
    for j, d in zip(want_x, d_xs, strict=True):
        result[nc + j] = d
    for k, d in zip(want_cap, final[nc:], strict=True):
        result[nc + nx + k] = d
    return result


@rule("scan_part")
def _scan_part(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    unpart = g.graph.apply("scan_unpart", (g, *ins[1:]), attrs)
    return [unpart] + [None] * (len(ins) - 1)


@rule("scan_unpart")
def _scan_unpart(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    part = g.graph.apply("scan_part", (g, *ins[1:]), attrs)
    return [part] + [None] * (len(ins) - 1)
