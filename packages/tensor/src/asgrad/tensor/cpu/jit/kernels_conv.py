"""Compiled 2-D convolutions: direct kernels for conv2d and its two gradients.

Wrappers have the calling convention of an `IntoKernel`
(``fn(*inputs, out=None, **attrs)``; ``out`` never overlaps an input) and the
semantics of the ops' numpy kernels (`asgrad.tensor.ops.conv`), which run im2col
or col2im around one BLAS product per group. The direct kernels
(`asgrad.tensor.cpu.jit.conv_source`) instead slide the kernel over zero-padded
image planes, with no column matrix. Each input channel's images are first copied
into one tall zero-padded plane (`Tall`: images stacked with shared padding rows,
rows sharing their padding columns, `Geometry`), one compiled pass:

* ``conv2d``: one pass per chunk of images and block of output channels
  accumulating into a wide buffer, then the bias (and, for `conv2d_relu`, the ReLU)
  applied while the real rows and columns are copied out;
* ``conv2d_backward_input``: at stride 1 the input gradient is the convolution of
  the output gradient, padded by ``(k - 1) * dilation - padding``, with the kernel
  flipped and its two channel axes swapped: the same forward kernel;
* ``conv2d_backward_weight``: one dot product per weight element over the whole
  tall plane (every image at once), the output gradient laid out tall and wide with
  zeros in the dropped columns and rows. Those
  zeros meet real input values, so where the input holds an infinity or NaN the
  result could hold a NaN that the numpy kernel's would not: a weight gradient with
  any non-finite element is computed again by the numpy kernel.

The direct kernels handle stride 1 (and, for the input gradient, padding at most
``(k - 1) * dilation``); any other convolution runs the numpy kernel. Whether a
shape's direct kernel runs on Numba's threads or on one is measured once per machine
(`Route`, kept in the cache folder's ``routes.json``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit._numba import fresh, kernel
from asgrad.tensor.cpu.jit.conv_source import forward_source, weight_source
from asgrad.tensor.cpu.jit.route import Route, key_of, routed
from asgrad.tensor.cpu.jit.step_run import load_module
from asgrad.tensor.ops.conv import (
    _conv2d_backward_input,
    _conv2d_backward_weight,
    conv2d_kernel,
)
from asgrad.tensor.ops.spatial import Pair, pair, scratch

# Output channels per block of the forward kernel's loop body, and of the weight
# gradient's (whose accumulators, block * taps of them, must fit the registers).
FORWARD_BLOCK = 4
WEIGHT_BLOCK = 2
# Elements of the tall wide plane per work item of the forward kernel (whole images).
FORWARD_CHUNK = 1024


@functools.cache
def _forward(taps: int, block: int, remainder: bool) -> Any:
    return load_module(forward_source(taps, block, remainder), "asgrad_conv").conv


@functools.cache
def _weight(taps: int, block: int) -> Any:
    return load_module(weight_source(taps, block), "asgrad_conv_weight").conv_weight


class Geometry:
    """A stride-1 convolution's planes: the output size, the pitch of a flattened
    padded row and each kernel tap's offset in a flattened padded plane.

    Consecutive rows share their padding columns: the ``pw`` zero columns left of a
    row are also the right padding of the row above (a window at a real output
    column reaching past its row's end reads the next row's left padding). So the
    pitch is ``w + pw`` (at least ``ow``, so that output rows do not overlap), not
    ``w + 2 * pw``: fewer dropped columns computed."""

    def __init__(self, hw: Pair, kernel: Pair, padding: Pair, dilation: Pair) -> None:
        (h, w), (kh, kw), (ph, pw), (dh, dw) = hw, kernel, padding, dilation
        self.oh, self.ow = h + 2 * ph - (kh - 1) * dh, w + 2 * pw - (kw - 1) * dw
        self.wp = max(w + pw, self.ow)
        self.padding = (ph, pw)
        self.reach = (kh - 1) * dh  # rows a window reaches below its output row
        # The wide rows of the last output row read up to (kw - 1) * dw past their end.
        self.slack = (kw - 1) * dw
        self.offs = np.array(
            [i * dh * self.wp + j * dw for i in range(kh) for j in range(kw)], dtype=np.int64
        )


@functools.lru_cache(maxsize=256)
def geometry(hw: Pair, kernel: Pair, padding: Pair, dilation: Pair) -> Geometry:
    """The `Geometry` of a shape, made once (every call of a convolution asks for it)."""
    return Geometry(hw, kernel, padding, dilation)


class Tall:
    """A batch's images stacked into one tall zero-padded plane per channel.

    Image ``n`` starts ``n * rows`` rows down (its top padding included); between
    two images lie ``gap`` zero rows, at least the padding below one image and the
    padding above the next, so a kernel window at a real output row never reaches
    another image. Output row ``n * rows + y`` (``y < oh``) is image ``n``'s row ``y``;
    the rows between are computed and dropped. One loop over the whole tall plane
    replaces one per image.
    """

    def __init__(self, n: int, h: int, geo: Geometry) -> None:
        ph = geo.padding[0]
        self.gap = max(ph, geo.oh - h)  # >= the padding below, and >= oh - h rows
        self.rows = h + self.gap
        self.q_end = n * self.rows * geo.wp  # the tall output's wide length
        # Reads reach geo.reach rows and geo.slack elements past the last output.
        self.height = n * self.rows + max(ph, geo.reach)
        self.length = self.height * geo.wp + geo.slack


@kernel
def _place(src: Any, dst: Any, top: int, left: int, rows: int, pitch: int) -> None:
    """Zero ``dst`` (C, length) and copy each image ``src[n, c]`` (H, W) into plane
    ``c`` at row ``top + n * rows`` and column ``left`` (rows ``pitch`` long). On
    this thread: a copy gains little from a second one, and every parallel region
    is one more point where a thread descheduled on a busy machine holds up all."""
    n_, c_, h, w = src.shape
    for c in range(c_):
        d = dst[c]
        d[:] = 0
        for n in range(n_):
            base = (top + n * rows) * pitch + left
            img = src[n, c]
            for y in range(h):
                s, row = img[y], d[base + y * pitch :]
                for x in range(w):
                    row[x] = s[x]


def _tall(x: np.ndarray, geo: Geometry, tall: Tall, role: str) -> np.ndarray:
    """``x`` (N, C, H, W) as tall zero-padded planes (C, tall.length)."""
    xt = scratch(role, (x.shape[1], tall.length), x.dtype)
    _place(x, xt, geo.padding[0], geo.padding[1], tall.rows, geo.wp)
    return xt


def _direct_forward(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    padding: Pair,
    dilation: Pair,
    groups: int,
    out: np.ndarray,
    relu: bool,
) -> np.ndarray:
    o, cg, kh, kw = w.shape
    geo = geometry(x.shape[2:], (kh, kw), padding, dilation)
    n = x.shape[0]
    tall = Tall(n, x.shape[2], geo)
    xt = _tall(x, geo, tall, "conv_pad")
    wide = scratch("conv_wide", (o, tall.q_end), x.dtype)
    taps = kh * kw
    wt = np.ascontiguousarray(w).reshape(o, cg, taps)
    bias = np.zeros(1, x.dtype) if b is None else np.ascontiguousarray(b)
    kernel = _forward(taps, FORWARD_BLOCK, (o // groups) % FORWARD_BLOCK != 0)
    per = max(1, min(n, FORWARD_CHUNK // (tall.rows * geo.wp)))
    kernel(xt, wt, bias, geo.offs, out, wide, groups, geo.wp, tall.rows, per, relu, b is not None)
    return out


def forward_applies(stride: Pair) -> bool:
    """Whether the direct forward kernel runs a convolution (stride 1)."""
    return stride == (1, 1)


def input_applies(kernel: Sequence[int], stride: Pair, padding: Pair, dilation: Pair) -> bool:
    """Whether the direct input gradient runs (stride 1, padding at most (k-1)*d)."""
    return stride == (1, 1) and all(
        p <= (k - 1) * d for k, p, d in zip(kernel, padding, dilation, strict=True)
    )


def conv2d_direct(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    out: np.ndarray | None = None,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
    relu: bool = False,
) -> np.ndarray:
    """``conv2d`` (then ``relu`` when asked) by the direct kernel (stride 1 only)."""
    st, pad, dil = pair(stride, "stride"), pair(padding, "padding"), pair(dilation, "dilation")
    assert forward_applies(st), "the direct kernel runs stride 1 only"
    o, _, kh, kw = w.shape
    geo = geometry(x.shape[2:], (kh, kw), pad, dil)
    result = fresh(out, (x.shape[0], o, geo.oh, geo.ow), x.dtype)
    if result.size:
        _direct_forward(np.ascontiguousarray(x), w, b, pad, dil, int(groups), result, relu)
    return result


def conv2d_backward_input_direct(
    g: np.ndarray,
    w: np.ndarray,
    x: np.ndarray,
    *,
    out: np.ndarray | None = None,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
) -> np.ndarray:
    """``conv2d_backward_input`` by the direct forward kernel (see the module docstring)."""
    st, pad, dil = pair(stride, "stride"), pair(padding, "padding"), pair(dilation, "dilation")
    o, cg, kh, kw = w.shape
    assert input_applies((kh, kw), st, pad, dil), "the direct kernel runs stride 1 only"
    groups = int(groups)
    c = cg * groups
    result = fresh(out, x.shape, np.result_type(g, w))
    if result.size == 0:
        return result
    flipped = (
        w.reshape(groups, o // groups, cg, kh, kw)[:, :, :, ::-1, ::-1]
        .transpose(0, 2, 1, 3, 4)
        .reshape(c, o // groups, kh, kw)
    )
    back = ((kh - 1) * dil[0] - pad[0], (kw - 1) * dil[1] - pad[1])
    _direct_forward(np.ascontiguousarray(g), flipped, None, back, dil, groups, result, False)
    return result


def conv2d_backward_weight_direct(
    x: np.ndarray,
    g: np.ndarray,
    *,
    out: np.ndarray | None = None,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
) -> np.ndarray:
    """``conv2d_backward_weight`` by the direct kernel (see the module docstring)."""
    st, pad, dil = pair(stride, "stride"), pair(padding, "padding"), pair(dilation, "dilation")
    kh, kw = pair(kernel_size, "kernel_size")
    assert forward_applies(st), "the direct kernel runs stride 1 only"
    groups = int(groups)
    n, c = x.shape[:2]
    o = g.shape[1]
    cg, og = c // groups, o // groups
    result = fresh(out, (o, cg, kh, kw), np.result_type(x, g))
    if result.size == 0:
        return result
    geo = geometry(x.shape[2:], (kh, kw), pad, dil)
    tall = Tall(n, x.shape[2], geo)
    xt = _tall(np.ascontiguousarray(x), geo, tall, "conv_pad")
    gt = scratch("conv_wide", (o, tall.q_end), g.dtype)
    _place(np.ascontiguousarray(g), gt, 0, 0, tall.rows, geo.wp)
    block = WEIGHT_BLOCK if og % WEIGHT_BLOCK == 0 else 1
    dw = result.reshape(o, cg, kh * kw)
    _weight(kh * kw, block)(xt, gt, geo.offs, dw, groups, tall.q_end)
    if not np.isfinite(dw).all():  # maybe 0 * inf from a dropped column: numpy's
        return _conv2d_backward_weight(
            x, g, kernel_size=kernel_size, stride=stride, padding=padding,
            dilation=dilation, groups=groups, out=result,
        )  # fmt: skip
    return result


# -- the kernels the lowering calls: routed per shape (threads or one) -----------------------
ROUTE = Route("conv")


def _spare(shape: tuple[int, ...], dtype: Any) -> Callable[[], np.ndarray]:
    return lambda: scratch("conv_spare", shape, dtype)


def conv2d(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    out: np.ndarray | None = None,
    relu: bool = False,
    **attrs: Any,
) -> np.ndarray:
    """``conv2d``'s compiled kernel (then ``relu`` when asked): the direct kernel or
    the numpy one, as `ROUTE` measured for the shape."""

    def reference(into: np.ndarray | None) -> np.ndarray:
        result = conv2d_kernel(x, w, b, out=into, **attrs)
        if relu:
            np.maximum(result, 0, out=result)
        return result

    if not forward_applies(pair(attrs["stride"], "stride")):
        return reference(out)
    arrays = (x, w) if b is None else (x, w, b)
    o, _, kh, kw = w.shape
    geo = geometry(x.shape[2:], (kh, kw), pair(attrs["padding"], "padding"),
                   pair(attrs["dilation"], "dilation"))  # fmt: skip
    shape = (x.shape[0], o, geo.oh, geo.ow)
    return routed(
        ROUTE,
        key_of("conv2d", arrays, attrs),
        reference,
        lambda into: conv2d_direct(x, w, b, out=into, relu=relu, **attrs),
        out,
        _spare(shape, x.dtype),
    )


def conv2d_backward_input(
    g: np.ndarray, w: np.ndarray, x: np.ndarray, *, out: np.ndarray | None = None, **attrs: Any
) -> np.ndarray:
    """``conv2d_backward_input``'s compiled kernel (``x`` gives the shape only)."""

    def reference(into: np.ndarray | None) -> np.ndarray:
        return _conv2d_backward_input(g, w, x, out=into, **attrs)

    st, pad, dil = (pair(attrs[k], k) for k in ("stride", "padding", "dilation"))
    if not input_applies(w.shape[2:], st, pad, dil):
        return reference(out)
    return routed(
        ROUTE,
        key_of("conv2d_backward_input", (g, w, x), attrs),
        reference,
        lambda into: conv2d_backward_input_direct(g, w, x, out=into, **attrs),
        out,
        _spare(x.shape, g.dtype),
    )


def conv2d_backward_weight(
    x: np.ndarray, g: np.ndarray, *, out: np.ndarray | None = None, **attrs: Any
) -> np.ndarray:
    """``conv2d_backward_weight``'s compiled kernel."""

    def reference(into: np.ndarray | None) -> np.ndarray:
        return _conv2d_backward_weight(x, g, out=into, **attrs)

    if not forward_applies(pair(attrs["stride"], "stride")):
        return reference(out)
    kh, kw = pair(attrs["kernel_size"], "kernel_size")
    groups = int(attrs["groups"])
    shape = (g.shape[1], x.shape[1] // groups, kh, kw)
    return routed(
        ROUTE,
        key_of("conv2d_backward_weight", (x, g), attrs),
        reference,
        lambda into: conv2d_backward_weight_direct(x, g, out=into, **attrs),
        out,
        _spare(shape, x.dtype),
    )
