"""Scans and sorts along one axis on the GPU (``kernels/reduction_scan.wgsl``,
``kernels/reduction_sort_bitonic.wgsl``, ``kernels/reduction_sort.wgsl``), for the
reduction family's lowerings.

A scan runs one thread per line along the axis, sequentially, so a line of any length
works (long lines with few of them are slow). A line of up to `BITONIC_MAX`
elements is sorted by one workgroup, a bitonic sort in workgroup memory on (value,
position) pairs (``R log^2 R`` comparisons). A longer one is sorted by counting, for
each element, the elements of its line that go before it: ``R * R`` comparisons, all
in parallel. Both are exact and stable (ties ordered by position); lines longer than
`MAX_SORT` raise [`GpuUnsupportedError`][asgrad.gpu.GpuUnsupportedError] (sort them on
the CPU backend).
"""

from __future__ import annotations

import math
import struct

from asgrad.gpu.device import fold_groups
from asgrad.gpu.device.array import GpuArray
from asgrad.gpu.device.checks import checks_source
from asgrad.gpu.device.source import kernel_text, numpy_dtype, render
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.tensor import TensorType

MAX_SORT = 16384  # elements of one line: 2.7e8 comparisons
BITONIC_MAX = 1024  # lines this long or shorter: a bitonic sort in workgroup memory

# kind -> (init, step) for float32 lines; `acc` starts at init
_FLOAT_STEPS: dict[str, tuple[str, str]] = {
    "cumsum": ("0.0", "acc = acc + x;"),
    "cumprod": ("1.0", "acc = acc * x;"),
    "cummax": ("0.0", "acc = select(asg_max(acc, x), x, k == 0u);"),
    "cummin": ("0.0", "acc = select(asg_min(acc, x), x, k == 0u);"),
    "logcumsumexp": ("asg_ninf()", "acc = asg_logaddexp(acc, x);"),
    # PyTorch's indices: a tie or a NaN moves them on (asg_ge/le are false for NaN)
    "cummax_index": (
        "0.0",
        "if (k == 0u || asg_ge(x, acc) || asg_isnan(x)) { acc = x; at = i32(r); }",
    ),
    "cummin_index": (
        "0.0",
        "if (k == 0u || asg_le(x, acc) || asg_isnan(x)) { acc = x; at = i32(r); }",
    ),
}
_INT_STEPS: dict[str, tuple[str, str]] = {
    "cumsum": ("0i", "acc = asg_chk_add(acc, x, {slot}u);"),
    "cummax": ("0i", "acc = select(max(acc, x), x, k == 0u);"),
    "cummin": ("0i", "acc = select(min(acc, x), x, k == 0u);"),
    "cummax_index": ("0i", "if (k == 0u || x >= acc) { acc = x; at = i32(r); }"),
    "cummin_index": ("0i", "if (k == 0u || x <= acc) { acc = x; at = i32(r); }"),
}


def _lines(x: GpuArray, axis: int) -> tuple[int, int, int]:
    axis = axis % x.ndim
    return math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1 :])


def scan(kind: str, x: GpuArray, axis: int, reverse: bool, out: TensorType) -> GpuArray:
    """``kind`` (a key of the step tables) along ``axis`` of ``x``."""
    result = GpuArray.empty(tuple(out.shape), numpy_dtype(out.dtype), x.device)
    outer, r, inner = _lines(x, axis)
    if result.size == 0:
        return result
    device = x.device
    t_in = x.wgsl
    # float16 lines run in f32, each output rounded to f16 once
    t_acc = "f32" if t_in == "f16" else t_in
    steps = _FLOAT_STEPS if t_acc == "f32" else _INT_STEPS
    if kind not in steps:
        raise GpuUnsupportedError(f"no GPU {kind} of {x.dtype} values")
    init, step = steps[kind]
    checks = ""
    if "{slot}" in step:
        detail = (
            "the exact running sum must fit the int32 range [-2**31, 2**31) that GPU "
            "buffers hold (the CPU computes it exactly, as int64)"
        )
        step = step.format(slot=device.checks.slot("overflow", kind, detail))
        checks = checks_source(3)
    out_value = "at" if kind.endswith("_index") else "acc"
    code = {
        "T_IN": t_in,
        "T_OUT": result.wgsl,
        "T_ACC": t_acc,
        "INIT": init,
        "STEP": step,
        "OUT": f"asg_f2h({out_value})" if result.wgsl == "f16" else out_value,
        "CHECKS": checks,
    }
    pipe = device.pipeline(
        ("reduction_scan", *code.values()),
        lambda: render("reduction_scan", PRELUDE=kernel_text("prelude"), **code),
        ("uniform", "read", "write") + ("checks",) * bool(checks),
    )
    meta = device.params(struct.pack("<4I", outer, r, inner, int(reverse)))
    buffers = (meta, x.buffer, result.buffer) + ((device.checks.buffer,) if checks else ())
    device.dispatch(pipe, buffers, fold_groups(-(-outer * inner // 64), device.max_groups))
    return result


def _before(t: str, descending: bool) -> str:
    if t not in ("f32", "f16"):
        cmp = ">" if descending else "<"
        return f"    return y {cmp} x || (y == x && j < i);"
    # NaN is the largest value: last ascending, first descending; -0 == 0. float16
    # values compare as their (exact) f32 widening.
    ahead = "asg_gt(yf, xf)" if descending else "asg_lt(yf, xf)"
    nan_ahead = "ny && !nx" if descending else "nx && !ny"
    return (
        f"    let yf = {'f32(y)' if t == 'f16' else 'y'};\n"
        f"    let xf = {'f32(x)' if t == 'f16' else 'x'};\n"
        "    let ny = asg_isnan(yf);\n    let nx = asg_isnan(xf);\n"
        f"    return {nan_ahead} || {ahead} || ((asg_eq(yf, xf) || (nx && ny)) && j < i);"
    )


def sort(x: GpuArray, axis: int, descending: bool, indices: bool, out: TensorType) -> GpuArray:
    """Values (or int64 positions, ``indices``) of ``x`` sorted along ``axis``, stable."""
    result = GpuArray.empty(tuple(out.shape), numpy_dtype(out.dtype), x.device)
    outer, r, inner = _lines(x, axis)
    if r > MAX_SORT:
        raise GpuUnsupportedError(
            f"sort on the GPU takes lines of at most {MAX_SORT} elements, got {r} along "
            f"axis {axis % x.ndim} of {list(x.shape)}; sort it with backend='cpu'"
        )
    if result.size == 0:
        return result
    device = x.device
    bitonic = r <= BITONIC_MAX
    variant = "reduction_sort_bitonic" if bitonic else "reduction_sort"
    code = {
        "T_IN": x.wgsl,
        "T_OUT": result.wgsl,
        "BEFORE": _before(x.wgsl, descending),
        "OUT": ("i32(p)" if bitonic else "i32(i)") if indices else "x",
    }
    pipe = device.pipeline(
        (variant, *code.values()),
        lambda: render(variant, PRELUDE=kernel_text("prelude"), **code),
        ("uniform", "read", "write"),
    )
    padded = 1 << max(r - 1, 1).bit_length()
    meta = device.params(struct.pack("<4I", outer, r, inner, padded))
    n_groups = outer * inner if bitonic else -(-result.size // 64)
    device.dispatch(pipe, (meta, x.buffer, result.buffer), fold_groups(n_groups, device.max_groups))
    return result


__all__ = ["BITONIC_MAX", "MAX_SORT", "scan", "sort"]
