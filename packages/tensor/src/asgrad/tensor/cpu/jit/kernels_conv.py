"""Compiled convolution input gradient (groups 1): a compiled col2im around one BLAS product.

The product stays numpy's (``np.matmul``, BLAS): W^T times g laid out channel-major
gives the columns' gradient (C*kh*kw, N, OH, OW), which col2im adds straight into
the result (no padded buffer, no transposed copy), each pixel's terms in the numpy
kernel's order. The columns live in the numpy kernels' per-thread scratch buffers
(:func:`asgrad.tensor.ops.spatial.scratch`, roles of their own).

The forward pass and the weight gradient have no compiled kernel: there im2col is
the copy to save, and a compiled im2col measured slower than numpy's strided copy
(rows of a 14-pixel image are too short for a loop to beat it), while the product,
the bulk of the time, is the same BLAS call either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit._numba import fresh, kernel
from asgrad.tensor.ops.spatial import pair, scratch

Pair = tuple[int, int]


@kernel
def _valid(o: int, stride: int, offset: int, size: int) -> Any:
    """The output positions ``p`` in [lo, hi) whose input ``p * stride + offset`` is in
    [0, size)."""
    lo = 0 if offset >= 0 else (-offset + stride - 1) // stride
    hi = 0 if size - offset <= 0 else (size - offset + stride - 1) // stride
    hi = min(hi, o)
    return lo, max(hi, lo)


@kernel
def _col2im(cols: Any, kh: int, kw: int, geometry: Any, dx: Any) -> None:
    """dx (N, C, H, W) from the columns' gradient cols (C*kh*kw, N, OH, OW): the adjoint
    of im2col, by flat indices (rows are short)."""
    n_, c_, h, w = dx.shape
    oh, ow = cols.shape[2], cols.shape[3]
    sh, sw, ph, pw, dh, dw = geometry
    xf, cf = dx.reshape(-1), cols.reshape(-1)
    xf[:] = 0
    for c in range(c_):
        for i in range(kh):
            ylo, yhi = _valid(oh, sh, i * dh - ph, h)
            for j in range(kw):
                off = j * dw - pw
                xlo, xhi = _valid(ow, sw, off, w)
                r = (c * kh + i) * kw + j
                for n in range(n_):
                    base = (r * n_ + n) * oh * ow
                    for oy in range(ylo, yhi):
                        d = base + oy * ow
                        s = ((n * c_ + c) * h + oy * sh + i * dh - ph) * w + off
                        if sw == 1:
                            for ox in range(xlo, xhi):
                                xf[s + ox] += cf[d + ox]
                        else:
                            for ox in range(xlo, xhi):
                                xf[s + ox * sw] += cf[d + ox]


@kernel
def _channel_major(g: Any, out: Any) -> None:
    """out (O, N, P) = g (N, O, P)."""
    n_, o_, p_ = g.shape
    for o in range(o_):
        for n in range(n_):
            src, dst = g[n, o], out[o, n]
            for p in range(p_):
                dst[p] = src[p]


def _geometry(attrs: dict[str, Any]) -> tuple[int, int, int, int, int, int]:
    """``(sh, sw, ph, pw, dh, dw)``: stride, padding and dilation."""
    sh, sw = pair(attrs.get("stride", 1), "stride")
    ph, pw = pair(attrs.get("padding", 0), "padding")
    dh, dw = pair(attrs.get("dilation", 1), "dilation")
    return sh, sw, ph, pw, dh, dw


def conv2d_backward_input(
    g: np.ndarray, w: np.ndarray, x: np.ndarray, *, out: np.ndarray | None = None, **attrs: Any
) -> np.ndarray:
    """``conv2d_backward_input``'s kernel (groups 1; ``x`` gives the shape only)."""
    n, o, oh, ow = g.shape
    _, c, kh, kw = w.shape
    result = fresh(out, x.shape, g.dtype)
    if result.size == 0:
        return result
    if g.size == 0:
        result.fill(0)
        return result
    gm = scratch("jit_channel_major", (o, n, oh * ow), g.dtype)
    _channel_major(np.ascontiguousarray(g).reshape(n, o, oh * ow), gm)
    cols = scratch("jit_cols", (c * kh * kw, n, oh, ow), g.dtype)
    wt = np.ascontiguousarray(w).reshape(o, -1).T
    np.matmul(wt, gm.reshape(o, -1), out=cols.reshape(c * kh * kw, -1))
    _col2im(cols, kh, kw, _geometry(attrs), result)
    return result
