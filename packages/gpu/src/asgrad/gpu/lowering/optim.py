"""The optim family on the GPU: Adam's moment update and parameter update.

Each is a WGSL expression over ``x0, x1, ...`` (`OPTIM_EXPRESSIONS`), so the
elementwise family launches it with its generated kernel, and a plan treats it like
any elementwise op: fused with its inputs' expressions, written in place into its
variable's buffer, and gathered with the other parameters' update rules into one
multi-tensor dispatch (`asgrad.gpu.plan.multi_update`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from asgrad.gpu.device.array import GpuArray
from asgrad.gpu.device.source import numpy_dtype
from asgrad.gpu.lowering.common import Attrs, Lowering, literal
from asgrad.tensor import TensorType

__all__ = [
    "LOWERINGS",
    "OPTIM_EXPRESSIONS",
    "WGSL_FILES",
    "adam_ema_expr",
    "adam_update_expr",
]

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


# op -> its expression from the attrs and the inputs' WGSL types
OPTIM_EXPRESSIONS: dict[str, Callable[[Attrs, Sequence[str]], str]] = {
    "adam_ema": lambda attrs, types: adam_ema_expr(attrs),
    "adam_update": lambda attrs, types: adam_update_expr(attrs, decay=len(types) == 6),
}


def _lower(op: str) -> Lowering:
    def lower_optim(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
        # imported here: the elementwise family imports this module's expressions
        from asgrad.gpu.lowering.elementwise import elementwise

        expr = OPTIM_EXPRESSIONS[op](attrs, [x.wgsl for x in ins])
        return elementwise(expr, ins, numpy_dtype(out.dtype), out.shape)

    return lower_optim


LOWERINGS: dict[str, Lowering] = {op: _lower(op) for op in OPTIM_EXPRESSIONS}
