"""What every family's lowerings share: the lowering signature and small helpers.

A lowering ``fn(ins, attrs, out)`` records the kernels computing one node from its
input arrays and returns the output array; ``out`` gives the node's static shape and
dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from asgrad.gpu.device.array import GpuArray
from asgrad.tensor import TensorType

__all__ = ["Attrs", "Lowering", "alias", "hw", "literal", "optional", "zero"]

Attrs = Mapping[str, Any]
Lowering = Callable[[list[GpuArray], Attrs, TensorType], GpuArray]

_F32_MAX = 3.4028234663852886e38


def literal(value: float, wgsl: str = "f32") -> str:
    """A WGSL literal of ``value`` for an element of type ``wgsl``."""
    if wgsl == "i32":  # clamped to the range: a bound beyond it acts like the range's end
        v = float(value)
        n = int(v) if math.isfinite(v) else (2**31 if v > 0 else -(2**31))
        n = min(max(n, -(2**31)), 2**31 - 1)
        return "bitcast<i32>(0x80000000u)" if n == -(2**31) else f"{n}i"
    if wgsl == "u32":
        return f"{int(value)}u"
    if wgsl == "f16":  # the float16 nearest (numpy's rule for a Python scalar it meets)
        with np.errstate(over="ignore"):
            h = float(np.float16(value))
        if math.isnan(h):
            return "asg_hnan()"
        if math.isinf(h):
            return "asg_hinf()" if h > 0 else "(-asg_hinf())"
        text = repr(h)
        return (text if ("." in text or "e" in text) else text + ".0") + "h"
    v = float(value)
    if math.isnan(v):
        return "asg_nan()"
    if math.isinf(v):
        return "asg_inf()" if v > 0 else "asg_ninf()"
    if abs(v) > _F32_MAX:  # beyond float32: numpy rounds it to an infinity too
        return "asg_inf()" if v > 0 else "asg_ninf()"
    text = repr(v)
    return text if ("." in text or "e" in text) else text + ".0"


def zero(wgsl: str) -> str:
    """The WGSL zero of element type ``wgsl``."""
    return {"f16": "0.0h", "f32": "0.0", "i32": "0i", "u32": "0u"}[wgsl]


def alias(x: GpuArray, shape: tuple[int, ...]) -> GpuArray:
    """A new shape over ``x``'s buffer (no copy; the buffer stays owned by ``x``)."""
    return x.view(shape)


def optional(ins: list[GpuArray], i: int) -> GpuArray | None:
    """Input ``i`` of an op whose trailing inputs (weight, bias) may be left out."""
    return ins[i] if len(ins) > i else None


def hw(x: TensorType | GpuArray) -> tuple[int, int]:
    """Height and width of an NCHW type or array."""
    return int(x.shape[2]), int(x.shape[3])
