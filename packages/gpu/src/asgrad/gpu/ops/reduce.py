"""Reductions along axes: a workgroup (tree) or a thread per output."""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from asgrad.gpu.array import GpuArray
from asgrad.gpu.device import fold_groups
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.ops.elementwise import Operand, elementwise
from asgrad.gpu.source import kernel_text, render

__all__ = ["REDUCTIONS", "normalize_axes", "reduce_axis"]

# name -> (init, combine(a, b), map(x), finish(acc_final)) for float32 accumulation
_F32_MAX = "3.4028234663852886e38"
REDUCTIONS: dict[str, tuple[str, str, str, str]] = {
    "sum": ("0.0", "a + b", "f32(x)", "acc_final"),
    "mean": ("0.0", "a + b", "f32(x)", "acc_final * params.scale"),
    "max": (f"-{_F32_MAX}", "max(a, b)", "f32(x)", "acc_final"),
    "min": (_F32_MAX, "min(a, b)", "f32(x)", "acc_final"),
    "prod": ("1.0", "a * b", "f32(x)", "acc_final"),
    "sumsq": ("0.0", "a + b", "f32(x) * f32(x)", "acc_final"),
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
    """``numpy.<kind>(x, axis, keepdims=...)`` for kind in :data:`REDUCTIONS`,
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
        pipe = device.pipeline(
            ("argreduce_rows", better, t_in),
            lambda: render("argreduce_rows", T_IN=t_in, BETTER=better),
            ("uniform", "read", "write"),
        )
        groups = fold_groups(rows, device.max_groups)
    else:
        init, combine, mapped, finish = REDUCTIONS[kind]
        t_out = out.wgsl
        if t_out != "f32":
            finish = f"{t_out}({finish})"
        meta = struct.pack("<4If", outer, r, inner, 0, 1.0 / max(r, 1))
        variant = "reduce_rows" if inner == 1 or rows < 2048 else "reduce_cols"
        pipe = device.pipeline(
            (variant, kind, t_in, t_out),
            lambda: render(
                variant,
                PRELUDE=kernel_text("prelude"),
                T_IN=t_in,
                T_OUT=t_out,
                T_ACC="f32",
                INIT=init,
                COMBINE=combine,
                MAP=mapped,
                FINISH=finish,
            ),
            ("uniform", "read", "write"),
        )
        n_groups = rows if variant == "reduce_rows" else -(-rows // 256)
        groups = fold_groups(n_groups, device.max_groups)
    device.dispatch(pipe, (device.params(meta), src.buffer, out.buffer), groups)
    return out
