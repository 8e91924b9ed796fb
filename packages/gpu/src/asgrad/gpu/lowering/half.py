"""float16 on the GPU: the ops that run their float32 kernel on widened values.

Most lowerings take float16 arrays themselves: elementwise kernels store ``f16`` and
compute each op in float16 (`asgrad.gpu.lowering.scalar`), matmul, the reductions,
the scans and sorts and the row programs (softmax, log-softmax, layer and batch norm)
read ``f16``, accumulate in ``f32`` and round their result once, and the shape and
index ops move ``f16`` elements as they are. The ops in `FLOAT32_FALLBACK` have no
float16 kernel yet: their float16 inputs are widened to float32 by one elementwise
kernel each, the float32 kernel runs, and its result is rounded to float16 by one
more. That is the float16 meaning of these ops (they accumulate in float32, as the
numpy reference does), at the cost of the two conversions and a float32 intermediate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from asgrad.gpu.device.array import GpuArray
from asgrad.gpu.lowering.common import Attrs, Lowering
from asgrad.gpu.lowering.elementwise import elementwise
from asgrad.tensor import TensorType

__all__ = ["FLOAT32_FALLBACK", "involves_float16", "through_float32"]

FLOAT32_FALLBACK: frozenset[str] = frozenset(
    {
        "adaptive_avg_pool2d",
        "adaptive_avg_pool2d_backward",
        "avg_pool2d",
        "avg_pool2d_backward",
        "conv2d",
        "conv2d_backward_input",
        "conv2d_backward_weight",
        "conv_transpose2d",
        "max_pool2d",
        "max_pool2d_backward",
        "max_pool2d_select",
        "rand_like",
        "randn_like",
        "scatter_add",
        "scatter_add_along",
        "scatter_reduce",
    }
)
"""The ops whose float16 values run through their float32 kernel (see the module)."""

_F16 = np.dtype(np.float16)


def involves_float16(ins: list[GpuArray], out: TensorType) -> bool:
    """Whether a node reads or yields float16 values."""
    return out.dtype == "float16" or any(x.dtype == _F16 for x in ins)


def _widened_attrs(attrs: Attrs) -> Mapping[str, Any]:
    return {k: "float32" if v == "float16" else v for k, v in attrs.items()}


def through_float32(fn: Lowering, ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    """``fn`` (a float32 lowering) on ``ins`` with float16 arrays widened to float32, its
    float32 result rounded to float16 when ``out`` is float16."""
    wide = [
        elementwise("asg_h2f(x0)", [x], np.float32, x.shape) if x.dtype == _F16 else x for x in ins
    ]
    half = out.dtype == "float16"
    result = fn(wide, _widened_attrs(attrs), TensorType(out.shape, "float32") if half else out)
    if not half:
        return result
    return elementwise("asg_f2h(x0)", [result], np.float16, result.shape)
