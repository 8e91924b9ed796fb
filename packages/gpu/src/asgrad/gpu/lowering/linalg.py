"""The linalg family on the GPU: batched, broadcasting matmul through strided reads.

Two tiled kernels (``kernels/linalg_matmul_128.wgsl`` for large products,
``kernels/linalg_matmul_small.wgsl`` with 64 or 32 tiles otherwise) read their operands through
:class:`MatrixView` strides, so a transposed operand costs no copy.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from asgrad.gpu.array import GpuArray, contiguous_strides
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.common import Attrs, Lowering
from asgrad.gpu.source import render
from asgrad.tensor import TensorType

__all__ = ["LOWERINGS", "WGSL_FILES", "MatrixView", "matmul", "matmul_into"]

WGSL_FILES: tuple[str, ...] = ("linalg_matmul_128.wgsl", "linalg_matmul_small.wgsl")

MAX_BATCH_DIMS = 4


class MatrixView:
    """A (batch..., rows, cols) view of a buffer given by element strides and an offset.

    ``transpose()`` swaps the last two axes without touching memory.
    """

    __slots__ = ("array", "offset", "shape", "strides")

    def __init__(
        self,
        array: GpuArray,
        shape: tuple[int, ...] | None = None,
        strides: tuple[int, ...] | None = None,
        offset: int = 0,
    ) -> None:
        self.array = array
        self.shape = array.shape if shape is None else shape
        self.strides = contiguous_strides(self.shape) if strides is None else strides
        self.offset = offset

    def transpose(self) -> MatrixView:
        """Swap the last two axes."""
        s, t = list(self.shape), list(self.strides)
        s[-1], s[-2] = s[-2], s[-1]
        t[-1], t[-2] = t[-2], t[-1]
        return MatrixView(self.array, tuple(s), tuple(t), self.offset)


def _as_view(x: GpuArray | MatrixView) -> MatrixView:
    return x if isinstance(x, MatrixView) else MatrixView(x)


def matmul(
    a: GpuArray | MatrixView, b: GpuArray | MatrixView, variant: str | None = None
) -> GpuArray:
    """``numpy.matmul`` semantics for float32 arrays (batch dims broadcast).

    1-D operands follow numpy: a vector is promoted to a matrix and the added
    dimension removed from the result. ``variant`` ("128", "64", "32") forces a tile
    size (tests and benchmarks); by default it is chosen from the sizes.
    """
    va, vb = _as_view(a), _as_view(b)
    squeeze: list[int] = []
    if len(va.shape) == 1:
        va = MatrixView(va.array, (1, va.shape[0]), (0, va.strides[0]), va.offset)
        squeeze.append(-2)
    if len(vb.shape) == 1:
        vb = MatrixView(vb.array, (vb.shape[0], 1), (vb.strides[0], 0), vb.offset)
        squeeze.append(-1)
    batch = tuple(np.broadcast_shapes(va.shape[:-2], vb.shape[:-2]))
    shape = (*batch, va.shape[-2], vb.shape[-1])
    out = GpuArray.empty(shape, np.float32, va.array.device)
    matmul_into(va, vb, out, variant)
    if squeeze:
        final = list(shape)
        for axis in sorted(squeeze):
            del final[axis if axis == -1 else len(final) - 2]
        out.shape = tuple(final)
    return out


def _batch_strides(view: MatrixView, batch: tuple[int, ...]) -> list[int]:
    """Strides of ``view`` over the broadcast ``batch`` dims (0 where broadcast)."""
    lead = len(batch) - (len(view.shape) - 2)
    strides = [0] * lead + list(view.strides[:-2])
    shape = [1] * lead + list(view.shape[:-2])
    return [0 if s == 1 else st for s, st in zip(shape, strides, strict=True)]


def matmul_into(a: MatrixView, b: MatrixView, out: GpuArray, variant: str | None = None) -> None:
    """Record ``out = a @ b``; ``out`` is C-contiguous of the broadcast result shape."""
    device = out.device
    if out.dtype != np.float32 or a.array.dtype != np.float32 or b.array.dtype != np.float32:
        raise GpuUnsupportedError(
            f"matmul on the GPU takes float32; got {a.array.dtype} @ {b.array.dtype}"
        )
    M, K = a.shape[-2], a.shape[-1]
    K2, N = b.shape[-2], b.shape[-1]
    if K != K2:
        raise GpuUnsupportedError(f"matmul: shapes {a.shape} and {b.shape} do not align")
    batch = tuple(out.shape[:-2])
    if len(batch) > MAX_BATCH_DIMS:
        # fold leading batch dims that are contiguous in every operand
        raise GpuUnsupportedError(
            f"matmul on the GPU supports up to {MAX_BATCH_DIMS} batch dimensions, "
            f"got {len(batch)}; reshape first"
        )
    nbatch = math.prod(batch)
    if nbatch == 0 or M == 0 or N == 0:
        return
    pad = MAX_BATCH_DIMS - len(batch)
    bshape = [1] * pad + list(batch)
    a_bs = [0] * pad + _batch_strides(a, batch)
    b_bs = [0] * pad + _batch_strides(b, batch)
    meta = struct.pack(
        "<4I4I4I4I4I4I",
        M, N, K, 0,
        a.offset, a.strides[-2], a.strides[-1], 0,
        b.offset, b.strides[-2], b.strides[-1], 0,
        *bshape, *a_bs, *b_bs,
    )  # fmt: skip
    a_layout = "k" if a.strides[-1] == 1 else "m"
    b_layout = "n" if b.strides[-1] == 1 else "k"
    if variant is None:
        tiles_128 = -(-M // 128) * -(-N // 128) * nbatch
        if tiles_128 >= 96 or (M >= 1024 and N >= 1024):
            variant = "128"
        else:
            variant = "64" if M * N * nbatch >= 64 * 64 * 64 else "32"
    if variant == "128":
        tile = 128
        pipe = device.pipeline(
            ("linalg_matmul_128", a_layout, b_layout),
            lambda: render("linalg_matmul_128", A_LAYOUT=a_layout, B_LAYOUT=b_layout),
            ("uniform", "read", "read", "write"),
        )
    else:
        t = {"64": 16, "32": 8}[variant]
        tile = 4 * t
        pipe = device.pipeline(
            ("linalg_matmul_small", t, a_layout, b_layout),
            lambda: render(
                "linalg_matmul_small",
                T=t,
                TILE=tile,
                TILE_VEC4=8 * t,
                A_LAYOUT=a_layout,
                B_LAYOUT=b_layout,
            ),
            ("uniform", "read", "read", "write"),
        )
    groups = (-(-N // tile), -(-M // tile), nbatch)
    if max(groups) > device.max_groups:
        raise GpuUnsupportedError(f"matmul grid {groups} exceeds the device limit")
    device.dispatch(pipe, (device.params(meta), a.array.buffer, b.array.buffer, out.buffer), groups)


def _matmul(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return matmul(ins[0], ins[1])


LOWERINGS: dict[str, Lowering] = {"matmul": _matmul}
