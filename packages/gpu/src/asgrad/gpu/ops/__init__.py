"""Launchers of the WGSL kernels, on :class:`~asgrad.gpu.GpuArray` values."""

from asgrad.gpu.ops.copy import copy_into
from asgrad.gpu.ops.elementwise import Operand, elementwise
from asgrad.gpu.ops.matmul import matmul, matmul_into
from asgrad.gpu.ops.reduce import reduce_axis
from asgrad.gpu.ops.rows import softmax

__all__ = [
    "Operand",
    "copy_into",
    "elementwise",
    "matmul",
    "matmul_into",
    "reduce_axis",
    "softmax",
]
