"""The ops a whole-step kernel writes in Numba: op name -> emitter.

Each emitter writes an op at exact types into a `Kernel`
as explicit loops with constant bounds, computing what the op's numpy kernel computes
(the same formulas, in the op's dtype; NaN and infinities propagate as numpy's do), and
returns the result's `Val`. An op not in
`EMITTERS`, or one an emitter declines (`UnsupportedError`: another dtype, an
attribute it does not handle), sends the whole step back to the numpy path.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from asgrad.tensor.cpu.jit.emit import (
    FLOATS,
    Kernel,
    UnsupportedError,
    Val,
    broadcast_view,
    dt,
    literal,
    transpose_view,
)
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.registry import TensorType

Emitter = Callable[[Kernel, Node, Sequence[Val], TensorType], Val]

# Helper functions the generated module defines (NaN-propagating max/min, sigmoid).
PRELUDE = """
@numba.njit(inline="always", error_model="numpy")
def _fmax(a, b):
    return a if (a >= b or a != a) else b


@numba.njit(inline="always", error_model="numpy")
def _fmin(a, b):
    return a if (a <= b or a != a) else b


@numba.njit(inline="always", error_model="numpy")
def _sigmoid(x):
    e = np.exp(-abs(x))
    one = e * 0 + 1
    return (e if x < 0 else one) / (e + one)
"""


def _floats(ins: Sequence[Val], out_t: TensorType) -> None:
    if out_t.dtype not in FLOATS or any(v.dtype != out_t.dtype for v in ins):
        raise UnsupportedError("not one float dtype")


def _unary(template: str) -> Emitter:
    # a transcendental function is a scalar libm call here, not numpy's SIMD loop
    cost = 8 if any(f in template for f in ("np.", "_sigmoid", "**")) else 0

    def emit(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
        _floats(ins, out_t)
        if node.attrs:
            raise UnsupportedError("attributes")
        k.flops += cost * max(1, math.prod(out_t.shape))
        return k.elementwise(out_t, ins, lambda e: template.format(*e, z=literal(0, out_t.dtype)))

    return emit


def _binary(template: str) -> Emitter:
    return _unary(template)


def _neg(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    if out_t.dtype not in ("float32", "float64", "int32", "int64") or ins[0].dtype != out_t.dtype:
        raise UnsupportedError("neg of this dtype")
    return k.elementwise(out_t, ins, lambda e: f"-{e[0]}")


def _compare(symbol: str) -> Emitter:
    def emit(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
        kinds = {v.dtype for v in ins}
        if len(kinds) != 1 or out_t.dtype != "bool" or node.attrs:
            raise UnsupportedError("comparison of mixed dtypes")
        return k.elementwise(out_t, ins, lambda e: f"({e[0]} {symbol} {e[1]})")

    return emit


def _logical(symbol: str) -> Emitter:
    def emit(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
        if out_t.dtype != "bool" or any(v.dtype != "bool" for v in ins):
            raise UnsupportedError("logical op on numbers")
        if symbol == "not":
            return k.elementwise(out_t, ins, lambda e: f"(not {e[0]})")
        return k.elementwise(out_t, ins, lambda e: f"({e[0]} {symbol} {e[1]})")

    return emit


def _where(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    cond, a, b = ins
    if cond.dtype != "bool" or a.dtype != out_t.dtype or b.dtype != out_t.dtype:
        raise UnsupportedError("where of mixed dtypes")
    dt(out_t.dtype)
    return k.elementwise(out_t, ins, lambda e: f"({e[1]} if {e[0]} else {e[2]})")


def _cast(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    src = ins[0].dtype
    dt(src)
    if out_t.dtype == "bool":
        return k.elementwise(out_t, ins, lambda e: f"({e[0]} != 0)")
    if src in FLOATS and out_t.dtype not in FLOATS:
        raise UnsupportedError("float to integer cast")  # out-of-range values differ by platform
    return k.elementwise(out_t, ins, lambda e: f"{dt(out_t.dtype)}({e[0]})")


def _leaky_relu(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    _floats(ins, out_t)
    alpha = literal(float(node.attrs.get("alpha", 0.01)), out_t.dtype)
    return k.elementwise(out_t, ins, lambda e: f"({e[0]} if {e[0]} > 0 else {e[0]} * {alpha})")


def _axes(node: Node, rank: int) -> list[int]:
    axis = node.attrs["axis"]
    axes = [axis] if isinstance(axis, int) else list(axis)
    return sorted(a % rank if rank else a for a in axes)


def _reduction(kind: str) -> Emitter:
    def emit(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
        _floats(ins, out_t)
        (x,) = ins
        axes = _axes(node, len(x.shape))
        if not axes or any(x.shape[a] == 0 for a in axes):
            raise UnsupportedError("empty reduction")
        keep = bool(node.attrs.get("keepdims", False))
        d = out_t.dtype
        if kind in ("sum", "mean"):
            count = math.prod(x.shape[a] for a in axes)
            fin = (lambda a: f"{a} / {literal(count, d)}") if kind == "mean" else (lambda a: a)
            return k.reduce_into(
                x, out_t, axes, keep, literal(0, d), lambda a, e: f"{a} + {e}", fin
            )
        inf = literal(-math.inf if kind == "max" else math.inf, d)
        fn = "_fmax" if kind == "max" else "_fmin"
        return k.reduce_into(x, out_t, axes, keep, inf, lambda a, e: f"{fn}({a}, {e})")

    return emit


def _sum_to_like(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    _floats(ins[:1], out_t)
    return k.sum_to(ins[0], out_t)


def _broadcast(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    return broadcast_view(ins[0], out_t.shape)


def _reshape(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    return k.reshape(ins[0], out_t.shape)


def _transpose(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    return transpose_view(ins[0], list(node.attrs["axes"]))


def _matmul(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    _floats(ins, out_t)
    a, b = ins
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise UnsupportedError("matmul of a vector")
    kk = a.shape[-1]
    out = k.alloc(out_t.shape, out_t.dtype)
    k.flops += 2 * math.prod(out_t.shape) * kk
    idx, depth = k.loops(out_t.shape, 0)
    batch = out_t.shape[:-2]
    acc, red = k.fresh("acc"), k.fresh("r")
    k.line(depth, f"{acc} = {literal(0, out_t.dtype)}")
    k.line(depth, f"for {red} in range({kk}):")
    ai = [*_batch(a.shape, batch, idx), idx[-2], red]
    bi = [*_batch(b.shape, batch, idx), red, idx[-1]]
    k.line(depth + 1, f"{acc} += {a.at(ai)} * {b.at(bi)}")
    k.line(depth, f"{out.at(idx)} = {acc}")
    return out


def _batch(shape: Sequence[int], batch: Sequence[int], idx: Sequence[str]) -> list[str]:
    lead = len(batch) - (len(shape) - 2)
    return ["0" if shape[d] == 1 else idx[lead + d] for d in range(len(shape) - 2)]


def _adam_ema(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    _floats(ins, out_t)
    d = out_t.dtype
    beta = float(node.attrs["beta"])
    b, c = literal(beta, d), literal(1.0 - beta, d)
    if node.attrs.get("square", False):
        return k.elementwise(out_t, ins, lambda e: f"{e[0]} * {b} + ({e[1]} * {e[1]}) * {c}")
    return k.elementwise(out_t, ins, lambda e: f"{e[0]} * {b} + {e[1]} * {c}")


def _adam_update(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    _floats(ins, out_t)
    eps = literal(float(node.attrs.get("eps", 1e-8)), out_t.dtype)

    def expr(e: list[str]) -> str:
        step = f"({e[3]} * {e[1]}) / (np.sqrt({e[2]}) / {e[4]} + {eps})"
        return f"{e[0]} - {step}" if len(e) == 5 else f"{e[0]} * {e[5]} - {step}"

    return k.elementwise(out_t, ins, expr)


EMITTERS: dict[str, Emitter] = {
    "add": _binary("{0} + {1}"),
    "sub": _binary("{0} - {1}"),
    "mul": _binary("{0} * {1}"),
    "div": _binary("{0} / {1}"),
    "pow": _binary("{0} ** {1}"),
    "maximum": _binary("_fmax({0}, {1})"),
    "minimum": _binary("_fmin({0}, {1})"),
    "neg": _neg,
    "exp": _unary("np.exp({0})"),
    "log": _unary("np.log({0})"),
    "sqrt": _unary("np.sqrt({0})"),
    "abs": _unary("abs({0})"),
    "tanh": _unary("np.tanh({0})"),
    "sin": _unary("np.sin({0})"),
    "cos": _unary("np.cos({0})"),
    "sigmoid": _unary("_sigmoid({0})"),
    "relu": _unary("_fmax({0}, {z})"),
    "stop_gradient": _unary("{0}"),
    "leaky_relu": _leaky_relu,
    "greater": _compare(">"),
    "greater_equal": _compare(">="),
    "less": _compare("<"),
    "less_equal": _compare("<="),
    "equal": _compare("=="),
    "not_equal": _compare("!="),
    "logical_and": _logical("and"),
    "logical_or": _logical("or"),
    "logical_not": _logical("not"),
    "where": _where,
    "cast": _cast,
    "sum": _reduction("sum"),
    "mean": _reduction("mean"),
    "max": _reduction("max"),
    "min": _reduction("min"),
    "sum_to_like": _sum_to_like,
    "broadcast_to": _broadcast,
    "broadcast_like": _broadcast,
    "reshape": _reshape,
    "reshape_like": _reshape,
    "expand_dims": _reshape,
    "squeeze": _reshape,
    "transpose": _transpose,
    "matmul": _matmul,
    "adam_ema": _adam_ema,
    "adam_update": _adam_update,
}
