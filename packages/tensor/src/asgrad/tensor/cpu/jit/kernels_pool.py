"""Compiled max pooling (and its gradient) and the scatter-add of gather's gradient.

Wrappers have the calling convention of an `IntoKernel`
(``fn(*inputs, out=None, **attrs)``; ``out`` never overlaps an input) and the
semantics of the ops' numpy kernels:

* ``max_pool2d``: a window's maximum, NaN when any of it is NaN (``np.maximum``);
  padding is -inf;
* ``max_pool2d_backward``: each window's gradient goes to its argmax, found as the
  numpy kernel finds it (the first maximum in row-major order; a NaN never wins
  except at the window's first offset), one pass over the windows without masks;
* ``scatter_add``: ``g`` added into zeros at the indices along an axis, in index
  order (as ``np.add.at``); indices out of range raise the numpy kernel's error.

Windows that tile the input (stride == kernel, no padding, no remainder) run kernels
generated per window size (`pool_source`: every offset unrolled, so a row of windows
is one vectorised pass; the gradient writes every input element once, bit for bit
numpy's); other windows run one loop per window. Both run over images and channels
on Numba's threads; `max_pool2d` and `max_pool2d_backward` choose per shape between
them, the same kernels on one thread and the numpy kernels by measuring (`ROUTE`,
see `asgrad.tensor.cpu.jit.route`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit._numba import fresh, kernel, parallel_kernel, prange
from asgrad.tensor.cpu.jit.conv_source import pool_source
from asgrad.tensor.cpu.jit.route import Route, key_of, routed
from asgrad.tensor.cpu.jit.step_run import load_module
from asgrad.tensor.ops.index import check_indices
from asgrad.tensor.ops.pool import _max_pool2d, _max_pool2d_backward
from asgrad.tensor.ops.spatial import out_hw, scratch, window_attrs


@kernel
def _at(img: Any, y: int, x: int, inside: bool) -> Any:
    """img[y, x], or -inf in the padding (``inside``: the caller knows it is not)."""
    if inside:
        return img[y, x]
    h, w = img.shape
    return img[y, x] if (y >= 0) & (y < h) & (x >= 0) & (x < w) else img.dtype.type(-np.inf)


@parallel_kernel
def _max_pool(x: Any, kh: int, kw: int, sh: int, sw: int, ph: int, pw: int, out: Any) -> None:
    n_, c_ = x.shape[:2]
    oh, ow = out.shape[2], out.shape[3]
    inside = ph == 0 and pw == 0  # every window lies in x: no bounds to check
    for plane in prange(n_ * c_):
        n, c = plane // c_, plane % c_
        img, dst = x[n, c], out[n, c]
        for oy in range(oh):
            by = oy * sh - ph
            for ox in range(ow):
                bx = ox * sw - pw
                m = _at(img, by, bx, inside)
                for i in range(kh):
                    for j in range(kw):
                        v = _at(img, by + i, bx + j, inside)
                        m = v if (v > m) | (v != v) else m  # np.maximum: NaN wins
                dst[oy, ox] = m


@parallel_kernel
def _max_pool_backward(
    g: Any, x: Any, kh: int, kw: int, sh: int, sw: int, ph: int, pw: int, out: Any,
    positive: bool,
) -> None:  # fmt: skip
    n_, c_, h, w = x.shape
    zero = out.dtype.type(0)
    oh, ow = g.shape[2], g.shape[3]
    inside = ph == 0 and pw == 0
    for plane in prange(n_ * c_):
        n, c = plane // c_, plane % c_
        img, gi, dst = x[n, c], g[n, c], out[n, c]
        dst[:] = 0
        for oy in range(oh):
            by = oy * sh - ph
            for ox in range(ow):
                bx = ox * sw - pw
                # The first offset, then the last strictly greater one (NaN never is).
                best = _at(img, by, bx, inside)
                wy, wx = by, bx
                for i in range(kh):
                    for j in range(kw):
                        v = _at(img, by + i, bx + j, inside)
                        take = v > best
                        best = v if take else best
                        wy = by + i if take else wy
                        wx = bx + j if take else wx
                gv = zero if positive and not best > zero else gi[oy, ox]
                if inside or ((wy >= 0) & (wy < h) & (wx >= 0) & (wx < w)):
                    dst[wy, wx] += gv


@functools.cache
def _tiled(kh: int, kw: int) -> Any:
    """The tiled max pooling kernels for a kh x kw window (`pool_source`)."""
    return load_module(pool_source(kh, kw), "asgrad_pool")


def _tiles(x_shape: tuple[int, ...], kernel: tuple[int, int], stride: tuple[int, int],
           padding: tuple[int, int], ohw: tuple[int, int]) -> bool:  # fmt: skip
    """Whether the windows tile x exactly: stride == kernel, no padding, no remainder."""
    return (
        stride == kernel
        and padding == (0, 0)
        and x_shape[2] == ohw[0] * kernel[0]
        and x_shape[3] == ohw[1] * kernel[1]
    )


def _geometry(x: np.ndarray, attrs: dict[str, Any]) -> tuple[tuple[int, int], ...]:
    kernel_size, stride, padding = window_attrs(attrs)
    ohw = out_hw(x.shape[2:], kernel_size, stride, padding, (1, 1), "pooling")
    return kernel_size, stride, padding, ohw


def max_pool2d_direct(x: np.ndarray, *, out: np.ndarray | None = None, **attrs: Any) -> np.ndarray:
    """``max_pool2d`` by the compiled kernels."""
    (kh, kw), (sh, sw), (ph, pw), ohw = _geometry(x, attrs)
    result = fresh(out, (*x.shape[:2], *ohw), x.dtype)
    if result.size == 0:
        return result
    x = np.ascontiguousarray(x)
    if _tiles(x.shape, (kh, kw), (sh, sw), (ph, pw), ohw):
        n, c = x.shape[:2]
        rows = n * c * ohw[0]
        _tiled(kh, kw).pool(x.reshape(rows, kh, ohw[1], kw), result.reshape(rows, ohw[1]))
    else:
        _max_pool(x, kh, kw, sh, sw, ph, pw, result)
    return result


def max_pool2d_backward_direct(
    g: np.ndarray,
    x: np.ndarray,
    *,
    out: np.ndarray | None = None,
    positive: bool = False,
    **attrs: Any,
) -> np.ndarray:
    """``max_pool2d_backward`` by the compiled kernels; with ``positive``, then
    ``where(x > 0, ., 0)`` in the same pass (see `max_pool2d_backward`)."""
    (kh, kw), (sh, sw), (ph, pw), ohw = _geometry(x, attrs)
    result = fresh(out, x.shape, g.dtype)
    if result.size == 0:
        return result
    if g.size == 0:
        result.fill(0)
        return result
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    if _tiles(x.shape, (kh, kw), (sh, sw), (ph, pw), ohw):
        rows = x.shape[0] * x.shape[1] * ohw[0]
        _tiled(kh, kw).pool_backward(
            g.reshape(rows, ohw[1]),
            x.reshape(rows, kh, ohw[1], kw),
            result.reshape(rows, kh, ohw[1], kw),
            positive,
        )
    else:
        _max_pool_backward(g, x, kh, kw, sh, sw, ph, pw, result, positive)
    return result


ROUTE = Route("pool")


def max_pool2d(x: np.ndarray, *, out: np.ndarray | None = None, **attrs: Any) -> np.ndarray:
    """``max_pool2d``'s compiled kernel: the compiled loops (on Numba's threads or
    one) or the numpy kernel, as `ROUTE` measured for the shape."""
    _, _, _, ohw = _geometry(x, attrs)
    return routed(
        ROUTE,
        key_of("max_pool2d", (x,), attrs),
        lambda into: _max_pool2d(x, out=into, **attrs),
        lambda into: max_pool2d_direct(x, out=into, **attrs),
        out,
        lambda: scratch("pool_spare", (*x.shape[:2], *ohw), x.dtype),
        same_bits=True,  # a maximum: exact, NaN placed as numpy places it
    )


def max_pool2d_backward(
    g: np.ndarray,
    x: np.ndarray,
    *,
    out: np.ndarray | None = None,
    positive: bool = False,
    **attrs: Any,
) -> np.ndarray:
    """``max_pool2d_backward``'s compiled kernel, chosen as `max_pool2d`'s.

    With ``positive``: ``where(x > 0, max_pool2d_backward(g, x), 0)`` (a ReLU's
    gradient after the pooling's, `asgrad.tensor.cpu.jit.fuse_pool`) in one pass, bit
    for bit: the gradient lands only at a window's argmax, where ``x`` is the window's
    maximum, so the mask is read there from the maximum the kernel found (+0.0 where
    it is not above zero, NaN included)."""

    def reference(into: np.ndarray | None) -> np.ndarray:
        result = _max_pool2d_backward(g, x, out=into, **attrs)
        if positive:
            result[~(x > 0)] = 0
        return result

    return routed(
        ROUTE,
        key_of("max_pool2d_backward", (g, x), {**attrs, "positive": positive}),
        reference,
        lambda into: max_pool2d_backward_direct(g, x, out=into, positive=positive, **attrs),
        out,
        lambda: scratch("pool_spare", x.shape, g.dtype),
        same_bits=True,  # each gradient element written once, as numpy writes it
    )


@kernel
def _scatter_add(g: Any, idx: Any, out: Any) -> None:
    """out (P, n, Q) += g (P, I, Q) at idx (I,) along axis 1."""
    out[:] = 0
    for p in range(g.shape[0]):
        for i in range(g.shape[1]):
            src, dst = g[p, i], out[p, idx[i]]
            for q in range(g.shape[2]):
                dst[q] += src[q]


def scatter_add(
    g: np.ndarray, indices: np.ndarray, x: np.ndarray, *, out: np.ndarray | None = None, axis: int
) -> np.ndarray:
    """``scatter_add``'s kernel (``x`` gives the shape only)."""
    axis = axis % x.ndim if x.ndim else 0
    n = x.shape[axis]
    check_indices("scatter_add", indices, n, f"axis {axis} of size {n}")
    result = fresh(out, x.shape, g.dtype)
    if result.size == 0:
        return result
    pre, post = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1 :])
    idx = np.ascontiguousarray(indices).reshape(-1)
    src = np.ascontiguousarray(g).reshape(pre, idx.size, post)
    _scatter_add(src, idx, result.reshape(pre, n, post))
    return result
