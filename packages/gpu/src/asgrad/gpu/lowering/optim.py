"""The optim family on the GPU: Adam's moment update and parameter update.

Each op's scalar expression (``OpDef.expression`` in ``asgrad/tensor/ops/optim.py``)
is rendered by the elementwise family's generated kernel, so a plan treats it like
any elementwise op: fused with its inputs' expressions, written in place into its
variable's buffer, and gathered with the other parameters' update rules into one
multi-tensor dispatch (`asgrad.gpu.plan.multi_update`).
"""

from __future__ import annotations

from asgrad.gpu.device.array import GpuArray
from asgrad.gpu.device.source import numpy_dtype
from asgrad.gpu.lowering.common import Attrs, Lowering
from asgrad.gpu.lowering.elementwise import elementwise, expression
from asgrad.tensor import TensorType

__all__ = ["LOWERINGS", "WGSL_FILES"]

WGSL_FILES: tuple[str, ...] = ("elementwise.wgsl", "prelude.wgsl")


def _lower(op: str) -> Lowering:
    def lower_optim(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
        expr = expression(op, attrs, [x.wgsl for x in ins], out.dtype)
        assert expr is not None
        return elementwise(expr, ins, numpy_dtype(out.dtype), out.shape)

    return lower_optim


LOWERINGS: dict[str, Lowering] = {op: _lower(op) for op in ("adam_ema", "adam_update")}
