"""The optim family on the GPU: Adam's moment update and parameter update.

Each is one elementwise kernel, a WGSL expression over ``x0, x1, ...`` launched with
the elementwise family's generated kernel.
"""

from __future__ import annotations

from asgrad.gpu.array import GpuArray
from asgrad.gpu.lowering.common import Attrs, Lowering, literal
from asgrad.gpu.lowering.elementwise import elementwise
from asgrad.gpu.source import numpy_dtype
from asgrad.tensor import TensorType

__all__ = ["LOWERINGS", "WGSL_FILES", "adam_ema_expr", "adam_update_expr"]

WGSL_FILES: tuple[str, ...] = ("elementwise.wgsl",)


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


def _adam_ema(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return elementwise(adam_ema_expr(attrs), ins, numpy_dtype(out.dtype), out.shape)


def _adam_update(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    expr = adam_update_expr(attrs, decay=len(ins) == 6)
    return elementwise(expr, ins, numpy_dtype(out.dtype), out.shape)


LOWERINGS: dict[str, Lowering] = {
    "adam_ema": _adam_ema,
    "adam_update": _adam_update,
}
