"""How a whole-step kernel writes an op: an elementwise op from its expression, the
structural families' ops by their emitters.

An emitter writes an op at exact types into a `Kernel`
as explicit loops with constant bounds, computing what the op's numpy kernel computes
(in the op's dtype; NaN and infinities propagate as numpy's do), and returns the
result's `Val`. `emit_expression` writes any
elementwise op from its scalar expression
(`render_numba`); the emitters below are the
structural families' (reductions, views, matrix products, Adam's updates, slices,
gathers, their scatters, one-hot and concatenation), listed in
`asgrad.tensor.cpu.lowering.FAMILY_LOWERINGS`; an op with a row program is written by
`asgrad.tensor.cpu.jit.emit_rows`. An op without one, or one an
emitter declines (`UnsupportedError`: another dtype, an attribute it does not
handle), sends the whole step back to the numpy path.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit.emit import (
    FLOATS,
    Index,
    Kernel,
    UnsupportedError,
    Val,
    broadcast_view,
    literal,
    transpose_view,
)
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.registry import TensorType

Emitter = Callable[[Kernel, Node, Sequence[Val], TensorType], Val]


def _floats(ins: Sequence[Val], out_t: TensorType) -> None:
    if out_t.dtype not in FLOATS or any(v.dtype != out_t.dtype for v in ins):
        raise UnsupportedError("not one float dtype")


def emit_expression(k: Kernel, expr: Any, ins: Sequence[Val], out_t: TensorType) -> Val:
    """An elementwise op from its scalar expression: one loop over the result's shape,
    the inputs broadcast, the element rendered by
    `render_numba`."""
    from asgrad.tensor.cpu.jit.render import cost, render_numba

    dtypes = [v.dtype for v in ins]
    render_numba(expr, ["x"] * len(ins), dtypes, out_t.dtype)  # declines before writing
    k.flops += (cost(expr) - 1) * max(1, math.prod(out_t.shape))
    return k.elementwise(out_t, ins, lambda e: render_numba(expr, e, dtypes, out_t.dtype))


def _axes(node: Node, rank: int) -> list[int]:
    axis = node.attrs["axis"]
    axes = [axis] if isinstance(axis, int) else list(axis)
    return sorted(a % rank if rank else a for a in axes)


def reduction(kind: str) -> Emitter:
    def emit(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
        integer = out_t.dtype in ("int32", "int64", "bool") and ins[0].dtype == out_t.dtype
        if not (kind in ("max", "min") and integer):
            _floats(ins, out_t)
        (x,) = ins
        axes = _axes(node, len(x.shape))
        if not axes or any(x.shape[a] == 0 for a in axes):
            raise UnsupportedError("empty reduction")
        keep = bool(node.attrs["keepdims"])
        d = out_t.dtype
        if kind in ("sum", "mean"):
            count = math.prod(x.shape[a] for a in axes)
            fin = (lambda a: f"{a} / {literal(count, d)}") if kind == "mean" else (lambda a: a)
            return k.reduce_into(
                x, out_t, axes, keep, literal(0, d), lambda a, e: f"{a} + {e}", fin
            )
        if d == "bool":
            inf = literal(kind == "min", d)
        elif integer:  # the dtype's extreme: every element replaces it
            info = np.iinfo(d)
            inf = literal(info.min if kind == "max" else info.max, d)
        else:
            inf = literal(-math.inf if kind == "max" else math.inf, d)
        fn = "_fmax" if kind == "max" else "_fmin"
        return k.reduce_into(x, out_t, axes, keep, inf, lambda a, e: f"{fn}({a}, {e})")

    return emit


def sum_to_like(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    _floats(ins[:1], out_t)
    return k.sum_to(ins[0], out_t)


def broadcast(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    return broadcast_view(ins[0], out_t.shape)


def reshape(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    return k.reshape(ins[0], out_t.shape)


def transpose(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    return transpose_view(ins[0], list(node.attrs["axes"]))


def concat(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    """``concat``: each input copied into its span of the result along ``axis``."""
    axis = int(node.attrs["axis"]) % len(out_t.shape)
    out = k.alloc(out_t.shape, out_t.dtype)
    start = 0
    for v in ins:
        idx, depth = k.loops(v.shape, 0)
        target = list(idx)
        target[axis] = f"({start} + {idx[axis]})" if start else idx[axis]
        k.line(depth, f"{out.at(target)} = {v.at(idx)}")
        k.flops += max(1, math.prod(v.shape))
        start += v.shape[axis]
    return out


def matmul(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    _floats(ins, out_t)
    a, b = ins
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise UnsupportedError("matmul of a vector")
    kk = a.shape[-1]
    if k.blas and 2 * math.prod(out_t.shape) * kk >= BLAS_AT and _blas_fits(a, b, out_t):
        return _blas_matmul(k, a, b, out_t)
    out = k.alloc(out_t.shape, out_t.dtype)
    k.flops += 2 * math.prod(out_t.shape) * kk
    idx, depth = k.loops(out_t.shape, 0)
    batch = out_t.shape[:-2]
    acc, red = k.fresh("acc"), k.fresh("r")
    k.line(depth, f"{acc} = {literal(0, out_t.dtype)}")
    k.line(depth, f"for {red} in range({k.bound(kk)}):")
    ai = [*_batch(a.shape, batch, idx), idx[-2], red]
    bi = [*_batch(b.shape, batch, idx), red, idx[-1]]
    k.line(depth + 1, f"{acc} += {a.at(ai)} * {b.at(bi)}")
    k.line(depth, f"{out.at(idx)} = {acc}")
    return out


# A product of at least this many operations calls BLAS (``np.dot``) where the kernel
# allows it (`Kernel.blas`). Measured in a Numba loop: a (16, 64) @ (64, 256) product
# took 18 us through np.dot, 43 us as loops over the contiguous transposed weight and
# 291 us as loops reading it transposed.
BLAS_AT = 1 << 12


def _blas_fits(a: Val, b: Val, out_t: TensorType) -> bool:
    """Whether `_blas_matmul` writes ``a @ b``: each operand has the result's batch
    axes or none (a batch broadcast from size 1 stays loops)."""
    batch = tuple(out_t.shape[:-2])
    return all(tuple(v.shape[:-2]) in ((), batch) for v in (a, b))


def _blas_matmul(k: Kernel, a: Val, b: Val, out_t: TensorType) -> Val:
    """``a @ b`` through ``np.dot`` into a work buffer: one call for 2-d operands (or a
    stacked ``a`` against a matrix, as one tall product), else one call per batch entry."""
    batch = out_t.shape[:-2]
    m, n = out_t.shape[-2:]
    kk = a.shape[-1]
    nb = math.prod(batch)
    k.blas_flops += 2 * nb * m * n * kk
    out = k.alloc(out_t.shape, out_t.dtype)
    assert out.flat is not None
    buf, off = out.flat
    a, b = _untransposed(k, a), _untransposed(k, b)
    if len(b.shape) == 2 and tuple(a.shape[:-2]) == tuple(batch):
        tall = _array(k, a) if not batch else _reshaped(k, a, (nb * m, kk))
        target = f"{buf}[{off}:{off + nb * m * n}].reshape(({nb * m}, {n}))"
        k.line(0, f"np.dot({tall}, {_array(k, b)}, {target})")
        return out
    i = k.fresh("b")
    arrays = []
    for v, rows, cols in ((a, m, kk), (b, kk, n)):
        if len(v.shape) == 2:
            arrays.append(_array(k, v))
        else:
            arrays.append(f"{_reshaped(k, v, (nb, rows, cols))}[{i}]")
    k.line(0, f"for {i} in range({nb}):")
    target = f"{buf}[{off}:{off + nb * m * n}].reshape(({nb}, {m}, {n}))[{i}]"
    k.line(1, f"np.dot({arrays[0]}, {arrays[1]}, {target})")
    return out


def _untransposed(k: Kernel, v: Val) -> Val:
    """``v``, or, in a time loop, a contiguous copy of it made once before the loop
    when it is the same transposed argument every step (`Kernel.hoist`)."""
    if k.loop_head is None or v.flat is not None or v.array is None or len(v.shape) != 2:
        return v
    text, transposes = v.array, 0
    while text.endswith(".T"):
        text, transposes = text[:-2], transposes + 1
    if transposes % 2 == 0 or not k.invariant(v):
        return v
    return k.hoist(lambda: k.materialize(v))


def _array(k: Kernel, v: Val) -> str:
    """``v`` as a Numba array expression (copied into a work buffer when it is none)."""
    if v.array is None:
        v = k.materialize(v)
    assert v.array is not None
    return v.array


def _reshaped(k: Kernel, v: Val, shape: tuple[int, ...]) -> str:
    """``v``'s elements in C order as an array of ``shape`` (a C-contiguous buffer)."""
    flat = k.materialize(v) if v.flat is None else v
    assert flat.flat is not None
    buf, off = flat.flat
    return f"{buf}[{off}:{off + math.prod(shape)}].reshape({shape!r})"


def _batch(shape: Sequence[int], batch: Sequence[int], idx: Sequence[str]) -> list[str]:
    lead = len(batch) - (len(shape) - 2)
    return ["0" if shape[d] == 1 else idx[lead + d] for d in range(len(shape) - 2)]


def _slice_items(index: Sequence[Any], shape: Sequence[int]) -> list[tuple[int, int] | int]:
    """Per axis of ``shape``: ``(start, step)`` of a slice, or an int's position."""
    items: list[tuple[int, int] | int] = []
    for d, n in enumerate(shape):
        item = index[d] if d < len(index) else slice(None)
        if isinstance(item, slice):
            start, _, step = item.indices(n)
            items.append((start, step))
        elif isinstance(item, int) and not isinstance(item, bool):
            items.append(item % n)
        else:
            raise UnsupportedError(f"a slice index {item!r}")
    return items


def _sliced(items: Sequence[tuple[int, int] | int], idx: Sequence[str]) -> list[str]:
    """The indices into the sliced value at the slice's indices ``idx``."""
    out, pos = [], 0
    for item in items:
        if isinstance(item, int):
            out.append(str(item))
            continue
        start, step = item
        i = idx[pos]
        pos += 1
        term = i if step == 1 else f"{i} * {step}"
        out.append(f"({start} + {term})" if start else f"({term})")
    return out


def slice_view(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    """``x[index]`` with ints and slices: a view."""
    (x,) = ins
    items = _slice_items(node.attrs["index"], x.shape)
    return Val(out_t.shape, x.dtype, lambda idx: x.at(_sliced(items, idx)))


def scatter_slice(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    """Zeros shaped like ``x`` with ``g`` written at the slice."""
    g, _x = ins
    items = _slice_items(node.attrs["index"], out_t.shape)
    out = _zeros(k, out_t)
    idx, depth = k.loops(g.shape, 0)
    k.line(depth, f"{out.at(_sliced(items, idx))} = {g.at(idx)}")
    k.flops += max(1, math.prod(g.shape))
    return out


def _zeros(k: Kernel, out_t: TensorType) -> Val:
    out = k.alloc(out_t.shape, out_t.dtype)
    idx, depth = k.loops(out_t.shape, 0)
    k.line(depth, f"{out.at(idx)} = {literal(0, out_t.dtype)}")
    k.flops += max(1, math.prod(out_t.shape))
    return out


def _checked(k: Kernel, op: str, idx: Val, n: int) -> None:
    """A loop raising ``IndexError`` unless every element of ``idx`` is in ``[0, n)``:
    the step's wrapper then runs the numpy function, whose kernel raises the typed
    error (the step writes no variable before its end)."""
    if idx.dtype not in ("int32", "int64"):
        raise UnsupportedError(f"{op} of non-integer indices")
    at, depth = k.loops(idx.shape, 0)
    v = k.fresh("v")
    k.line(depth, f"{v} = {idx.at(at)}")
    k.line(depth, f"if {v} < 0 or {v} >= {n}:")
    k.line(depth + 1, f'raise IndexError("{op}: an index out of range")')
    k.flops += max(1, math.prod(idx.shape))


def gather(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    """``take(x, indices, axis)``: the indices checked, then a view."""
    x, indices = ins
    axis = int(node.attrs["axis"]) % len(x.shape)
    _checked(k, "gather", indices, x.shape[axis])
    m = len(indices.shape)

    def at(idx: Index) -> str:
        i = indices.at(list(idx[axis : axis + m]))
        return x.at([*idx[:axis], f"({i})", *idx[axis + m :]])

    return Val(out_t.shape, x.dtype, at)


def scatter_add(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    """Zeros shaped like ``x`` with ``g`` added at the indices along ``axis``, in order."""
    _floats(ins[:1], out_t)
    g, indices, _x = ins
    axis = int(node.attrs["axis"]) % len(out_t.shape)
    _checked(k, "scatter_add", indices, out_t.shape[axis])
    out = _zeros(k, out_t)
    m = len(indices.shape)
    idx, depth = k.loops(g.shape, 0)
    i = indices.at(list(idx[axis : axis + m]))
    target = out.at([*idx[:axis], f"({i})", *idx[axis + m :]])
    k.line(depth, f"{target} += {g.at(idx)}")
    k.flops += max(1, math.prod(g.shape))
    return out


def one_hot(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    """``one_hot``: the indices checked, then one loop writing ones and zeros."""
    (idx,) = ins
    depth = int(node.attrs["depth"])
    _checked(k, "one_hot", idx, depth)
    out = k.alloc(out_t.shape, out_t.dtype)
    k.flops += max(1, math.prod(out_t.shape))
    outer, depth_ = k.loops(idx.shape, 0)
    v = k.fresh("v")
    k.line(depth_, f"{v} = {idx.at(outer)}")
    c = k.fresh("c")
    k.line(depth_, f"for {c} in range({depth}):")
    one, zero = literal(1, out_t.dtype), literal(0, out_t.dtype)
    k.line(depth_ + 1, f"{out.at([*outer, c])} = {one} if {v} == {c} else {zero}")
    return out


def adam_ema(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    _floats(ins, out_t)
    d = out_t.dtype
    beta = float(node.attrs["beta"])
    b, c = literal(beta, d), literal(1.0 - beta, d)
    if node.attrs["square"]:
        return k.elementwise(out_t, ins, lambda e: f"{e[0]} * {b} + ({e[1]} * {e[1]}) * {c}")
    return k.elementwise(out_t, ins, lambda e: f"{e[0]} * {b} + {e[1]} * {c}")


def adam_update(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    _floats(ins, out_t)
    eps = literal(float(node.attrs["eps"]), out_t.dtype)

    def expr(e: list[str]) -> str:
        step = f"({e[3]} * {e[1]}) / (np.sqrt({e[2]}) / {e[4]} + {eps})"
        return f"{e[0]} - {step}" if len(e) == 5 else f"{e[0]} * {e[5]} - {step}"

    return k.elementwise(out_t, ins, expr)
