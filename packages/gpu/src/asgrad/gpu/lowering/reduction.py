"""The reduction family on the GPU: sum, mean, max, min, prod, var, argmax, argmin,
size_ratio; the scans (cumsum...) and sorts along one axis (`._scan`).

`reduce_axis` reduces along axes with a workgroup per row (a tree,
``kernels/reduction_rows.wgsl``), a workgroup per block of 32 outputs along a wide
strided axis (column sums, ``kernels/reduction_cols_block.wgsl``) or a thread per
output (``kernels/reduction_cols.wgsl``: narrow outputs, and a short axis of many outputs,
split-K's partial products), splitting long axes into pieces first; arg-reductions use
``kernels/reduction_arg_rows.wgsl``. Reduced axes that are not adjacent are brought
together by a permuting copy.

Floats follow numpy at NaN: max/min and argmax/argmin let a NaN win (the first one's
index). Integers never go through float32: max/min compare int32, and a sum
accumulates exactly in 64 bits, flagged (`asgrad.gpu.device.checks`) when the total
does not fit the int32 result.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from asgrad.gpu.device import Device, fold_groups
from asgrad.gpu.device.array import GpuArray, Operand
from asgrad.gpu.device.buffers import GpuBuffer
from asgrad.gpu.device.checks import checks_source
from asgrad.gpu.device.source import kernel_text, numpy_dtype, render, wgsl_type
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering import _scan as scans
from asgrad.gpu.lowering.common import Attrs, Lowering, alias, literal
from asgrad.gpu.lowering.elementwise import elementwise
from asgrad.tensor import TensorType

__all__ = ["LOWERINGS", "REDUCTIONS", "WGSL_FILES", "normalize_axes", "reduce_axis"]

WGSL_FILES: tuple[str, ...] = (
    "reduction_rows.wgsl",
    "reduction_cols.wgsl",
    "reduction_cols_block.wgsl",
    "reduction_arg_rows.wgsl",
    "reduction_scan.wgsl",
    "reduction_sort.wgsl",
    "reduction_sort_bitonic.wgsl",
    "prelude.wgsl",
    "elementwise.wgsl",
)

SCANS = ("cumsum", "cumprod", "cummax", "cummin", "cummax_index", "cummin_index", "logcumsumexp")

# name -> (init, combine(a, b), map(x), finish(acc_final)) for float32 accumulation
_F32_MAX = "3.4028234663852886e38"
REDUCTIONS: dict[str, tuple[str, str, str, str]] = {
    "sum": ("0.0", "a + b", "f32(x)", "acc_final"),
    "mean": ("0.0", "a + b", "f32(x)", "acc_final * params.scale"),
    "max": ("asg_ninf()", "asg_max(a, b)", "f32(x)", "acc_final"),
    "min": ("asg_inf()", "asg_min(a, b)", "f32(x)", "acc_final"),
    "prod": ("1.0", "a * b", "f32(x)", "acc_final"),
    "sumsq": ("0.0", "a + b", "f32(x) * f32(x)", "acc_final"),
}
# ... and for int32 elements: exact (accumulator type, init, combine)
_INT_REDUCTIONS: dict[str, tuple[str, str, str]] = {
    "sum": ("vec2<i32>", "vec2<i32>(0i, 0i)", "asg_add64(a, b)"),
    "max": ("i32", "bitcast<i32>(0x80000000u)", "max(a, b)"),
    "min": ("i32", "2147483647i", "min(a, b)"),
}


def normalize_axes(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """Sorted, non-negative axes (``None`` means all)."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = sorted({a % ndim if ndim else 0 for a in axes})
    return tuple(out)


def _reduced_shape(
    shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool
) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if d in axes else s for d, s in enumerate(shape))
    return tuple(s for d, s in enumerate(shape) if d not in axes)


def reduce_axis(
    kind: str,
    x: GpuArray,
    axis: int | Sequence[int] | None = None,
    keepdims: bool = False,
    out: GpuArray | None = None,
    out_dtype: Any = None,
) -> GpuArray:
    """``numpy.<kind>(x, axis, keepdims=...)`` for kind in `REDUCTIONS`,
    ``"argmax"`` and ``"argmin"`` (one axis; int64 logical, int32 stored)."""
    axes = normalize_axes(axis, x.ndim)
    arg = kind in ("argmax", "argmin")
    if arg and len(axes) != 1 and x.ndim > 1:
        raise GpuUnsupportedError(f"{kind} reduces one axis, got axes {axes}")
    if not arg and kind not in REDUCTIONS:
        raise GpuUnsupportedError(f"no GPU reduction {kind!r}")
    result_shape = _reduced_shape(x.shape, axes, keepdims)
    default = np.int64 if arg else (x.dtype if kind in ("max", "min") else np.float32)
    dtype = out_dtype if out_dtype is not None else default
    if out is None:
        out = GpuArray.empty(result_shape, dtype, x.device)
    if out.size == 0:
        return out
    src = x
    # bring the reduced axes together (a contiguous block) with a permuting copy
    if axes and axes != tuple(range(axes[0], axes[-1] + 1)):
        keep = [d for d in range(x.ndim) if d not in axes]
        perm = keep + list(axes)
        view = Operand.of(x).permute(perm)
        src = elementwise("x0", [view], x.dtype, view.shape)
        axes = tuple(range(len(keep), x.ndim))
    shape = src.shape
    if axes:
        outer = math.prod(shape[: axes[0]])
        r = math.prod(shape[axes[0] : axes[-1] + 1])
        inner = math.prod(shape[axes[-1] + 1 :])
    else:
        outer, r, inner = math.prod(shape), 1, 1
    if r == 0 and kind in ("max", "min", "argmax", "argmin"):
        raise GpuUnsupportedError(f"{kind} of an empty axis has no identity")
    device = x.device
    t_in = src.wgsl
    rows = outer * inner
    if arg:
        meta = struct.pack("<4I", outer, r, inner, 0)
        better = "a > b" if kind == "argmax" else "a < b"
        nan_first = _NAN_FIRST.format(a="a", b="b") if t_in == "f32" else ""
        if t_in == "f16":
            nan_first = _NAN_FIRST.format(a="f32(a)", b="f32(b)")
        pipe = device.pipeline(
            ("reduction_arg_rows", better, t_in),
            lambda: render("reduction_arg_rows", T_IN=t_in, BETTER=better, NAN_FIRST=nan_first),
            ("uniform", "read", "write"),
        )
        groups = fold_groups(rows, device.max_groups)
        device.dispatch(pipe, (device.params(meta), src.buffer, out.buffer), groups)
        return out
    scale = 1.0 / max(r, 1)
    # partial results: float32, or exact int32 (a (lo, hi) pair per partial sum)
    exact = t_in == "i32" and kind in _INT_REDUCTIONS and out.wgsl == "i32"
    width = 2 if exact and kind == "sum" else 1
    part_dtype = np.int32 if exact else np.float32
    if inner == 1 and rows < _BUSY_GROUPS and r > 2 * _ROW_CHUNK:
        # a few long rows: one workgroup per piece of a row, then per row
        chunks = min(-(-r // _ROW_CHUNK), -(-_BUSY_GROUPS // rows))
        chunk_len = -(-r // chunks)
        chunks = -(-r // chunk_len)
        partial = GpuArray.empty((outer, chunks, width), part_dtype, device)
        first, second = _SPLIT.get(kind, (kind, kind))
        _launch(device, "reduction_rows", first, src, partial, (outer, r, 1), 1.0, chunk_len)
        _launch(device, "reduction_rows", second, partial, out, (outer, chunks, 1), scale, 0, True)
    elif inner == 1:
        _launch(device, "reduction_rows", kind, src, out, (outer, r, inner), scale)
    elif inner >= _BLOCK and (r > _FEW_ROWS or rows < _BUSY_THREADS):
        # wide rows (column sums): a workgroup per block of outputs; few blocks and a
        # long axis: partial results over pieces of the axis first
        blocks = outer * -(-inner // _BLOCK)
        if blocks < _BUSY_BLOCKS and r > 2 * _BLOCK_CHUNK:
            chunks = min(-(-r // _BLOCK_CHUNK), -(-_BUSY_BLOCKS // blocks))
            chunk_len = -(-r // chunks)
            chunks = -(-r // chunk_len)
            partial = GpuArray.empty((outer, chunks, inner, width), part_dtype, device)
            first, second = _SPLIT.get(kind, (kind, kind))
            dims = (outer, r, inner)
            _launch(device, "reduction_cols_block", first, src, partial, dims, 1.0, chunk_len)
            dims = (outer, chunks, inner)
            _launch(device, "reduction_cols_block", second, partial, out, dims, scale, 0, True)
        else:
            _launch(device, "reduction_cols_block", kind, src, out, (outer, r, inner), scale)
    elif rows < _BUSY_THREADS and r > 2 * _MIN_CHUNK:
        # few outputs, long axis: partial results over chunks of the axis first
        chunks = min(-(-r // _MIN_CHUNK), -(-_BUSY_THREADS // rows))
        chunk_len = -(-r // chunks)
        chunks = -(-r // chunk_len)
        partial = GpuArray.empty((outer, chunks, inner, width), part_dtype, device)
        first, second = _SPLIT.get(kind, (kind, kind))
        _launch(device, "reduction_cols", first, src, partial, (outer, r, inner), 1.0, chunk_len)
        dims = (outer, chunks, inner)
        _launch(device, "reduction_cols", second, partial, out, dims, scale, 0, True)
    else:
        _launch(device, "reduction_cols", kind, src, out, (outer, r, inner), scale)
    return out


# Ahead of BETTER in reduction_arg_rows.wgsl for floats: a NaN wins (the first one)
_NAN_FIRST = """    let na = (bitcast<u32>({a}) & 0x7fffffffu) > 0x7f800000u;
    let nb = (bitcast<u32>({b}) & 0x7fffffffu) > 0x7f800000u;
    if (na || nb) {{
        return na && (!nb || ia < ib);
    }}"""


# Threads that keep a large GPU busy, and the shortest piece of an axis worth a thread.
_BUSY_THREADS = 65536
_MIN_CHUNK = 32
# Outputs per workgroup of reduction_cols_block.wgsl, the workgroups that keep a large
# GPU busy with it, and the shortest piece of the axis worth one.
_BLOCK = 32
_BUSY_BLOCKS = 1024
_BLOCK_CHUNK = 64
# A column sum over at most this many rows with at least _BUSY_THREADS outputs (split-K
# partial products, (splits, size)) runs a thread per output (reduction_cols.wgsl): in
# the block kernel each of its 8 lanes of rows would read one or two elements and then
# meet the others in workgroup memory, 8 threads and 3 barriers per output.
_FEW_ROWS = 16
# Workgroups that keep a large GPU busy, and the shortest piece of a row worth one.
_BUSY_GROUPS = 512
_ROW_CHUNK = 4096
# How a reduction splits into a reduction of pieces and a reduction of partial results.
_SPLIT = {"mean": ("sum", "mean"), "sumsq": ("sumsq", "sum")}


def _launch(
    device: Device,
    variant: str,
    kind: str,
    src: GpuArray,
    out: GpuArray,
    dims: tuple[int, int, int],
    scale: float,
    chunk_len: int = 0,
    from_partials: bool = False,
) -> None:
    """One reduction kernel over ``src`` seen as (outer, R, inner).

    With ``chunk_len`` it writes partial results into ``out``; ``from_partials``: the
    ``src`` holds such partial results.
    """
    outer, r, inner = dims
    chunks = -(-r // chunk_len) if chunk_len else 1
    code = _code(device, kind, src.wgsl, out.wgsl, chunk_len > 0, from_partials)
    meta = struct.pack("<4IfI", outer, r, inner, chunk_len, scale, chunks)
    binds = ("uniform", "read", "write") + ("checks",) * bool(code["CHECKS"])
    pipe = device.pipeline(
        (variant, kind, *code.values()),
        lambda: render(variant, PRELUDE=kernel_text("prelude"), **code),
        binds,
    )
    rows = outer * chunks * inner
    if variant == "reduction_rows":
        n_groups = rows
    elif variant == "reduction_cols_block":
        n_groups = outer * chunks * -(-inner // _BLOCK)
    else:
        n_groups = -(-rows // 256)
    groups = fold_groups(n_groups, device.max_groups)
    buffers: tuple[GpuBuffer, ...] = (device.params(meta), src.buffer, out.buffer)
    if code["CHECKS"]:
        buffers = (*buffers, device.checks.buffer)
    device.dispatch(pipe, buffers, groups)


def _code(
    device: Device, kind: str, t_in: str, t_out: str, to_partials: bool, from_partials: bool
) -> dict[str, str]:
    """The template values of one reduction kernel (types, init, combine, map, finish)."""
    if not (t_in == "i32" and t_out == "i32" and kind in _INT_REDUCTIONS):
        init, combine, mapped, finish = REDUCTIONS[kind]
        if t_out == "f16":  # accumulated in f32, rounded once (beyond 65504: inf)
            finish = f"asg_f2h({finish})"
        elif t_out != "f32":
            finish = f"{t_out}({finish})"
        code = {"T_ACC": "f32", "INIT": init, "COMBINE": combine, "MAP": mapped}
        return {"T_IN": t_in, "T_OUT": t_out, **code, "FINISH": finish, "CHECKS": ""}
    acc, init, combine = _INT_REDUCTIONS[kind]
    wide = acc == "vec2<i32>"
    finish, checks = "acc_final", ""
    if wide and to_partials:
        t_out = acc  # (lo, hi) partial sums
    elif wide:
        detail = (
            "the exact sum must fit the int32 range [-2**31, 2**31) that GPU buffers hold "
            "(the CPU computes it exactly, as int64)"
        )
        slot = device.checks.slot("overflow", "sum", detail)
        finish, checks = f"asg_chk_narrow(acc_final, {slot}u)", checks_source(3)
    if wide and from_partials:
        t_in, mapped = acc, "x"
    else:
        mapped = "vec2<i32>(x, x >> 31u)" if wide else "x"
    code = {"T_ACC": acc, "INIT": init, "COMBINE": combine, "MAP": mapped}
    return {"T_IN": t_in, "T_OUT": t_out, **code, "FINISH": finish, "CHECKS": checks}


def _reduction(kind: str) -> Lowering:
    def lower_reduction(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
        (x,) = ins
        return reduce_axis(
            kind,
            x,
            attrs["axis"],
            bool(attrs["keepdims"]),
            out_dtype=numpy_dtype(out.dtype),
        )

    return lower_reduction


def _var(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    """In float32 (float16 values widened), rounded to the result's dtype once."""
    (x,) = ins
    axes = normalize_axes(attrs["axis"], x.ndim)
    mean = reduce_axis("mean", x, axes, keepdims=True)
    d = "(f32(x0) - x1)"
    sq = elementwise(f"{d} * {d}", [x, mean], np.float32, x.shape)
    dtype = numpy_dtype(out.dtype)
    correction = float(attrs["correction"])
    if not correction:
        return reduce_axis("mean", sq, axes, bool(attrs["keepdims"]), out_dtype=dtype)
    result = reduce_axis("mean", sq, axes, bool(attrs["keepdims"]))
    # n / (n - correction), inf for n <= correction (numpy's division by max(n - c, 0))
    n = math.prod(x.shape[a] for a in axes)
    scale = n / (n - correction) if n > correction else math.inf
    scaled = f"x0 * {literal(scale)}"
    if wgsl_type(dtype) == "f16":
        scaled = f"asg_f2h({scaled})"
    return elementwise(scaled, [result], dtype, result.shape)


def _arg(kind: str) -> Lowering:
    def lower_arg(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
        (x,) = ins
        result = reduce_axis(kind, x, int(attrs["axis"]), out_dtype=np.int64)
        return alias(result, out.shape)

    return lower_arg


def _size_ratio(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    a, b = ins
    value = a.size / max(b.size, 1)
    dtype = numpy_dtype(out.dtype)
    return elementwise(literal(value, wgsl_type(dtype)), [], dtype, (), None)


def _scan(kind: str) -> Lowering:
    def lower_scan(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
        reverse = "reverse" in attrs and bool(attrs["reverse"])  # cumsum, logcumsumexp
        return scans.scan(kind, ins[0], int(attrs["axis"]), reverse, out)

    return lower_scan


def _sort(indices: bool) -> Lowering:
    def lower_sort(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
        descending = bool(attrs["descending"])
        return scans.sort(ins[0], int(attrs["axis"]), descending, indices, out)

    return lower_sort


LOWERINGS: dict[str, Lowering] = {
    **{kind: _scan(kind) for kind in SCANS},
    "sort": _sort(False),
    "argsort": _sort(True),
    "sum": _reduction("sum"),
    "mean": _reduction("mean"),
    "max": _reduction("max"),
    "min": _reduction("min"),
    "var": _var,
    "prod": _reduction("prod"),
    "argmax": _arg("argmax"),
    "argmin": _arg("argmin"),
    "size_ratio": _size_ratio,
}
