"""Compiled 2-D convolution (groups 1): im2col and col2im loops around one BLAS product.

The products stay numpy's (``np.matmul``, BLAS, threaded as the code generator
decides); the loops around them are compiled, so that the copies numpy makes go:

* ``conv2d``: the columns (C*kh*kw, N, OH, OW) come straight from x, the padding
  written as zeros (no padded copy); the product (O, N*OH*OW) is laid out as
  (N, O, OH, OW) with the bias added in the same pass;
* ``conv2d_backward_input``: the product W^T g gives the columns' gradient, which
  col2im adds straight into the result (no padded buffer, no transposed copy), each
  pixel's terms in the numpy kernel's order;
* ``conv2d_backward_weight``: the same columns, g laid out channel-major, one
  product into ``out``.

The columns live in the numpy kernels' per-thread scratch buffers
(:func:`asgrad.tensor.ops.spatial.scratch`, roles of their own).
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
def _im2col(x: Any, kh: int, kw: int, st: Any, pad: Any, dil: Any, cols: Any) -> None:
    """cols (C*kh*kw, N, OH, OW) from x (N, C, H, W)."""
    n_, c_, h, w = x.shape
    oh, ow = cols.shape[2], cols.shape[3]
    for c in range(c_):
        for i in range(kh):
            ylo, yhi = _valid(oh, st[0], i * dil[0] - pad[0], h)
            for j in range(kw):
                off = j * dil[1] - pad[1]
                xlo, xhi = _valid(ow, st[1], off, w)
                r = (c * kh + i) * kw + j
                for n in range(n_):
                    for oy in range(oh):
                        dst = cols[r, n, oy]
                        if oy < ylo or oy >= yhi:
                            dst[:] = 0
                            continue
                        src = x[n, c, oy * st[0] + i * dil[0] - pad[0]]
                        dst[:xlo] = 0
                        for ox in range(xlo, xhi):
                            dst[ox] = src[ox * st[1] + off]
                        dst[xhi:] = 0


@kernel
def _col2im(cols: Any, kh: int, kw: int, st: Any, pad: Any, dil: Any, dx: Any) -> None:
    """dx (N, C, H, W) = the adjoint of :func:`_im2col` of cols (C*kh*kw, N, OH, OW)."""
    n_, c_, h, w = dx.shape
    oh, ow = cols.shape[2], cols.shape[3]
    dx[:] = 0
    for c in range(c_):
        for i in range(kh):
            ylo, yhi = _valid(oh, st[0], i * dil[0] - pad[0], h)
            for j in range(kw):
                off = j * dil[1] - pad[1]
                xlo, xhi = _valid(ow, st[1], off, w)
                r = (c * kh + i) * kw + j
                for n in range(n_):
                    for oy in range(ylo, yhi):
                        src = cols[r, n, oy]
                        dst = dx[n, c, oy * st[0] + i * dil[0] - pad[0]]
                        for ox in range(xlo, xhi):
                            dst[ox * st[1] + off] += src[ox]


@kernel
def _to_images(gemm: Any, b: Any, bias: bool, out: Any) -> None:
    """out (N, O, P) = gemm (O, N, P) (+ b[o])."""
    o_, n_, p_ = gemm.shape
    for n in range(n_):
        for o in range(o_):
            src, dst = gemm[o, n], out[n, o]
            if bias:
                bo = b[o]
                for p in range(p_):
                    dst[p] = src[p] + bo
            else:
                for p in range(p_):
                    dst[p] = src[p]


@kernel
def _channel_major(g: Any, out: Any) -> None:
    """out (O, N, P) = g (N, O, P)."""
    n_, o_, p_ = g.shape
    for o in range(o_):
        for n in range(n_):
            src, dst = g[n, o], out[o, n]
            for p in range(p_):
                dst[p] = src[p]


def _geometry(attrs: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        np.array(pair(attrs.get("stride", 1), "stride"), np.int64),
        np.array(pair(attrs.get("padding", 0), "padding"), np.int64),
        np.array(pair(attrs.get("dilation", 1), "dilation"), np.int64),
    )


def _columns(x: np.ndarray, kernel_hw: Pair, out_hw: Pair, attrs: dict[str, Any]) -> np.ndarray:
    n, c = x.shape[:2]
    st, pad, dil = _geometry(attrs)
    cols = scratch("jit_cols", (c * kernel_hw[0] * kernel_hw[1], n, *out_hw), x.dtype)
    _im2col(np.ascontiguousarray(x), kernel_hw[0], kernel_hw[1], st, pad, dil, cols)
    return cols


def conv2d(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    out: np.ndarray | None = None,
    **attrs: Any,
) -> np.ndarray:
    """``conv2d``'s kernel (groups 1); ``out`` is the (N, O, OH, OW) result's type."""
    n = x.shape[0]
    o, _, kh, kw = w.shape
    oh, ow = _out_hw(x.shape[2:], (kh, kw), attrs)
    result = fresh(out, (n, o, oh, ow), x.dtype)
    if result.size == 0:
        return result
    cols = _columns(x, (kh, kw), (oh, ow), attrs)
    gemm = scratch("jit_gemm", (o, n, oh * ow), x.dtype)
    np.matmul(
        np.ascontiguousarray(w).reshape(o, -1),
        cols.reshape(-1, n * oh * ow),
        out=gemm.reshape(o, -1),
    )
    bias = b if b is not None else np.empty(0, x.dtype)
    _to_images(gemm, np.ascontiguousarray(bias), b is not None, result.reshape(n, o, oh * ow))
    return result


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
    st, pad, dil = _geometry(attrs)
    _col2im(cols, kh, kw, st, pad, dil, result)
    return result


def conv2d_backward_weight(
    x: np.ndarray, g: np.ndarray, *, out: np.ndarray | None = None, kernel_size: Any, **attrs: Any
) -> np.ndarray:
    """``conv2d_backward_weight``'s kernel (groups 1)."""
    n, o, oh, ow = g.shape
    kh, kw = pair(kernel_size, "kernel_size")
    c = x.shape[1]
    result = fresh(out, (o, c, kh, kw), np.result_type(x, g))
    if result.size == 0:
        return result
    if g.size == 0:
        result.fill(0)
        return result
    cols = _columns(x, (kh, kw), (oh, ow), attrs)
    gm = scratch("jit_channel_major", (o, n, oh * ow), g.dtype)
    _channel_major(np.ascontiguousarray(g).reshape(n, o, oh * ow), gm)
    np.matmul(gm.reshape(o, -1), cols.reshape(c * kh * kw, -1).T, out=result.reshape(o, -1))
    return result


def _out_hw(hw: Any, kernel_hw: Pair, attrs: dict[str, Any]) -> Pair:
    st, pad, dil = _geometry(attrs)
    return (
        (hw[0] + 2 * int(pad[0]) - int(dil[0]) * (kernel_hw[0] - 1) - 1) // int(st[0]) + 1,
        (hw[1] + 2 * int(pad[1]) - int(dil[1]) * (kernel_hw[1] - 1) - 1) // int(st[1]) + 1,
    )
