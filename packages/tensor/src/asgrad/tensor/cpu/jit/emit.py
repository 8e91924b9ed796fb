"""Numba source for values at constant shapes: the building blocks of a whole-step kernel.

A whole-step kernel (`asgrad.tensor.cpu.jit.step`) is one Numba function whose
every value has a shape known when it is generated. A value is a `Val`: its
shape, its dtype and how to read one element of it at given loop indices (an element
of an argument array, of a flat work buffer at a constant offset, a scalar local, a
literal, or a view of another value: transposed, broadcast, reshaped). An op's
emitter (`asgrad.tensor.cpu.jit.emit_ops`) writes explicit loops with constant
bounds into a `Kernel` and returns its result's `Val`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from asgrad.tensor.ir.registry import TensorType

# The dtypes a whole-step kernel handles, by their names in the generated source.
NUMBA_DTYPES = {
    "float32": "np.float32",
    "float64": "np.float64",
    "int32": "np.int32",
    "int64": "np.int64",
    "bool": "np.bool_",
}
FLOATS = ("float32", "float64")

# The parameters of a function moved out of a kernel (`Kernel.outline`), and the
# arguments of its call: the kernel's parameters, written in when they are all known.
ARGS = "__kernel_args__"

# The first lines of a function whose loop bounds are ``n * _u`` (`Kernel.runtime_bounds`):
# the check that tells LLVM ``0 <= _u <= 1``.
BOUNDS_CHECK = ("    if _u < 0 or _u > 1:", '        raise ValueError("_u must be 1")')

# The elements a work buffer's arrays are aligned to when 0-d values lie among them
# (``Kernel.scalars_in_work``): a product or a vectorised loop reads them unaligned
# otherwise.
ALIGN = 16


class UnsupportedError(Exception):
    """The value cannot be written in Numba here: the step falls back to numpy."""


Index = Sequence[str]


@dataclass(frozen=True)
class Val:
    """A value of the kernel: ``at(idx)`` reads the element at loop indices ``idx``
    (one source expression per axis of ``shape``).

    Attributes:
        shape: Its exact shape.
        dtype: Its dtype name.
        at: The element at given indices, as source text.
        flat: ``(buffer, offset)`` when it is C-contiguous in a flat buffer.
        literal: For a literal scalar, its value.
        array: The value as a Numba array expression of its shape, when it is one
            (an argument, a slice of a work buffer, their 2-d transposes): what a
            BLAS product reads.
    """

    shape: tuple[int, ...]
    dtype: str
    at: Callable[[Index], str]
    flat: tuple[str, int] | None = None
    literal: float | int | bool | None = None
    array: str | None = None


def dt(dtype: str) -> str:
    """The Numba-side name of ``dtype``; `UnsupportedError` for any other."""
    try:
        return NUMBA_DTYPES[dtype]
    except KeyError:
        raise UnsupportedError(f"dtype {dtype}") from None


def literal(value: float | int | bool, dtype: str) -> str:
    """``value`` as a typed literal of ``dtype``, exact (a float's repr round-trips)."""
    if dtype == "bool":
        return repr(bool(value))
    if dtype in FLOATS:
        f = float(value)
        text = "np.nan" if math.isnan(f) else repr(f).replace("inf", "np.inf")
        return f"{dt(dtype)}({text})"
    return f"{dt(dtype)}({int(value)})"


def strides(shape: Sequence[int]) -> list[int]:
    """C-order element strides."""
    out, step = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        out[d] = step
        step *= shape[d]
    return out


def flat_val(buf: str, off: int, shape: tuple[int, ...], dtype: str) -> Val:
    """The C-contiguous value at element ``off`` of the flat buffer ``buf``."""
    st = strides(shape)

    def at(idx: Index) -> str:
        terms = [str(off)] if off or not shape else []
        for i, s, n in zip(idx, st, shape, strict=True):
            if n != 1 and i != "0":
                terms.append(i if s == 1 else f"{i} * {s}")
        return f"{buf}[{' + '.join(terms) or '0'}]"

    array = f"{buf}[{off}:{off + math.prod(shape)}].reshape({tuple(shape)!r})" if shape else None
    return Val(shape, dtype, at, flat=(buf, off), array=array)


def arr_val(name: str, shape: tuple[int, ...], dtype: str) -> Val:
    """An argument array of the kernel (any layout), read with one index per axis."""

    def at(idx: Index) -> str:
        if not shape:
            return f"{name}[()]"
        return f"{name}[{', '.join('0' if n == 1 else i for i, n in zip(idx, shape, strict=True))}]"

    return Val(shape, dtype, at, array=name if shape else None)


def scalar_val(expr: str, dtype: str, value: float | int | bool | None = None) -> Val:
    """A 0-d value held as a scalar: a local of the kernel or a literal."""
    return Val((), dtype, lambda idx: expr, literal=value)


def broadcast_index(shape: Sequence[int], out_shape: Sequence[int], idx: Index) -> list[str]:
    """The indices into a value of ``shape`` broadcast to ``out_shape`` at ``idx``."""
    lead = len(out_shape) - len(shape)
    return ["0" if n == 1 else idx[lead + d] for d, n in enumerate(shape)]


def broadcast_view(v: Val, out_shape: tuple[int, ...]) -> Val:
    """``v`` broadcast to ``out_shape`` (a view: no copy)."""
    if tuple(v.shape) == tuple(out_shape):
        return v
    return Val(out_shape, v.dtype, lambda idx: v.at(broadcast_index(v.shape, out_shape, idx)))


def transpose_view(v: Val, axes: Sequence[int]) -> Val:
    """``v.transpose(axes)`` (a view)."""
    inv = [0] * len(axes)
    for d, a in enumerate(axes):
        inv[a] = d
    shape = tuple(v.shape[a] for a in axes)
    array = f"{v.array}.T" if v.array is not None and list(axes) == [1, 0] else None
    return Val(
        shape, v.dtype, lambda idx: v.at([idx[inv[a]] for a in range(len(axes))]), array=array
    )


class Kernel:
    """The body of a kernel being written: source lines, work buffers, fresh names."""

    def __init__(self) -> None:
        self.body: list[str] = []
        self.work: dict[str, int] = {}  # dtype -> elements of its flat work buffer
        self.count = 0
        self.flops = 0
        self.indent = 0  # extra indentation of every line: inside a loop over steps
        self.blas = False  # whether large matrix products call BLAS (np.dot)
        self.blas_flops = 0  # the work of those products (not in ``flops``)
        self.work_limit = 0  # the most ``flops`` the kernel may do (set by its planner)
        self.consts: list[np.ndarray] = []  # the constant arrays, arguments ``c0``, ``c1``...
        # Whether loop bounds are written as ``n * _u`` with ``_u`` an argument (1 at
        # run time): LLVM then cannot unroll the loops fully, which a kernel of many
        # short loops needs. Measured on 40 loops of 16 x 64 elements: 104 s to compile
        # with constant bounds, 17 s with these. The kernel first checks 0 <= _u <= 1:
        # without that bound LLVM cannot tell the slices of the one work buffer apart
        # (an index might wrap) and leaves the loops scalar (an LSTM cell's gate loop of
        # 1,024 elements: 32 us a step against 1.5 us with the check).
        self.runtime_bounds = False
        # Whether a 0-d value is an element of the work buffer rather than a local (a
        # step compiled in pieces: a local of one function is not seen by the next).
        self.scalars_in_work = False
        # Where the next value of this shape and dtype is written (`alloc` returns it
        # once, then clears it): a loop step's output written straight into its slot of
        # the stacked outputs (`asgrad.tensor.cpu.jit.emit_scan`).
        self.target: Val | None = None
        # Functions of the module besides the kernel, each a list of source lines
        # (without its decorator): a loop moved out of the kernel (`outline`). Their
        # parameters, and the arguments of the calls to them, are `ARGS`, which the
        # planner replaces with the kernel's own parameters.
        self.functions: list[list[str]] = []
        # The body line where the time loop being written starts, and its step index
        # (`asgrad.tensor.cpu.jit.emit_scan`): work that every step would repeat is
        # written there instead, once, before the loop (`hoist`).
        self.loop_head: int | None = None
        self.loop_index = ""
        # Whether an elementwise op over the shape of the loop just written joins that
        # loop (`elementwise`): one loop for a chain (Adam's moments and step) compiles
        # in a fraction of the time of one loop per op and runs in one pass.
        self.fuse_loops = False
        self._open: _OpenLoop | None = None

    def constant(self, value: np.ndarray) -> Val:
        """A constant's value: a literal when 0-d, else a new argument of the kernel."""
        v = const_val(value, f"c{len(self.consts)}")
        if v.shape:
            self.consts.append(np.asarray(value))
        return v

    def fresh(self, prefix: str = "t") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def alloc(self, shape: tuple[int, ...], dtype: str) -> Val:
        """A new value's storage: a scalar local when 0-d (unless ``scalars_in_work``),
        else a slice of a work buffer."""
        dt(dtype)
        target, self.target = self.target, None
        if target is not None and target.shape == tuple(shape) and target.dtype == dtype:
            return target
        if not shape and not self.scalars_in_work:
            return scalar_val(self.fresh(), dtype)
        if 0 in shape:
            raise UnsupportedError("an empty value")
        off = self.work.get(dtype, 0)
        if shape and self.scalars_in_work:  # past the 0-d values: 64-byte aligned
            off = -(-off // ALIGN) * ALIGN
        self.work[dtype] = off + math.prod(shape)
        return flat_val(f"W_{dtype}", off, shape, dtype)

    def loops(self, shape: Sequence[int], depth: int, prefix: str = "i") -> tuple[list[str], int]:
        """Open loops over ``shape`` at indentation ``depth``; returns the indices and the
        body's depth. Axes of size 1 get the index ``0`` and no loop."""
        idx: list[str] = []
        for d, n in enumerate(shape):
            if n == 1:
                idx.append("0")
                continue
            name = f"{prefix}{depth}_{d}"
            self.line(depth, f"for {name} in range({self.bound(n)}):")
            idx.append(name)
            depth += 1
        return idx, depth

    def bound(self, n: int) -> str:
        """A loop's trip count ``n`` as source (see ``runtime_bounds``)."""
        return f"{n} * _u" if self.runtime_bounds else str(n)

    def outline(self, start: int) -> None:
        """Move the body's lines from ``start`` on (a loop, at the current ``indent``)
        into a function of their own (`functions`) that the body calls instead.

        LLVM optimises a long function worse than a short one: an LSTM's forward loop
        of 128 steps took 10-12 ms inside the whole-step function against 4.5 ms as a
        function of its own (the same source; batch 16, hidden 64, one thread). The
        function first checks ``_u`` as the kernel does (see ``runtime_bounds``); every
        value it reads or writes is an argument or an element of a work buffer (the
        planner sets ``scalars_in_work``), so it needs no local of the kernel."""
        lines = self.body[start:]
        del self.body[start:]
        pad = len("    " * self.indent)
        name = self.fresh("_loop")
        head = [f"def {name}({ARGS}):"]
        if self.runtime_bounds:
            head += BOUNDS_CHECK
        self.functions.append([*head, *(text[pad:] for text in lines), "    return 0"])
        self.line(0, f"{name}({ARGS})")

    def hoist(self, write: Callable[[], Val]) -> Val:
        """``write()``'s lines written before the time loop being written (at
        `loop_head`, which moves past them), where they run once rather than every step."""
        assert self.loop_head is not None
        lines, self.body = self.body, []
        self.indent -= 1
        try:
            out = write()
        finally:
            new, self.body = self.body, lines
            self.indent += 1
        self.body[self.loop_head : self.loop_head] = new
        self.loop_head += len(new)
        return out

    def invariant(self, v: Val) -> bool:
        """Whether ``v``, an array expression, reads an argument of the kernel that no
        loop writes (a feed, a variable's state, a constant; not a work buffer) at
        elements that do not depend on the time loop's step."""
        if v.array is None or v.array.startswith("W_"):
            return False
        return not re.search(rf"\b{self.loop_index}\b", v.array) if self.loop_index else True

    def line(self, depth: int, text: str) -> None:
        self.body.append("    " * (depth + 1 + self.indent) + text)

    def elementwise(
        self, out_t: TensorType, ins: Sequence[Val], expr: Callable[[list[str]], str]
    ) -> Val:
        """``out = expr(elements of ins)`` over the output's shape, inputs broadcast."""
        open_loop = self._open if out_t.shape else None
        joins = open_loop is not None and open_loop.takes(self, out_t.shape, ins)
        out = self.alloc(out_t.shape, out_t.dtype)
        self.flops += max(1, math.prod(out_t.shape))
        if not out_t.shape:
            self.line(0, f"{out.at([])} = {dt(out_t.dtype)}({expr([v.at([]) for v in ins])})")
            return out
        if joins:
            assert open_loop is not None
            idx, depth = open_loop.idx, open_loop.depth
        else:
            idx, depth = self.loops(out_t.shape, 0)
        elems = [v.at(broadcast_index(v.shape, out_t.shape, idx)) for v in ins]
        self.line(depth, f"{out.at(idx)} = {expr(elems)}")
        if self.fuse_loops and out.flat is not None:
            if not joins or open_loop is None:
                open_loop = self._open = _OpenLoop(tuple(out_t.shape), idx, depth)
            open_loop.add(self, out)
        return out

    def copy(self, target: Val, src: Val) -> None:
        """``target[...] = src``, element by element (counted as work)."""
        if not target.shape:
            self.line(0, f"{target.at([])} = {src.at([])}")
            return
        idx, depth = self.loops(target.shape, 0)
        self.line(depth, f"{target.at(idx)} = {src.at(idx)}")
        self.flops += math.prod(target.shape)

    def materialize(self, v: Val) -> Val:
        """``v`` copied into a C-contiguous work buffer (unless it already is one)."""
        if v.flat is not None or not v.shape:
            return v
        out = self.alloc(v.shape, v.dtype)
        idx, depth = self.loops(v.shape, 0)
        self.line(depth, f"{out.at(idx)} = {v.at(idx)}")
        return out

    def reshape(self, v: Val, shape: tuple[int, ...]) -> Val:
        """``v.reshape(shape)``: the same elements in C order."""
        if math.prod(v.shape) != math.prod(shape):
            raise UnsupportedError("reshape to another size")
        if math.prod(shape) == 1:
            one = v
            return Val(shape, v.dtype, lambda idx: one.at(["0"] * len(one.shape)), v.flat)
        src = self.materialize(v)
        assert src.flat is not None
        return flat_val(src.flat[0], src.flat[1], shape, v.dtype)

    def reduce_into(
        self,
        x: Val,
        out_t: TensorType,
        axes: Sequence[int],
        keepdims: bool,
        init: str,
        step: Callable[[str, str], str],
        finish: Callable[[str], str] = lambda acc: acc,
    ) -> Val:
        """A reduction of ``x`` over ``axes``: ``acc = init``, then ``acc = step(acc, x)``
        over the reduced axes, and ``finish(acc)`` stored."""
        out = self.alloc(out_t.shape, out_t.dtype)
        self.flops += max(1, math.prod(x.shape))
        kept = [d for d in range(len(x.shape)) if d not in axes]
        outer, depth = self.loops([x.shape[d] for d in kept], 0)
        acc = self.fresh("acc")
        self.line(depth, f"{acc} = {init}")
        inner, body = self.loops([x.shape[d] for d in axes], depth, "k")
        full = ["0"] * len(x.shape)
        for d, i in zip(kept, outer, strict=True):
            full[d] = i
        for d, i in zip(axes, inner, strict=True):
            full[d] = i
        self.line(body, f"{acc} = {step(acc, x.at(full))}")
        if keepdims:
            oidx = ["0" if d in axes else full[d] for d in range(len(x.shape))]
        else:
            oidx = list(outer)
        self.line(depth, f"{out.at(oidx)} = {dt(out_t.dtype)}({finish(acc)})")
        return out

    def sum_to(self, x: Val, out_t: TensorType) -> Val:
        """``x`` summed to ``out_t``'s shape (leading axes, and axes where it has size 1)."""
        lead = len(x.shape) - len(out_t.shape)
        axes = [d for d in range(len(x.shape)) if d < lead or out_t.shape[d - lead] == 1]
        if not axes:
            return self.reshape(x, out_t.shape)
        zero = literal(0, out_t.dtype)
        if axes == list(range(len(axes))) and len(axes) < len(x.shape):
            return self.reshape(self._sum_rows(x, len(axes), out_t.dtype), out_t.shape)
        summed = self.reduce_into(
            x, TensorType(tuple(x.shape[d] for d in range(len(x.shape)) if d not in axes),
                          out_t.dtype),
            axes, False, zero, lambda a, e: f"{a} + {e}",
        )  # fmt: skip
        return self.reshape(summed, out_t.shape)

    def _sum_rows(self, x: Val, lead: int, dtype: str) -> Val:
        """``x`` summed over its ``lead`` leading axes, row by row into the result (each
        element summed in the same order as one accumulator would: the rows are read
        contiguously, where a loop per element strides across them; a bias gradient
        of 2,048 rows of 256: a cache miss per element otherwise)."""
        kept = x.shape[lead:]
        out = self.alloc(kept, dtype)
        self.flops += max(1, math.prod(x.shape))
        idx, depth = self.loops(kept, 0)
        self.line(depth, f"{out.at(idx)} = {literal(0, dtype)}")
        rows, depth = self.loops(x.shape[:lead], 0, "k")
        idx, depth = self.loops(kept, depth)
        self.line(depth, f"{out.at(idx)} = {out.at(idx)} + {x.at([*rows, *idx])}")
        return out


class _OpenLoop:
    """The elementwise loop last written into a kernel (`Kernel.fuse_loops`): its shape,
    indices and body depth, the values it writes, and the body's length after it (a
    line written since, by any other op, closes it)."""

    def __init__(self, shape: tuple[int, ...], idx: list[str], depth: int) -> None:
        self.shape, self.idx, self.depth = shape, idx, depth
        self.outputs: set[int] = set()  # id() of the values it writes
        self.regions: list[tuple[str, int, int]] = []  # (buffer, first, past last element)
        self.end = -1
        self.indent = 0

    def add(self, k: Kernel, out: Val) -> None:
        assert out.flat is not None
        buf, off = out.flat
        self.outputs.add(id(out))
        self.regions.append((buf, off, off + math.prod(out.shape)))
        self.end, self.indent = len(k.body), k.indent

    def takes(self, k: Kernel, shape: Sequence[int], ins: Sequence[Val]) -> bool:
        """Whether an elementwise op over ``shape`` reading ``ins`` may join the loop:
        nothing written since, the same shape, and every element of ``ins`` it reads
        either written by the loop at that same element or not written by it at all."""
        if not k.fuse_loops or (k.target is not None and k.target.flat is None):
            return False
        if len(k.body) != self.end or k.indent != self.indent or tuple(shape) != self.shape:
            return False
        return all(self._reads_safely(v) for v in ins)

    def _reads_safely(self, v: Val) -> bool:
        if id(v) in self.outputs:
            return tuple(v.shape) == self.shape  # read at the element being written
        if v.flat is not None:  # an array of its own: not one the loop writes?
            buf, off = v.flat
            end = off + max(1, math.prod(v.shape))
            return not any(b == buf and off < e and s < end for b, s, e in self.regions)
        # A view, an argument, a constant or a local: it must not read the loop's buffers.
        text = v.at(["_"] * len(v.shape))
        return not any(re.search(rf"\b{b}\[", text) for b, _, _ in self.regions)


def const_val(value: np.ndarray, name: str) -> Val:
    """A constant: a literal when 0-d, else the kernel argument ``name``."""
    arr = np.asarray(value)
    dtype = str(arr.dtype)
    dt(dtype)
    if arr.ndim == 0:
        item = arr.item()
        return scalar_val(literal(item, dtype), dtype, item)
    return arr_val(name, tuple(arr.shape), dtype)
