"""The GPU twins of the fused elementwise ops (``asgrad.tensor.ops.fused``).

Each is one elementwise kernel, a WGSL expression over ``x0, x1, ...`` recorded
with the shared helper; importing this module registers them into
:data:`asgrad.gpu.lowering.LOWERINGS` (``asgrad.gpu`` imports it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asgrad.gpu.array import GpuArray
from asgrad.gpu.lowering import LOWERINGS, Lowering, literal, numpy_dtype
from asgrad.gpu.ops.elementwise import elementwise
from asgrad.tensor.registry import TensorType

__all__ = ["FUSED_LOWERINGS", "adam_ema_expr", "adam_update_expr", "gelu_backward_expr"]

Attrs = Mapping[str, Any]


def gelu_backward_expr(attrs: Attrs) -> str:
    """``g * GELU'(x)`` over ``x0 = g, x1 = x``."""
    if attrs.get("approximate", "none") == "tanh":
        k, a = 0.7978845608028654, 0.044715
        t = f"asg_tanh({literal(k)} * (x1 + {literal(a)} * x1 * x1 * x1))"
        du = f"{literal(k)} * (1.0 + {literal(3.0 * a)} * x1 * x1)"
        return f"x0 * (0.5 * (1.0 + {t}) + 0.5 * x1 * (1.0 - {t} * {t}) * {du})"
    pdf = "asg_exp(-0.5 * x1 * x1) * 0.3989422804014327"
    return f"x0 * (0.5 * (1.0 + asg_erf(x1 * 0.7071067811865476)) + x1 * {pdf})"


def adam_ema_expr(attrs: Attrs) -> str:
    """``beta * m + (1 - beta) * g`` (``g * g`` with ``square``) over ``x0 = m, x1 = g``."""
    beta = float(attrs["beta"])
    g = "x1 * x1" if attrs.get("square", False) else "x1"
    return f"x0 * {literal(beta)} + {g} * {literal(1.0 - beta)}"


def adam_update_expr(attrs: Attrs, decay: bool) -> str:
    """``p * decay - step_size * m / (sqrt(v) / bc2_sqrt + eps)`` over ``x0..x5``."""
    eps = literal(float(attrs.get("eps", 1e-8)))
    p = "x0 * x5" if decay else "x0"
    return f"{p} - x3 * x1 / (sqrt(x2) / x4 + {eps})"


def _gelu_backward(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return elementwise(gelu_backward_expr(attrs), ins, numpy_dtype(out.dtype), out.shape)


def _adam_ema(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return elementwise(adam_ema_expr(attrs), ins, numpy_dtype(out.dtype), out.shape)


def _adam_update(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    expr = adam_update_expr(attrs, decay=len(ins) == 6)
    return elementwise(expr, ins, numpy_dtype(out.dtype), out.shape)


FUSED_LOWERINGS: dict[str, Lowering] = {
    "gelu_backward": _gelu_backward,
    "adam_ema": _adam_ema,
    "adam_update": _adam_update,
}
LOWERINGS.update(FUSED_LOWERINGS)
