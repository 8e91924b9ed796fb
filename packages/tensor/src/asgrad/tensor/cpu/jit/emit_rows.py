"""How a whole-step kernel writes an op with a row program (softmax, the norms).

A row program (`asgrad.tensor.ir.rows`) is written into the step function as one loop
over its rows (the kept axes) holding, per pass of stages (`RowProgram.groups`), one
loop over the row accumulating each stage's reduction, then one loop writing the
row's results. Every expression is spelled by `render_numba`, as in the line path's
row kernels (`asgrad.tensor.cpu.jit.render_rows`) and the elementwise ops; a
subexpression of row scalars alone (layer norm's ``1 / sqrt(var + eps)``) is
computed once per row. The inputs are `Val` s of the step, read at the row's indices
whatever their layout (views included); a reduced axis may sit anywhere (softmax
over a middle axis, batch norm's axes around the channel).

The expression of the last stage that the output reads, in a pass of its own
(softmax's ``exp(x - m)``), is written into the result once and read back, not
computed twice (the same value). Sums accumulate in order (numpy's are pairwise:
results within the op's tolerance, as the whole step's reductions); a max propagates
NaN as numpy's does, and a mean is the sum times ``1 / n`` in the op's dtype, as the
numpy rendering computes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from asgrad.tensor.cpu.jit.emit import FLOATS, Kernel, UnsupportedError, Val, literal
from asgrad.tensor.cpu.jit.render import cost, render_numba
from asgrad.tensor.ir.registry import TensorType
from asgrad.tensor.ir.rows import RowProgram
from asgrad.tensor.ir.scalar import Expr, arg, replace

__all__ = ["emit_rows"]

_INIT = {"sum": 0.0, "mean": 0.0, "max": -math.inf}


def emit_rows(k: Kernel, program: RowProgram, ins: Sequence[Val], out_t: TensorType) -> Val:
    """``program`` applied to ``ins`` at ``out_t``, written into ``k``; its result."""
    d = out_t.dtype
    if d not in FLOATS or any(v.dtype != d for v in ins) or len(ins) != len(program.inputs):
        raise UnsupportedError("a row program not of one float dtype")
    shape = tuple(out_t.shape)
    if not shape or tuple(ins[0].shape) != shape:
        raise UnsupportedError("a row program of another shape")
    axes = program.axes
    kept = [a for a in range(len(shape)) if a not in axes]
    vals: list[Val] = []
    for v, layout in zip(ins, program.inputs, strict=True):
        along = axes if layout == "position" else kept
        want = shape if layout == "element" else tuple(shape[a] for a in along)
        if tuple(v.shape) == want:
            vals.append(v)
        elif layout != "element" and math.prod(v.shape) == math.prod(want):
            vals.append(k.reshape(v, want))
        else:
            raise UnsupportedError("a row program's input of another shape")
    size = math.prod(shape)
    out = k.alloc(shape, d)
    outer, depth = k.loops([shape[a] for a in kept], 0, "i")
    full = ["0"] * len(shape)
    for a, i in zip(kept, outer, strict=True):
        full[a] = i
    n_in = len(program.inputs)
    # arg index -> its source: inputs (filled per loop by `row`), the stages' row
    # scalars, hoisted row-level values; the cached stage value, read at the element
    names: list[str | Callable[[list[str]], str]] = []
    hoisted: dict[Expr, Expr] = {}

    def row(inner: Sequence[str]) -> list[str]:
        """The inputs' elements at the row's position ``inner``, then the scalars."""
        at = _at(full, axes, inner)
        elems = []
        for v, layout in zip(vals, program.inputs, strict=True):
            if layout == "element":
                elems.append(v.at(at))
            else:
                elems.append(v.at(list(inner) if layout == "position" else list(outer)))
        return elems + [n if isinstance(n, str) else n(at) for n in names[n_in:]]

    def render(e: Expr, inner: Sequence[str]) -> str:
        current = row(inner)
        return render_numba(e, current, [d] * len(current), d)

    def hoist(e: Expr) -> Expr:
        if e.op in ("arg", "const"):
            return e
        if program.is_row_level(e):
            if e not in hoisted:
                name = k.fresh("h")
                k.line(depth, f"{name} = {render(e, ['0'] * len(axes))}")
                names.append(name)
                hoisted[e] = arg(len(names) - 1)
            return hoisted[e]
        return Expr(e.op, tuple(hoist(a) for a in e.args), e.value)

    names.extend("?" for _ in range(n_in))
    scalars = [k.fresh("s") for _ in program.stages]
    names.extend(scalars)
    n = math.prod(shape[a] for a in axes)
    groups = program.groups()
    cached = _cached(program, groups)
    cached_expr: Expr | None = None
    for group in groups:
        exprs = [hoist(program.stages[j].expr) for j in group]
        for j in group:
            k.line(depth, f"{scalars[j]} = {literal(_INIT[program.stages[j].reduce], d)}")
        inner, body = k.loops([shape[a] for a in axes], depth, "k")
        for j, e in zip(group, exprs, strict=True):
            s, value = scalars[j], render(e, inner)
            if j == cached:  # written into the result once, read back by the output
                element = out.at(_at(full, axes, inner))
                k.line(body, f"{element} = {value}")
                value, cached_expr = element, e
            if program.stages[j].reduce == "max":
                k.line(body, f"{s} = _fmax({s}, {value})")
            else:
                k.line(body, f"{s} = {s} + {value}")
            k.flops += size * cost(e)
        for j in group:
            if program.stages[j].reduce == "mean":
                k.line(depth, f"{scalars[j]} = {scalars[j]} * {literal(1.0 / n, d)}")
    body_expr = hoist(program.out)
    if cached_expr is not None:
        names.append(lambda at: out.at(at))
        body_expr = replace(body_expr, cached_expr, arg(len(names) - 1))
    inner, body = k.loops([shape[a] for a in axes], depth, "k")
    k.line(body, f"{out.at(_at(full, axes, inner))} = {render(body_expr, inner)}")
    k.flops += size * cost(body_expr)
    return out


def _at(full: Sequence[str], axes: Sequence[int], inner: Sequence[str]) -> list[str]:
    """The element's indices: the row's (``full``) with ``inner`` along ``axes``."""
    at = list(full)
    for a, i in zip(axes, inner, strict=True):
        at[a] = i
    return at


def _contains(e: Expr, sub: Expr) -> bool:
    return e == sub or any(_contains(a, sub) for a in e.args)


def _cached(program: RowProgram, groups: Sequence[Sequence[int]]) -> int | None:
    """The stage whose expression the output reads and whose pass is its own
    (softmax's ``exp(x - m)``): written into the result once, not computed twice."""
    alone = {g[0] for g in groups if len(g) == 1}
    for j in reversed(range(len(program.stages))):
        e = program.stages[j].expr
        if e.op not in ("arg", "const") and _contains(program.out, e):
            return j if j in alone and not program.is_row_level(e) else None
    return None
