"""Shared pieces of the NCHW ops (convolution, pooling): sizes, windows, padding.

A public module: backends lowering the conv and pool families read their
attributes with `pair`, `window_attrs` and the size rules here, so that
every backend checks and interprets them as the numpy kernels do.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from asgrad.tensor.errors import ShapeError
from asgrad.tensor.ir.common import require_float
from asgrad.tensor.ir.registry import Attr, Attrs, TensorType

__all__ = [
    "CONV_ATTRS",
    "COUNT_INCLUDE_PAD",
    "DILATION",
    "GROUPS",
    "KERNEL_SIZE",
    "OUTPUT_PADDING",
    "OUTPUT_SIZE",
    "PADDING",
    "POOL_ATTRS",
    "POOL_STRIDE",
    "SCRATCH_LIMIT_BYTES",
    "STRIDE",
    "Pair",
    "channel_major",
    "crop_hw",
    "im2col",
    "offset_slice",
    "out_hw",
    "out_size",
    "pad_hw",
    "pad_hw_scratch",
    "pair",
    "require_nchw",
    "scratch",
    "transpose_out_size",
    "window_attrs",
    "windows",
]

Pair = tuple[int, int]

# The attributes of the conv and pool families, each an int (every spatial axis) or
# one per spatial axis; the shape rules check them with `pair` (``triple``).
STRIDE = Attr(name="stride", kind=(int, tuple), default=1, doc="the step between windows")
PADDING = Attr(name="padding", kind=(int, tuple), default=0, doc="zeros added on each side")
DILATION = Attr(name="dilation", kind=(int, tuple), default=1, doc="the step between taps")
GROUPS = Attr(name="groups", kind=int, default=1, doc="channel groups convolved apart")
OUTPUT_PADDING = Attr(
    name="output_padding", kind=(int, tuple), default=0, doc="added to one side of the output"
)
KERNEL_SIZE = Attr(name="kernel_size", kind=(int, tuple), doc="the window's size")
POOL_STRIDE = Attr(
    name="stride",
    kind=(int, tuple),
    default=None,
    optional=True,
    doc="the step between windows (None: the kernel size)",
)
COUNT_INCLUDE_PAD = Attr(
    name="count_include_pad", kind=bool, default=True, doc="padding counts in the mean"
)
OUTPUT_SIZE = Attr(name="output_size", kind=(int, tuple), doc="the output's spatial size")
CONV_ATTRS = (STRIDE, PADDING, DILATION, GROUPS)
POOL_ATTRS = (KERNEL_SIZE, POOL_STRIDE, PADDING)


def pair(value: Any, name: str, *, minimum: int = 0) -> Pair:
    """``value`` (an int or a pair of ints) as ``(height, width)``; checks ``minimum``."""
    if isinstance(value, int | np.integer):
        out = (int(value), int(value))
    elif isinstance(value, Sequence) and len(value) == 2:
        out = (int(value[0]), int(value[1]))
    else:
        raise ShapeError(f"{name} must be an int or a pair of ints, got {value!r}")
    if out[0] < minimum or out[1] < minimum:
        raise ShapeError(f"{name} must be at least {minimum}, got {value!r}")
    return out


def require_nchw(t: TensorType, what: str = "input") -> None:
    """A float value of rank 4 (batch, channels, height, width)."""
    require_float(t, what)
    if len(t.shape) != 4:
        hint = " (add a batch axis with x.expand_dims(0))" if len(t.shape) == 3 else ""
        raise ShapeError(f"{what} must have rank 4 (N, C, H, W), got {t}{hint}")


def out_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """floor((size + 2 padding - dilation (kernel - 1) - 1) / stride) + 1."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def out_hw(
    hw: Sequence[int], kernel: Pair, stride: Pair, padding: Pair, dilation: Pair, what: str
) -> Pair:
    """The output height and width of a sliding window; an error when it is empty."""
    sizes = tuple(out_size(hw[i], kernel[i], stride[i], padding[i], dilation[i]) for i in range(2))
    if sizes[0] < 1 or sizes[1] < 1:
        span = tuple(dilation[i] * (kernel[i] - 1) + 1 for i in range(2))
        padded = tuple(hw[i] + 2 * padding[i] for i in range(2))
        raise ShapeError(
            f"the {what} window ({span[0]}x{span[1]} with dilation) is larger than the"
            f" padded input ({padded[0]}x{padded[1]}); use a smaller kernel or more padding"
        )
    return sizes[0], sizes[1]


def window_attrs(attrs: Attrs) -> tuple[Pair, Pair, Pair]:
    """``(kernel_size, stride, padding)`` of a pooling op, checked."""
    kernel = pair(attrs["kernel_size"], "kernel_size", minimum=1)
    stride = kernel if attrs["stride"] is None else pair(attrs["stride"], "stride", minimum=1)
    padding = pair(attrs["padding"], "padding")
    if padding[0] > kernel[0] // 2 or padding[1] > kernel[1] // 2:
        raise ShapeError(
            f"padding {list(padding)} must be at most half the kernel size"
            f" {list(kernel)} (as in PyTorch), so that no window lies in the padding only"
        )
    return kernel, stride, padding


def pad_hw(x: np.ndarray, padding: Pair, value: float = 0.0) -> np.ndarray:
    """``x`` padded by ``padding`` on both sides of its last two axes."""
    ph, pw = padding
    if not ph and not pw:
        return x
    n, c, h, w = x.shape
    out = np.full((n, c, h + 2 * ph, w + 2 * pw), value, dtype=x.dtype)
    out[:, :, ph : ph + h, pw : pw + w] = x
    return out


def crop_hw(xp: np.ndarray, padding: Pair, hw: Sequence[int]) -> np.ndarray:
    """The inverse of `pad_hw`: the ``hw`` interior of ``xp``."""
    ph, pw = padding
    if not ph and not pw and xp.shape[2:] == tuple(hw):
        return xp
    return np.ascontiguousarray(xp[:, :, ph : ph + hw[0], pw : pw + hw[1]])


def windows(xp: np.ndarray, kernel: Pair, stride: Pair, dilation: Pair, ohw: Pair) -> np.ndarray:
    """A read-only view of shape (N, C, kh, kw, OH, OW) of the windows of padded ``xp``."""
    n, c = xp.shape[:2]
    s0, s1, s2, s3 = xp.strides
    return as_strided(
        xp,
        (n, c, kernel[0], kernel[1], ohw[0], ohw[1]),
        (s0, s1, s2 * dilation[0], s3 * dilation[1], s2 * stride[0], s3 * stride[1]),
        writeable=False,
    )


def offset_slice(i: int, j: int, stride: Pair, dilation: Pair, ohw: Pair) -> tuple[slice, ...]:
    """The strided slice of a padded input that kernel offset (i, j) reads."""
    y0, x0 = i * dilation[0], j * dilation[1]
    return (
        slice(None),
        slice(None),
        slice(y0, y0 + stride[0] * (ohw[0] - 1) + 1, stride[0]),
        slice(x0, x0 + stride[1] * (ohw[1] - 1) + 1, stride[1]),
    )


class _ScratchBuffers(threading.local):
    def __init__(self) -> None:
        self.by_role: dict[str, np.ndarray] = {}


_scratch = _ScratchBuffers()
SCRATCH_LIMIT_BYTES = 1 << 26  # larger temporaries are allocated afresh


def scratch(role: str, shape: Sequence[int], dtype: Any) -> np.ndarray:
    """An uninitialised C-contiguous array for a kernel's temporary, reused across calls.

    One byte buffer per ``role`` and thread, grown to the largest request: the
    im2col columns and padded copies of a training step then cost no fresh pages
    (page faults on new memory dominated the convolutions). A kernel must never
    return such an array (nor a view of it), and two live temporaries of one call
    need two roles.
    """
    dt = np.dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize
    if nbytes > SCRATCH_LIMIT_BYTES:
        return np.empty(tuple(shape), dtype=dt)
    buf = _scratch.by_role.get(role)
    if buf is None or buf.nbytes < nbytes:
        buf = np.empty(max(nbytes, 64), dtype=np.uint8)
        _scratch.by_role[role] = buf
    out: np.ndarray = buf[:nbytes].view(dt).reshape(tuple(shape))
    return out


def pad_hw_scratch(x: np.ndarray, padding: Pair, role: str = "pad") -> np.ndarray:
    """`pad_hw` with zeros into a scratch buffer (``x`` itself without padding)."""
    ph, pw = padding
    if not ph and not pw:
        return x
    n, c, h, w = x.shape
    out = scratch(role, (n, c, h + 2 * ph, w + 2 * pw), x.dtype)
    out[:, :, :ph] = 0
    out[:, :, ph + h :] = 0
    out[:, :, ph : ph + h, :pw] = 0
    out[:, :, ph : ph + h, pw + w :] = 0
    out[:, :, ph : ph + h, pw : pw + w] = x
    return out


# -- convolution layouts -------------------------------------------------------------
def transpose_out_size(
    size: int, kernel: int, stride: int, padding: int, output_padding: int, dilation: int
) -> int:
    """(size - 1) stride - 2 padding + dilation (kernel - 1) + output_padding + 1."""
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


def im2col(
    x: np.ndarray, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair, groups: int
) -> tuple[np.ndarray, Pair]:
    """im2col, channel-major: (G, C/G*kh*kw, N*OH*OW), and (OH, OW).

    This layout makes each pass one matrix product per group (one BLAS call), with
    the long N*OH*OW axis contiguous, which beats a batch of small products per
    image, most of all on a loaded multi-threaded BLAS. The columns (and the padded
    copy) are scratch buffers reused across calls.
    """
    n, c, h, w = x.shape
    ohw = out_hw((h, w), kernel, stride, padding, dilation, "convolution")
    xp = pad_hw_scratch(x, padding)
    view = windows(xp, kernel, stride, dilation, ohw)  # (N, C, kh, kw, OH, OW)
    k = c // groups * kernel[0] * kernel[1]
    cols = scratch("cols", (groups, k, n * ohw[0] * ohw[1]), x.dtype)
    np.copyto(
        cols.reshape(c, kernel[0], kernel[1], n, ohw[0], ohw[1]), view.transpose(1, 2, 3, 0, 4, 5)
    )
    return cols, ohw


def channel_major(g: np.ndarray, groups: int) -> np.ndarray:
    """(N, O, OH, OW) -> (G, O/G, N*OH*OW), in a scratch buffer."""
    n, o, oh, ow = g.shape
    out = scratch("channel_major", (o, n, oh, ow), g.dtype)
    np.copyto(out, g.transpose(1, 0, 2, 3))
    return out.reshape(groups, o // groups, n * oh * ow)
